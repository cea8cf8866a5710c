//! What the store refuses to trust (issue 11, part B, items 7 and 10–13): an index that
//! no longer describes its file, a value that does not match its recorded sha256, a
//! truncated file, a second file claiming a key, a symbolic link, a writer's lock held
//! while it waits for input, and the leftovers (temp files, lock files) of writers.

use std::fs::{self, File};
use std::io::{self, Read};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use rlm_context_store::{
    Expected, ListFilter, SetOptions, Store, StoreError, StoreOptions, LOCKS_DIR, VARIABLES_DIR,
};
use serde_json::json;

use crate::support::{bulk, data_dir, file_names};

/// Item 7: another process rewrote a variable; `reference` must not keep the old
/// sha256 (cache keys were built from it) and `get` must not return the old value.
#[test]
fn a_variable_rewritten_elsewhere_is_seen_by_reference_and_get() {
    let (_temp, data) = data_dir();
    let ours = Store::open_with(&data, bulk()).unwrap();
    ours.set("k", json!("one"), SetOptions::default()).unwrap();
    assert_eq!(*ours.get("k").unwrap(), json!("one"));
    // Another process (its own store) writes a new, longer value.
    let theirs = Store::open_with(&data, bulk()).unwrap();
    let new = theirs
        .set("k", json!("two, and longer"), SetOptions::default())
        .unwrap();
    assert_eq!(ours.reference("k").unwrap().sha256, new.sha256);
    assert_eq!(*ours.get("k").unwrap(), json!("two, and longer"));
    assert_eq!(ours.content_sha256("k").unwrap(), new.sha256.unwrap());
    // And a removal elsewhere is a removal here.
    theirs.delete("k").unwrap();
    assert!(!ours.has("k"));
}

/// Rewrites the value bytes of `key`'s file in place, keeping its header (and so its
/// recorded sha256): a hand edit.
fn edit_value_in_place(store: &Store, key: &str, from: &str, to: &str) {
    let path = store.path_of(key).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    let (header, value) = text.split_once('\n').unwrap();
    fs::write(&path, format!("{header}\n{}", value.replace(from, to))).unwrap();
}

/// Item 12: a value edited by hand under its old header fails to read, fails to
/// match its old sha256 in compare-and-set, and fails as a cache key.
#[test]
fn a_hand_edited_value_matches_neither_its_old_sha256_nor_reads() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    let old = store
        .set("k", json!("approved: no"), SetOptions::default())
        .unwrap();
    let stale = old.sha256.unwrap();
    drop(store);
    let store = Store::open_with(&data, bulk()).unwrap();
    edit_value_in_place(&store, "k", "no", "ja"); // same length: the header looks fine
    let err = store
        .compare_and_set(
            "k",
            &Expected::Sha256(stale.clone()),
            json!("approved: yes"),
            SetOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::Integrity { .. }), "{err}");
    let err = store.get("k").unwrap_err();
    assert!(matches!(err, StoreError::Integrity { .. }), "{err}");
    assert!(err.to_string().contains("sha256"), "{err}");
    let err = store.content_sha256("k").unwrap_err();
    assert!(matches!(err, StoreError::Integrity { .. }), "{err}");
    let mut out = Vec::new();
    let err = store.write_value_to("k", &mut out, true).unwrap_err();
    assert!(matches!(err, StoreError::Integrity { .. }), "{err}");
    // Writing it again (no --if-sha256) and removing it both still work.
    store
        .set("k", json!("fixed"), SetOptions::default())
        .unwrap();
    assert_eq!(*store.get("k").unwrap(), json!("fixed"));
    store.delete("k").unwrap();
}

/// The same value re-indented by hand is still that value.
#[test]
fn a_reformatted_but_equal_value_still_reads() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    let value = json!({"a": [1, 2], "b": "c"});
    let written = store
        .set("j", value.clone(), SetOptions::default())
        .unwrap();
    let path = store.path_of("j").unwrap();
    drop(store);
    let text = fs::read_to_string(&path).unwrap();
    let (header, _) = text.split_once('\n').unwrap();
    let pretty = serde_json::to_string_pretty(&value).unwrap();
    fs::write(&path, format!("{header}\n\"value\": {pretty}\n}}\n")).unwrap();
    let store = Store::open_with(&data, bulk()).unwrap();
    assert!(store.problems().is_empty(), "{:?}", store.problems());
    assert_eq!(*store.get("j").unwrap(), value);
    assert_eq!(store.content_sha256("j").unwrap(), written.sha256.unwrap());
}

