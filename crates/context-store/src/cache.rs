//! The in-memory value cache: least-recently-used, bounded by a byte ceiling.
//!
//! Sizes are the values' serialised sizes (`sizeBytes`), a stable proxy for their heap
//! cost. Inserting past the ceiling evicts the least recently used values and hands
//! them back, so the store can spill the ones that exist nowhere else.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

struct Cached {
    value: Arc<Value>,
    size: u64,
    tick: u64,
}

/// Values held in memory, keyed by variable key.
pub(crate) struct ValueCache {
    values: HashMap<String, Cached>,
    recency: BTreeMap<u64, String>,
    tick: u64,
    bytes: u64,
    ceiling: u64,
}

/// A value pushed out of memory by an insert.
pub(crate) struct Evicted {
    pub key: String,
    pub value: Arc<Value>,
}

impl ValueCache {
    pub(crate) fn new(ceiling: u64) -> Self {
        Self {
            values: HashMap::new(),
            recency: BTreeMap::new(),
            tick: 0,
            bytes: 0,
            ceiling,
        }
    }

    /// True when a value of `size` bytes may be cached at all.
    pub(crate) fn admits(&self, size: u64) -> bool {
        size <= self.ceiling
    }

    /// The cached value, marked as just used.
    pub(crate) fn get(&mut self, key: &str) -> Option<Arc<Value>> {
        self.tick += 1;
        let tick = self.tick;
        let cached = self.values.get_mut(key)?;
        self.recency.remove(&cached.tick);
        cached.tick = tick;
        self.recency.insert(tick, key.to_owned());
        Some(Arc::clone(&cached.value))
    }

    /// The cached value without marking it as used.
    pub(crate) fn peek(&self, key: &str) -> Option<Arc<Value>> {
        self.values.get(key).map(|c| Arc::clone(&c.value))
    }

    /// True when `key` is cached (does not count as a use).
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// Caches a value (the caller checked `admits`) and returns what had to leave.
    pub(crate) fn insert(&mut self, key: &str, value: Arc<Value>, size: u64) -> Vec<Evicted> {
        self.remove(key);
        self.tick += 1;
        self.recency.insert(self.tick, key.to_owned());
        self.values.insert(
            key.to_owned(),
            Cached {
                value,
                size,
                tick: self.tick,
            },
        );
        self.bytes += size;
        let mut evicted = Vec::new();
        while self.bytes > self.ceiling {
            let Some((_, oldest)) = self.recency.pop_first() else {
                break;
            };
            if let Some(cached) = self.values.remove(&oldest) {
                self.bytes -= cached.size;
                evicted.push(Evicted {
                    key: oldest,
                    value: cached.value,
                });
            }
        }
        evicted
    }

    /// Drops a value from memory.
    pub(crate) fn remove(&mut self, key: &str) {
        if let Some(cached) = self.values.remove(key) {
            self.recency.remove(&cached.tick);
            self.bytes -= cached.size;
        }
    }

    pub(crate) fn clear(&mut self) {
        self.values.clear();
        self.recency.clear();
        self.bytes = 0;
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn evicts_least_recently_used_past_the_ceiling() {
        let mut cache = ValueCache::new(10);
        assert!(cache.insert("a", Arc::new(json!(1)), 4).is_empty());
        assert!(cache.insert("b", Arc::new(json!(2)), 4).is_empty());
        cache.get("a");
        let evicted = cache.insert("c", Arc::new(json!(3)), 4);
        assert_eq!(
            evicted.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(),
            ["b"]
        );
        assert_eq!(cache.bytes(), 8);
        assert!(cache.contains("a") && cache.contains("c"));
        assert!(!cache.admits(11));
    }
}
