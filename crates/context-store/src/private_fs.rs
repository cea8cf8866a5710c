//! Private files: every file rlm writes is `0600` and every directory `0700`, and a
//! file that others may read while it is written is replaced atomically.
//!
//! A data directory holds contexts, answers and traces a user may not want other
//! accounts on the machine to read, so nothing in it is created with the default
//! umask. One module does it, so no writer forgets the mode and every error names the
//! path. Atomic writes go through a temp file in the destination's directory, an
//! fsync, a rename and an fsync of the directory: a reader (another process, a run
//! after a crash or `kill -9`) sees the old file or the new one, never a torn one.
//! The store's own variable files use the same machinery (`Staged`), which also
//! locks each temp file so a store opening later can tell a live writer's temp file
//! from a killed one's.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// A failed operation on a private file or directory, naming it.
#[derive(Debug, thiserror::Error)]
#[error("failed to {action} {}", path.display())]
pub struct PrivateFsError {
    /// What was being done, e.g. "create directory".
    pub action: &'static str,
    /// The file or directory involved.
    pub path: PathBuf,
    /// The underlying error.
    #[source]
    pub source: io::Error,
}

impl PrivateFsError {
    fn new(action: &'static str, path: &Path, source: io::Error) -> Self {
        Self {
            action,
            path: path.to_owned(),
            source,
        }
    }

    /// The kind of the underlying I/O error (e.g. `AlreadyExists` from
    /// [`write_private_new`]).
    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }
}

impl From<PrivateFsError> for StoreError {
    fn from(e: PrivateFsError) -> Self {
        StoreError::io(e.action, e.path, e.source)
    }
}

impl From<StoreError> for PrivateFsError {
    /// The store's atomic writes fail only with I/O errors; anything else (which they
    /// never return) is kept as its message.
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Io {
                action,
                path,
                source,
            } => Self {
                action,
                path,
                source,
            },
            other => Self {
                action: "write",
                path: PathBuf::new(),
                source: io::Error::other(other.to_string()),
            },
        }
    }
}

/// Creates `path` and its missing parents with mode `0700` (existing directories keep
/// their mode).
pub fn create_dir_all_private(path: &Path) -> Result<(), PrivateFsError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| PrivateFsError::new("create directory", path, e))
}

/// Writes `bytes` to `path`, created `0600` (or truncated), its missing parent
/// directories `0700`. Not atomic: for files nobody reads while they are written.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), PrivateFsError> {
    create_parent(path)?;
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .map_err(|e| PrivateFsError::new("write", path, e))
}

/// Atomically replaces `path` with `bytes` (`0600`, missing parent directories
/// `0700`): temp file, fsync, rename, fsync of the directory; without the fsyncs
/// under [`Durability::Bulk`]. Readers see the old contents or the new ones.
pub fn write_private_atomic(
    path: &Path,
    bytes: &[u8],
    durability: Durability,
) -> Result<(), PrivateFsError> {
    let dir = create_parent(path)?;
    stage_as(dir, durability, &PRIVATE_FILE, |file| file.write_all(bytes))?.publish(path)?;
    Ok(())
}

/// Creates `path` with `bytes` (`0600`, missing parent directories `0700`) only if it
/// does not exist: fails with [`io::ErrorKind::AlreadyExists`] otherwise (see
/// [`PrivateFsError::kind`]). The file appears whole (written and fsynced under a
/// temporary name, then linked into place), so when two processes race to create it,
/// one wins and the other reads the winner's complete file.
pub fn write_private_new(path: &Path, bytes: &[u8]) -> Result<(), PrivateFsError> {
    write_private_new_with(path, bytes, Durability::Fsync)
}

/// [`write_private_new`] with a choice of durability: under [`Durability::Bulk`]
/// nothing waits for the disk (no fsync of the file or of its directory), so a crash
/// soon after may leave the file missing or empty; it still appears whole to every
/// process while the system runs.
pub fn write_private_new_with(
    path: &Path,
    bytes: &[u8],
    durability: Durability,
) -> Result<(), PrivateFsError> {
    let dir = create_parent(path)?;
    let staged = stage_as(dir, durability, &PRIVATE_FILE, |file| file.write_all(bytes))?;
    staged
        .temp
        .persist_noclobber(path)
        .map_err(|e| PrivateFsError::new("create", path, e.error))?;
    if durability == Durability::Fsync {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Opens `path` for appending, creating it `0600` (missing parent directories `0700`).
pub fn open_private_append(path: &Path) -> Result<File, PrivateFsError> {
    create_parent(path)?;
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| PrivateFsError::new("open for appending", path, e))
}

/// Creates the parent directory of `path` (`0700`) if missing; returns it.
fn create_parent(path: &Path) -> Result<&Path, PrivateFsError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    create_dir_all_private(dir)?;
    Ok(dir)
}

/// How writes reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// fsync the file and its directory before the rename is considered done.
    #[default]
    Fsync,
    /// Skip fsync (bulk loads, benchmarks); still atomic against concurrent readers.
    Bulk,
}

/// Prefix of the temp files writers fill before renaming them into place.
pub(crate) const TEMP_PREFIX: &str = ".tmp-";

/// Suffix of those temp files.
pub(crate) const TEMP_SUFFIX: &str = ".partial";

/// A complete variable file in a temp file beside its destination, not yet visible to
/// readers. Its writer holds an exclusive `flock` on it until it is published or
/// dropped (dropping removes it), which is how a store opening later tells a live
/// writer's temp file from a killed one's.
#[derive(Debug)]
pub(crate) struct Staged {
    temp: tempfile::NamedTempFile,
    dir: PathBuf,
    durability: Durability,
}

