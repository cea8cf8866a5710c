//! Loading `--context-dir`: every regular file under the directory (hidden entries
//! skipped), in lexical order of their paths, copied into one value shaped by
//! `--dir-as`. The whole tree is listed and sized before any file is read, and a FIFO
//! or device in it is refused rather than read forever.
//!
//! Symbolic links are not followed (a `loop -> .` link recursed until the path was too
//! long; a link to `/etc/passwd` put that file in the context): they are listed as
//! skipped in what the model is told. `--follow-symlinks` follows those that resolve
//! inside the directory; every directory is entered once (by device and inode), so no
//! link can make the walk loop, and the walk counts toward `--max-context-bytes` as it
//! goes.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
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

/// A file of the directory: its path relative to the directory, and the path it is
/// read from (the link's target, resolved, for a followed symbolic link).
pub(super) type DirFile = (String, PathBuf);

/// Most skipped entries named in the context's description (the rest are counted).
const SKIPPED_NAMED: usize = 20;

/// What a walk of `--context-dir` found: the files to read, sorted by relative path,
/// and the entries it did not follow (symbolic links), for the model to be told.
#[derive(Debug, Default)]
pub(super) struct DirListing {
    /// The files to read.
    pub files: Vec<DirFile>,
    /// `relative path (why)` of each entry skipped, at most [`SKIPPED_NAMED`].
    pub skipped: Vec<String>,
    /// How many entries were skipped in all.
    pub skipped_count: usize,
}

impl DirListing {
    fn skip(&mut self, relative: String, why: &str) {
        self.skipped_count += 1;
        if self.skipped.len() < SKIPPED_NAMED {
            self.skipped.push(format!("{relative} ({why})"));
        }
    }

    /// What the model is told about the skipped entries, if any.
    pub fn skipped_note(&self) -> Vec<String> {
        let mut note = self.skipped.clone();
        let more = self.skipped_count - self.skipped.len();
        if more > 0 {
            note.push(format!("… and {more} more"));
        }
        note
    }
}

/// Every regular file under `dir` (hidden entries skipped), sorted by relative path.
///
/// Symbolic links are not followed unless `follow_symlinks`, and then only links to
/// files that resolve inside `dir` (a link leaving it, dangling, pointing at a hidden
/// entry or at a directory — walked under its own path anyway — is skipped and listed). Each directory is entered once, by device and inode,
/// so a link cycle cannot recurse. Every file found counts its size and the length of
/// its name against `max_bytes` as the walk goes, so it fails at the file that crosses
/// the limit, before anything is read.
pub(super) fn list_dir_files(
    dir: &Path,
    max_bytes: u64,
    follow_symlinks: bool,
) -> Result<DirListing, ContextError> {
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
    let root = fs::canonicalize(dir).map_err(|e| ContextError::Unreadable {
        path: dir.to_owned(),
        source: e,
    })?;
    let mut listing = DirListing::default();
    let mut visited = HashSet::from([(meta.dev(), meta.ino())]);
    // Each directory to list: where it is read from, and its path as the user sees it.
    let mut pending = vec![(dir.to_owned(), dir.to_owned())];
    let mut total = 0u64;
    while let Some((current, shown)) = pending.pop() {
        let entries = fs::read_dir(&current).map_err(|e| ContextError::Unreadable {
            path: shown.clone(),
            source: e,
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| ContextError::Unreadable {
                path: shown.clone(),
                source: e,
            })?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            let shown_path = shown.join(entry.file_name());
            let relative = shown_path
                .strip_prefix(dir)
                .unwrap_or(&shown_path)
                .to_string_lossy()
                .into_owned();
            let unreadable = |e| ContextError::Unreadable {
                path: shown_path.clone(),
                source: e,
            };
            let own = fs::symlink_metadata(&path).map_err(unreadable)?;
            let (read_from, meta) = if own.file_type().is_symlink() {
                if !follow_symlinks {
                    listing.skip(relative, "symbolic link, not followed");
                    continue;
                }
                match resolve_inside(&path, &root) {
                    // Every directory inside is walked under its own path already.
                    Ok((_, meta)) if meta.is_dir() => {
                        listing.skip(
                            relative,
                            "symbolic link to a directory of this one, read under its own path",
                        );
                        continue;
                    }
                    Ok(target) => target,
                    Err(why) => {
                        listing.skip(relative, why);
                        continue;
                    }
                }
            } else {
                (path, own)
            };
            if meta.is_dir() {
                if visited.insert((meta.dev(), meta.ino())) {
                    pending.push((read_from, shown_path));
                }
            } else if !meta.is_file() {
                // A FIFO could block the load and a device never ends; neither is a
                // document of the directory.
                return Err(ContextError::NotRegular {
                    kind: special_kind(&meta),
                    path: shown_path,
                });
            } else {
                total = total
                    .saturating_add(meta.len())
                    .saturating_add(relative.len() as u64);
                check_known_size(dir, total, max_bytes, DIR_OVER_LIMIT_HINT)?;
                listing.files.push((relative, read_from));
            }
        }
    }
    listing.files.sort();
    Ok(listing)
}

/// The target of the symbolic link `link`, resolved, and its metadata, when it stays
/// inside `root` (canonical) and is not hidden; otherwise why it is skipped.
fn resolve_inside(link: &Path, root: &Path) -> Result<(PathBuf, fs::Metadata), &'static str> {
    let Ok(target) = fs::canonicalize(link) else {
        return Err("symbolic link whose target does not exist or cannot be resolved");
    };
    let Ok(inside) = target.strip_prefix(root) else {
        return Err("symbolic link to outside the directory, not followed");
    };
    if inside
        .components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
    {
        return Err("symbolic link to a hidden entry, not followed");
    }
    match fs::metadata(&target) {
        Ok(meta) => Ok((target, meta)),
        Err(_) => Err("symbolic link whose target cannot be read"),
    }
}

