//! The live record of a run: what a later run or `runs prune` needs to end what a run
//! left behind when both it and its watchdog were `kill -9`ed.
//!
//! A run writes `<data-dir>/live/<cookie>.json` when its watchdog starts: the tree
//! cookie, the machine it runs on, its own pid and the watchdog's (each with its start
//! time, so a reused pid is never taken for it), the run's cgroup and, as they are
//! made, the kernels' private temporary directories. It holds a shared `flock` on
//! `<cookie>.lock` for its whole life (the kernel drops it however the process ends),
//! and its watchdog removes both files once it has cleaned up. A record whose lock is
//! free and whose owner and watchdog are gone is a dead run's ([`super::reap`]).
//!
//! The record is data, never commands: a process of the run may write the data
//! directory, so a reader checks the file (a regular file of our own user, `0600`,
//! opened without following links, bounded in size) and each thing it names (see
//! [`super::reap`]) before acting on it.

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The directory of the data directory holding one record per live run.
pub const LIVE_DIR: &str = "live";

/// The format of [`LiveRecord`] this build writes.
const FORMAT_VERSION: u32 = 1;
/// The largest record a reader accepts.
const MAX_RECORD_BYTES: u64 = 256 * 1024;
/// Extension of a record file.
pub(crate) const RECORD_EXT: &str = "json";
/// Extension of a record's lock file.
pub(crate) const LOCK_EXT: &str = "lock";

/// A process named by its pid and its start time (clock ticks since boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ProcessId {
    /// The pid.
    pub pid: u32,
    /// When it started, as `/proc/<pid>/stat` says.
    pub start_ticks: u64,
}

impl ProcessId {
    /// This process.
    pub fn own() -> Option<Self> {
        Self::of(std::process::id())
    }

    /// The process `pid` now, if it exists.
    pub fn of(pid: u32) -> Option<Self> {
        crate::procfs::stat(pid).map(|stat| Self {
            pid,
            start_ticks: stat.start_ticks,
        })
    }

    /// Whether this very process (same pid, same start) still runs (a zombie runs
    /// nothing).
    pub fn alive(&self) -> bool {
        crate::procfs::stat(self.pid)
            .is_some_and(|stat| !stat.zombie && stat.start_ticks == self.start_ticks)
    }
}

/// Where a run ran: pids and start times mean something only on the same machine, in
/// the same boot and the same pid namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Machine {
    /// The host name.
    pub host: String,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// The pid namespace (`/proc/self/ns/pid`).
    pub pid_namespace: String,
}

impl Machine {
    /// The machine this process runs on.
    pub fn this() -> Self {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|text| text.trim().to_owned())
                .unwrap_or_default()
        };
        Self {
            host: read("/proc/sys/kernel/hostname"),
            boot_id: read("/proc/sys/kernel/random/boot_id"),
            pid_namespace: std::fs::read_link("/proc/self/ns/pid")
                .map(|link| link.display().to_string())
                .unwrap_or_default(),
        }
    }
}

/// One live run, as `<data-dir>/live/<cookie>.json` holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct LiveRecord {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The run's tree cookie (`<pid>.t<nanos>`), also the file's name.
    pub cookie: String,
    /// Where it runs.
    pub machine: Machine,
    /// The orchestrator process of the run.
    pub owner: ProcessId,
    /// Its watchdog.
    pub watchdog: Option<ProcessId>,
    /// The run's cgroup, where it has one.
    pub cgroup: Option<PathBuf>,
    /// Private temporary directories of the run's kernels.
    #[serde(default)]
    pub temp_dirs: Vec<PathBuf>,
}

impl LiveRecord {
    /// The record of this process's run.
    pub fn new(cookie: &str, watchdog: Option<ProcessId>, cgroup: Option<PathBuf>) -> Self {
        Self {
            format_version: FORMAT_VERSION,
            cookie: cookie.to_owned(),
            machine: Machine::this(),
            owner: ProcessId::own().unwrap_or(ProcessId {
                pid: std::process::id(),
                start_ticks: 0,
            }),
            watchdog,
            cgroup,
            temp_dirs: Vec::new(),
        }
    }
}

