//! Ending what dead runs left behind: for a run `kill -9`ed together with its watchdog,
//! nothing else will (issue 49, item 11).
//!
//! A record in `<data-dir>/live/` ([`super::record`]) is a dead run's when, on this
//! machine (same host, boot and pid namespace), nobody holds its lock, and neither its
//! owner nor its watchdog (each the same pid *and* start time) still runs; a record of
//! an earlier boot of this host is dead too. Records of other machines sharing the data
//! directory are left to them. For each dead run, [`reap_dead_runs`] `SIGKILL`s the
//! carriers of its cookie (through pidfds, so a recycled pid is never hit), kills and
//! removes its cgroup, removes its kernels' temporary directories and then the record.
//!
//! A record is data a process of the run could have written, so nothing in it is
//! taken on trust: the cookie must be a tree cookie whose pid is the owner's, the
//! cgroup must be `rlm-<that cookie>` under this machine's cgroup v2 mount, and a
//! temporary directory must be an absolute path to a real directory of this user named
//! `rlm-…`. A forged record can so name only what its writer could have killed or
//! removed itself, and never a live run (whose lock is held).

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use super::record::{LiveDir, LiveRecord, Machine, RecordError, RECORD_EXT};

/// How long one reaping keeps sweeping for carriers of the dead runs' cookies.
const SWEEP_FOR: Duration = Duration::from_secs(2);
/// Pause between two sweeps.
const SWEEP_PAUSE: Duration = Duration::from_millis(10);

/// What [`reap_dead_runs`] may do.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReapOptions {
    /// Reap at most this many dead runs (the rest wait for the next call); `None`: all.
    pub limit: Option<usize>,
    /// Only find the dead runs; end and remove nothing.
    pub dry_run: bool,
}

/// What one dead run had left, and what was done about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReapedRun {
    /// The run's tree cookie.
    pub cookie: String,
    /// The pid of its orchestrator.
    pub owner_pid: u32,
    /// Processes killed (carriers of its cookie, members of its cgroup).
    pub processes: usize,
    /// Its cgroup, if it still existed (and is now removed, unless a dry run).
    pub cgroup: Option<PathBuf>,
    /// Its kernels' temporary directories that still existed (now removed).
    pub temp_dirs: Vec<PathBuf>,
}

impl ReapedRun {
    /// Whether the run had left anything (a record alone is not worth a word).
    pub fn left_anything(&self) -> bool {
        self.processes > 0 || self.cgroup.is_some() || !self.temp_dirs.is_empty()
    }
}

/// The outcome of [`reap_dead_runs`].
#[derive(Debug, Default)]
pub struct Reaped {
    /// The dead runs found (and reaped, unless a dry run).
    pub runs: Vec<ReapedRun>,
    /// Dead runs past [`ReapOptions::limit`], left for a later call.
    pub deferred: usize,
    /// Records that were refused, each with why (nothing they name was touched).
    pub refused: Vec<RecordError>,
}

/// Finds the runs of `data_dir` that died with their watchdog and ends what they left:
/// processes, cgroup, temporary directories. Cheap when there are none (one directory
/// listing and one lock attempt per live run); each call sweeps for at most a couple
/// of seconds. Fails only when `<data_dir>/live` itself cannot be trusted or read.
pub fn reap_dead_runs(data_dir: &Path, options: ReapOptions) -> Result<Reaped, RecordError> {
    let mut reaped = Reaped::default();
    let Some(live) = LiveDir::existing(data_dir)? else {
        return Ok(reaped);
    };
    let here = Machine::this();
    let mut dead = Vec::new();
    for path in record_files(&live)? {
        let record = match live.read(&path) {
            Ok(record) => record,
            Err(error) => {
                reaped.refused.push(error);
                continue;
            }
        };
        let Some(lock) = dead_lock(&live, &record, &here) else {
            continue;
        };
        if options.limit.is_some_and(|limit| dead.len() >= limit) {
            reaped.deferred += 1;
            continue;
        }
        dead.push((record, lock));
    }
    if dead.is_empty() {
        return Ok(reaped);
    }
    let cookies: Vec<String> = dead.iter().map(|(r, _)| r.cookie.clone()).collect();
    let mut killed = if options.dry_run {
        vec![HashSet::new(); cookies.len()]
    } else {
        sweep(&cookies)
    };
    for ((record, lock), killed) in dead.into_iter().zip(killed.iter_mut()) {
        let cgroup = record
            .cgroup
            .as_deref()
            .filter(|dir| trusted_cgroup(dir, &record.cookie) && dir.exists())
            .map(Path::to_owned);
        let temp_dirs: Vec<PathBuf> = record
            .temp_dirs
            .iter()
            .filter(|dir| trusted_temp_dir(dir))
            .cloned()
            .collect();
        let mut emptied = true;
        if !options.dry_run {
            if let Some(dir) = &cgroup {
                let (members, gone) = crate::cgroup::kill_and_remove(dir);
                killed.extend(members);
                emptied = gone;
            }
            for dir in &temp_dirs {
                if let Err(error) = std::fs::remove_dir_all(dir) {
                    tracing::debug!(path = %dir.display(), %error, "could not remove a dead run's temporary directory");
                }
            }
            // A cgroup still dying is tried again next time.
            if emptied {
                live.remove(&record.cookie);
            }
        }
        drop(lock);
        reaped.runs.push(ReapedRun {
            cookie: record.cookie,
            owner_pid: record.owner.pid,
            processes: killed.len(),
            cgroup,
            temp_dirs,
        });
    }
    Ok(reaped)
}

