//! Benchmarks of the context store's operations (the "store operation costs" of BENCHMARKS.md):
//! `reference` (the model's `ref()`), `set`/`get` in memory and on disk with and
//! without fsync, throughput of 1 MB and 100 MB values, and `list`/`open` of stores
//! holding 10 000 variables of 1 KB and of 100 KB.
//!
//! Run with `cargo bench -p rlm-context-store` (about three minutes on two cores,
//! most of it building 1 GB of fixtures and moving 100 MB values). Large fixtures are
//! built once per run in a temporary directory with `Durability::Bulk` and removed at
//! the end; sample counts are kept small where one iteration moves 100 MB.

#![expect(
    clippy::unwrap_used,
    reason = "benchmarks fail loudly on any store error"
)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use divan::counter::{BytesCount, ItemsCount};
use divan::Bencher;
use rlm_context_store::{Durability, ListFilter, SetOptions, Store, StoreOptions};
use serde_json::Value;
use tempfile::TempDir;

fn main() {
    divan::main();
    // Statics are never dropped: remove the fixtures (over 1 GB) explicitly.
    FIXTURE_DIRS.lock().unwrap().clear();
}

/// Temporary directories of fixtures shared by several benchmarks.
static FIXTURE_DIRS: Mutex<Vec<TempDir>> = Mutex::new(Vec::new());

const KB: usize = 1000;
const MB: usize = 1000 * 1000;

/// Variables in the `list`/`open` fixtures.
const MANY: usize = 10_000;

fn options(durability: Durability) -> StoreOptions {
    StoreOptions {
        durability,
        ..StoreOptions::default()
    }
}

/// Log-like text of exactly `bytes` bytes, with quotes and newlines to escape.
fn text(bytes: usize) -> String {
    let line = "2025-11-22T09:39:46Z INFO request \"GET /api/v1/items\" took 12 ms\n";
    let mut text = line.repeat(bytes / line.len() + 1);
    text.truncate(bytes);
    text
}

/// A text value whose JSON serialisation is `bytes` bytes long (give or take the
/// escapes), as a `Value`.
fn value(bytes: usize) -> Value {
    Value::String(text(bytes))
}

/// A fresh directory for one benchmark (removed when it returns).
fn scratch() -> (TempDir, PathBuf) {
    let temp = tempfile::tempdir().unwrap();
    let data = temp.path().join("data");
    (temp, data)
}

/// A store of `MANY` persisted variables of `value_bytes` each, built once.
fn many_fixture(value_bytes: usize) -> &'static Path {
    static SMALL: OnceLock<PathBuf> = OnceLock::new();
    static LARGE: OnceLock<PathBuf> = OnceLock::new();
    let cell = if value_bytes <= KB { &SMALL } else { &LARGE };
    cell.get_or_init(|| {
        let temp = tempfile::tempdir().unwrap();
        let data = temp.path().join("data");
        let store = Store::open_with(&data, options(Durability::Bulk)).unwrap();
        let value = value(value_bytes);
        for i in 0..MANY {
            store
                .set(&format!("doc-{i:05}"), value.clone(), SetOptions::default())
                .unwrap();
        }
        FIXTURE_DIRS.lock().unwrap().push(temp);
        flush_to_disk();
        data
    })
}

/// Writes dirty pages back now, so writeback of a fresh 1 GB fixture does not slow
/// down whichever benchmark runs next.
fn flush_to_disk() {
    let _ = std::process::Command::new("sync").status();
}

