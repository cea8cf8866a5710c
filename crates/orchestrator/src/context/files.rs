//! Loading `--context` files, one variable each (several make a list): a regular file
//! is referenced where it is and described from samples, a `.json` file is parsed into
//! a value, and stdin, pipes, devices and `--copy-context` files are streamed into the
//! store as text, validated and counted on the way.

use std::io;
use std::path::{Path, PathBuf};

use rlm_context_store::{Store, StoreError};
use rlm_protocol::ContextShape;
use serde_json::Value;

use super::budget::{open_input, stop_error};
use super::describe::{
    describe_list, describe_referenced_file, describe_streamed_text, describe_value,
};
use super::error::ContextError;
use super::info::{ContextInfo, LoadedContext};
use super::input::{Budget, STDIN_PATH};
use super::plan::{CopyReason, Plan};
use super::sample::sample;
use super::spec::ContextKeys;
use super::stats::StatsReader;

/// Loads `files` as `plans` say, recording each key in `written` as soon as it is
/// stored (so a failed load can remove them).
pub(super) fn load_files(
    store: &Store,
    files: &[PathBuf],
    plans: &[Plan],
    keys: &ContextKeys,
    budget: &mut Budget,
    written: &mut Vec<String>,
) -> Result<LoadedContext, ContextError> {
    let mut paths = Vec::new();
    let mut infos = Vec::new();
    let mut referenced = Vec::new();
    for (i, (path, plan)) in files.iter().zip(plans).enumerate() {
        let key = keys.slot_key(i, files.len());
        let info = match *plan {
            Plan::Reference { size, lazy } => {
                let (info, file) = reference_file(store, path, size, lazy, &key, keys, budget)?;
                referenced.push(file);
                info
            }
            Plan::Copy {
                why: CopyReason::Json,
                ..
            } => copy_json_file(store, path, &key, keys, budget)?,
            Plan::Copy { .. } => copy_text_file(store, path, &key, keys, budget)?,
        };
        written.push(key.clone());
        paths.push(store.persist_for_sub_agent(&key)?);
        infos.push(info);
    }
    let (shape, info) = if files.len() == 1 {
        let info = infos
            .pop()
            .unwrap_or_else(|| describe_value(&Value::Null, String::new()));
        (ContextShape::Single, info)
    } else {
        (ContextShape::List, describe_list(infos))
    };
    Ok(LoadedContext::new(
        shape,
        paths,
        info,
        written.clone(),
        referenced,
    ))
}

/// Stores a `file` variable referring to `path` and describes the file from samples;
/// returns the description and the canonical path the variable refers to.
fn reference_file(
    store: &Store,
    path: &Path,
    size: u64,
    lazy: bool,
    key: &str,
    keys: &ContextKeys,
    budget: &Budget,
) -> Result<(ContextInfo, PathBuf), ContextError> {
    if budget.is_cancelled() {
        return Err(ContextError::Cancelled {
            path: path.to_owned(),
        });
    }
    let sampled = sample(path, size)?;
    let (_, file) = store
        .set_file_reference(key, path, keys.reference_options())
        .map_err(|e| match e {
            StoreError::Io { source, .. } => ContextError::Unreadable {
                path: path.to_owned(),
                source,
            },
            other => ContextError::Store(other),
        })?;
    let info = describe_referenced_file(sampled, size, lazy, input_name(path));
    Ok((info, file.path))
}

/// Parses a `.json` input (counted against `budget`) and stores the value.
fn copy_json_file(
    store: &Store,
    path: &Path,
    key: &str,
    keys: &ContextKeys,
    budget: &mut Budget,
) -> Result<ContextInfo, ContextError> {
    let value = read_json_file(path, budget)?;
    let info = describe_value(&value, input_name(path));
    store.set(key, value, keys.copy_options(path))?;
    Ok(info)
}

/// Streams a text input into the store (stdin, a pipe, a device, `--copy-context`).
fn copy_text_file(
    store: &Store,
    path: &Path,
    key: &str,
    keys: &ContextKeys,
    budget: &mut Budget,
) -> Result<ContextInfo, ContextError> {
    let mut reader = StatsReader::new(open_input(path, budget)?);
    let name = input_name(path);
    let stored = store.set_text_from_reader(key, &mut reader, &name, keys.copy_options(path));
    let reference = stored.map_err(|e| {
        if let Some(stop) = stop_error(path, reader.get_ref().budget()) {
            return stop;
        }
        match e {
            StoreError::InvalidUtf8 { offset, .. } => ContextError::InvalidUtf8 {
                path: path.to_owned(),
                offset,
            },
            StoreError::Io {
                action: "read",
                source,
                ..
            } => ContextError::Unreadable {
                path: path.to_owned(),
                source,
            },
            other => ContextError::Store(other),
        }
    })?;
    Ok(describe_streamed_text(
        reader.stats(),
        reference.size_bytes,
        reader.preview(),
        name,
    ))
}

