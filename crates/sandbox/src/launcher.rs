//! The launcher: `rlm-orchestrate sandbox-exec POLICY -- PROGRAM ARGS…` confines itself
//! and becomes PROGRAM.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::{confine, Policy, SandboxError};

/// The binary's hidden sub-command that runs [`launcher_main`].
pub const LAUNCHER_SUBCOMMAND: &str = "sandbox-exec";

/// Exit code of a launcher that could not confine or start its program (as a shell's
/// "found but could not run").
const LAUNCH_FAILED: u8 = 126;

/// The program and arguments that start `program args` confined by `policy` through
/// `launcher` (the rlm-orchestrate binary).
pub fn wrap_command(
    launcher: &Path,
    policy: &Policy,
    program: &OsStr,
    args: &[OsString],
) -> (OsString, Vec<OsString>) {
    let mut wrapped: Vec<OsString> = vec![
        LAUNCHER_SUBCOMMAND.into(),
        policy.to_arg().into(),
        "--".into(),
        program.to_owned(),
    ];
    wrapped.extend(args.iter().cloned());
    (launcher.as_os_str().to_owned(), wrapped)
}

/// Runs the launcher with the arguments after the sub-command: confines the process
/// and `exec`s the program. Returns only on failure, with the exit code to use (the
/// reason is on stderr).
pub fn launcher_main(args: &[OsString]) -> u8 {
    match launch(args) {
        Ok(never) => match never {},
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "rlm-orchestrate sandbox-exec: {error}");
            LAUNCH_FAILED
        }
    }
}

fn launch(args: &[OsString]) -> Result<std::convert::Infallible, SandboxError> {
    let [policy, separator, program, rest @ ..] = args else {
        return Err(SandboxError::Usage);
    };
    if separator != "--" {
        return Err(SandboxError::Usage);
    }
    let policy = Policy::from_arg(&policy.to_string_lossy())?;
    let applied = confine(&policy)?;
    tracing::debug!(?applied, "confined");
    let error = Command::new(program).args(rest).exec();
    Err(SandboxError::Exec {
        program: program.to_string_lossy().into_owned(),
        source: error,
    })
}
