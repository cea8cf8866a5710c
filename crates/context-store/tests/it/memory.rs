//! The memory ceiling (docs/store.md): past it, least-recently-used values leave memory,
//! in-memory-only values are spilled and read back intact, a value larger than the
//! ceiling is never cached, and a store's spill directory goes away with it.

use rlm_context_store::{ListFilter, SetOptions, Store, StoreOptions, SPILL_DIR, VARIABLES_DIR};
use serde_json::{json, Value};

use crate::support::{bulk, data_dir, file_names, read_plain_json};

const CEILING_BYTES: u64 = 16 * 1024;

fn small_ceiling() -> StoreOptions {
    StoreOptions {
        memory_ceiling_bytes: CEILING_BYTES,
        ..bulk()
    }
}

fn value(i: usize) -> Value {
    json!({"i": i, "text": format!("{i:05}-").repeat(170)})
}

#[test]
fn in_memory_values_spill_past_the_ceiling_and_read_back() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, small_ceiling()).unwrap();
    const COUNT: usize = 100; // ~1 KB each: about six times the ceiling
    for i in 0..COUNT {
        store
            .set(&format!("v{i}"), value(i), SetOptions::in_memory())
            .unwrap();
        let stats = store.stats();
        assert!(stats.memory_bytes <= CEILING_BYTES, "{stats:?}");
    }
    let stats = store.stats();
    assert!(stats.values_spilled > 0, "{stats:?}");
    assert!(stats.values_in_memory < COUNT, "{stats:?}");
    assert_eq!(stats.variables, COUNT);
    assert_eq!(store.list(&ListFilter::default()).len(), COUNT);
    // Spilled values are private to this store: nothing appears in variables/.
    assert!(file_names(&data.join(VARIABLES_DIR)).is_empty());

    // Every value reads back exactly, in two passes (the second reloads what the
    // first pushed out again), and memory never passes the ceiling.
    for _ in 0..2 {
        for i in 0..COUNT {
            assert_eq!(*store.get(&format!("v{i}")).unwrap(), value(i), "v{i}");
            assert!(store.stats().memory_bytes <= CEILING_BYTES);
        }
    }
    assert!(store.stats().values_loaded > 0);

    // A spilled value can still be handed to a sub-agent.
    let path = store.persist_for_sub_agent("v0").unwrap();
    assert_eq!(read_plain_json(&path)["value"], value(0));
}

#[test]
fn a_value_larger_than_the_ceiling_is_never_cached() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, small_ceiling()).unwrap();
    let big = json!("z".repeat(4 * CEILING_BYTES as usize));

    // In memory only: spilled straight away, not kept.
    store
        .set("big-in-memory", big.clone(), SetOptions::in_memory())
        .unwrap();
    let stats = store.stats();
    assert_eq!(stats.values_in_memory, 0, "{stats:?}");
    assert_eq!(stats.memory_bytes, 0);
    assert_eq!(stats.values_spilled, 1);

    // Persisted: written, not kept.
    store
        .set("big-on-disk", big.clone(), SetOptions::default())
        .unwrap();
    assert_eq!(store.stats().values_in_memory, 0);

    // Every get reads it again and keeps nothing.
    for round in 1..=3u64 {
        assert_eq!(*store.get("big-in-memory").unwrap(), big);
        assert_eq!(*store.get("big-on-disk").unwrap(), big);
        let stats = store.stats();
        assert_eq!(stats.values_in_memory, 0, "{stats:?}");
        assert_eq!(stats.memory_bytes, 0);
        assert_eq!(stats.values_loaded, 2 * round);
    }

    // Small values are still cached next to it.
    store
        .set("small", json!("s"), SetOptions::default())
        .unwrap();
    assert_eq!(store.stats().values_in_memory, 1);
}

#[test]
fn persisted_values_leave_memory_without_spilling() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, small_ceiling()).unwrap();
    for i in 0..60 {
        store
            .set(&format!("p{i}"), value(i), SetOptions::default())
            .unwrap();
    }
    let stats = store.stats();
    assert!(stats.memory_bytes <= CEILING_BYTES, "{stats:?}");
    assert_eq!(
        stats.values_spilled, 0,
        "persisted values are already on disk"
    );
    for i in 0..60 {
        assert_eq!(*store.get(&format!("p{i}")).unwrap(), value(i));
    }
}

#[test]
fn the_spill_directory_is_removed_on_drop() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, small_ceiling()).unwrap();
    for i in 0..40 {
        store
            .set(&format!("v{i}"), value(i), SetOptions::in_memory())
            .unwrap();
    }
    assert!(store.stats().values_spilled > 0);
    let own = file_names(&data.join(SPILL_DIR));
    assert_eq!(own.len(), 1, "one spill directory per live store: {own:?}");
    assert!(!file_names(&data.join(SPILL_DIR).join(&own[0])).is_empty());

    // A second live store on the same data dir spills into its own directory.
    let other = Store::open_with(&data, small_ceiling()).unwrap();
    other
        .set("big", json!("q".repeat(100_000)), SetOptions::in_memory())
        .unwrap();
    assert_eq!(file_names(&data.join(SPILL_DIR)).len(), 2);

    drop(store);
    assert_eq!(file_names(&data.join(SPILL_DIR)).len(), 1);
    drop(other);
    assert!(file_names(&data.join(SPILL_DIR)).is_empty());
}
