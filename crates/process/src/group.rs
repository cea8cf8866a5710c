//! Starting a child in its own process group, and ending that group.
//!
//! A child started here is the leader of a new process group (`process_group(0)`), so
//! everything it forks (a shell's pipeline, a kernel's `subprocess.run`) can be
//! signalled at once. On Linux it also gets `PR_SET_PDEATHSIG(SIGKILL)`: if the
//! orchestrator is SIGKILLed and cannot clean up, the kernel kills the leader. Note
//! that the parent-death signal fires when the spawning *thread* exits, so spawn from
//! long-lived threads (tokio workers, the main thread), never from `spawn_blocking`.

use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::{Child, Command};
use tokio::time::{sleep, timeout, Instant};

use crate::signal::{group_exists, send_signal, signal_group, GroupGuard, SignalError};

/// How often [`GroupChild::terminate`] checks whether the rest of the group has gone.
const GROUP_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Options for [`spawn_in_group`].
#[derive(Debug, Clone)]
pub struct SpawnOptions {
    /// Arm `PR_SET_PDEATHSIG(SIGKILL)` (Linux only; ignored elsewhere).
    pub parent_death_signal: bool,
}

impl Default for SpawnOptions {
    fn default() -> Self {
        Self {
            parent_death_signal: true,
        }
    }
}

/// A child could not be started.
#[derive(Debug, thiserror::Error)]
#[error("failed to start `{command}`")]
pub struct SpawnError {
    /// The program that was run.
    pub command: String,
    /// What went wrong.
    #[source]
    pub source: io::Error,
}

/// Starts `command` as the leader of a new process group.
///
/// The caller sets the environment and stdio first (clear the environment and pass
/// only what the child needs; stdin null unless it reads from it). `kill_on_drop` is
/// set as well, and the returned [`GroupChild`] kills the whole group when dropped.
pub fn spawn_in_group(
    command: &mut Command,
    options: &SpawnOptions,
) -> Result<GroupChild, SpawnError> {
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    command.process_group(0).kill_on_drop(true);
    if options.parent_death_signal {
        arm_parent_death_signal(command);
    }
    let child = command.spawn().map_err(|source| SpawnError {
        command: program.clone(),
        source,
    })?;
    let pid = child.id().ok_or_else(|| SpawnError {
        command: program,
        source: io::Error::other("the child exited before its id was read"),
    })?;
    Ok(GroupChild {
        child,
        pid,
        guard: GroupGuard::new(pid),
    })
}

