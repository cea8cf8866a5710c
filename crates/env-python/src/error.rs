//! Why a python kernel could not start or become ready: typed, so that what ends the
//! run ([`rlm_env::EnvError::Start`] or `Broken`, which carry this text) stays apart
//! from what the model reads (exceptions in its code are output, never these).

use rlm_process::SpawnError;

/// Why a kernel could not start or become ready; the message reads after "failed to
/// start the python REPL (…):".
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// `--sandbox strict` and no launcher to confine the kernel with.
    #[error("--sandbox strict: no rlm-orchestrate launcher is known to confine the kernel")]
    NoLauncher,
    /// The confined kernel's private temporary directory could not be created.
    #[error("could not create the kernel's private temporary directory: {source}")]
    TempDir {
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The interpreter could not be run.
    #[error("{error}: {}", error.source)]
    Spawn {
        /// What went wrong, with the command.
        #[source]
        error: SpawnError,
    },
    /// The kernel's stdin, stdout or stderr was missing.
    #[error("the kernel's pipes were not set up")]
    Pipes,
    /// The `init` message could not be encoded.
    #[error("could not encode the init message: {source}")]
    Encode {
        /// What went wrong.
        #[source]
        source: serde_json::Error,
    },
    /// The kernel did not report ready in time.
    #[error("it did not report ready within {secs} s{stderr}")]
    ReadyTimeout {
        /// The limit, in seconds.
        secs: u64,
        /// `; its stderr ended with: …`, or empty.
        stderr: String,
    },
    /// The kernel died before it was ready.
    #[error("{report}")]
    Died {
        /// Its exit status and the tail of its stderr.
        report: String,
    },
    /// The kernel broke the protocol before it was ready.
    #[error("it broke the REPL protocol: {problem}")]
    Protocol {
        /// What it sent.
        problem: String,
    },
    /// The driver reported that it could not start (e.g. the context did not load).
    #[error("{error}{stderr}")]
    Driver {
        /// The driver's error.
        error: String,
        /// `; its stderr ended with: …`, or empty.
        stderr: String,
    },
}
