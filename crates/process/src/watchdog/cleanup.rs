//! Carrying out a watchdog's orders once its run is gone and swept: removing the
//! kernels' temporary directories, running the commands for what no signal reaches,
//! and at the very end removing the run's live record.
//!
//! A command runs without a shell, with no input or output, in a process group of its
//! own and inside the run's cgroup where there is one (moved there before it execs),
//! for at most [`CLEANUP_WAIT`]; then its group is killed, and the caller kills the
//! cgroup: nothing a clean-up command starts outlives the clean-up.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::orders::Order;

/// How long the watchdog waits for one clean-up command.
const CLEANUP_WAIT: Duration = Duration::from_secs(5);
/// Pause between two looks at a running command.
const POLL: Duration = Duration::from_millis(20);

/// Removes the temporary directories and runs the commands of `orders`, each once, in
/// the order given; commands inside `cgroup` when the run has one.
pub(crate) fn carry_out(orders: &[Order], cgroup: Option<&Path>) {
    for order in orders {
        match order {
            Order::RemoveDir { path } => {
                if let Err(error) = std::fs::remove_dir_all(path) {
                    if error.kind() != std::io::ErrorKind::NotFound {
                        tracing::debug!(path = %path.display(), %error, "could not remove a temporary directory");
                    }
                }
            }
            Order::Run { argv } => run(argv, cgroup),
            Order::Record { .. } => {}
        }
    }
}

/// Removes the live records named in `orders` (after everything else is done).
pub(crate) fn remove_records(orders: &[Order]) {
    for order in orders {
        if let Order::Record { path } = order {
            let _ = std::fs::remove_file(path);
            let _ = std::fs::remove_file(path.with_extension(super::record::LOCK_EXT));
        }
    }
}

/// Runs `argv` (no shell) for at most [`CLEANUP_WAIT`], inside `cgroup` if given, then
/// kills whatever is left of its process group.
fn run(argv: &[String], cgroup: Option<&Path>) {
    let Some((program, args)) = argv.split_first() else {
        return;
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    // Opened here (close-on-exec), written in the child before it execs: the command is
    // a member of the run's cgroup from its first instruction.
    let procs = cgroup.and_then(|dir| {
        OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .ok()
    });
    if let Some(file) = &procs {
        join_before_exec(&mut command, file.as_raw_fd());
    }
    let Ok(mut child) = command.spawn() else {
        return;
    };
    drop(procs);
    let started = Instant::now();
    while started.elapsed() < CLEANUP_WAIT {
        if !matches!(child.try_wait(), Ok(None)) {
            break;
        }
        std::thread::sleep(POLL);
    }
    let _ = crate::signal::signal_group(child.id(), Signal::SIGKILL);
    let _ = child.kill();
    let _ = child.wait();
}

/// Makes the child of `command` write `0` to `procs` (an open `cgroup.procs`) before it
/// execs, which moves it into that cgroup.
#[expect(
    unsafe_code,
    reason = "pre_exec is the only way to join a cgroup in the child before exec"
)]
fn join_before_exec(command: &mut Command, procs: std::os::fd::RawFd) {
    let hook = move || -> std::io::Result<()> {
        let own = b"0";
        // SAFETY: one write(2) of a static buffer to a descriptor the parent keeps
        // open until the child has started.
        // Should it fail, the command runs anyway: the kill of its group still ends
        // what it starts.
        let _ = unsafe { nix::libc::write(procs, own.as_ptr().cast(), own.len()) };
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec and makes one write(2),
    // which is async-signal-safe; it takes no lock and does not allocate.
    unsafe {
        command.pre_exec(hook);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_runs_without_a_shell_and_a_directory_goes() {
        let scratch = tempfile::tempdir().unwrap();
        let marker = scratch.path().join("ran; touch injected");
        let dir = scratch.path().join("rlm-kernel-x");
        std::fs::create_dir_all(dir.join("deep")).unwrap();
        carry_out(
            &[
                Order::Run {
                    argv: vec!["touch".into(), marker.display().to_string()],
                },
                Order::RemoveDir { path: dir.clone() },
            ],
            None,
        );
        assert!(marker.exists());
        assert!(!scratch.path().join("injected").exists());
        assert!(!dir.exists());
    }
}
