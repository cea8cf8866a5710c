//! File variables: a context given by path is referenced, not copied.
//!
//! A `file` variable's value is a small JSON object that names a file on disk — its
//! absolute path, size, modification time, inode and device ([`FileRef`]) — so storing
//! a 40 GB log costs one `stat` and a few hundred bytes instead of a second copy of it.
//! Every reader checks that the file still matches the reference ([`FileRef::check`])
//! before it trusts what it reads, and says clearly when it changed: the store never
//! hands out text the variable did not refer to.
//!
//! The sha256 of the file's contents is not computed when the reference is made (that
//! would read the whole file before the first model request); it is filled in the
//! first time the whole file is read through the store ([`crate::Store::write_value_to`],
//! which `vars get` uses).

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a `file` variable holds: enough to find the file and to notice any change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileRef {
    /// Absolute, canonical path of the file.
    pub path: PathBuf,
    /// Its size in bytes when referenced.
    pub size: u64,
    /// Its modification time, in nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Its inode number.
    pub inode: u64,
    /// The device it is on.
    pub device: u64,
    /// The content's encoding (always `utf-8`: contexts are UTF-8 text).
    pub encoding: String,
    /// Hex sha256 of the contents, once something has read them whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// HMAC-SHA256 of the fields above but `sha256`, under the data directory's key
    /// ([`crate::Store::set_file_reference`]): a child process that may write variables
    /// (an agent) cannot make one that points rlm at a file of its choosing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// How a referenced file differs from its reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0)]
pub struct FileChange(pub String);

impl FileRef {
    /// References the regular file at `path` as it is now.
    pub fn of(path: &Path) -> io::Result<Self> {
        let path = fs::canonicalize(path)?;
        let meta = fs::metadata(&path)?;
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a regular file", path.display()),
            ));
        }
        Ok(Self {
            path,
            size: meta.len(),
            mtime_ns: mtime_ns(&meta),
            inode: meta.ino(),
            device: meta.dev(),
            encoding: "utf-8".to_owned(),
            sha256: None,
            signature: None,
        })
    }

    /// The signature of this reference under `key`.
    pub(crate) fn sign(&self, key: &[u8]) -> String {
        use hmac::Mac;
        use std::os::unix::ffi::OsStrExt;
        // `new_from_slice` takes a key of any length.
        let Ok(mut mac) = hmac::Hmac::<Sha256>::new_from_slice(key) else {
            return String::new();
        };
        mac.update(self.path.as_os_str().as_bytes());
        for field in [
            self.size.to_le_bytes(),
            self.mtime_ns.to_le_bytes(),
            self.inode.to_le_bytes(),
            self.device.to_le_bytes(),
        ] {
            mac.update(&[0]);
            mac.update(&field);
        }
        mac.update(self.encoding.as_bytes());
        crate::integrity::hex(&mac.finalize().into_bytes())
    }

    /// True when the reference carries `key`'s signature.
    pub(crate) fn signed_by(&self, key: &[u8]) -> bool {
        self.signature.as_deref() == Some(self.sign(key).as_str())
    }

    /// Checks that the file is still the one referenced, unchanged: same inode and
    /// device (not replaced), same size and modification time (not written to).
    pub fn check(&self) -> Result<(), FileChange> {
        let meta = match fs::metadata(&self.path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(FileChange("it no longer exists".to_owned()))
            }
            Err(e) => return Err(FileChange(format!("it cannot be read ({e})"))),
        };
        self.compare(&meta)
    }

    /// [`check`](Self::check) against metadata already at hand (of an open file).
    pub fn compare(&self, meta: &fs::Metadata) -> Result<(), FileChange> {
        if meta.ino() != self.inode || meta.dev() != self.device {
            return Err(FileChange(
                "it was replaced by another file (a new inode)".to_owned(),
            ));
        }
        if meta.len() != self.size {
            return Err(FileChange(format!(
                "its size went from {} to {} bytes",
                self.size,
                meta.len()
            )));
        }
        if mtime_ns(meta) != self.mtime_ns {
            return Err(FileChange(
                "it was modified (its modification time moved)".to_owned(),
            ));
        }
        Ok(())
    }

    /// Copies the file's bytes to `out`, checked before and after against the
    /// reference (a change during the copy fails once the bytes went out, like the
    /// store's other streamed reads). Returns the sha256 of what was copied.
    pub fn copy_to(&self, out: &mut dyn Write) -> Result<String, FileCopyError> {
        let mut file = fs::File::open(&self.path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => {
                FileCopyError::Changed(FileChange("it no longer exists".to_owned()))
            }
            _ => FileCopyError::Read(e),
        })?;
        let meta = file.metadata().map_err(FileCopyError::Read)?;
        self.compare(&meta).map_err(FileCopyError::Changed)?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 1 << 20];
        let mut copied = 0u64;
        loop {
            let n = match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(FileCopyError::Read(e)),
            };
            hasher.update(&buffer[..n]);
            out.write_all(&buffer[..n]).map_err(FileCopyError::Write)?;
            copied += n as u64;
        }
        let meta = file.metadata().map_err(FileCopyError::Read)?;
        if copied != self.size {
            return Err(FileCopyError::Changed(FileChange(format!(
                "its size went from {} to {copied} bytes while it was read",
                self.size
            ))));
        }
        self.compare(&meta).map_err(FileCopyError::Changed)?;
        let sha = crate::integrity::hex(&hasher.finalize());
        if let Some(recorded) = &self.sha256 {
            if !recorded.eq_ignore_ascii_case(&sha) {
                return Err(FileCopyError::Changed(FileChange(format!(
                    "its contents no longer match the recorded sha256 {recorded} (now {sha})"
                ))));
            }
        }
        Ok(sha)
    }
}