/// Reads and parses a `.json` input, counted against `budget`.
fn read_json_file(path: &Path, budget: &mut Budget) -> Result<Value, ContextError> {
    let mut input = open_input(path, budget)?;
    // serde_json reads a byte at a time: buffer in front of the counting reader.
    let parsed = serde_json::from_reader(io::BufReader::with_capacity(1 << 16, &mut input));
    parsed.map_err(|e| {
        if let Some(stop) = stop_error(path, input.budget()) {
            stop
        } else if e.is_io() {
            ContextError::Unreadable {
                path: path.to_owned(),
                source: io::Error::other(e.to_string()),
            }
        } else {
            ContextError::InvalidJson {
                path: path.to_owned(),
                message: e.to_string(),
            }
        }
    })
}

/// How an input is named to the model and in messages.
fn input_name(path: &Path) -> String {
    if path.as_os_str() == STDIN_PATH {
        "stdin".to_owned()
    } else {
        path.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use rlm_context_store::VariableType;
    use rlm_process::CancellationToken;

    use super::*;
    use crate::context::info::{TextStats, PREVIEW_CHARS};
    use crate::context::lazy::LazyMode;
    use crate::context::load_context;
    use crate::context::test_support::{spec, store, test_keys};

    #[test]
    fn a_text_file_is_referenced_and_described_from_samples() {
        let (dir, store) = store();
        let path = dir.path().join("log.txt");
        fs::write(&path, format!("héllo\n{}", "x".repeat(1000))).unwrap();
        let loaded = load_context(
            &store,
            &spec(vec![path.clone()]),
            &test_keys("run-1-context"),
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(loaded.info.kind, "str");
        assert_eq!(
            (loaded.info.total_chars, loaded.info.lines),
            (1006, Some(2))
        );
        assert!(!loaded.info.estimated && !loaded.info.lazy);
        assert_eq!(loaded.info.total_bytes, 1007);
        assert!(loaded.info.preview.starts_with("héllo\n"));
        assert_eq!(loaded.info.text, None);
        let reference = store.reference("run-1-context").unwrap();
        assert_eq!(reference.var_type, VariableType::File);
        assert!(reference.size_bytes < 500, "a reference, not a copy");
        let canonical = fs::canonicalize(&path).unwrap();
        assert_eq!(loaded.source.referenced, vec![canonical.clone()]);
        assert_eq!(
            store.file_reference("run-1-context").unwrap().unwrap().path,
            canonical
        );

        // Above --lazy-above it is lazy; --lazy-context never loads it whole, within
        // --max-context-bytes, whose error then names the lazy way out.
        let mut lazy = spec(vec![path.clone()]);
        lazy.lazy.above_bytes = 100;
        let loaded =
            load_context(&store, &lazy, &test_keys("lazy"), &CancellationToken::new()).unwrap();
        assert!(loaded.info.lazy);
        let mut never = spec(vec![path]);
        never.lazy.mode = LazyMode::Never;
        never.max_bytes = 100;
        let err = load_context(
            &store,
            &never,
            &test_keys("never"),
            &CancellationToken::new(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("read it lazily instead"), "{err}");
        assert!(!store.has("never"));
    }

    #[test]
    fn a_copied_text_file_is_streamed_and_described() {
        let (dir, store) = store();
        let path = dir.path().join("log.txt");
        fs::write(&path, format!("héllo\n{}", "x".repeat(1000))).unwrap();
        let mut copy = spec(vec![path]);
        copy.copy = true;
        let loaded = load_context(
            &store,
            &copy,
            &test_keys("run-1-context"),
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(loaded.info.kind, "str");
        assert_eq!(loaded.info.total_chars, 1006);
        assert_eq!(loaded.info.preview.chars().count(), PREVIEW_CHARS);
        assert!(loaded.info.preview.starts_with("héllo\n"));
        assert_eq!(
            loaded.info.text,
            Some(TextStats {
                chars: 1006,
                max_char: 0xff
            })
        );
        assert_eq!(loaded.source.shape, ContextShape::Single);
        assert_eq!(
            store.get("run-1-context").unwrap().as_str().map(str::len),
            Some(1007)
        );
    }

    #[test]
    fn several_files_make_a_list() {
        let (dir, store) = store();
        let a = dir.path().join("a.md");
        let b = dir.path().join("b.json");
        fs::write(&a, "alpha").unwrap();
        fs::write(&b, r#"{"k": [1, 2]}"#).unwrap();
        let loaded = load_context(
            &store,
            &spec(vec![a, b]),
            &test_keys("ctx"),
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(loaded.info.kind, "list");
        assert_eq!(loaded.info.items, Some(2));
        assert_eq!(loaded.source.files.len(), 2);
        assert_eq!(loaded.keys, vec!["ctx-0", "ctx-1"]);
        assert_eq!(
            *store.get("ctx-1").unwrap(),
            serde_json::json!({"k": [1, 2]})
        );
    }
}
