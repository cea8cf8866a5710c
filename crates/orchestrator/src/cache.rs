//! Memoised sub-calls: an identical `llm_query`, `sub_rlm` or `spawn_agent` (same
//! model or command, same prompt, same referenced variables' sha256) is answered from
//! the store instead of being asked again.
//!
//! Entries are ordinary variables `cache-<hash>` in scope `cache`, so they survive the
//! run, are shared by every process of the tree, and can be inspected or cleared with
//! `rlm-orchestrate vars list --scope cache` / `vars rm`.
//!
//! A referenced variable enters a key through [`variable_digest`]: the hash of what it
//! holds now, checked against its file — never a sha256 remembered by an index or
//! written in a header, which another process's rewrite or a hand edit leaves stale
//! (and which then answered the new content with the old content's answer). A `file`
//! variable enters through the sha256 of the file's bytes, not of the reference.

use std::sync::Arc;

use rlm_context_store::{FileCopyError, SetOptions, Store, StoreError};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::events::CachedCall;

/// Scope of cache entries.
pub const CACHE_SCOPE: &str = "cache";

/// The identity of a call: what kind, who answers, and everything it is given.
#[derive(Debug, Clone)]
pub struct CallKey {
    hex: String,
}

impl CallKey {
    /// Hashes the parts of a call. `parts` must include every input that can change
    /// the answer (model or command, prompt text, sha256 of referenced variables).
    pub fn new(kind: CachedCall, parts: &[&str]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(kind.as_str().as_bytes());
        for part in parts {
            // Length-prefix each part so ("ab", "c") and ("a", "bc") differ.
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        let digest = hasher.finalize();
        Self {
            hex: digest.iter().take(16).map(|b| format!("{b:02x}")).collect(),
        }
    }

    /// The variable key of the entry.
    pub fn variable(&self) -> String {
        format!("cache-{}", self.hex)
    }
}

/// The part of a call's key that stands for the variable `key`: the sha256 of its
/// current content ([`Store::content_sha256`]). A value that does not match its
/// recorded hash fails here, so nothing is memoised on top of it.
///
/// A `file` variable's value is only the file's identity (path, size, inode,
/// modification time), which an edit in place that keeps all three leaves as it was:
/// its part is the sha256 of the file's bytes, streamed now (one read of the file per
/// memoised call over it), so an answer cached for other contents is never served.
pub fn variable_digest(store: &Store, key: &str) -> Result<String, StoreError> {
    let Some(file) = store.unchanged_file_reference(key)? else {
        return store.content_sha256(key);
    };
    let sha = file.copy_to(&mut std::io::sink()).map_err(|e| match e {
        FileCopyError::Changed(change) => StoreError::FileChanged {
            key: key.to_owned(),
            path: file.path.clone(),
            change: change.0,
        },
        FileCopyError::Read(source) | FileCopyError::Write(source) => StoreError::Io {
            action: "hash the referenced file",
            path: file.path.clone(),
            source,
        },
    })?;
    Ok(format!("file:{sha}"))
}

/// The call cache over a store; disabled with `--no-cache`.
#[derive(Clone)]
pub struct CallCache {
    store: Arc<Store>,
    enabled: bool,
}

impl std::fmt::Debug for CallCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallCache")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl CallCache {
    /// A cache in `store`; `enabled = false` makes every lookup miss and nothing stored.
    pub fn new(store: Arc<Store>, enabled: bool) -> Self {
        Self { store, enabled }
    }

    /// The cached answer of `key`, if any.
    pub async fn get(&self, key: &CallKey) -> Option<Value> {
        if !self.enabled {
            return None;
        }
        let store = Arc::clone(&self.store);
        let variable = key.variable();
        let found = tokio::task::spawn_blocking(move || store.get(&variable).ok())
            .await
            .ok()
            .flatten()?;
        found.get("answer").cloned()
    }

