//! Several processes on one data directory (docs/store.md): racing `compare_and_set`s lose
//! no update, `kill -9` of a writer in the middle of a 50 MB write leaves the old or the
//! new value and never a torn file, and another process's writes become visible through
//! `refresh` and `wait_for`.
//!
//! The `worker_*` tests are the other processes: they do nothing in a normal run (see
//! [`crate::support`]).

use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use notify::Watcher as _;
use rlm_context_store::{
    file_name, Expected, ListFilter, SetOptions, Store, StoreError, VARIABLES_DIR,
};
use serde_json::{json, Value};

use crate::support::sha256_hex;
use crate::support::{
    bulk, data_dir, file_names, hear_parent, read_plain_json, tell_parent, worker_input, Worker,
};

// ----- compare_and_set from 8 processes -----

const CAS_WORKER: &str = "processes::worker_cas_incrementer";
const CAS_KEY: &str = "counter";
const CAS_PROCESSES: usize = 8;
const CAS_INCREMENTS: usize = 50;

/// Adds one to the counter `arg` times with compare-and-set, retrying on conflicts, the
/// way a sub-agent updating shared state would. Reports the values it wrote.
#[test]
fn worker_cas_incrementer() {
    let Some(input) = worker_input(CAS_WORKER) else {
        return;
    };
    let increments: usize = input.arg.parse().unwrap();
    let store = Store::open_with(&input.dir, bulk()).unwrap();
    tell_parent("ready");
    assert_eq!(hear_parent(), "go");
    let mut wrote = Vec::with_capacity(increments);
    let mut conflicts = 0u64;
    while wrote.len() < increments {
        // Another process may have written since our last look.
        store.refresh().unwrap();
        // The value and the sha256 of that very value (a `get` then a `reference` may
        // see two different files once the index follows other writers).
        let (current, reference) = store.get_with_reference(CAS_KEY).unwrap();
        let current = current.as_u64().unwrap();
        let sha = reference.sha256.unwrap();
        match store.compare_and_set(
            CAS_KEY,
            &Expected::Sha256(sha),
            json!(current + 1),
            SetOptions::default(),
        ) {
            Ok(_) => wrote.push(current + 1),
            Err(StoreError::Conflict { .. }) => conflicts += 1,
            Err(e) => panic!("compare_and_set failed: {e}"),
        }
    }
    tell_parent(&format!("wrote {}", serde_json::to_string(&wrote).unwrap()));
    tell_parent(&format!("conflicts {conflicts}"));
}

#[test]
fn racing_compare_and_set_from_8_processes_loses_no_update() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    store
        .compare_and_set(CAS_KEY, &Expected::Absent, json!(0), SetOptions::default())
        .unwrap();

    let mut workers: Vec<Worker> = (0..CAS_PROCESSES)
        .map(|_| Worker::spawn(CAS_WORKER, &data, &CAS_INCREMENTS.to_string()))
        .collect();
    // Start them together, so they really race.
    for worker in &mut workers {
        worker.expect_message("ready");
    }
    for worker in &mut workers {
        worker.send("go");
    }
    let mut written: Vec<u64> = Vec::new();
    let mut conflicts = 0u64;
    for worker in workers {
        for message in worker.finish() {
            if let Some(list) = message.strip_prefix("wrote ") {
                let mine: Vec<u64> = serde_json::from_str(list).unwrap();
                assert_eq!(mine.len(), CAS_INCREMENTS);
                written.extend(mine);
            } else if let Some(n) = message.strip_prefix("conflicts ") {
                conflicts += n.parse::<u64>().unwrap();
            }
        }
    }
    let total = (CAS_PROCESSES * CAS_INCREMENTS) as u64;
    // Every successful compare_and_set wrote a distinct number: each update was
    // applied on top of the one before it, none was lost or applied twice.
    written.sort_unstable();
    assert_eq!(written, (1..=total).collect::<Vec<_>>());
    eprintln!("{total} increments from {CAS_PROCESSES} processes, {conflicts} conflicts retried");

    store.refresh().unwrap();
    assert_eq!(*store.get(CAS_KEY).unwrap(), json!(total));
    let fresh = Store::open(&data).unwrap();
    assert_eq!(*fresh.get(CAS_KEY).unwrap(), json!(total));
    assert!(fresh.problems().is_empty(), "{:?}", fresh.problems());
}

