//! Loading the user's context into the store, and describing it without showing it.
//!
//! A `--context` file is *referenced*, not copied: it becomes a `file` variable naming
//! the file (see `rlm_context_store::FileRef`), and it is described from samples
//! (`sample`), so loading costs the same for 2 KB and 40 GB and the first model
//! request never waits for it. The REPL reads the file where it is, whole or — above
//! `--lazy-above` — lazily ([`LazyPolicy`]). Stdin, pipes, devices, `.json` files,
//! directories and `--copy-context` are copied into the store as before.
//!
//! Every input is checked (exists, is a file or directory as expected, fits
//! `--max-context-bytes` when it is copied or loaded whole) before anything is
//! written; copied text is streamed into the store with UTF-8 validated on the way, so
//! a decode error names the file and byte offset. Sizes known in advance are checked
//! first, and every byte copied is counted as well (`input`): pipes, devices and
//! stdin (`--context -`) have no size to check, and reading stops at the limit or at
//! Ctrl-C / SIGTERM. Context variables get run-scoped keys, so a bad input never
//! touches variables that were already stored; whatever a failed or stopped load
//! wrote is removed again (a half-streamed variable never leaves its temporary file).
//!
//! The description ([`ContextInfo`]) is what the model sees: type, sizes, item count
//! and a preview of at most 200 characters — its size does not depend on the context's.
//!
//! [`load_context`] reads as its steps, one module each: an existing variable is only
//! described (`variable`); a directory is listed, then loaded whole (`dir`); files are
//! planned — referenced or copied, within the limit — (`plan`), then loaded (`files`).
//! Below them: the public types (`spec`, `info`, `error`), the limit as errors
//! (`budget`) over the counting reader (`input`), the description (`describe`) and
//! text statistics gathered while streaming (`stats`).

use rlm_context_store::Store;
use rlm_process::CancellationToken;

mod budget;
mod describe;
mod dir;
mod error;
mod files;
mod info;
mod input;
mod lazy;
mod plan;
mod sample;
mod spec;
mod stats;
#[cfg(test)]
mod test_support;
mod variable;

pub use describe::describe_value;
pub use error::ContextError;
pub use info::{ContextInfo, LoadedContext, TextStats, PREVIEW_CHARS};
pub use input::{Budget, Input as BudgetedInput, Stop, STDIN_PATH};
pub use lazy::{LazyMode, LazyPolicy, DEFAULT_LAZY_ABOVE_BYTES};
pub use rlm_protocol::CHUNK_CHARS;
pub use spec::{ContextKeys, ContextSpec, DirAs, DEFAULT_MAX_CONTEXT_BYTES};

/// Loads the context described by `spec` into `store` under `keys`. Cancelling
/// `cancel` stops the load within a read, leaving nothing of it in the store.
///
/// A `--context` file is referenced ([`Store::set_file_reference`]) and described from
/// samples, so this costs the same for any size; stdin, pipes, `.json` files,
/// directories and `--copy-context` are copied. `--max-context-bytes` bounds what is
/// copied or will be loaded whole, not what is read lazily.
pub fn load_context(
    store: &Store,
    spec: &ContextSpec,
    keys: &ContextKeys,
    cancel: &CancellationToken,
) -> Result<LoadedContext, ContextError> {
    if let Some(key) = &spec.var {
        return variable::describe_variable(store, key, spec.lazy);
    }
    let mut budget = Budget::new(spec.max_bytes, cancel.clone());
    if let Some(dir) = &spec.dir {
        let listing = dir::list_dir_files(dir, spec.max_bytes, spec.follow_symlinks)?;
        return deleting_on_failure(store, |written| {
            dir::load_dir(
                store,
                dir,
                &listing,
                spec.dir_as,
                keys,
                &mut budget,
                written,
            )
        });
    }
    let plans = plan::plan_files(spec)?;
    deleting_on_failure(store, |written| {
        files::load_files(store, &spec.files, &plans, keys, &mut budget, written)
    })
}

/// Runs a load that records each key it writes; on failure deletes them all again.
fn deleting_on_failure(
    store: &Store,
    load: impl FnOnce(&mut Vec<String>) -> Result<LoadedContext, ContextError>,
) -> Result<LoadedContext, ContextError> {
    let mut written = Vec::new();
    let result = load(&mut written);
    if result.is_err() {
        for key in &written {
            let _ = store.delete(key);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use std::fs;

    use rlm_context_store::SetOptions;

    use super::*;
    use test_support::{spec, store, test_keys};

    #[test]
    fn bad_inputs_are_named_and_leave_nothing_behind() {
        let (dir, store) = store();
        store
            .set("keep", serde_json::json!("me"), SetOptions::default())
            .unwrap();
        let good = dir.path().join("good.txt");
        fs::write(&good, "fine").unwrap();
        let bad = dir.path().join("bad.txt");
        let mut bytes = b"abc".to_vec();
        bytes.push(0xff);
        fs::write(&bad, bytes).unwrap();
        let err = load_context(
            &store,
            &spec(vec![good.clone(), bad]),
            &test_keys("ctx"),
            &CancellationToken::new(),
        )
        .unwrap_err();
        assert!(
            matches!(err, ContextError::InvalidUtf8 { offset: 3, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("bad.txt"));
        assert!(!store.has("ctx-0"), "partial load was not cleaned up");
        assert!(store.has("keep"));

        let err = load_context(
            &store,
            &spec(vec![dir.path().join("nope.txt")]),
            &test_keys("ctx"),
            &CancellationToken::new(),
        )
        .unwrap_err();
        assert!(matches!(err, ContextError::NotFound(_)));
        let err = load_context(
            &store,
            &spec(vec![dir.path().to_owned()]),
            &test_keys("ctx"),
            &CancellationToken::new(),
        )
        .unwrap_err();
        assert!(matches!(err, ContextError::IsDirectory(_)));
        let json = dir.path().join("bad.json");
        fs::write(&json, "{\"a\": ").unwrap();
        let err = load_context(
            &store,
            &spec(vec![json]),
            &test_keys("ctx"),
            &CancellationToken::new(),
        )
        .unwrap_err();
        assert!(matches!(err, ContextError::InvalidJson { .. }), "{err}");
        let mut small = spec(vec![good]);
        small.max_bytes = 2;
        assert!(matches!(
            load_context(&store, &small, &test_keys("ctx"), &CancellationToken::new()).unwrap_err(),
            ContextError::TooLarge { .. }
        ));
        assert_eq!(store.list(&Default::default()).len(), 1);
    }

    #[test]
    fn a_cancelled_load_stores_nothing_and_says_so() {
        let (dir, store) = store();
        let path = dir.path().join("log.txt");
        fs::write(&path, "some text").unwrap();
        let cancel = CancellationToken::new();
        cancel.cancel();
        let err = load_context(&store, &spec(vec![path]), &test_keys("ctx"), &cancel).unwrap_err();
        assert!(matches!(err, ContextError::Cancelled { .. }), "{err}");
        assert!(store.list(&Default::default()).is_empty());
    }
}
