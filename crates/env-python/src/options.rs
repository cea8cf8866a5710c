//! How the kernel process is run: [`PythonOptions`], with their defaults.

use std::path::PathBuf;
use std::time::Duration;

use crate::confine::KernelSandbox;

/// Default for [`PythonOptions::output_cap_bytes`].
pub const OUTPUT_CAP_BYTES: usize = 1 << 20;
/// Default for [`PythonOptions::interrupt_grace`].
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(2);
/// Default for [`PythonOptions::ready_timeout`].
pub const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// Default for [`PythonOptions::max_message_bytes`]: room for a large `FINAL_VAR`
/// or `store.set` value, far below what would strain the orchestrator's memory.
pub const MAX_MESSAGE_BYTES: usize = 128 << 20;
/// Default for [`PythonOptions::capture_limit_bytes`].
pub const CAPTURE_LIMIT_BYTES: usize = 16 << 20;
/// Default for [`PythonOptions::stderr_tail_bytes`].
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// How the kernel process is run.
#[derive(Debug, Clone)]
pub struct PythonOptions {
    /// The interpreter (default `python3`, looked up in `PATH`).
    pub python: PathBuf,
    /// How long the kernel may take to start and load `context`.
    pub ready_timeout: Duration,
    /// After the SIGINT of a timeout, how long to wait before killing and restarting.
    pub interrupt_grace: Duration,
    /// Bytes kept of each of stdout and stderr per execution.
    pub output_cap_bytes: usize,
    /// The most bytes a capture file may hold before the orchestrator empties it
    /// (never less than `output_cap_bytes`).
    pub capture_limit_bytes: usize,
    /// The longest message the kernel may send (a longer one is a protocol error; the
    /// driver refuses to send one, so model code gets a `HostError` instead).
    pub max_message_bytes: usize,
    /// Bytes kept of the kernel's stderr outside executions, for error messages.
    pub stderr_tail_bytes: usize,
    /// Extra environment variables to inherit by name (the kernel's environment is
    /// cleared and rebuilt; API keys are never passed unless named here).
    pub pass_env: Vec<String>,
    /// Extra environment variables to set.
    pub env: Vec<(String, String)>,
    /// Working directory of the kernel (default: the orchestrator's).
    pub working_dir: Option<PathBuf>,
    /// Read size of the chunked text loader (tests use tiny chunks to exercise
    /// boundaries; default 1 MiB).
    pub load_chunk_bytes: Option<usize>,
    /// `--sandbox`: how the kernel is confined (default: not at all; the command
    /// line's default is `auto`).
    pub sandbox: KernelSandbox,
}

impl From<PathBuf> for PythonOptions {
    /// Default options with this interpreter.
    fn from(python: PathBuf) -> Self {
        Self {
            python,
            ..Self::default()
        }
    }
}

impl Default for PythonOptions {
    fn default() -> Self {
        Self {
            python: PathBuf::from("python3"),
            ready_timeout: READY_TIMEOUT,
            interrupt_grace: INTERRUPT_GRACE,
            output_cap_bytes: OUTPUT_CAP_BYTES,
            capture_limit_bytes: CAPTURE_LIMIT_BYTES,
            max_message_bytes: MAX_MESSAGE_BYTES,
            stderr_tail_bytes: STDERR_TAIL_BYTES,
            pass_env: Vec::new(),
            env: Vec::new(),
            working_dir: None,
            load_chunk_bytes: None,
            sandbox: KernelSandbox::off(),
        }
    }
}

impl PythonOptions {
    /// The most bytes a capture file may hold: `capture_limit_bytes`, at least the cap.
    pub fn capture_limit(&self) -> u64 {
        self.capture_limit_bytes.max(self.output_cap_bytes) as u64
    }
}
