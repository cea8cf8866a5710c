//! What the loaders' tests share: a store in a temporary directory, run-scoped keys and
//! a spec of files, so each module's tests stay beside its code.

use std::path::PathBuf;

use rlm_context_store::Store;

use super::spec::{ContextKeys, ContextSpec, DEFAULT_MAX_CONTEXT_BYTES};

/// A store in a fresh temporary directory (kept alive by the returned guard).
pub(super) fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("data")).unwrap();
    (dir, store)
}

/// Keys under `prefix` in a test session's scope.
pub(super) fn test_keys(prefix: &str) -> ContextKeys {
    ContextKeys {
        prefix: prefix.into(),
        scope: "session:test".into(),
    }
}

/// A spec loading `files` with the default limit.
pub(super) fn spec(files: Vec<PathBuf>) -> ContextSpec {
    ContextSpec {
        files,
        max_bytes: DEFAULT_MAX_CONTEXT_BYTES,
        ..ContextSpec::default()
    }
}