/// Why [`FileRef::copy_to`] failed.
#[derive(Debug, thiserror::Error)]
pub enum FileCopyError {
    /// The file is not the one referenced any more.
    #[error(transparent)]
    Changed(FileChange),
    /// Reading it failed.
    #[error("reading it failed: {0}")]
    Read(#[source] io::Error),
    /// Writing what was read failed.
    #[error("writing it out failed: {0}")]
    Write(#[source] io::Error),
}

/// Modification time of `meta` in nanoseconds since the Unix epoch.
fn mtime_ns(meta: &fs::Metadata) -> i64 {
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctx.log");
        fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn a_reference_holds_path_size_time_and_inode_and_round_trips_as_json() {
        let (_dir, path) = file_with("hello\n");
        let reference = FileRef::of(&path).unwrap();
        assert_eq!(reference.path, fs::canonicalize(&path).unwrap());
        assert_eq!(reference.size, 6);
        assert!(reference.mtime_ns > 0 && reference.inode > 0);
        let json = serde_json::to_value(&reference).unwrap();
        assert!(json.get("mtimeNs").is_some() && json.get("sha256").is_none());
        let back: FileRef = serde_json::from_value(json).unwrap();
        assert_eq!(back, reference);
        assert_eq!(reference.check(), Ok(()));
    }

    #[test]
    fn each_kind_of_change_is_named() {
        let (_dir, path) = file_with("hello\n");
        let reference = FileRef::of(&path).unwrap();
        fs::write(&path, "hello world\n").unwrap();
        let change = reference.check().unwrap_err();
        assert!(change.0.contains("size went from 6 to 12"), "{change}");

        let (_dir, path) = file_with("hello\n");
        let reference = FileRef::of(&path).unwrap();
        let renamed = path.with_extension("new");
        fs::write(&renamed, "HELLO\n").unwrap();
        fs::rename(&renamed, &path).unwrap();
        assert!(reference.check().unwrap_err().0.contains("replaced"));

        let (_dir, path) = file_with("hello\n");
        let reference = FileRef::of(&path).unwrap();
        let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(9))
            .unwrap();
        assert!(reference.check().unwrap_err().0.contains("modified"));

        fs::remove_file(&path).unwrap();
        assert!(reference
            .check()
            .unwrap_err()
            .0
            .contains("no longer exists"));
    }

    #[test]
    fn a_copy_hashes_what_it_copied_and_refuses_a_changed_file() {
        let (_dir, path) = file_with("héllo\n");
        let mut reference = FileRef::of(&path).unwrap();
        let mut out = Vec::new();
        let sha = reference.copy_to(&mut out).unwrap();
        assert_eq!(out, "héllo\n".as_bytes());
        assert_eq!(sha, crate::integrity::sha256_hex("héllo\n".as_bytes()));
        reference.sha256 = Some("0".repeat(64));
        assert!(matches!(
            reference.copy_to(&mut Vec::new()),
            Err(FileCopyError::Changed(_))
        ));
        fs::write(&path, "x").unwrap();
        reference.sha256 = None;
        assert!(matches!(
            reference.copy_to(&mut Vec::new()),
            Err(FileCopyError::Changed(_))
        ));
    }
}
