//! `--runner`: how every supervised child — external agents and nested `sub_rlm`
//! runs alike — is started: as a local process (the default), or as a Slurm job.
//!
//! With `slurm` the child's command is wrapped in `srun` ([`Runner::wrap`]): one task,
//! job name `rlm-<agent id>`, the user's `--slurm-args` (partition, time, memory,
//! account), the child's own environment (exported by `srun`) and its stdin and
//! stdout passed through, so everything else — the prompt, the result variable, the
//! bounded capture, the timeout — works as for a local child. `srun` ends its job when
//! it is signalled, which is how a timeout or Ctrl-C reaches the job; the job is also
//! cancelled by name ([`JobGuard`], `scancel`) whenever its `srun` did not end by
//! itself — a timeout, Ctrl-C, or the run torn down while the child ran. Slurm's own failures (no resources, a node failure, a job
//! cancelled or out of time) are found in `srun`'s stderr ([`slurm_failure`]) and
//! become the error the model sees.
//!
//! The store must be on storage every node sees (see `docs/scale-out.md`):
//! [`data_dir_warning`] says when it is not.

use std::ffi::OsString;
use std::path::Path;

use rlm_process::SpawnOptions;
use serde::{Deserialize, Serialize};

use crate::ids::AgentId;

/// The program that starts a job step and waits for it.
pub const SRUN: &str = "srun";
/// The program that cancels jobs.
pub const SCANCEL: &str = "scancel";
/// How long a cancellation waits for `scancel` (it answers in milliseconds when the
/// controller is up).
const SCANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How supervised children start.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Runner {
    /// A process of this machine.
    #[default]
    Local,
    /// A Slurm job through `srun`.
    Slurm {
        /// `--slurm-args`, split like a shell would: given to `srun` before the command.
        #[serde(default)]
        args: Vec<String>,
    },
}

/// `--slurm-args` that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SlurmArgsError {
    /// The text is not a list of arguments (an unclosed quote…).
    #[error("--slurm-args {args:?} cannot be split into arguments: {source}")]
    Split {
        /// The text given.
        args: String,
        /// Why it cannot be split.
        #[source]
        source: shell_words::ParseError,
    },
    /// It names the job, which rlm does itself.
    #[error(
        "--slurm-args must not set {flag}: rlm names each job rlm-<agent id> to find and cancel it"
    )]
    JobName {
        /// The flag that names the job.
        flag: String,
    },
}

impl Runner {
    /// `slurm` with `--slurm-args` (split like a shell would), or `local`.
    pub fn slurm(args: &str) -> Result<Self, SlurmArgsError> {
        let words = shell_words::split(args).map_err(|source| SlurmArgsError::Split {
            args: args.to_owned(),
            source,
        })?;
        let args = words;
        if let Some(bad) = args
            .iter()
            .find(|a| a.starts_with("--job-name") || *a == "-J")
        {
            return Err(SlurmArgsError::JobName { flag: bad.clone() });
        }
        Ok(Self::Slurm { args })
    }

    /// The job name of the child `agent_id`.
    pub fn job_name(agent_id: &AgentId) -> String {
        format!("rlm-{agent_id}")
    }

    /// Rewrites `spawn` so that the child runs under this runner (unchanged for
    /// `local`). The environment of `spawn` becomes the job's; a user's `SLURM_CONF`
    /// is passed on so `srun` finds the cluster, and nothing of an enclosing job's
    /// (a nested run inside a job must start a job of its own, not a step of its
    /// parent's allocation).
    pub fn wrap(&self, spawn: &mut SpawnOptions, agent_id: &AgentId) {
        let Self::Slurm { args } = self else {
            return;
        };
        let mut srun: Vec<OsString> = vec![
            format!("--job-name={}", Self::job_name(agent_id)).into(),
            "--ntasks=1".into(),
            "--nodes=1".into(),
            "--quiet".into(),
            "--export=ALL".into(),
        ];
        if let Some(cwd) = &spawn.cwd {
            let mut chdir = OsString::from("--chdir=");
            chdir.push(cwd);
            srun.push(chdir);
        }
        srun.extend(args.iter().map(OsString::from));
        srun.push("--".into());
        srun.push(std::mem::replace(&mut spawn.program, SRUN.into()));
        srun.append(&mut spawn.args);
        spawn.args = srun;
        spawn
            .env
            .retain(|(name, _)| !name.to_string_lossy().starts_with("SLURM_"));
        if let Some(conf) = std::env::var_os("SLURM_CONF") {
            spawn.env.push(("SLURM_CONF".into(), conf));
        }
    }