/// The record files of `live` (not temp files, not locks).
fn record_files(live: &LiveDir) -> Result<Vec<PathBuf>, RecordError> {
    let entries = std::fs::read_dir(live.path()).map_err(|source| RecordError::Io {
        action: "list",
        path: live.path().to_owned(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension().is_some_and(|ext| ext == RECORD_EXT)
                && !path
                    .file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The exclusive lock of `record` when its run is dead (taken, so no other reaper
/// works on it at the same time), `None` while it may live or is another machine's.
fn dead_lock(live: &LiveDir, record: &LiveRecord, here: &Machine) -> Option<DeadLock> {
    let theirs = &record.machine;
    if theirs.host != here.host {
        return None;
    }
    let rebooted = theirs.boot_id != here.boot_id;
    if !rebooted && theirs.pid_namespace != here.pid_namespace {
        return None;
    }
    let lock = match live.open_lock(&record.cookie, false) {
        Ok(file) => match file.try_lock() {
            Ok(()) => Some(file),
            Err(_) => return None,
        },
        // No lock file: only the pids can tell, and any process with the owner's pid
        // is taken for it.
        Err(_) if !rebooted && crate::procfs::stat(record.owner.pid).is_some() => return None,
        Err(_) => None,
    };
    if !rebooted && (record.owner.alive() || record.watchdog.is_some_and(|w| w.alive())) {
        return None;
    }
    Some(DeadLock { _file: lock })
}

/// Held while a dead run is reaped.
struct DeadLock {
    _file: Option<std::fs::File>,
}

/// `SIGKILL`s the carriers of `cookies` until two sweeps in a row find none or
/// [`SWEEP_FOR`] passes; returns the pids killed, per cookie.
fn sweep(cookies: &[String]) -> Vec<HashSet<u32>> {
    let mut killed = vec![HashSet::new(); cookies.len()];
    let deadline = Instant::now() + SWEEP_FOR;
    let mut quiet = 0;
    while quiet < 2 && Instant::now() < deadline {
        let found = crate::procfs::carriers(cookies);
        if found.is_empty() {
            quiet += 1;
        } else {
            quiet = 0;
        }
        for pid in found {
            for (cookie, pids) in cookies.iter().zip(killed.iter_mut()) {
                let one = std::slice::from_ref(cookie);
                if crate::procfs::signal_carrier(pid, one, nix::sys::signal::Signal::SIGKILL) {
                    pids.insert(pid);
                    break;
                }
            }
        }
        if quiet < 2 {
            std::thread::sleep(SWEEP_PAUSE);
        }
    }
    killed
}

/// Whether `dir` may be the cgroup of the run of `cookie`: `rlm-<cookie>` somewhere
/// under this machine's cgroup v2 mount, by a plain path.
fn trusted_cgroup(dir: &Path, cookie: &str) -> bool {
    let Some(mount) = crate::cgroup::mount_point() else {
        return false;
    };
    plain_absolute(dir)
        && dir.starts_with(&mount)
        && dir != mount
        && dir
            .file_name()
            .is_some_and(|name| *name == *format!("rlm-{cookie}"))
}

/// Whether `dir` may be a kernel's temporary directory: an absolute plain path to a
/// real directory (not a link) of this user whose name starts with `rlm-`.
fn trusted_temp_dir(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    plain_absolute(dir)
        && dir
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with(super::TEMP_DIR_PREFIX))
        && std::fs::symlink_metadata(dir).is_ok_and(|meta| {
            meta.file_type().is_dir() && meta.uid() == nix::unistd::geteuid().as_raw()
        })
}

/// An absolute path of plain names only (no `.`, no `..`).
fn plain_absolute(path: &Path) -> bool {
    path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watchdog::record::ProcessId;

    fn record_of(cookie: &str, owner: ProcessId) -> LiveRecord {
        let mut record = LiveRecord::new(cookie, None, None);
        record.owner = owner;
        record
    }

    #[test]
    fn paths_outside_the_rules_are_not_trusted() {
        assert!(!plain_absolute(Path::new("tmp/rlm-kernel-x")));
        assert!(!plain_absolute(Path::new("/tmp/../etc/rlm-x")));
        let dir = tempfile::Builder::new()
            .prefix("rlm-kernel-")
            .tempdir()
            .unwrap();
        assert!(trusted_temp_dir(dir.path()));
        let other = tempfile::Builder::new().prefix("home-").tempdir().unwrap();
        assert!(!trusted_temp_dir(other.path()));
        let link = other.path().join("rlm-link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(!trusted_temp_dir(&link));
        if let Some(mount) = crate::cgroup::mount_point() {
            assert!(trusted_cgroup(&mount.join("rlm-1.t2"), "1.t2"));
            assert!(!trusted_cgroup(&mount.join("rlm-1.t3"), "1.t2"));
            assert!(!trusted_cgroup(&mount, "1.t2"));
            assert!(!trusted_cgroup(Path::new("/etc/rlm-1.t2"), "1.t2"));
        }
    }

    #[test]
    fn a_live_owner_keeps_its_record_and_a_dead_one_is_reaped() {
        let data = tempfile::tempdir().unwrap();
        let live = LiveDir::create(data.path()).unwrap();
        // This process, alive, holding its lock.
        let own = ProcessId::own().unwrap();
        let alive = format!("{}.t1", own.pid);
        let _mine =
            super::super::record::OwnRecord::create(live.clone(), record_of(&alive, own)).unwrap();
        // A forged version of the live run's record (as model code could write it): a
        // wrong start time, a directory to remove. The held lock keeps it alive.
        let kept = tempfile::Builder::new()
            .prefix("rlm-kernel-")
            .tempdir()
            .unwrap();
        let mut forged = record_of(
            &alive,
            ProcessId {
                pid: own.pid,
                start_ticks: own.start_ticks + 1,
            },
        );
        forged.temp_dirs.push(kept.path().to_owned());
        live.write(&forged).unwrap();
        // A child that has exited and been reaped: its pid names no process now (or
        // another one, with another start time).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead_id = ProcessId::of(child.id()).unwrap_or(ProcessId {
            pid: child.id(),
            start_ticks: 0,
        });
        child.wait().unwrap();
        let dead = format!("{}.t2", dead_id.pid);
        let temp = tempfile::Builder::new()
            .prefix("rlm-kernel-")
            .tempdir()
            .unwrap();
        let mut record = record_of(&dead, dead_id);
        record.temp_dirs.push(temp.path().to_owned());
        // A directory the record may not name.
        let precious = tempfile::Builder::new()
            .prefix("precious-")
            .tempdir()
            .unwrap();
        record.temp_dirs.push(precious.path().to_owned());
        live.write(&record).unwrap();

        let dry = reap_dead_runs(
            data.path(),
            ReapOptions {
                limit: None,
                dry_run: true,
            },
        )
        .unwrap();
        assert_eq!(dry.runs.len(), 1, "{dry:?}");
        assert!(temp.path().exists());

        let reaped = reap_dead_runs(data.path(), ReapOptions::default()).unwrap();
        assert_eq!(reaped.runs.len(), 1, "{reaped:?}");
        assert_eq!(reaped.runs[0].cookie, dead);
        assert_eq!(reaped.runs[0].temp_dirs, [temp.path().to_owned()]);
        assert!(!temp.path().exists());
        assert!(precious.path().exists());
        assert!(kept.path().exists());
        assert!(!live.record_path(&dead).exists());
        assert!(live.record_path(&alive).exists());
    }
}