impl Staged {
    /// Where the temp file is.
    pub(crate) fn path(&self) -> &Path {
        self.temp.path()
    }

    /// Renames the temp file onto `path` (in the same directory) and, when durable,
    /// fsyncs the directory so the rename survives a crash.
    pub(crate) fn publish(self, path: &Path) -> Result<()> {
        self.temp
            .persist(path)
            .map_err(|e| StoreError::io("rename temporary file onto", path, e.error))?;
        if self.durability == Durability::Fsync {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }
}

impl Staged {
    /// Links the temp file into place at `path` (in the same directory) only if
    /// nothing is there yet. Returns `None` once published, or the temp file back
    /// (still unpublished) when `path` already exists, for the caller to decide.
    pub(crate) fn publish_new(self, path: &Path) -> Result<Option<Self>> {
        let Self {
            temp,
            dir,
            durability,
        } = self;
        match temp.persist_noclobber(path) {
            Ok(_) => {
                if durability == Durability::Fsync {
                    sync_dir(&dir)?;
                }
                Ok(None)
            }
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(Some(Self {
                temp: e.file,
                dir,
                durability,
            })),
            Err(e) => Err(StoreError::io("link temporary file onto", path, e.error)),
        }
    }
}

/// Creates a locked temp file in `dir` for a private file that is not a variable
/// file (a text view), fills it and (when durable) fsyncs it.
pub(crate) fn stage_private(
    dir: &Path,
    durability: Durability,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<Staged> {
    stage_as(dir, durability, &PRIVATE_FILE, fill)
}

/// Creates a locked temp file in `dir`, fills it and (when durable) fsyncs it.
pub(crate) fn stage(
    dir: &Path,
    durability: Durability,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<Staged> {
    stage_as(dir, durability, &VARIABLE_FILE, fill)
}

/// What errors call the file being staged.
struct Actions {
    write: &'static str,
    fsync: &'static str,
}

/// A variable file (what the store stages).
const VARIABLE_FILE: Actions = Actions {
    write: "write variable file",
    fsync: "fsync variable file",
};

/// Any other private file.
const PRIVATE_FILE: Actions = Actions {
    write: "write temporary file",
    fsync: "fsync temporary file",
};

/// [`stage`], naming the file as `actions` says in errors.
fn stage_as(
    dir: &Path,
    durability: Durability,
    actions: &Actions,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<Staged> {
    let mut temp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)
        .map_err(|e| StoreError::io("create a temporary file in", dir, e))?;
    if let Err(e) = temp.as_file().try_lock() {
        // Only costs the early clean-up of this file should we be killed.
        tracing::debug!("cannot lock temp file {}: {e}", temp.path().display());
    }
    let temp_path = temp.path().to_owned();
    fill(temp.as_file_mut()).map_err(|e| StoreError::io(actions.write, &temp_path, e))?;
    if durability == Durability::Fsync {
        #[cfg(test)]
        fsync_count::add();
        temp.as_file()
            .sync_all()
            .map_err(|e| StoreError::io(actions.fsync, &temp_path, e))?;
    }
    Ok(Staged {
        temp,
        dir: dir.to_owned(),
        durability,
    })
}

/// Atomically replaces `path` with what `fill` writes: a locked temp file in the same
/// directory, fsync (when durable), rename, fsync of the directory (when durable).
pub(crate) fn write_atomically(
    path: &Path,
    durability: Durability,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    stage(dir, durability, fill)?.publish(path)
}

/// fsyncs a directory so a rename in it survives a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(test)]
    fsync_count::add();
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("fsync directory", dir, e))
}

/// The fsyncs this thread asked for, so a test can tell that a path never waits for
/// the disk.
#[cfg(test)]
pub(crate) mod fsync_count {
    use std::cell::Cell;

    thread_local! {
        static FSYNCS: Cell<usize> = const { Cell::new(0) };
    }

    /// Counts one fsync.
    pub(crate) fn add() {
        FSYNCS.with(|n| n.set(n.get() + 1));
    }

    /// The fsyncs of this thread so far.
    pub(crate) fn get() -> usize {
        FSYNCS.with(Cell::get)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn files_are_0600_and_new_directories_0700() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("a/b/plain.txt");
        write_private(&plain, b"one").unwrap();
        assert_eq!(
            (mode(&plain), mode(&dir.path().join("a/b"))),
            (0o600, 0o700)
        );
        let atomic = dir.path().join("c/atomic.json");
        write_private_atomic(&atomic, b"two", Durability::Bulk).unwrap();
        write_private_atomic(&atomic, b"three", Durability::Fsync).unwrap();
        assert_eq!(std::fs::read(&atomic).unwrap(), b"three");
        assert_eq!((mode(&atomic), mode(&dir.path().join("c"))), (0o600, 0o700));
        let mut log = open_private_append(&dir.path().join("d/log")).unwrap();
        log.write_all(b"x").unwrap();
        assert_eq!(mode(&dir.path().join("d/log")), 0o600);
        assert_eq!(
            std::fs::read_dir(dir.path().join("c")).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn a_new_file_is_never_replaced_and_errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key");
        write_private_new(&key, b"first").unwrap();
        let error = write_private_new(&key, b"second").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert!(
            error.to_string().contains(&key.display().to_string()),
            "{error}"
        );
        assert_eq!(std::fs::read(&key).unwrap(), b"first");
        assert_eq!(mode(&key), 0o600);
        let blocked = key.join("below");
        let error = create_dir_all_private(&blocked).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("failed to create directory {}", blocked.display())
        );
    }
}