/// Why the live directory or a record in it cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Creating, reading or writing failed.
    #[error("failed to {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The directory or file is not ours alone (another user's, or open to others, or
    /// a link): nothing in it is trusted.
    #[error("refusing {}: {why}; only a 0700 directory and 0600 files of this user are trusted (remove it, or fix its owner and mode)", path.display())]
    Untrusted {
        /// The directory or file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The record does not parse or does not hold together.
    #[error("refusing the live-run record {}: {why}", path.display())]
    Invalid {
        /// The record.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

fn io_error<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> RecordError + 'a {
    move |source| RecordError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

/// `<data-dir>/live`, checked to be a directory of this user that no one else may
/// enter or write.
#[derive(Debug, Clone)]
pub(crate) struct LiveDir {
    path: PathBuf,
}

impl LiveDir {
    /// Creates `<data_dir>/live` (`0700`, with any missing parents) if needed.
    pub fn create(data_dir: &Path) -> Result<Self, RecordError> {
        let path =
            std::path::absolute(data_dir.join(LIVE_DIR)).map_err(io_error("resolve", data_dir))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)
            .map_err(io_error("create", &path))?;
        Self::checked(path)
    }

    /// `<data_dir>/live` if it exists.
    pub fn existing(data_dir: &Path) -> Result<Option<Self>, RecordError> {
        let path =
            std::path::absolute(data_dir.join(LIVE_DIR)).map_err(io_error("resolve", data_dir))?;
        match std::fs::symlink_metadata(&path) {
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error("inspect", &path)(error)),
            Ok(_) => Self::checked(path).map(Some),
        }
    }

    fn checked(path: PathBuf) -> Result<Self, RecordError> {
        let meta = std::fs::symlink_metadata(&path).map_err(io_error("inspect", &path))?;
        let why = if !meta.file_type().is_dir() {
            Some("it is not a directory".to_owned())
        } else {
            untrusted_why(&meta)
        };
        match why {
            Some(why) => Err(RecordError::Untrusted { path, why }),
            None => Ok(Self { path }),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The record file of `cookie`.
    pub fn record_path(&self, cookie: &str) -> PathBuf {
        self.path.join(format!("{cookie}.{RECORD_EXT}"))
    }

    /// The lock file of `cookie`.
    pub fn lock_path(&self, cookie: &str) -> PathBuf {
        self.path.join(format!("{cookie}.{LOCK_EXT}"))
    }

    /// Opens (creating it, `0600`) the lock file of `cookie`, never through a link.
    pub fn open_lock(&self, cookie: &str, create: bool) -> Result<File, RecordError> {
        let path = self.lock_path(cookie);
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .map_err(io_error("open", &path))
    }

    /// Writes `record` atomically (a `0600` temp file, then a rename).
    pub fn write(&self, record: &LiveRecord) -> Result<(), RecordError> {
        let path = self.record_path(&record.cookie);
        let temp = self
            .path
            .join(format!(".{}.{RECORD_EXT}.tmp", record.cookie));
        let json = serde_json::to_vec(record).map_err(|e| RecordError::Invalid {
            path: path.clone(),
            why: e.to_string(),
        })?;
        let _ = std::fs::remove_file(&temp);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&temp)
            .map_err(io_error("create", &temp))?;
        file.write_all(&json).map_err(io_error("write", &temp))?;
        drop(file);
        std::fs::rename(&temp, &path).map_err(io_error("rename into place", &path))
    }

    /// Reads and checks the record at `path` (a file of this directory): ours alone,
    /// bounded, well formed, named by its cookie, its owner the cookie's pid.
    pub fn read(&self, path: &Path) -> Result<LiveRecord, RecordError> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(path)
            .map_err(io_error("open", path))?;
        let meta = file.metadata().map_err(io_error("inspect", path))?;
        let why = if !meta.file_type().is_file() {
            Some("it is not a regular file".to_owned())
        } else if meta.len() > MAX_RECORD_BYTES {
            Some(format!(
                "it holds {} bytes, more than a record can",
                meta.len()
            ))
        } else {
            untrusted_why(&meta)
        };
        if let Some(why) = why {
            return Err(RecordError::Untrusted {
                path: path.to_owned(),
                why,
            });
        }
        let mut bytes = Vec::new();
        file.take(MAX_RECORD_BYTES)
            .read_to_end(&mut bytes)
            .map_err(io_error("read", path))?;
        let invalid = |why: String| RecordError::Invalid {
            path: path.to_owned(),
            why,
        };
        let record: LiveRecord =
            serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
        if record.format_version != FORMAT_VERSION {
            return Err(invalid(format!(
                "format version {} (this build reads {FORMAT_VERSION})",
                record.format_version
            )));
        }
        let Some(pid) = cookie_pid(&record.cookie) else {
            return Err(invalid(format!("{:?} is no tree cookie", record.cookie)));
        };
        if path != self.record_path(&record.cookie) {
            return Err(invalid(format!(
                "it is not named after its cookie {}",
                record.cookie
            )));
        }
        if record.owner.pid != pid {
            return Err(invalid(format!(
                "its owner {} is not the pid of its cookie {}",
                record.owner.pid, record.cookie
            )));
        }
        Ok(record)
    }

    /// Removes the record of `cookie` and its lock file.
    pub fn remove(&self, cookie: &str) {
        let _ = std::fs::remove_file(self.record_path(cookie));
        let _ = std::fs::remove_file(self.lock_path(cookie));
    }
}

