//! The memory ceiling: values are cached up to [`StoreOptions::memory_ceiling_bytes`]
//! and the least recently used ones are pushed out.
//!
//! A value pushed out of memory that also has a file in `variables/` is simply
//! dropped; one that exists nowhere else (written with `persist: false`) is spilled to
//! this store's own directory under `spill/`, which the store removes when dropped. A
//! spilled value is not visible to other processes, unlike a persisted one.
//!
//! [`StoreOptions::memory_ceiling_bytes`]: super::StoreOptions::memory_ceiling_bytes

use std::fs;
use std::sync::Arc;

use serde_json::Value;

use super::{create_private_dir, Entry, Inner, Location, Store, SPILL_DIR};
use crate::disk::{self, FileHeader, FORMAT_VERSION};
use crate::error::Result;
use crate::integrity;
use crate::key;
use crate::private_fs::Durability;

impl Store {
    /// Caches a value if it fits, spilling whatever the ceiling pushes out. A value that
    /// cannot fit is spilled straight away if it exists nowhere else.
    pub(super) fn cache_value(
        &self,
        inner: &mut Inner,
        key: &str,
        value: Arc<Value>,
        size: u64,
    ) -> Result<()> {
        if !inner.cache.admits(size) {
            if matches!(
                inner.entries.get(key).map(|e| &e.location),
                Some(Location::Memory)
            ) {
                self.spill(inner, key, &value)?;
            }
            return Ok(());
        }
        for evicted in inner.cache.insert(key, value, size) {
            if matches!(
                inner.entries.get(&evicted.key).map(|e| &e.location),
                Some(Location::Memory)
            ) {
                self.spill(inner, &evicted.key, &evicted.value)?;
            }
        }
        Ok(())
    }

    /// Writes the in-memory value of `key` to the spill directory (creating it on first
    /// use) and records that it now lives there.
    fn spill(&self, inner: &mut Inner, key: &str, value: &Value) -> Result<()> {
        if !inner.spill_dir_created {
            create_private_dir(&self.data_dir.join(SPILL_DIR))?;
            create_private_dir(&self.spill_dir)?;
            inner.spill_dir_created = true;
        }
        let Some(entry) = inner.entries.get(key).cloned() else {
            return Ok(());
        };
        let path = self.spill_dir.join(key::file_name(key));
        let bytes = integrity::encode_value(value);
        let mut reference = entry.reference;
        if reference.sha256.is_none() {
            reference.sha256 = Some(integrity::sha256_hex(&bytes));
        }
        let header = FileHeader {
            format_version: Some(FORMAT_VERSION),
            reference: reference.clone(),
            persist: false,
        };
        let value_offset = Some(disk::write_file(&path, &header, &bytes, Durability::Bulk)?);
        inner.stats.values_spilled += 1;
        inner.entries.insert(
            key.to_owned(),
            Entry {
                reference,
                location: Location::Spilled { path, value_offset },
            },
        );
        Ok(())
    }
}

impl Drop for Store {
    /// Removes this store's spill directory: spilled values die with the store.
    fn drop(&mut self) {
        let created = self
            .inner
            .get_mut()
            .map(|i| i.spill_dir_created)
            .unwrap_or(true);
        if created {
            let _ = fs::remove_dir_all(&self.spill_dir);
        }
    }
}
