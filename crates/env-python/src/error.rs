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

/// What a kernel sent that breaks the protocol (it is then replaced); the message
/// reads after "it sent".
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// A line that is not JSON.
    #[error("a line that is not JSON ({source}), starting {start:?}")]
    NotJson {
        /// Why it is not.
        #[source]
        source: serde_json::Error,
        /// The line's first bytes.
        start: String,
    },
    /// A message without the kernel's token (model code writing to the protocol fd).
    #[error("a message that did not come from the REPL's driver (it lacks the kernel's token), starting {start:?}")]
    NoToken {
        /// The line's first bytes.
        start: String,
    },
    /// A `ready` message of the wrong shape.
    #[error("bad ready message ({source})")]
    BadReady {
        /// What was wrong.
        #[source]
        source: serde_json::Error,
    },
    /// A `result` without its request's id.
    #[error("a result without an id")]
    ResultWithoutId,
    /// A `host_call` without its call id.
    #[error("a host_call without a call_id")]
    HostCallWithoutId,
    /// A message of a type the protocol does not have.
    #[error("unknown message type {kind:?}")]
    UnknownType {
        /// The type it named.
        kind: String,
    },
    /// A host call whose id is already in flight (two callers would wait for one
    /// answer).
    #[error("a host call with call id {call_id}, which is already in flight")]
    DuplicateCall {
        /// The repeated id.
        call_id: u64,
    },
}

/// Why the kernel's capture files cannot be bounded (the kernel still runs; its
/// captured output is then not bounded, and a warning says so).
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The driver did not report one file per stream.
    #[error("the kernel reported {count} capture files, not 2")]
    Count {
        /// How many it reported.
        count: usize,
    },
    /// A capture file could not be inspected or opened.
    #[error("could not {action} the capture file {}: {source}", path.display())]
    Io {
        /// `inspect` or `open`.
        action: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// A capture file is not a regular file.
    #[error("the capture file {} is not a regular file", path.display())]
    NotAFile {
        /// The file.
        path: std::path::PathBuf,
    },
    /// A capture file was replaced after the driver created it.
    #[error("{} is not the capture file the kernel created (it was replaced)", path.display())]
    Replaced {
        /// The file.
        path: std::path::PathBuf,
    },
    /// The thread that bounds the capture files could not be started.
    #[error("could not start the thread that bounds the capture files: {source}")]
    Thread {
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
}