/// What makes a file or directory untrusted: another user's, or open to others.
fn untrusted_why(meta: &std::fs::Metadata) -> Option<String> {
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid {
        Some(format!("it belongs to uid {}, not {euid}", meta.uid()))
    } else if meta.mode() & 0o077 != 0 {
        Some(format!(
            "its mode {:o} lets others in",
            meta.mode() & 0o7777
        ))
    } else {
        None
    }
}

/// The pid a tree cookie (`<pid>.t<nanos>`) names; `None` for anything else.
pub(crate) fn cookie_pid(cookie: &str) -> Option<u32> {
    let (pid, nanos) = cookie.split_once(".t")?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 40 && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(nanos)).then(|| pid.parse().ok())?
}

/// This process's live record, kept up to date as kernels start, and the lock that
/// says it lives.
#[derive(Debug)]
pub(crate) struct OwnRecord {
    dir: LiveDir,
    record: LiveRecord,
    /// Held (shared) for the life of the process.
    _lock: File,
}

impl OwnRecord {
    /// Takes the lock and writes the first version of the record.
    pub fn create(dir: LiveDir, record: LiveRecord) -> Result<Self, RecordError> {
        let lock = dir.open_lock(&record.cookie, true)?;
        lock.lock_shared()
            .map_err(io_error("lock", &dir.lock_path(&record.cookie)))?;
        dir.write(&record)?;
        Ok(Self {
            dir,
            record,
            _lock: lock,
        })
    }

    /// The record file.
    pub fn path(&self) -> PathBuf {
        self.dir.record_path(&self.record.cookie)
    }

    /// Removes the record and its lock file (the lock stays held until exit).
    pub fn remove(&self) {
        self.dir.remove(&self.record.cookie);
    }

    /// Adds a temporary directory (forgetting those already gone, so a long session
    /// that restarts its kernel keeps a short list) and rewrites the record.
    pub fn add_temp_dir(&mut self, dir: &Path) -> Result<(), RecordError> {
        self.record.temp_dirs.retain(|known| known.exists());
        if !self.record.temp_dirs.iter().any(|known| known == dir) {
            self.record.temp_dirs.push(dir.to_owned());
        }
        self.dir.write(&self.record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_name_their_pid() {
        assert_eq!(cookie_pid("123.t456"), Some(123));
        for bad in ["123", "123.t", ".t5", "1.t2/../x", "a.t1", "1.t2.json", ""] {
            assert_eq!(cookie_pid(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_record_round_trips_and_a_forged_one_is_refused() {
        let data = tempfile::tempdir().unwrap();
        let live = LiveDir::create(data.path()).unwrap();
        let own = std::process::id();
        let cookie = format!("{own}.t1");
        let record = LiveRecord::new(&cookie, None, Some("/sys/fs/cgroup/rlm-x".into()));
        live.write(&record).unwrap();
        assert_eq!(live.read(&live.record_path(&cookie)).unwrap(), record);

        // Named after another cookie.
        let other = live.record_path("9.t9");
        std::fs::rename(live.record_path(&cookie), &other).unwrap();
        assert!(matches!(
            live.read(&other),
            Err(RecordError::Invalid { .. })
        ));

        // Its owner is not its cookie's pid.
        let mut forged = record.clone();
        forged.cookie = "1.t1".into();
        live.write(&forged).unwrap();
        assert!(matches!(
            live.read(&live.record_path("1.t1")),
            Err(RecordError::Invalid { .. })
        ));
    }

    #[test]
    fn files_open_to_others_and_links_are_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let data = tempfile::tempdir().unwrap();
        let live = LiveDir::create(data.path()).unwrap();
        let cookie = format!("{}.t1", std::process::id());
        live.write(&LiveRecord::new(&cookie, None, None)).unwrap();
        let path = live.record_path(&cookie);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o622)).unwrap();
        assert!(matches!(
            live.read(&path),
            Err(RecordError::Untrusted { .. })
        ));

        let target = data.path().join("elsewhere.json");
        std::fs::rename(&path, &target).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(matches!(live.read(&path), Err(RecordError::Io { .. })));

        std::fs::set_permissions(live.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            LiveDir::existing(data.path()),
            Err(RecordError::Untrusted { .. })
        ));
    }
}