    /// A guard for the job of the child `agent_id`: unless told the job finished
    /// ([`JobGuard::finished`]), dropping it cancels the job by name — after a timeout
    /// or Ctrl-C, and also when the run is torn down while the child is still
    /// supervised (the supervising future is dropped, and `srun` with it). Does nothing
    /// for `local`.
    pub fn guard(&self, agent_id: &AgentId) -> JobGuard {
        let job = matches!(self, Self::Slurm { .. }).then(|| Self::job_name(agent_id));
        if let Some(name) = &job {
            // If this process is SIGKILLed nothing here runs: its watchdog cancels the
            // job instead (Slurm keeps an allocation whose srun died until its --time).
            rlm_process::run_at_exit(&[SCANCEL, &format!("--name={name}")]);
        }
        JobGuard { job }
    }

    /// The Slurm failure a child's stderr reports, for `slurm` (see [`slurm_failure`]).
    pub fn failure(&self, stderr_tail: &str) -> Option<String> {
        match self {
            Self::Local => None,
            Self::Slurm { .. } => slurm_failure(stderr_tail),
        }
    }

    /// `local` or `slurm`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Slurm { .. } => "slurm",
        }
    }
}

/// Cancels a child's job when dropped, unless the job finished (see [`Runner::guard`]).
#[derive(Debug)]
#[must_use = "dropping the guard at once cancels the job"]
pub struct JobGuard {
    job: Option<String>,
}

impl JobGuard {
    /// The child's `srun` ended by itself: its job is over, nothing to cancel.
    pub fn finished(mut self) {
        self.job = None;
    }
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        if let Some(name) = self.job.take() {
            // During a graceful stop `srun` was sent SIGTERM and is given the grace
            // period to end its job itself: cancel it only once that is over.
            rlm_process::after_stop(move || cancel_job(&name));
        }
    }
}

/// `scancel --name=<name>`, waited for (at most [`SCANCEL_WAIT`]): this runs when a
/// run is torn down, right before the process may exit, and a cancellation left to a
/// background thread would die with it.
fn cancel_job(name: &str) {
    let started = std::time::Instant::now();
    let child = std::process::Command::new(SCANCEL)
        .arg(format!("--name={name}"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => {
            tracing::warn!(job = name, %error, "could not run scancel; the job may still be queued or running");
            return;
        }
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return,
            Ok(Some(status)) => {
                tracing::warn!(job = name, %status, "scancel failed; the job may still be queued or running");
                return;
            }
            Ok(None) if started.elapsed() < SCANCEL_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Ok(None) | Err(_) => {
                tracing::warn!(
                    job = name,
                    "scancel did not finish in time; the job may still be queued or running"
                );
                return;
            }
        }
    }
}

/// What Slurm says went wrong with a job, from `srun`'s (and `slurmstepd`'s) lines in
/// its stderr: no resources for the request, a node failure, a job or step cancelled
/// (by `scancel`, an administrator, or its time limit). `None` when the lines only
/// report the command's own failure (`task 0: Exited with exit code 3`).
pub fn slurm_failure(stderr: &str) -> Option<String> {
    const SIGNS: [&str; 8] = [
        "Unable to allocate resources",
        "CANCELLED",
        "NODE FAIL",
        "Node failure",
        "DUE TO TIME LIMIT",
        "PREEMPT",
        "has been revoked",
        "Invalid partition",
    ];
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|line| {
            line.starts_with("srun:") || line.contains("slurmstepd") || line.contains("***")
        })
        .collect();
    // The `***` line says what happened to the job; srun's lines say it second hand.
    let pick = lines
        .iter()
        .find(|line| line.contains("***") && SIGNS.iter().any(|s| line.contains(s)))
        .or_else(|| {
            lines
                .iter()
                .find(|line| SIGNS.iter().any(|s| line.contains(s)))
        })
        // srun does not always relay the `***` line of a job cancelled under it; then
        // it only says the task was ended by a signal.
        .or_else(|| {
            lines.iter().find(|line| {
                line.starts_with("srun: error:")
                    && (line.ends_with(": Terminated") || line.ends_with(": Killed"))
            })
        })?;
    Some(format!("Slurm: {pick}"))
}

/// A warning when `data_dir` is on a file system that only this node sees, for
/// `--runner slurm`; `None` on network and cluster file systems (NFS, Lustre, CephFS,
/// GPFS, BeeGFS, SMB, FUSE).
pub fn data_dir_warning(data_dir: &Path) -> Option<String> {
    let kind = node_local_kind(data_dir)?;
    Some(format!(
        "--runner slurm: the data directory {} is on {kind}, a file system only this node sees; \
         jobs on other nodes cannot read their prompts or write their results there: put it on \
         NFS, Lustre or CephFS (--data-dir) — on a one-node cluster this is fine",
        data_dir.display()
    ))
}

