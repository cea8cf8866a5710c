//! Streaming writes and handing variables to sub-agents: `set_text_from_reader` gives
//! the same size and hash as an in-memory `set` of the same text, keeps the previous
//! value when the input is not UTF-8, and `persist_for_sub_agent` returns an absolute
//! path to a file whose `"value"` is the data.

use std::io::Read;

use rlm_context_store::{ListFilter, SetOptions, Store, StoreError, VariableType};
use serde_json::{json, Value};

use crate::support::{bulk, data_dir, file_names, read_plain_json};

/// Text that needs escaping everywhere, with multi-byte characters that straddle the
/// streaming chunk boundaries (1 MiB) at different offsets.
fn awkward_text(bytes: usize) -> String {
    let block = "plain ascii, \"quotes\", back\\slash, tab\t, nl\n, \u{1} ctrl, é, €, 😀 — ";
    let mut text = String::with_capacity(bytes + block.len());
    let mut i = 0usize;
    while text.len() < bytes {
        text.push_str(block);
        // Shifts the multi-byte characters against the chunk boundaries.
        text.push_str(&"x".repeat(i % 7));
        i += 1;
    }
    text
}

/// A reader handing out 1 to 13 bytes per call, to split UTF-8 sequences everywhere.
struct Dribble<'a> {
    data: &'a [u8],
    step: usize,
}

impl Read for Dribble<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.step = self.step % 13 + 1;
        let n = self.step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[test]
fn streamed_text_equals_an_in_memory_set_of_the_same_text() {
    let text = awkward_text(3 * 1024 * 1024 + 17);
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();

    let streamed = store
        .set_text_from_reader(
            "streamed",
            &mut text.as_bytes(),
            "big.txt",
            SetOptions::default(),
        )
        .unwrap();
    // Streamed to disk, not through memory: nothing cached, nothing loaded.
    let stats = store.stats();
    assert_eq!((stats.values_in_memory, stats.values_loaded), (0, 0));
    let in_memory = store
        .set(
            "in-memory",
            Value::String(text.clone()),
            SetOptions::in_memory(),
        )
        .unwrap();
    assert_eq!(streamed.size_bytes, in_memory.size_bytes);
    assert_eq!(
        streamed.sha256,
        store.reference(&in_memory.key).unwrap().sha256
    );
    assert_eq!(streamed.var_type, VariableType::Text);

    // The value reads back, raw text streams back byte for byte, and a plain JSON
    // parser agrees.
    assert_eq!(store.get("streamed").unwrap().as_str(), Some(text.as_str()));
    let mut raw = Vec::new();
    store.write_value_to("streamed", &mut raw, false).unwrap();
    assert!(raw == text.as_bytes(), "streamed bytes differ");
    let path = store.path_of("streamed").unwrap();
    assert_eq!(
        read_plain_json(&path)["value"].as_str(),
        Some(text.as_str())
    );

    // A reopened store sees the same reference.
    drop(store);
    let reopened = Store::open_with(&data, bulk()).unwrap();
    assert_eq!(reopened.reference("streamed").unwrap(), streamed);
}

#[test]
fn streamed_text_survives_tiny_reads() {
    let text = awkward_text(20_000);
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    let r = store
        .set_text_from_reader(
            "dribbled",
            &mut Dribble {
                data: text.as_bytes(),
                step: 0,
            },
            "pipe",
            SetOptions::default()
                .scope("session:s")
                .var_type(VariableType::Stream),
        )
        .unwrap();
    store
        .set("whole", json!(text), SetOptions::in_memory())
        .unwrap();
    assert_eq!(r.sha256, store.reference("whole").unwrap().sha256);
    assert_eq!(r.scope, "session:s");
    assert_eq!(r.var_type, VariableType::Stream);
    assert_eq!(store.get("dribbled").unwrap().as_str(), Some(text.as_str()));
}

