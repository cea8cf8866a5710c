//! Which files a `--haystack` path names, read under the rules of `--context` and
//! `--context-dir`: a directory's symbolic links are never followed (a link to a 0600
//! file outside the directory put that file into model requests) but named as
//! skipped; only regular files are read (`/dev/zero` or a FIFO was read without end,
//! or waited on for ever); the whole haystack is at most `--max-context-bytes`,
//! checked on the sizes before anything is read and counted again while reading, so
//! a file that grows cannot pass it.
//!
//! Each file is read by [`read_regular_file`]: without waiting at its open (a FIFO put
//! in place after the listing), inside a directory without following a link, and
//! checked to be a regular file on the open descriptor.

use std::fs::{self, FileType};
use std::path::{Path, PathBuf};

use crate::error::EvalError;
use crate::regular_file::{kind_of, read_regular_file, Refused};

/// The files of a haystack, in byte order of their names, each as its name and raw
/// contents, and the entries of a directory that were not read.
#[derive(Debug, Default)]
pub(super) struct HaystackFiles {
    /// Name and contents of each file read.
    pub files: Vec<(Vec<u8>, Vec<u8>)>,
    /// `name (why)` of each `.txt` entry not read (a symbolic link).
    pub skipped: Vec<String>,
}

/// A file to read: its name, where it is, and whether a link there may be followed
/// (only the path the user named itself).
struct Listed {
    name: Vec<u8>,
    path: PathBuf,
    follow: bool,
}

/// Reads `path`: a `.txt` file, or a directory whose `.txt` files (not those of its
/// subdirectories, nor its symbolic links) are read in byte order of their names; at
/// most `max_bytes` in all.
pub(super) fn read_haystack(path: &Path, max_bytes: u64) -> Result<HaystackFiles, EvalError> {
    let metadata = fs::metadata(path).map_err(|source| EvalError::haystack_io(path, source))?;
    let mut out = HaystackFiles::default();
    let mut listed = Vec::new();
    let mut total = 0_u64;
    if metadata.is_dir() {
        let entries = fs::read_dir(path).map_err(|source| EvalError::haystack_io(path, source))?;
        for entry in entries {
            let entry = entry.map_err(|source| EvalError::haystack_io(path, source))?;
            let name = entry.file_name();
            if !name.as_encoded_bytes().ends_with(b".txt") {
                continue;
            }
            let file = entry.path();
            let kind = entry
                .file_type()
                .map_err(|source| EvalError::haystack_io(&file, source))?;
            if kind.is_symlink() {
                out.skipped.push(format!(
                    "{} (symbolic link, not followed)",
                    name.to_string_lossy()
                ));
                continue;
            }
            if kind.is_dir() {
                continue;
            }
            if !kind.is_file() {
                return Err(not_regular(&file, kind));
            }
            let size = entry
                .metadata()
                .map_err(|source| EvalError::haystack_io(&file, source))?
                .len();
            total = over_limit(path, total.saturating_add(size), max_bytes)?;
            listed.push(Listed {
                name: name.as_encoded_bytes().to_vec(),
                path: file,
                follow: false,
            });
        }
        listed.sort_by(|a, b| a.name.cmp(&b.name));
        out.skipped.sort();
    } else if metadata.is_file() {
        over_limit(path, metadata.len(), max_bytes)?;
        let name = path
            .file_name()
            .map(|n| n.as_encoded_bytes().to_vec())
            .unwrap_or_default();
        listed.push(Listed {
            name,
            path: path.to_owned(),
            follow: true,
        });
    } else {
        return Err(not_regular(path, metadata.file_type()));
    }
    let mut left = max_bytes;
    for file in listed {
        let contents = read_regular(&file, path, max_bytes, left)?;
        left -= contents.len() as u64;
        out.files.push((file.name, contents));
    }
    Ok(out)
}

/// `total` when it is within `max_bytes`, else the error naming the haystack.
fn over_limit(haystack: &Path, total: u64, max_bytes: u64) -> Result<u64, EvalError> {
    if total > max_bytes {
        return Err(EvalError::HaystackTooLarge {
            path: haystack.to_owned(),
            max: max_bytes,
        });
    }
    Ok(total)
}

/// Reads `file`, which must still be a regular file once open, at most `left` bytes
/// (of the haystack's `max_bytes`).
fn read_regular(
    file: &Listed,
    haystack: &Path,
    max_bytes: u64,
    left: u64,
) -> Result<Vec<u8>, EvalError> {
    let path = &file.path;
    read_regular_file(path, file.follow, left).map_err(|refused| match refused {
        // Grown since it was listed.
        Refused::TooLarge(_) => EvalError::HaystackTooLarge {
            path: haystack.to_owned(),
            max: max_bytes,
        },
        Refused::NotRegular(what) => EvalError::HaystackNotRegular {
            path: path.clone(),
            what,
        },
        // A link put in place after the listing.
        Refused::Link => EvalError::Haystack {
            path: path.clone(),
            reason: "became a symbolic link while it was read".to_owned(),
        },
        Refused::Io(source) => EvalError::haystack_io(path, source),
    })
}

/// The error for `path`, which is not a regular file.
fn not_regular(path: &Path, kind: FileType) -> EvalError {
    EvalError::HaystackNotRegular {
        path: path.to_owned(),
        what: kind_of(kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_skipped_and_only_regular_files_read() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("corpus");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("b.txt"), "Second.").unwrap();
        fs::write(dir.join("a.txt"), "First.").unwrap();
        fs::create_dir(dir.join("sub.txt")).unwrap();
        fs::write(top.path().join("secret.txt"), "Secret.").unwrap();
        std::os::unix::fs::symlink(top.path().join("secret.txt"), dir.join("link.txt")).unwrap();
        let read = read_haystack(&dir, 1 << 20).unwrap();
        let names: Vec<&[u8]> = read.files.iter().map(|(n, _)| n.as_slice()).collect();
        assert_eq!(names, [&b"a.txt"[..], b"b.txt"]);
        assert_eq!(read.skipped, ["link.txt (symbolic link, not followed)"]);
        // The path the user named is followed, when it is a link to a regular file.
        let named = read_haystack(&dir.join("link.txt"), 1 << 20).unwrap();
        assert_eq!(named.files[0].1, b"Secret.");
    }

    #[test]
    fn devices_fifos_and_haystacks_over_the_limit_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let error = read_haystack(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("/dev/zero is a character device"),
            "{error}"
        );
        let fifo = dir.path().join("pipe.txt");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        for path in [fifo.as_path(), dir.path()] {
            let error = read_haystack(path, 1 << 20).unwrap_err().to_string();
            assert!(error.contains("pipe.txt is a FIFO"), "{error}");
        }
        fs::remove_file(&fifo).unwrap();
        fs::write(dir.path().join("a.txt"), "x".repeat(30)).unwrap();
        fs::write(dir.path().join("b.txt"), "y".repeat(30)).unwrap();
        let error = read_haystack(dir.path(), 50).unwrap_err().to_string();
        assert!(
            error.contains("more than 50 bytes") && error.contains("--max-context-bytes"),
            "{error}"
        );
        assert_eq!(read_haystack(dir.path(), 60).unwrap().files.len(), 2);
    }
}