/// Reads the `files` of `dir` into one value shaped by `dir_as` and stores it under
/// the context key, recording it in `written` (so a failed load can remove it).
pub(super) fn load_dir(
    store: &Store,
    dir: &Path,
    listing: &DirListing,
    dir_as: DirAs,
    keys: &ContextKeys,
    budget: &mut Budget,
    written: &mut Vec<String>,
) -> Result<LoadedContext, ContextError> {
    let key = keys.prefix.as_str();
    let files = &listing.files;
    let value = read_dir_value(files, dir_as, budget)?;
    let mut info = describe_value(&value, format!("{} ({} files)", dir.display(), files.len()));
    info.skipped = listing.skipped_note();
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

    fn load(
        root: &Path,
        follow: bool,
        max_bytes: u64,
    ) -> Result<(Value, LoadedContext), ContextError> {
        let (_dir, store) = store();
        let spec = ContextSpec {
            dir: Some(root.to_owned()),
            dir_as: DirAs::Dict,
            follow_symlinks: follow,
            max_bytes,
            ..ContextSpec::default()
        };
        let loaded = load_context(&store, &spec, &test_keys("ctx"), &CancellationToken::new())?;
        Ok(((*store.get("ctx").unwrap()).clone(), loaded))
    }

    #[test]
    fn a_link_cycle_is_skipped_and_never_walked_even_when_links_are_followed() {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("repo");
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("a.txt"), "A").unwrap();
        std::os::unix::fs::symlink(".", root.join("loop")).unwrap();
        std::os::unix::fs::symlink("..", root.join("sub/up")).unwrap();
        for follow in [false, true] {
            let (value, loaded) = load(&root, follow, 1 << 20).unwrap();
            assert_eq!(value, serde_json::json!({"a.txt": "A"}), "follow={follow}");
            let skipped = loaded.info.skipped.join("\n");
            assert!(skipped.contains("loop (symbolic link"), "{skipped}");
            assert!(skipped.contains("sub/up (symbolic link"), "{skipped}");
        }
    }

    #[test]
    fn a_link_to_a_file_outside_the_directory_is_never_read() {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("repo");
        fs::create_dir_all(&root).unwrap();
        fs::write(top.path().join("secret.txt"), "TOP-SECRET").unwrap();
        fs::write(root.join(".hidden"), "HIDDEN").unwrap();
        fs::write(root.join("a.txt"), "A").unwrap();
        std::os::unix::fs::symlink(top.path().join("secret.txt"), root.join("passwd")).unwrap();
        std::os::unix::fs::symlink("../secret.txt", root.join("relative")).unwrap();
        std::os::unix::fs::symlink(".hidden", root.join("shown")).unwrap();
        std::os::unix::fs::symlink("missing", root.join("dangling")).unwrap();
        for follow in [false, true] {
            let (value, loaded) = load(&root, follow, 1 << 20).unwrap();
            assert_eq!(value, serde_json::json!({"a.txt": "A"}), "follow={follow}");
            assert_eq!(loaded.info.skipped.len(), 4, "{:?}", loaded.info.skipped);
        }
        let (_, loaded) = load(&root, true, 1 << 20).unwrap();
        let skipped = loaded.info.skipped.join("\n");
        assert!(
            skipped.contains("passwd (symbolic link to outside the directory"),
            "{skipped}"
        );
        assert!(
            skipped.contains("shown (symbolic link to a hidden entry"),
            "{skipped}"
        );
        assert!(
            skipped.contains("dangling (symbolic link whose target"),
            "{skipped}"
        );
    }

    #[test]
    fn a_link_inside_the_directory_is_followed_only_when_asked() {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("repo");
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("sub/real.txt"), "REAL").unwrap();
        std::os::unix::fs::symlink("sub/real.txt", root.join("alias.txt")).unwrap();
        std::os::unix::fs::symlink("sub", root.join("linkdir")).unwrap();
        let (value, loaded) = load(&root, false, 1 << 20).unwrap();
        assert_eq!(value, serde_json::json!({"sub/real.txt": "REAL"}));
        assert_eq!(loaded.info.skipped.len(), 2, "{:?}", loaded.info.skipped);
        let (value, loaded) = load(&root, true, 1 << 20).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"alias.txt": "REAL", "sub/real.txt": "REAL"})
        );
        assert_eq!(
            loaded.info.skipped,
            vec!["linkdir (symbolic link to a directory of this one, read under its own path)"]
        );
    }

    #[test]
    fn the_walk_stops_at_the_limit_as_it_goes_counting_names_too() {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("repo");
        fs::create_dir_all(&root).unwrap();
        for i in 0..200 {
            fs::write(root.join(format!("empty-file-{i:04}")), "").unwrap();
        }
        let err = list_dir_files(&root, 1000, false).unwrap_err();
        match err {
            ContextError::TooLarge { size, max, .. } => {
                assert_eq!(max, 1000);
                // It stopped at the entry that crossed the limit, not after the walk.
                assert!(size > 1000 && size <= 1000 + 15, "{size}");
            }
            other => panic!("{other}"),
        }
        assert_eq!(
            list_dir_files(&root, 1 << 20, false).unwrap().files.len(),
            200
        );
        assert!(load(&root, false, 1000).is_err());
    }
}