// ----- kill -9 during a 50 MB write -----

const BIG_WRITER: &str = "processes::worker_big_writer";
const BIG_KEY: &str = "big";
const BIG_TEXT_BYTES: usize = 50 * 1024 * 1024;

/// Kill rounds are scaled to the time one 50 MB write takes (fsync included), within
/// these bounds, so `cargo test` stays quick: 5 in a debug build (which hashes and
/// escapes 50 MB about ten times slower than a release one), up to 20 on a fast disk
/// with optimised dependencies.
const MIN_KILL_ROUNDS: u32 = 5;
const MAX_KILL_ROUNDS: u32 = 20;
const KILL_TEST_BUDGET: Duration = Duration::from_secs(10);

/// Sets the number of kill rounds instead (e.g. `RLM_STORE_KILL_ROUNDS=20` for a
/// thorough run).
const KILL_ROUNDS_ENV: &str = "RLM_STORE_KILL_ROUNDS";

/// 50 MB of text unique to `generation`, needing JSON escapes throughout.
fn big_text(generation: u32) -> String {
    let block = format!("generation {generation:>4}: \"quoted\", back\\slash, tab\t, é € 😀\n");
    let mut text = block.repeat(BIG_TEXT_BYTES / block.len());
    text.push_str(&".".repeat(BIG_TEXT_BYTES - text.len()));
    text
}

fn generation_of(text: &str) -> u32 {
    text.get(11..15)
        .and_then(|digits| digits.trim().parse().ok())
        .unwrap_or_else(|| panic!("not a generated text: {:?}", text.get(..40)))
}

/// Writes generation `arg` of the big value: even generations with `set` (encode,
/// hash, write, fsync, rename), odd ones streamed with `set_text_from_reader`.
#[test]
fn worker_big_writer() {
    let Some(input) = worker_input(BIG_WRITER) else {
        return;
    };
    let generation: u32 = input.arg.parse().unwrap();
    let store = Store::open(&input.dir).unwrap(); // fsync durability, as in production
    let text = big_text(generation);
    tell_parent("ready");
    if generation.is_multiple_of(2) {
        store
            .set(BIG_KEY, Value::String(text), SetOptions::default())
            .unwrap();
    } else {
        store
            .set_text_from_reader(
                BIG_KEY,
                &mut text.as_bytes(),
                "generator",
                SetOptions::default(),
            )
            .unwrap();
    }
    tell_parent("done");
}

/// A channel that receives `()` when a writer's temp file (`.tmp-…`) appears in `dir`
/// (a fresh watcher, so no event of an earlier round can arrive).
fn watch_for_temp_file(dir: &Path) -> TempFileWatch {
    let (tx, rx) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event {
            let is_temp = |p: &std::path::PathBuf| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(".tmp-"))
            };
            if matches!(event.kind, notify::EventKind::Create(_)) && event.paths.iter().any(is_temp)
            {
                let _ = tx.send(());
            }
        }
    })
    .unwrap();
    watcher
        .watch(dir, notify::RecursiveMode::NonRecursive)
        .unwrap();
    TempFileWatch {
        _watcher: watcher,
        rx,
    }
}

/// A live watch from [`watch_for_temp_file`].
struct TempFileWatch {
    _watcher: notify::RecommendedWatcher,
    rx: mpsc::Receiver<()>,
}

impl TempFileWatch {
    fn recv_timeout(&self, timeout: Duration) -> Result<(), mpsc::RecvTimeoutError> {
        self.rx.recv_timeout(timeout)
    }
}