/// The name of a node-local file system `path` is on, if it is one.
fn node_local_kind(path: &Path) -> Option<&'static str> {
    use nix::sys::statfs::statfs;
    let probe = std::iter::successors(Some(path), |p| p.parent()).find(|p| p.exists())?;
    let found = statfs(probe).ok()?.filesystem_type().0 as u64;
    Some(match found {
        0xEF53 => "ext2/3/4",
        0x5846_5342 => "XFS",
        0x9123_683E => "Btrfs",
        0x0102_1994 => "tmpfs",
        0x794C_7630 => "overlayfs",
        0x2FC1_2FC1 => "ZFS",
        0xF2F5_2010 => "F2FS",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn() -> SpawnOptions {
        SpawnOptions {
            program: "sh".into(),
            args: vec!["agent.sh".into(), "{x}".into()],
            env: vec![
                ("PATH".into(), "/usr/bin".into()),
                ("SLURM_JOB_ID".into(), "7".into()),
            ],
            cwd: Some("/shared/tmp".into()),
            parent_death_signal: true,
        }
    }

    #[test]
    fn local_leaves_the_command_alone() {
        let mut s = spawn();
        Runner::Local.wrap(&mut s, &AgentId::parse("a1").unwrap());
        assert_eq!(s.program, OsString::from("sh"));
        assert_eq!(s.args.len(), 2);
    }

    #[test]
    fn slurm_wraps_the_command_in_a_named_srun_job_with_the_users_args() {
        let runner = Runner::slurm("--partition=debug --time='0:05:00'").unwrap();
        let mut s = spawn();
        runner.wrap(&mut s, &AgentId::parse("a1").unwrap());
        assert_eq!(s.program, OsString::from("srun"));
        let args: Vec<String> = s
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "--job-name=rlm-a1",
                "--ntasks=1",
                "--nodes=1",
                "--quiet",
                "--export=ALL",
                "--chdir=/shared/tmp",
                "--partition=debug",
                "--time=0:05:00",
                "--",
                "sh",
                "agent.sh",
                "{x}"
            ]
        );
        assert!(
            s.env.iter().all(|(name, _)| name != "SLURM_JOB_ID"),
            "an enclosing job's variables would make srun start a step of it"
        );
    }

    #[test]
    fn slurm_args_that_would_rename_the_job_or_do_not_split_are_refused() {
        assert!(Runner::slurm("-J mine")
            .unwrap_err()
            .to_string()
            .contains("must not set"));
        assert!(Runner::slurm("--job-name=x").is_err());
        assert!(Runner::slurm("--comment='open")
            .unwrap_err()
            .to_string()
            .contains("cannot be split"));
        assert_eq!(
            Runner::slurm("").unwrap(),
            Runner::Slurm { args: Vec::new() }
        );
    }

    #[test]
    fn slurm_failures_are_told_from_the_commands_own() {
        let cancelled = "slurmstepd-vm: error: *** STEP 4.0 ON vm CANCELLED AT 2026-11-24T08:42:50 ***\nsrun: Job step aborted: Waiting up to 4 seconds for job step to finish.\nsrun: error: vm: task 0: Terminated\n";
        assert_eq!(
            slurm_failure(cancelled).as_deref(),
            Some("Slurm: slurmstepd-vm: error: *** STEP 4.0 ON vm CANCELLED AT 2026-11-24T08:42:50 ***")
        );
        let no_resources = "srun: error: Memory specification can not be satisfied\nsrun: error: Unable to allocate resources: Requested node configuration is not available\n";
        assert!(slurm_failure(no_resources)
            .unwrap()
            .contains("Unable to allocate resources"));
        let timed_out = "slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2026-11-24T09:00:00 DUE TO TIME LIMIT ***";
        assert!(slurm_failure(timed_out).unwrap().contains("TIME LIMIT"));
        assert_eq!(
            slurm_failure("srun: error: vm: task 0: Terminated\n").as_deref(),
            Some("Slurm: srun: error: vm: task 0: Terminated")
        );
        let own = "grep: x: No such file\nsrun: error: vm: task 0: Exited with exit code 2\n";
        assert_eq!(slurm_failure(own), None);
        assert_eq!(Runner::Local.failure(cancelled), None);
    }

    #[test]
    fn a_runner_round_trips_through_settings_json() {
        for runner in [Runner::Local, Runner::slurm("-p debug").unwrap()] {
            let json = serde_json::to_value(&runner).unwrap();
            assert_eq!(serde_json::from_value::<Runner>(json).unwrap(), runner);
        }
    }

    #[test]
    fn a_tmpfs_data_dir_is_named_as_node_local() {
        if let Some(kind) = node_local_kind(Path::new("/dev/shm")) {
            assert_eq!(kind, "tmpfs");
            let warning = data_dir_warning(Path::new("/dev/shm/rlm-data")).unwrap();
            assert!(
                warning.contains("NFS") && warning.contains("tmpfs"),
                "{warning}"
            );
        }
    }
}