    /// Remembers `answer` for `key`. Failures only cost a future cache miss.
    pub async fn put(&self, key: &CallKey, kind: CachedCall, answer: &Value) {
        if !self.enabled {
            return;
        }
        let store = Arc::clone(&self.store);
        let variable = key.variable();
        let entry = json!({ "kind": kind.as_str(), "answer": answer });
        let stored = tokio::task::spawn_blocking(move || {
            store.set(&variable, entry, SetOptions::default().scope(CACHE_SCOPE))
        })
        .await;
        if let Ok(Err(e)) = stored {
            tracing::warn!("failed to cache a {} answer: {e}", kind.as_str());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_separate_their_parts() {
        assert_ne!(
            CallKey::new(CachedCall::LlmQuery, &["ab", "c"]).variable(),
            CallKey::new(CachedCall::LlmQuery, &["a", "bc"]).variable()
        );
        assert_ne!(
            CallKey::new(CachedCall::LlmQuery, &["m", "p"]).variable(),
            CallKey::new(CachedCall::SubRlm, &["m", "p"]).variable()
        );
        assert_eq!(
            CallKey::new(CachedCall::SpawnAgent, &["x"]).variable(),
            CallKey::new(CachedCall::SpawnAgent, &["x"]).variable()
        );
        assert_eq!(
            CallKey::new(CachedCall::SpawnAgent, &["x"])
                .variable()
                .len(),
            "cache-".len() + 32
        );
    }

    /// Issue 11 B7: a variable rewritten by another process gets a new digest, so the
    /// answer cached for its old content is not returned for the new one (the key
    /// used to come from the index's stale sha256).
    #[tokio::test]
    async fn a_variable_rewritten_elsewhere_misses_the_old_answer() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        store
            .set("doc", json!("the old text"), SetOptions::default())
            .unwrap();
        let key_for = |store: &Store| {
            let digest = variable_digest(store, "doc").unwrap();
            CallKey::new(CachedCall::SpawnAgent, &["agent", "summarise doc", &digest])
        };
        let cache = CallCache::new(Arc::clone(&store), true);
        let before = key_for(&store);
        cache
            .put(
                &before,
                CachedCall::SpawnAgent,
                &json!("about the old text"),
            )
            .await;
        // Another process (its own store on the same directory) rewrites the variable.
        Store::open(dir.path())
            .unwrap()
            .set("doc", json!("a new text"), SetOptions::default())
            .unwrap();
        let after = key_for(&store);
        assert_ne!(after.variable(), before.variable());
        assert_eq!(cache.get(&after).await, None);
    }

    /// Issue 22 item 8: a `file` variable's digest is its file's content, so an edit in
    /// place that keeps size, inode and modification time changes it.
    #[test]
    fn a_file_variable_is_keyed_on_its_content() {
        use std::io::{Seek as _, Write as _};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("data")).unwrap();
        let path = dir.path().join("doc.txt");
        std::fs::write(&path, "the old text").unwrap();
        store
            .set_file_reference("doc", &path, SetOptions::default())
            .unwrap();
        let before = variable_digest(&store, "doc").unwrap();
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.seek(std::io::SeekFrom::Start(4)).unwrap();
        file.write_all(b"NEW").unwrap();
        file.set_modified(modified).unwrap();
        drop(file);
        store
            .file_reference("doc")
            .unwrap()
            .unwrap()
            .check()
            .unwrap();
        assert_ne!(variable_digest(&store, "doc").unwrap(), before);
    }

    #[tokio::test]
    async fn answers_round_trip_unless_disabled() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let key = CallKey::new(CachedCall::LlmQuery, &["model", "prompt"]);
        let cache = CallCache::new(Arc::clone(&store), true);
        assert_eq!(cache.get(&key).await, None);
        cache
            .put(&key, CachedCall::LlmQuery, &json!("answer"))
            .await;
        assert_eq!(cache.get(&key).await, Some(json!("answer")));
        assert_eq!(store.reference(&key.variable()).unwrap().scope, CACHE_SCOPE);
        let off = CallCache::new(store, false);
        assert_eq!(off.get(&key).await, None);
    }
}