/// After a writer died: a plain JSON parser reads the file, and a store opened now
/// lists the variable, reports no problem (the dead writer's temp file is ignored) and
/// returns generation `old` or `new`, exactly, with a header that describes it.
/// Returns the generation found.
fn check_old_or_new(data: &Path, old: u32, new: u32, check_hash: bool) -> u32 {
    let path = data.join(VARIABLES_DIR).join(file_name(BIG_KEY));
    let bytes = std::fs::read(&path).unwrap();
    serde_json::from_slice::<serde::de::IgnoredAny>(&bytes)
        .unwrap_or_else(|e| panic!("torn file after kill -9: a JSON parser says {e}"));

    let store = Store::open(data).unwrap();
    assert!(store.problems().is_empty(), "{:?}", store.problems());
    assert_eq!(store.list(&ListFilter::default()).len(), 1);
    let value = store.get(BIG_KEY).unwrap();
    let text = value.as_str().unwrap();
    let generation = generation_of(text);
    assert!(
        generation == old || generation == new,
        "found generation {generation}, expected {old} (old) or {new} (new)"
    );
    assert!(
        text == big_text(generation),
        "generation {generation} is not intact"
    );
    // The header describes these bytes: after the header line and `"value":`,
    // before the final `}`.
    let r = store.reference(BIG_KEY).unwrap();
    let header_end = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    let raw = &bytes[header_end + br#""value":"#.len()..bytes.len() - 1];
    assert_eq!(r.size_bytes, raw.len() as u64);
    if check_hash {
        assert_eq!(r.sha256.as_deref(), Some(sha256_hex(raw).as_str()));
    }
    generation
}

#[test]
fn kill_9_during_a_50_mb_write_leaves_the_old_or_the_new_value() {
    let (_temp, data) = data_dir();
    let vars = data.join(VARIABLES_DIR);

    // Generation 0 is written to completion; how long that takes spreads the kills.
    let mut first = Worker::spawn(BIG_WRITER, &data, "0");
    first.expect_message("ready");
    let started = Instant::now();
    first.expect_message("done");
    let write_time = started.elapsed();
    first.finish();
    let mut current = check_old_or_new(&data, 0, 0, false);

    let rounds = match std::env::var(KILL_ROUNDS_ENV) {
        Ok(n) => n.parse::<u32>().unwrap().max(2),
        Err(_) => ((KILL_TEST_BUDGET.as_secs_f64() / write_time.as_secs_f64()) as u32)
            .clamp(MIN_KILL_ROUNDS, MAX_KILL_ROUNDS),
    };
    // Half the rounds kill at instants spread over the whole write (and a little past
    // its end). The other half kill a few milliseconds after the writer creates its
    // temp file (an inotify event tells), so some kills surely land inside the file
    // write, for `set` (rounds ≡ 2 mod 4) as for streaming (≡ 3). Sleeps only pick
    // the instants; no result depends on them.
    let targeted = |round: u32| matches!(round % 4, 2 | 3);
    let sweeps: Vec<u32> = (1..=rounds).filter(|&r| !targeted(r)).collect();
    let (mut kept_old, mut got_new, mut died_mid_file) = (0, 0, 0);
    for round in 1..=rounds {
        let temp_created = watch_for_temp_file(&vars);
        let mut writer = Worker::spawn(BIG_WRITER, &data, &round.to_string());
        writer.expect_message("ready");
        if targeted(round) {
            temp_created
                .recv_timeout(Duration::from_secs(120))
                .expect("the writer never created its temp file");
            std::thread::sleep(Duration::from_millis(u64::from(round) * 3));
        } else {
            let index = sweeps.iter().position(|&r| r == round).unwrap_or(0);
            let fraction = 1.1 * index as f64 / (sweeps.len().max(2) - 1) as f64;
            std::thread::sleep(write_time.mul_f64(fraction));
        }
        writer.kill();

        // A writer killed inside its temp file leaves that file behind (hidden, and
        // ignored by the store); count and clear them.
        let temps: Vec<String> = file_names(&vars)
            .into_iter()
            .filter(|n| n.starts_with(".tmp-"))
            .collect();
        died_mid_file += usize::from(!temps.is_empty());
        let found = check_old_or_new(&data, current, round, round == rounds);
        if found == current {
            kept_old += 1;
        } else {
            got_new += 1;
        }
        for temp in temps {
            std::fs::remove_file(vars.join(temp)).unwrap();
        }
        current = found;
    }
    eprintln!(
        "{rounds} kills over a {write_time:?} write: {kept_old} kept the old value, \
         {got_new} found the new one, {died_mid_file} died inside the temp file"
    );
    assert!(
        died_mid_file > 0,
        "no kill landed while the temp file was being written; the test proved little"
    );
}

// ----- other processes' writes become visible -----

const MUTATOR: &str = "processes::worker_mutator";

/// Adds, changes and removes variables as a sub-agent would, then says so.
#[test]
fn worker_mutator() {
    let Some(input) = worker_input(MUTATOR) else {
        return;
    };
    let store = Store::open_with(&input.dir, bulk()).unwrap();
    store
        .set(
            "added",
            json!("new"),
            SetOptions::default().scope("agent:w"),
        )
        .unwrap();
    store
        .set("changed", json!({"result": 2}), SetOptions::default())
        .unwrap();
    store.delete("removed").unwrap();
    tell_parent("done");
}

#[test]
fn refresh_sees_another_process_add_change_and_remove() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    for (key, value) in [
        ("changed", json!({"result": 1})),
        ("removed", json!("bye")),
        ("kept", json!("same")),
    ] {
        store
            .set(key, value.clone(), SetOptions::default())
            .unwrap();
        // Cached in memory, so a stale copy would show.
        assert_eq!(*store.get(key).unwrap(), value);
    }

    let mut worker = Worker::spawn(MUTATOR, &data, "");
    worker.expect_message("done");
    worker.finish();

    let report = store.refresh().unwrap();
    assert_eq!(report.added, ["added"]);
    assert_eq!(report.changed, ["changed"]);
    assert_eq!(report.removed, ["removed"]);
    assert_eq!(*store.get("changed").unwrap(), json!({"result": 2}));
    assert_eq!(*store.get("added").unwrap(), json!("new"));
    assert_eq!(store.reference("added").unwrap().scope, "agent:w");
    assert!(!store.has("removed"));
    let keys: Vec<String> = store
        .list(&ListFilter::default())
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(keys, ["added", "changed", "kept"]);

    // Nothing changed since: a second refresh reports nothing.
    let again = store.refresh().unwrap();
    assert!(
        again.added.is_empty() && again.changed.is_empty() && again.removed.is_empty(),
        "{again:?}"
    );
}