#[test]
fn invalid_utf8_leaves_the_previous_value_intact() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    let previous = store
        .set("log", json!("the previous value"), SetOptions::default())
        .unwrap();

    let cases: [(Vec<u8>, u64); 3] = [
        // A stray byte deep inside (past the first chunk).
        (
            {
                let mut bytes = vec![b'a'; 2_000_000];
                bytes[1_500_000] = 0xff;
                bytes
            },
            1_500_000,
        ),
        // A multi-byte character cut off at the end of the input.
        (b"ends with half a euro \xe2\x82".to_vec(), 22),
        // An overlong encoding right at the start.
        (b"\xc0\xafabc".to_vec(), 0),
    ];
    for (bytes, offset) in cases {
        let err = store
            .set_text_from_reader(
                "log",
                &mut bytes.as_slice(),
                "input.log",
                SetOptions::default(),
            )
            .unwrap_err();
        match &err {
            StoreError::InvalidUtf8 {
                source_name,
                offset: at,
            } => {
                assert_eq!(source_name, "input.log");
                assert_eq!(*at, offset, "{err}");
            }
            other => panic!("expected InvalidUtf8, got {other}"),
        }
        assert_eq!(*store.get("log").unwrap(), json!("the previous value"));
        assert_eq!(store.reference("log").unwrap(), previous);
    }
    // No temp file is left behind, and another process still reads the old value.
    assert_eq!(file_names(store.variables_dir()), ["log.json"]);
    let other = Store::open_with(&data, bulk()).unwrap();
    assert_eq!(*other.get("log").unwrap(), json!("the previous value"));
    // Nothing is created for a key that did not exist.
    assert!(store
        .set_text_from_reader("fresh", &mut &b"\xff"[..], "x", SetOptions::default())
        .is_err());
    assert!(!store.has("fresh"));
}

#[test]
fn persist_for_sub_agent_returns_an_absolute_path_to_the_value() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    let cases = [
        (
            "persisted",
            json!({"rows": [1, 2, 3]}),
            SetOptions::default(),
        ),
        (
            "in-memory",
            json!("only in memory so far"),
            SetOptions::in_memory(),
        ),
    ];
    for (key, value, opts) in cases {
        store.set(key, value.clone(), opts).unwrap();
        let path = store.persist_for_sub_agent(key).unwrap();
        assert!(path.is_absolute(), "{}", path.display());
        assert_eq!(path.parent(), Some(store.variables_dir()));
        let file = read_plain_json(&path);
        assert_eq!(file["value"], value, "{key}");
        assert_eq!(file["ref"]["key"], json!(key));
        let r = store.reference(key).unwrap();
        assert_eq!(file["ref"]["sha256"], json!(r.sha256.unwrap()));
        // Asking again is harmless and gives the same path.
        assert_eq!(store.persist_for_sub_agent(key).unwrap(), path);
    }
    // Now another process sees both.
    let other = Store::open_with(&data, bulk()).unwrap();
    assert_eq!(other.list(&ListFilter::default()).len(), 2);
    assert!(matches!(
        store.persist_for_sub_agent("missing"),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn persist_for_sub_agent_resolves_a_relative_data_dir() {
    // The store is opened with a relative path; the sub-agent still gets an absolute
    // one (it may run in another working directory).
    let (temp, _) = data_dir();
    let cwd = std::env::current_dir().unwrap();
    let relative = pathdiff(temp.path(), &cwd).join("rel-data");
    let store = Store::open_with(&relative, bulk()).unwrap();
    store.set("k", json!(1), SetOptions::in_memory()).unwrap();
    let path = store.persist_for_sub_agent("k").unwrap();
    assert!(path.is_absolute(), "{}", path.display());
    assert_eq!(read_plain_json(&path)["value"], json!(1));
}

/// `target` relative to `base`, with `..` steps (both absolute).
fn pathdiff(target: &std::path::Path, base: &std::path::Path) -> std::path::PathBuf {
    use std::path::{Component, PathBuf};
    let t: Vec<Component> = target.components().collect();
    let b: Vec<Component> = base.components().collect();
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c.as_os_str());
    }
    out
}