/// A store holding one persisted variable `big` of `bytes`, built once per size.
fn one_value_fixture(bytes: usize) -> PathBuf {
    static BUILT: Mutex<Vec<(usize, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap();
    if let Some((_, path)) = built.iter().find(|(b, _)| *b == bytes) {
        return path.clone();
    }
    let temp = tempfile::tempdir().unwrap();
    let data = temp.path().join("data");
    let store = Store::open_with(&data, options(Durability::Bulk)).unwrap();
    store
        .set("big", value(bytes), SetOptions::default())
        .unwrap();
    FIXTURE_DIRS.lock().unwrap().push(temp);
    flush_to_disk();
    built.push((bytes, data.clone()));
    data
}

// ----- metadata -----

/// `ref()`: the reference of one variable among 10 000 (metadata only, O(1)).
#[divan::bench]
fn reference(bencher: Bencher) {
    let (_temp, data) = scratch();
    let store = Store::open_with(&data, options(Durability::Bulk)).unwrap();
    let small = value(100);
    for i in 0..MANY {
        store
            .set(
                &format!("doc-{i:05}"),
                small.clone(),
                SetOptions::in_memory(),
            )
            .unwrap();
    }
    bencher
        .counter(ItemsCount::new(1u32))
        .bench_local(|| store.reference(divan::black_box("doc-04242")).unwrap());
}

// ----- in memory -----

/// `set` of a 1 KB value kept in memory (no disk).
#[divan::bench]
fn set_in_memory_1kb(bencher: Bencher) {
    let (_temp, data) = scratch();
    let store = Store::open_with(&data, options(Durability::Bulk)).unwrap();
    let value = value(KB);
    bencher
        .counter(ItemsCount::new(1u32))
        .with_inputs(|| value.clone())
        .bench_local_values(|v| store.set("k", v, SetOptions::in_memory()).unwrap());
}

/// `get` of a 1 KB value held in memory.
#[divan::bench]
fn get_in_memory_1kb(bencher: Bencher) {
    let (_temp, data) = scratch();
    let store = Store::open_with(&data, options(Durability::Bulk)).unwrap();
    store.set("k", value(KB), SetOptions::in_memory()).unwrap();
    bencher
        .counter(ItemsCount::new(1u32))
        .bench_local(|| store.get(divan::black_box("k")).unwrap());
}

// ----- persisted set -----

/// `set` persisted to disk: fsync of the file and the directory, then rename.
#[divan::bench(
    consts = [KB, MB, 100 * MB],
    sample_count = 10,
    sample_size = 1,
    max_time = 20
)]
fn set_fsync<const BYTES: usize>(bencher: Bencher) {
    bench_set(bencher, BYTES, Durability::Fsync);
}

/// `set` persisted to disk without fsync (bulk loads): still atomic.
#[divan::bench(
    consts = [KB, MB, 100 * MB],
    sample_count = 10,
    max_time = 20
)]
fn set_bulk<const BYTES: usize>(bencher: Bencher) {
    bench_set(bencher, BYTES, Durability::Bulk);
}

fn bench_set(bencher: Bencher, bytes: usize, durability: Durability) {
    let (_temp, data) = scratch();
    let store = Store::open_with(&data, options(durability)).unwrap();
    let value = value(bytes);
    bencher
        .counter(BytesCount::new(bytes))
        .with_inputs(|| value.clone())
        .bench_local_values(|v| store.set("v", v, SetOptions::default()).unwrap());
}

// ----- get from disk -----

/// `get` of a value that is on disk only (first read after open): read and parse.
#[divan::bench(consts = [KB, MB, 100 * MB], sample_count = 10, max_time = 20)]
fn get_from_disk<const BYTES: usize>(bencher: Bencher) {
    let data = one_value_fixture(BYTES);
    bencher
        .counter(BytesCount::new(BYTES))
        .with_inputs(|| Store::open_with(&data, options(Durability::Bulk)).unwrap())
        .bench_local_values(|store| {
            let value: Arc<Value> = store.get("big").unwrap();
            (store, value)
        });
}

// ----- many variables -----

/// `list` of every variable in a store of 10 000.
#[divan::bench(consts = [KB, 100 * KB], sample_count = 50)]
fn list_10000<const VALUE_BYTES: usize>(bencher: Bencher) {
    let store = Store::open(many_fixture(VALUE_BYTES)).unwrap();
    bencher.bench_local(|| store.list(&ListFilter::default()));
}

/// `Store::open` of 10 000 variables (headers only, whatever the value size).
#[divan::bench(consts = [KB, 100 * KB], sample_count = 20, sample_size = 1)]
fn open_10000<const VALUE_BYTES: usize>(bencher: Bencher) {
    let data = many_fixture(VALUE_BYTES);
    bencher.bench_local(|| Store::open(data).unwrap());
}