#[test]
fn refresh_notices_a_rewrite_that_keeps_size_mtime_and_inode() {
    // A writer that replaces a file within one timestamp tick (coarse clocks: 1 s on
    // ext3 or HFS+, a jiffy for new files on Linux), with the same size and the same
    // inode number (an in-place rewrite, or an atomic rename onto a recycled inode),
    // leaves (size, mtime, inode) unchanged. Simulated by an in-place rewrite whose
    // mtime is set back.
    use std::os::unix::fs::MetadataExt;
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    store
        .set("k", json!("aaaa"), SetOptions::default())
        .unwrap();
    assert_eq!(*store.get("k").unwrap(), json!("aaaa"));
    let path = store.path_of("k").unwrap();
    let before = std::fs::metadata(&path).unwrap();

    // The new file: another variable "k" with a value of the same length.
    let (_elsewhere_temp, elsewhere) = data_dir();
    let writer = Store::open_with(&elsewhere, bulk()).unwrap();
    let new = writer
        .set("k", json!("bbbb"), SetOptions::default())
        .unwrap();
    let new_bytes = std::fs::read(writer.path_of("k").unwrap()).unwrap();
    assert_eq!(new_bytes.len() as u64, before.len());

    std::fs::write(&path, &new_bytes).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_modified(before.modified().unwrap()).unwrap();
    drop(file);
    let after = std::fs::metadata(&path).unwrap();
    assert_eq!(
        (after.len(), after.ino(), after.mtime(), after.mtime_nsec()),
        (
            before.len(),
            before.ino(),
            before.mtime(),
            before.mtime_nsec()
        ),
        "the simulation must keep size, inode and mtime"
    );

    let report = store.refresh().unwrap();
    assert_eq!(report.changed, ["k"], "{report:?}");
    assert_eq!(store.reference("k").unwrap(), new);
    assert_eq!(*store.get("k").unwrap(), json!("bbbb"));
}

const LATE_WRITER: &str = "processes::worker_late_writer";