/// Item 12: a truncated file is reported and left out of `list`, and `get` of it
/// writes nothing at all instead of half the value.
#[test]
fn a_truncated_file_is_reported_and_prints_nothing() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    store
        .set("log", json!("line\n".repeat(10_000)), SetOptions::default())
        .unwrap();
    store
        .set("fine", json!([1]), SetOptions::default())
        .unwrap();
    let path = store.path_of("log").unwrap();
    drop(store);
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() - 1000]).unwrap();

    let store = Store::open_with(&data, bulk()).unwrap();
    let keys: Vec<String> = store
        .list(&ListFilter::default())
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(keys, ["fine"]);
    let problems = store.problems();
    assert!(
        problems.iter().any(|p| p.path == path),
        "truncated file not reported: {problems:?}"
    );
    let mut out = Vec::new();
    let err = store.write_value_to("log", &mut out, false).unwrap_err();
    assert!(matches!(err, StoreError::Integrity { .. }), "{err}");
    assert!(
        out.is_empty(),
        "printed {} bytes of a torn value",
        out.len()
    );
}

/// Item 12: a second file holding a key is reported whichever of the two the
/// directory lists first (before, one met before the canonical file vanished without
/// a word). Ten keys with three copies each, so some copy is listed first whatever
/// order the file system lists names in.
#[test]
fn duplicate_files_of_a_key_are_all_reported() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    let vars = data.join(VARIABLES_DIR);
    let mut copies = Vec::new();
    for k in 0..10 {
        let key = format!("key-{k}");
        store.set(&key, json!(k), SetOptions::default()).unwrap();
        let canonical = store.path_of(&key).unwrap();
        for i in 0..3 {
            let copy = vars.join(format!("copy-{i}-of-{key}.json"));
            fs::copy(&canonical, &copy).unwrap();
            copies.push(copy);
        }
    }
    store.refresh().unwrap();
    let problems = store.problems();
    for copy in &copies {
        assert!(
            problems.iter().any(|p| &p.path == copy),
            "{} not reported: {problems:?}",
            copy.display()
        );
    }
    for k in 0..10 {
        let key = format!("key-{k}");
        assert_eq!(
            store.path_of(&key).unwrap(),
            vars.join(format!("{key}.json"))
        );
        assert_eq!(*store.get(&key).unwrap(), json!(k));
    }
}

/// Item 13: a symlink in `variables/` pointing outside the store is reported by the
/// scan and refused by `get` (it used to be hidden by `list` but read by `get`).
#[test]
fn a_symlinked_variable_file_is_refused_and_reported() {
    let (_temp, data) = data_dir();
    let outside = tempfile::tempdir().unwrap();
    // A valid variable file for key "secret", outside the data directory.
    let elsewhere = Store::open_with(outside.path(), bulk()).unwrap();
    elsewhere
        .set("secret", json!("outside data"), SetOptions::default())
        .unwrap();
    let target = elsewhere.path_of("secret").unwrap();
    let store = Store::open_with(&data, bulk()).unwrap();
    let link = data.join(VARIABLES_DIR).join("secret.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();

    store.refresh().unwrap();
    assert!(
        store.problems().iter().any(|p| p.path == link),
        "{:?}",
        store.problems()
    );
    let err = store.get("secret").unwrap_err();
    assert!(matches!(err, StoreError::Symlink { .. }), "{err}");
    assert!(!store.has("secret"));
    let mut out = Vec::new();
    assert!(store.write_value_to("secret", &mut out, false).is_err());
    assert!(out.is_empty());
    // `vars rm` removes the link (never its target).
    store.delete("secret").unwrap();
    assert!(fs::symlink_metadata(&link).is_err());
    assert!(target.exists());
}

/// Item 13: a symlink in `locks/` is never opened as a lock file.
#[test]
fn a_symlinked_lock_file_is_refused() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("victim");
    fs::write(&target, b"keep me").unwrap();
    std::os::unix::fs::symlink(&target, data.join(LOCKS_DIR).join("k.lock")).unwrap();
    let err = store
        .set("k", json!("v"), SetOptions::default())
        .unwrap_err();
    assert!(matches!(err, StoreError::Symlink { .. }), "{err}");
    assert_eq!(fs::read(&target).unwrap(), b"keep me");
}

