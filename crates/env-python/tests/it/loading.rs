//! How the kernel loads a text context: through the fast path, in chunks of any size,
//! exactly (every escape, every `str` kind), with size hints it uses but never trusts.
//! Also the measurement of loading 512 MiB.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::{SetOptions, Store};
use rlm_env::{ContextShape, ContextSource, Environment};
use rlm_env_python::PythonOptions;
use rlm_test_support::repl::run;
use serde_json::json;
use tempfile::TempDir;

use crate::support::{fixture_with, json_of, python_options, start};

/// Text that exercises every escape, every str kind and chunk boundaries.
fn tricky_texts() -> Vec<String> {
    let ascii = "plain \"quoted\" back\\slash\n\ttab\r\u{0001}\u{001f} / end".repeat(7);
    let latin1 = format!("{ascii}caf\u{e9} na\u{ef}ve \u{ff}");
    let ucs2 = format!("{latin1} \u{0100}\u{20ac} \u{4e2d}\u{6587} done");
    let ucs4 = format!("{ucs2} \u{1f600}\u{1f680} emoji \\\\ \"\"");
    let late = format!("{}\u{1f600}", "a".repeat(300));
    vec![ascii, latin1, ucs2, ucs4, late, "x".into(), String::new()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_contexts_load_exactly_through_the_fast_path() {
    for chunk in [16, 61, 1 << 20] {
        for text in tricky_texts() {
            let options = PythonOptions {
                load_chunk_bytes: Some(chunk),
                ..python_options()
            };
            let mut f = fixture_with(
                &[json!(text)],
                ContextShape::Single,
                Duration::from_secs(60),
                options,
            )
            .await;
            let info = f.env.wait_ready().await.unwrap();
            if text.chars().count() >= 2 {
                assert_eq!(info.load_method, "fast", "chunk {chunk}: {text:?}");
            }
            let loaded = json_of(
                &mut f.env,
                "import json; print(json.dumps([type(context).__name__, context]))",
            )
            .await;
            assert_eq!(loaded, json!(["str", text]), "chunk {chunk}");
            // The str is a normal one: hashing, equality and slicing agree.
            let same = json_of(
                &mut f.env,
                "c2 = ''.join(list(context)); print(json.dumps([c2 == context, hash(c2) == hash(context), len(context)]))",
            )
            .await;
            assert_eq!(same, json!([true, true, text.chars().count()]));
            f.env.shutdown().await;
        }
    }
}

/// Loads `text` with the given size hints and checks that `context` is exactly it and
/// a canonical str (a str wider than its content would compare unequal).
async fn load_with_hints(text: &str, chars: Option<u64>, max_char: Option<u32>) {
    let dir = TempDir::new().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    store
        .set("ctx", json!(text), SetOptions::default())
        .unwrap();
    let context = ContextSource {
        shape: ContextShape::Single,
        files: vec![store.path_of("ctx").unwrap()],
        keys: Vec::new(),
        chunk_chars: 100,
        chars,
        max_char,
        referenced: Vec::new(),
    };
    let options = PythonOptions {
        load_chunk_bytes: Some(29),
        ..python_options()
    };
    let mut f = start(dir, store, Some(context), Duration::from_secs(60), options).await;
    assert_eq!(f.env.wait_ready().await.unwrap().load_method, "fast");
    let loaded = json_of(
        &mut f.env,
        "import json; c2 = ''.join(list(context)); print(json.dumps([context, c2 == context, hash(c2) == hash(context)]))",
    )
    .await;
    assert_eq!(
        loaded,
        json!([text, true, true]),
        "hints {chars:?} {max_char:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_hints_are_used_but_never_trusted() {
    let ucs2 = "\u{4e2d}\u{6587} and \"ascii\"\n".repeat(20);
    let count = ucs2.chars().count() as u64;
    load_with_hints(&ucs2, Some(count), Some(0xffff)).await;
    // Too narrow a class, too small a size, too wide a class: all still exact.
    load_with_hints(&ucs2, Some(5), Some(0x7f)).await;
    load_with_hints("plain ascii text, long enough", Some(2), Some(0x10ffff)).await;
    load_with_hints("caf\u{e9} latin", None, Some(0xffff)).await;
}

/// Not a test: measures loading a 512 MiB text context through the real kernel.
/// `cargo test --release -p rlm-env-python --test it loading:: -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement: writes a 512 MiB variable"]
async fn measure_loading_a_512_mib_text_context() {
    const TARGET_BYTES: usize = 512 << 20;
    let dir = TempDir::new().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let line = "2024-01-01 12:00:00 INFO user=42 path=\"/api/v1/items\" status=200 latency=12ms\n";
    let text = line.repeat(TARGET_BYTES / line.len());
    store
        .set_text_from_reader("big", &mut text.as_bytes(), "bench", SetOptions::default())
        .unwrap();
    let chars = text.chars().count() as u64;
    drop(text);
    for hints in [false, true] {
        let context = ContextSource {
            shape: ContextShape::Single,
            files: vec![store.path_of("big").unwrap()],
            keys: Vec::new(),
            chunk_chars: 100_000,
            chars: hints.then_some(chars),
            max_char: hints.then_some(0x7f),
            referenced: Vec::new(),
        };
        let started = std::time::Instant::now();
        let mut f = start(
            TempDir::new().unwrap(),
            Arc::clone(&store),
            Some(context),
            Duration::from_secs(600),
            python_options(),
        )
        .await;
        let info = f.env.wait_ready().await.unwrap();
        let to_ready = started.elapsed();
        let file_bytes = std::fs::metadata(store.path_of("big").unwrap())
            .unwrap()
            .len();
        let rss = info.max_rss_kb.unwrap_or(0) * 1024;
        eprintln!(
            "hints={hints}: file {file_bytes} B, method {}, load {:.3} s, start→ready {:.3} s, peak RSS {} MiB ({:.2}x the file)",
            info.load_method,
            info.load_seconds,
            to_ready.as_secs_f64(),
            rss >> 20,
            rss as f64 / file_bytes as f64
        );
        assert_eq!(run(&mut f.env, "len(context)").await, format!("{chars}\n"));
        f.env.shutdown().await;
    }
}