/// Opens the store, waits for the parent's word, then writes `sub-result-1`.
#[test]
fn worker_late_writer() {
    let Some(input) = worker_input(LATE_WRITER) else {
        return;
    };
    let store = Store::open(&input.dir).unwrap();
    tell_parent("ready");
    assert_eq!(hear_parent(), "go");
    store
        .set(
            "sub-result-1",
            json!({"result": "from the sub-agent"}),
            SetOptions::default().scope("agent:root"),
        )
        .unwrap();
    tell_parent("done");
}

#[test]
fn wait_for_returns_when_another_process_writes() {
    let (_temp, data) = data_dir();
    let store = Arc::new(Store::open(&data).unwrap());
    let mut worker = Worker::spawn(LATE_WRITER, &data, "");
    worker.expect_message("ready");
    let waiter = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || store.wait_for("sub-result-1", Duration::from_secs(60)))
    };
    // Whether the waiter is already watching when the write lands or not, it must
    // come back with the variable.
    worker.send("go");
    let r = waiter.join().unwrap().unwrap();
    worker.expect_message("done");
    worker.finish();
    assert_eq!(r.key, "sub-result-1");
    assert_eq!(r.scope, "agent:root");
    assert_eq!(
        *store.get("sub-result-1").unwrap(),
        json!({"result": "from the sub-agent"})
    );
    let path = store.path_of("sub-result-1").unwrap();
    assert_eq!(read_plain_json(&path)["ref"]["id"], json!(r.id));
}

#[test]
fn wait_for_returns_when_another_thread_writes() {
    let (_temp, data) = data_dir();
    let waiting = Store::open(&data).unwrap();
    let writing = Store::open(&data).unwrap();
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| waiting.wait_for("answer", Duration::from_secs(60)));
        writing
            .set("answer", json!(42), SetOptions::default())
            .unwrap();
        let r = waiter.join().unwrap().unwrap();
        assert_eq!(r.key, "answer");
    });
    assert_eq!(*waiting.get("answer").unwrap(), json!(42));
}

#[test]
fn wait_for_an_existing_variable_returns_at_once_and_a_missing_one_times_out() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    store.set("here", json!(1), SetOptions::default()).unwrap();
    assert_eq!(
        store.wait_for("here", Duration::from_secs(60)).unwrap().key,
        "here"
    );
    let err = store
        .wait_for("never-written", Duration::from_millis(200))
        .unwrap_err();
    match &err {
        StoreError::WaitTimeout { key, .. } => assert_eq!(key, "never-written"),
        other => panic!("expected WaitTimeout, got {other}"),
    }
    assert!(err.to_string().contains("never-written"), "{err}");
}

// ----- a value streamed while another writer renames new versions over it -----

/// `write_value_to` (what `vars get` and `vars show` use) reads a variable's header and
/// value from one open file: a writer elsewhere renaming new versions over the file
/// never makes it pair one version's header with another's value. Found by the Slurm
/// compare-and-set test: `vars show` failed as an integrity error under concurrent
/// `vars set`s. Each reader is a fresh store (a fresh process's index).
#[test]
fn a_value_streamed_while_it_is_rewritten_is_always_one_whole_version() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let writer_store = Store::open_with(&data, bulk()).unwrap();
    writer_store
        .set(
            "shared",
            json!({"n": 0, "pad": "x".repeat(2000)}),
            SetOptions::default(),
        )
        .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 100_000 {
                n += 1;
                // Versions of different lengths, so a mixed pair cannot pass the check.
                let value = json!({"n": n, "pad": "x".repeat(2000 + (n % 7) as usize)});
                writer_store
                    .set("shared", value, SetOptions::default())
                    .unwrap();
            }
        })
    };
    for _ in 0..300 {
        let reader = Store::open_with(&data, bulk()).unwrap();
        let mut out = Vec::new();
        reader
            .write_value_to("shared", &mut out, false)
            .unwrap_or_else(|e| panic!("a read under a concurrent writer failed: {e}"));
        let value: Value = serde_json::from_slice(&out).unwrap();
        assert!(value["n"].is_u64(), "{value}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
}
