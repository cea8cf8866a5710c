//! Loading `--context-dir`: every regular file under the directory (hidden entries
//! skipped), in lexical order of their paths, copied into one value shaped by
//! `--dir-as`. The whole tree is listed and sized before any file is read, and a FIFO
//! or device in it is refused rather than read forever.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use rlm_context_store::Store;
use rlm_protocol::ContextShape;
use serde_json::{Map, Value};

use super::budget::{check_known_size, open_input, stop_error};
use super::describe::describe_value;
use super::error::ContextError;
use super::info::LoadedContext;
use super::input::{special_kind, Budget};
use super::spec::{ContextKeys, DirAs};

/// What to do when a directory is over `--max-context-bytes`.
const DIR_OVER_LIMIT_HINT: &str = "--context-dir copies every file: pass the large ones with --context (referenced, and read lazily when large), or raise --max-context-bytes";

/// A file of the directory: its path relative to the directory, and its full path.
pub(super) type DirFile = (String, PathBuf);

/// Every regular file under `dir` (hidden entries skipped), sorted by relative path;
/// fails before anything is read when their sizes add up to more than `max_bytes`.
pub(super) fn list_dir_files(dir: &Path, max_bytes: u64) -> Result<Vec<DirFile>, ContextError> {
    let meta = fs::metadata(dir).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ContextError::NotFound(dir.to_owned()),
        _ => ContextError::Unreadable {
            path: dir.to_owned(),
            source: e,
        },
    })?;
    if !meta.is_dir() {
        return Err(ContextError::NotDirectory(dir.to_owned()));
    }
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    let mut total = 0u64;
    while let Some(current) = pending.pop() {
        let entries = fs::read_dir(&current).map_err(|e| ContextError::Unreadable {
            path: current.clone(),
            source: e,
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| ContextError::Unreadable {
                path: current.clone(),
                source: e,
            })?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            let meta = fs::metadata(&path).map_err(|e| ContextError::Unreadable {
                path: path.clone(),
                source: e,
            })?;
            if meta.is_dir() {
                pending.push(path);
            } else if !meta.is_file() {
                // A FIFO could block the load and a device never ends; neither is a
                // document of the directory.
                return Err(ContextError::NotRegular {
                    kind: special_kind(&meta),
                    path,
                });
            } else {
                total += meta.len();
                check_known_size(dir, total, max_bytes, DIR_OVER_LIMIT_HINT)?;
                let relative = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .into_owned();
                files.push((relative, path));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Reads the `files` of `dir` into one value shaped by `dir_as` and stores it under
/// the context key, recording it in `written` (so a failed load can remove it).
pub(super) fn load_dir(
    store: &Store,
    dir: &Path,
    files: &[DirFile],
    dir_as: DirAs,
    keys: &ContextKeys,
    budget: &mut Budget,
    written: &mut Vec<String>,
) -> Result<LoadedContext, ContextError> {
    let key = keys.prefix.as_str();
    let value = read_dir_value(files, dir_as, budget)?;
    let mut info = describe_value(&value, format!("{} ({} files)", dir.display(), files.len()));
    let reference = store.set(key, value, keys.copy_options(dir))?;
    written.push(key.to_owned());
    info.total_bytes = reference.size_bytes;
    let path = store.persist_for_sub_agent(key)?;
    Ok(LoadedContext::new(
        ContextShape::Single,
        vec![path],
        info,
        written.clone(),
        Vec::new(),
    ))
}

/// The directory's files as one value: a list, a dict by relative path, or one
/// string with a `=== path ===` line before each file.
fn read_dir_value(
    files: &[DirFile],
    dir_as: DirAs,
    budget: &mut Budget,
) -> Result<Value, ContextError> {
    Ok(match dir_as {
        DirAs::List => {
            let mut items = Vec::with_capacity(files.len());
            for (_, path) in files {
                items.push(Value::String(read_text_file(path, budget)?));
            }
            Value::Array(items)
        }
        DirAs::Dict => {
            let mut map = Map::new();
            for (relative, path) in files {
                map.insert(
                    relative.clone(),
                    Value::String(read_text_file(path, budget)?),
                );
            }
            Value::Object(map)
        }
        DirAs::Concat => {
            let mut text = String::new();
            for (relative, path) in files {
                text.push_str(&format!("=== {relative} ===\n"));
                text.push_str(&read_text_file(path, budget)?);
                if !text.ends_with('\n') {
                    text.push('\n');
                }
            }
            Value::String(text)
        }
    })
}

/// Reads a whole text file of a directory, counted against `budget`.
fn read_text_file(path: &Path, budget: &mut Budget) -> Result<String, ContextError> {
    let mut input = open_input(path, budget)?;
    let mut bytes = Vec::new();
    if let Err(e) = input.read_to_end(&mut bytes) {
        return Err(
            stop_error(path, input.budget()).unwrap_or(ContextError::Unreadable {
                path: path.to_owned(),
                source: e,
            }),
        );
    }
    String::from_utf8(bytes).map_err(|e| ContextError::InvalidUtf8 {
        path: path.to_owned(),
        offset: e.utf8_error().valid_up_to() as u64,
    })
}

#[cfg(test)]
mod tests {
    use rlm_process::CancellationToken;

    use super::*;
    use crate::context::load_context;
    use crate::context::spec::ContextSpec;
    use crate::context::test_support::{store, test_keys};

    #[test]
    fn directories_load_in_lexical_order_in_every_shape() {
        let (dir, store) = store();
        let root = dir.path().join("repo");
        fs::create_dir_all(root.join("src")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join("b.txt"), "B").unwrap();
        fs::write(root.join("src/a.rs"), "A").unwrap();
        fs::write(root.join(".git/HEAD"), "ignored").unwrap();
        let mut spec = ContextSpec {
            dir: Some(root),
            max_bytes: 1 << 20,
            ..ContextSpec::default()
        };
        load_context(&store, &spec, &test_keys("list"), &CancellationToken::new()).unwrap();
        assert_eq!(*store.get("list").unwrap(), serde_json::json!(["B", "A"]));
        spec.dir_as = DirAs::Dict;
        let loaded =
            load_context(&store, &spec, &test_keys("dict"), &CancellationToken::new()).unwrap();
        assert_eq!(
            *store.get("dict").unwrap(),
            serde_json::json!({"b.txt": "B", "src/a.rs": "A"})
        );
        assert_eq!(loaded.info.items, Some(2));
        spec.dir_as = DirAs::Concat;
        load_context(
            &store,
            &spec,
            &test_keys("concat"),
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(
            *store.get("concat").unwrap(),
            serde_json::json!("=== b.txt ===\nB\n=== src/a.rs ===\nA\n")
        );
    }
}
