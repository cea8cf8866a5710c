//! What can go wrong when confining a process.

use std::path::PathBuf;

/// A failure to confine, or to start the confined program.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The policy argument could not be read.
    #[error("the sandbox policy is not valid JSON ({0}); it is written by rlm-orchestrate itself: report a bug")]
    BadPolicy(#[source] serde_json::Error),
    /// The launcher was called without `-- PROGRAM`.
    #[error("usage: rlm-orchestrate sandbox-exec POLICY -- PROGRAM [ARGS…] (an internal command of rlm-orchestrate)")]
    Usage,
    /// A resource limit could not be set.
    #[error("could not set the {limit} limit to {value}: {source}")]
    Limit {
        /// The rlimit's name.
        limit: &'static str,
        /// The value asked for.
        value: u64,
        /// Why.
        source: std::io::Error,
    },
    /// `--sandbox strict` and the kernel cannot enforce part of the policy.
    #[error("--sandbox strict: this system cannot confine the child: {0}; use --sandbox auto to run with what it can enforce, or --sandbox off")]
    Unsupported(String),
    /// Landlock refused the ruleset.
    #[error("Landlock refused the ruleset: {0}")]
    Landlock(String),
    /// A path of the policy could not be opened for a rule.
    #[error("could not open {path} for a sandbox rule: {message}")]
    Path {
        /// The path.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The seccomp filter could not be built or installed.
    #[error("could not install the seccomp filter: {0}")]
    Seccomp(String),
    /// `exec` of the confined program failed.
    #[error("could not start {program}: {source}")]
    Exec {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
}