#[cfg(target_os = "linux")]
#[expect(
    unsafe_code,
    reason = "pre_exec is the only way to run prctl in the child before exec"
)]
fn arm_parent_death_signal(command: &mut Command) {
    let parent = nix::unistd::getpid();
    let hook = move || -> io::Result<()> {
        // Only async-signal-safe calls here (we are between fork and exec): two raw
        // syscalls and an error built from an errno, which does not allocate.
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
        // The parent may have died before the signal was armed: then nobody would
        // ever send it, so give up instead of running unsupervised.
        if nix::unistd::getppid() != parent {
            return Err(io::Error::from_raw_os_error(nix::libc::ESRCH));
        }
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec. It calls only prctl(2)
    // and getppid(2), both async-signal-safe, takes no locks, and does not allocate
    // (io::Error::from(Errno) and from_raw_os_error store the code inline).
    unsafe {
        command.pre_exec(hook);
    }
}

#[cfg(not(target_os = "linux"))]
fn arm_parent_death_signal(_command: &mut Command) {}

/// A running child that leads its own process group.
///
/// Dropping it SIGKILLs the whole group (and `tokio` reaps the leader).
#[derive(Debug)]
pub struct GroupChild {
    child: Child,
    pid: u32,
    guard: GroupGuard,
}

impl GroupChild {
    /// The leader's pid, which is also the group id.
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// The underlying child, e.g. to take its stdio handles.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Sends `signal` to the leader only (e.g. SIGINT to interrupt a REPL without
    /// touching the programs it started). `Ok(false)` if it is gone.
    pub fn signal(&self, signal: Signal) -> Result<bool, SignalError> {
        send_signal(self.pid, signal)
    }

    /// Sends `signal` to every process of the group.
    pub fn signal_group(&self, signal: Signal) -> Result<bool, SignalError> {
        signal_group(self.pid, signal)
    }

    /// SIGKILLs the whole group now, without waiting.
    pub fn kill_group(&self) {
        self.guard.kill_now();
    }

    /// The leader's exit status if it has exited.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Waits for the leader to exit (the rest of the group may live on).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Ends the group politely: SIGTERM to the group, up to `grace` for the leader and
    /// the rest of the group to exit, then SIGKILL to whatever is left. Returns the
    /// leader's exit status.
    pub async fn terminate(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        let deadline = Instant::now() + grace;
        if self.child.try_wait()?.is_none() {
            if let Err(error) = self.signal_group(Signal::SIGTERM) {
                tracing::warn!(pgid = self.pid, %error, "could not SIGTERM a process group");
            }
        }
        let status = match timeout(grace, self.child.wait()).await {
            Ok(status) => status?,
            Err(_) => {
                self.kill_group();
                self.child.wait().await?
            }
        };
        // The leader is gone; give the rest of the group what is left of the grace.
        while group_exists(self.pid) && Instant::now() < deadline {
            sleep(GROUP_POLL_INTERVAL).await;
        }
        self.kill_group();
        if !group_exists(self.pid) {
            self.guard.disarm();
        }
        Ok(status)
    }
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use super::*;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command
    }

    async fn read_pids(child: &mut GroupChild, count: usize) -> Vec<u32> {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let stdout = child.child_mut().stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut pids = Vec::new();
        while pids.len() < count {
            let line = lines.next_line().await.unwrap().unwrap();
            pids.push(line.trim().parse().unwrap());
        }
        pids
    }

    /// Alive and not a zombie (zombies wait for their reaper; they run nothing).
    fn running(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => !stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
            Err(_) => false,
        }
    }

    async fn wait_gone(pid: u32) {
        for _ in 0..1000 {
            if !running(pid) {
                return;
            }
            sleep(Duration::from_millis(10)).await;
        }
        panic!("process {pid} is still running");
    }

    #[tokio::test]
    async fn terminate_ends_background_jobs_too() {
        let mut child = spawn_in_group(
            &mut sh("sleep 100 & echo $!; sleep 100 & echo $!; wait"),
            &SpawnOptions::default(),
        )
        .unwrap();
        let pids = read_pids(&mut child, 2).await;
        let status = child.terminate(Duration::from_secs(5)).await.unwrap();
        assert!(!status.success());
        for pid in pids {
            wait_gone(pid).await;
        }
    }

    #[tokio::test]
    async fn sigterm_ignorers_are_killed_after_the_grace() {
        let mut child = spawn_in_group(
            &mut sh("trap '' TERM; sleep 100 & echo $!; wait"),
            &SpawnOptions::default(),
        )
        .unwrap();
        let pids = read_pids(&mut child, 1).await;
        child.terminate(Duration::from_millis(200)).await.unwrap();
        wait_gone(pids[0]).await;
    }

    #[tokio::test]
    async fn dropping_the_child_kills_the_group() {
        let mut child = spawn_in_group(
            &mut sh("sleep 100 & echo $!; wait"),
            &SpawnOptions::default(),
        )
        .unwrap();
        let leader = child.id();
        let pids = read_pids(&mut child, 1).await;
        drop(child);
        wait_gone(pids[0]).await;
        wait_gone(leader).await;
    }

    #[test]
    fn the_child_dies_with_its_spawning_thread() {
        let pid = std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let mut command = sh("sleep 100");
                command.stdout(Stdio::null());
                let child = spawn_in_group(&mut command, &SpawnOptions::default()).unwrap();
                let pid = child.id();
                // No guard and no kill_on_drop: only the parent-death signal can end it.
                std::mem::forget(child);
                pid
            })
        })
        .join()
        .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(wait_gone(pid));
    }

    #[tokio::test]
    async fn a_missing_program_names_itself() {
        let error = spawn_in_group(
            &mut Command::new("/nonexistent/rlm-no-such-program"),
            &SpawnOptions::default(),
        )
        .unwrap_err();
        assert!(error.to_string().contains("rlm-no-such-program"));
        assert_eq!(error.source.kind(), io::ErrorKind::NotFound);
    }
}