/// A reader that blocks until the test sends it its bytes: a `--file -` whose writer
/// has not written yet.
struct WaitingReader {
    chunks: mpsc::Receiver<Vec<u8>>,
    current: io::Cursor<Vec<u8>>,
    /// Told when the store first asks for input.
    reading: Option<mpsc::Sender<()>>,
}

impl Read for WaitingReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(reading) = self.reading.take() {
            let _ = reading.send(());
        }
        loop {
            let n = self.current.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            match self.chunks.recv() {
                Ok(chunk) => self.current = io::Cursor::new(chunk),
                Err(_) => return Ok(0),
            }
        }
    }
}

/// Item 11: a streamed write that is still waiting for its input holds no lock, so
/// another writer of the key is not blocked by it; the streamed value lands after.
#[test]
fn a_streaming_set_waiting_for_input_holds_no_lock() {
    let (_temp, data) = data_dir();
    let (send, chunks) = mpsc::channel();
    let (reading, started) = mpsc::channel();
    let streaming = {
        let data = data.clone();
        std::thread::spawn(move || {
            let store = Store::open_with(&data, bulk()).unwrap();
            let mut reader = WaitingReader {
                chunks,
                current: io::Cursor::new(Vec::new()),
                reading: Some(reading),
            };
            store.set_text_from_reader("k", &mut reader, "stdin", SetOptions::default())
        })
    };
    started.recv().unwrap(); // the store is waiting for input now
    send.send(b"first ".to_vec()).unwrap();
    let quick = Store::open_with(
        &data,
        StoreOptions {
            lock_timeout: Duration::from_millis(500),
            ..bulk()
        },
    )
    .unwrap();
    quick
        .set("k", json!("meanwhile"), SetOptions::default())
        .unwrap();
    send.send(b"and last".to_vec()).unwrap();
    drop(send);
    streaming.join().unwrap().unwrap();
    assert_eq!(*quick.get("k").unwrap(), json!("first and last"));
}

/// Sets `path`'s modification time `age` into the past.
fn age(path: &std::path::Path, age: Duration) {
    File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

/// Item 10: a temp file nobody holds a lock on is a killed writer's and goes when a
/// store opens (it used to stay an hour); one whose writer still holds it stays.
#[test]
fn a_dead_writers_temp_file_goes_and_a_live_ones_stays() {
    let (_temp, data) = data_dir();
    drop(Store::open_with(&data, bulk()).unwrap());
    let vars = data.join(VARIABLES_DIR);
    let dead = vars.join(".tmp-dead.partial");
    let live = vars.join(".tmp-live.partial");
    fs::write(&dead, vec![b'x'; 1 << 20]).unwrap();
    fs::write(&live, b"{").unwrap();
    age(&dead, Duration::from_secs(300));
    age(&live, Duration::from_secs(300));
    let writer = File::open(&live).unwrap();
    writer.lock().unwrap(); // the live writer's lock (another descriptor: flock conflicts)
    drop(Store::open_with(&data, bulk()).unwrap());
    assert!(!dead.exists(), "a dead writer's temp file was left");
    assert!(live.exists(), "a live writer's temp file was removed");
    drop(writer);
}

/// Item 10: `delete` and `clear` remove lock files (they used to stay forever).
#[test]
fn delete_and_clear_remove_lock_files() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    for key in ["a", "b", "c"] {
        store.set(key, json!(key), SetOptions::default()).unwrap();
    }
    let locks = data.join(LOCKS_DIR);
    assert_eq!(file_names(&locks).len(), 3);
    store.delete("a").unwrap();
    assert_eq!(file_names(&locks), ["b.lock", "c.lock"]);
    assert_eq!(store.clear().unwrap(), 2);
    assert!(file_names(&locks).is_empty(), "{:?}", file_names(&locks));
    // The keys are usable again afterwards.
    store.set("a", json!(1), SetOptions::default()).unwrap();
    assert_eq!(*store.get("a").unwrap(), json!(1));
}
