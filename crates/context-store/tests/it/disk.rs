//! What is on disk and what else may be there (docs/store.md): corrupt and stray files are
//! reported and skipped without hiding good variables; files a foreign writer made in
//! the TypeScript store's layout (no `sha256`, keys in another order) are read, hashed on first
//! `get`, and can be compare-and-set; directories are 0700 and files 0600.

use std::fs;
use std::path::Path;

use rlm_context_store::{
    Expected, ListFilter, SetOptions, Store, StoreError, VariableType, LOCKS_DIR, SPILL_DIR,
    VARIABLES_DIR,
};
use serde_json::{json, Value};

use crate::support::{bulk, data_dir, file_names, mode_of, read_plain_json};
use crate::support::{encode_value, sha256_hex};

#[test]
fn corrupt_and_stray_files_are_reported_and_skipped() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    store
        .set("good-1", json!("one"), SetOptions::default())
        .unwrap();
    store
        .set("good-2", json!({"two": 2}), SetOptions::default())
        .unwrap();
    let vars = store.variables_dir().to_owned();
    drop(store);

    let bad: [(&str, &[u8]); 6] = [
        ("truncated.json", br#"{"ref": {"id": "x", "key": "truncated""#),
        ("garbage.json", b"\x00\xff\xfe not json at all"),
        ("empty.json", b""),
        ("no-ref.json", br#"{"value": 1, "persist": true}"#),
        (
            "bad-type.json",
            br#"{"ref":{"id":"i","key":"bad-type","scope":"global","type":"banana","sizeBytes":1,"createdAt":1},"value":1}"#,
        ),
        ("notes.txt", b"not a variable"),
    ];
    for (name, bytes) in bad {
        fs::write(vars.join(name), bytes).unwrap();
    }
    // A directory and a writer's temp file in flight are neither variables nor
    // problems.
    fs::create_dir(vars.join("a-directory.json")).unwrap();
    fs::write(vars.join(".tmp-abc.partial"), b"{\"ref\":").unwrap();

    let store = Store::open_with(&data, bulk()).unwrap();
    let problems = store.problems();
    let mut reported: Vec<String> = problems
        .iter()
        .map(|p| {
            assert!(!p.message.is_empty(), "{p:?}");
            assert_eq!(p.path.parent(), Some(vars.as_path()), "{p:?}");
            p.path.file_name().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    reported.sort();
    let mut expected: Vec<String> = bad.iter().map(|(n, _)| (*n).to_owned()).collect();
    expected.sort();
    assert_eq!(reported, expected, "{problems:#?}");
    // The message says what is wrong with the file.
    let bad_type = problems
        .iter()
        .find(|p| p.path.ends_with("bad-type.json"))
        .unwrap();
    assert!(bad_type.message.contains("banana"), "{bad_type:?}");

    // The good variables are still listed and readable.
    let keys: Vec<String> = store
        .list(&ListFilter::default())
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(keys, ["good-1", "good-2"]);
    assert_eq!(*store.get("good-1").unwrap(), json!("one"));
    assert_eq!(*store.get("good-2").unwrap(), json!({"two": 2}));

    // Once the files are gone, a refresh stops reporting them.
    for (name, _) in bad {
        fs::remove_file(vars.join(name)).unwrap();
    }
    store.refresh().unwrap();
    assert!(store.problems().is_empty(), "{:?}", store.problems());
}

#[test]
fn a_value_torn_outside_the_store_fails_its_get_with_the_path() {
    // The store never tears a file, but a disk or a foreign program might: the damaged
    // variable fails clearly, naming the file, and nothing else is affected.
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    store
        .set("intact", json!("fine"), SetOptions::default())
        .unwrap();
    store
        .set("torn", json!("x".repeat(10_000)), SetOptions::default())
        .unwrap();
    let path = store.path_of("torn").unwrap();
    drop(store);
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();

    let store = Store::open_with(&data, bulk()).unwrap();
    // Too short for the value its header records: refused before anything is read.
    let err = store.get("torn").unwrap_err();
    assert!(matches!(err, StoreError::Integrity { .. }), "{err}");
    assert!(
        err.to_string().contains(&*path.to_string_lossy()),
        "the error names the file: {err}"
    );
    assert_eq!(*store.get("intact").unwrap(), json!("fine"));
}

/// A file as the TypeScript store (or a sub-agent in another language) writes
/// it: pretty-printed, `value` first, `ref` keys in another order, no `sha256`, no
/// `formatVersion`.
fn write_foreign(path: &Path, key: &str, value: &Value) {
    let text = format!(
        r#"{{
  "value": {},
  "persist": true,
  "ref": {{
    "createdAt": 1706000000000,
    "sizeBytes": 12345,
    "type": "json",
    "scope": "agent:sub-1",
    "key": {},
    "id": "6f1c1f55-8a3c-4d1c-9f0e-2b8f1f3f0a11"
  }}
}}
"#,
        serde_json::to_string_pretty(value).unwrap(),
        serde_json::to_string(key).unwrap(),
    );
    fs::write(path, text).unwrap();
}

#[test]
fn foreign_files_are_read_hashed_on_first_get_and_compare_and_set() {
    let (_temp, data) = data_dir();
    let vars = data.join(VARIABLES_DIR);
    fs::create_dir_all(&vars).unwrap();
    let value = json!({"items": [1, 2, 3], "note": "written by python"});
    let sha = sha256_hex(&encode_value(&value));
    // One under the store's own file name for its key, one under a name the TypeScript store's
    // sanitiser chose (not the store's canonical name for that key).
    write_foreign(&vars.join("from-python.json"), "from-python", &value);
    write_foreign(&vars.join("seed_style_key.json"), "seed style/key", &value);

    let store = Store::open(&data).unwrap();
    assert!(store.problems().is_empty(), "{:?}", store.problems());
    let listed = store.list(&ListFilter::default());
    assert_eq!(listed.len(), 2);
    for r in &listed {
        assert_eq!(r.sha256, None, "no sha256 before the value is read");
        assert_eq!(r.scope, "agent:sub-1");
        assert_eq!(r.var_type, VariableType::Json);
        assert_eq!(r.id, "6f1c1f55-8a3c-4d1c-9f0e-2b8f1f3f0a11");
    }
    assert_eq!(store.stats().values_loaded, 0);

    // First get computes the hash (and the true size).
    assert_eq!(*store.get("from-python").unwrap(), value);
    let r = store.reference("from-python").unwrap();
    assert_eq!(r.sha256.as_deref(), Some(sha.as_str()));
    assert_eq!(r.size_bytes, encode_value(&value).len() as u64);

    // compare_and_set against it: wrong expectations conflict, the right one wins.
    let err = store
        .compare_and_set(
            "from-python",
            &Expected::Sha256("0".repeat(64)),
            json!("nope"),
            SetOptions::default(),
        )
        .unwrap_err();
    match &err {
        StoreError::Conflict { actual, .. } => assert_eq!(*actual, sha),
        other => panic!("expected a conflict, got {other}"),
    }
    assert!(matches!(
        store.compare_and_set(
            "from-python",
            &Expected::Absent,
            json!("nope"),
            SetOptions::default()
        ),
        Err(StoreError::Conflict { .. })
    ));
    let new = store
        .compare_and_set(
            "from-python",
            &Expected::Sha256(sha.to_uppercase()),
            json!({"result": "rewritten"}),
            SetOptions::default(),
        )
        .unwrap();
    assert_eq!(new.var_type, VariableType::Result);

    // The key under a non-canonical name: compare_and_set works without a prior get
    // (the store hashes the file under the lock) and rewrites that same file, so no
    // duplicate appears.
    let foreign_path = vars.join("seed_style_key.json");
    assert_eq!(store.path_of("seed style/key").unwrap(), foreign_path);
    store
        .compare_and_set(
            "seed style/key",
            &Expected::Sha256(sha.clone()),
            json!("updated"),
            SetOptions::default(),
        )
        .unwrap();
    assert_eq!(read_plain_json(&foreign_path)["value"], json!("updated"));

    drop(store);
    let reopened = Store::open(&data).unwrap();
    assert!(reopened.problems().is_empty(), "{:?}", reopened.problems());
    assert_eq!(reopened.list(&ListFilter::default()).len(), 2);
    assert_eq!(
        *reopened.get("from-python").unwrap(),
        json!({"result": "rewritten"})
    );
    assert_eq!(*reopened.get("seed style/key").unwrap(), json!("updated"));
    assert_eq!(
        read_plain_json(&vars.join("from-python.json"))["ref"]["sha256"],
        json!(new.sha256.unwrap())
    );
}

#[test]
fn directories_are_0700_and_files_0600() {
    let (_temp, data) = data_dir();
    // A small ceiling so an in-memory value spills and creates the spill directory.
    let store = Store::open_with(
        &data,
        rlm_context_store::StoreOptions {
            memory_ceiling_bytes: 100,
            ..rlm_context_store::StoreOptions::default()
        },
    )
    .unwrap();
    store
        .set("fsynced", json!("durable"), SetOptions::default())
        .unwrap();
    store
        .set_text_from_reader(
            "streamed",
            &mut "streamed text".as_bytes(),
            "input",
            SetOptions::default(),
        )
        .unwrap();
    store
        .set("spilled", json!("y".repeat(500)), SetOptions::in_memory())
        .unwrap();
    assert!(store.stats().values_spilled >= 1);

    for dir in [
        data.clone(),
        data.join(VARIABLES_DIR),
        data.join(LOCKS_DIR),
        data.join(SPILL_DIR),
    ] {
        assert_eq!(mode_of(&dir), 0o700, "{}", dir.display());
    }
    let spill_dirs = file_names(&data.join(SPILL_DIR));
    assert_eq!(spill_dirs.len(), 1);
    let own_spill = data.join(SPILL_DIR).join(&spill_dirs[0]);
    assert_eq!(mode_of(&own_spill), 0o700);

    let mut files = Vec::new();
    for dir in [data.join(VARIABLES_DIR), data.join(LOCKS_DIR), own_spill] {
        for name in file_names(&dir) {
            files.push(dir.join(name));
        }
    }
    assert_eq!(files.len(), 2 + 2 + 1, "{files:?}");
    for file in files {
        assert_eq!(mode_of(&file), 0o600, "{}", file.display());
    }
}

#[test]
fn a_bulk_compare_and_set_on_an_fsync_store_is_a_normal_write() {
    // The store fsyncs; one write asks not to. It is still atomic, checked and read
    // back like any other, by this store and a fresh one.
    let (_temp, data) = data_dir();
    let store = Store::open(&data).unwrap();
    let written = store
        .compare_and_set_with(
            "sub-result-a1",
            &Expected::Absent,
            json!("the answer"),
            SetOptions::default().scope("agent:root"),
            rlm_context_store::Durability::Bulk,
        )
        .unwrap();
    assert!(matches!(
        store.compare_and_set_with(
            "sub-result-a1",
            &Expected::Absent,
            json!("again"),
            SetOptions::default(),
            rlm_context_store::Durability::Bulk,
        ),
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(*store.get("sub-result-a1").unwrap(), json!("the answer"));
    let path = store.path_of("sub-result-a1").unwrap();
    assert_eq!(read_plain_json(&path)["value"], json!("the answer"));
    drop(store);
    let reopened = Store::open(&data).unwrap();
    assert_eq!(
        reopened.reference("sub-result-a1").unwrap().sha256,
        written.sha256
    );
    assert_eq!(
        reopened.reference("sub-result-a1").unwrap().scope,
        "agent:root"
    );
}

#[test]
fn stale_temp_files_of_killed_writers_are_removed_on_open() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    store
        .set("kept", json!("value"), SetOptions::default())
        .unwrap();
    let vars = store.variables_dir().to_owned();
    drop(store);
    let stale = vars.join(".tmp-killed.partial");
    let fresh = vars.join(".tmp-in-flight.partial");
    fs::write(&stale, b"half a value").unwrap();
    fs::write(&fresh, b"a writer at work").unwrap();
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(two_hours_ago)
        .unwrap();

    let store = Store::open_with(&data, bulk()).unwrap();
    assert!(!stale.exists(), "a stale temp file survived the open");
    assert!(
        fresh.exists(),
        "a recent temp file (a live writer's) was removed"
    );
    assert_eq!(*store.get("kept").unwrap(), json!("value"));
    assert!(store.problems().is_empty());
}
