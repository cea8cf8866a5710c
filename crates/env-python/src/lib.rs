//! The `python` environment: a persistent `python3` kernel running the embedded driver.
//!
//! Model code runs in a child process (its own process group, parent-death signal,
//! killed on drop) that speaks JSON lines with the orchestrator (see `protocol` and
//! `python/driver/`). The kernel reads `context` straight from the variable files, so the
//! context never crosses the pipe; everything that needs a model, the store or a
//! sub-agent is a `host_call` served by the [`rlm_env::Host`].
//!
//! Behaviour the loop relies on:
//! - The last expression of a cell is echoed like a REPL (`repr`, unless `None`);
//!   everything else follows plain `exec` semantics.
//! - Captured stdout/stderr are capped at [`PythonOptions::output_cap_bytes`] each,
//!   with a marker; C-level and subprocess output is captured too, in order. The
//!   capture files themselves never hold more than
//!   [`PythonOptions::capture_limit_bytes`]: past it the orchestrator empties them
//!   (whatever writes to them, a background process included) and says so in the
//!   output.
//! - The kernel is not trusted with the protocol: a message longer than
//!   [`PythonOptions::max_message_bytes`], one that is not JSON or lacks the kernel's
//!   token (model code writing to the protocol fd, a forged `final`), and a kernel
//!   whose own fds the code closed (`os.close(7)`) are protocol errors: the kernel is
//!   replaced at once and the execution's error says why, never a timeout. Host calls
//!   from a forked process (`multiprocessing`, `os.fork`) fail at once with a
//!   `HostError` that says to use threads.
//! - Past [`rlm_env::EnvConfig::exec_timeout`] the kernel gets SIGINT (a `KeyboardInterrupt` in
//!   the code; variables survive, `timed_out` is set). If it does not answer within
//!   [`PythonOptions::interrupt_grace`], its process group is killed and a new kernel
//!   started: `timed_out` and `restarted` are both set.
//! - A kernel that dies (`os._exit`, a segfault) fails the running execution with its
//!   exit status and stderr tail; a new kernel is started at once and the next
//!   execution reports `restarted`.
//! - Persistent sessions ([`rlm_env::Environment::next_query`]): each new context is loaded
//!   into its own slot; a restarted kernel reloads every slot and the whole `history`.
//!   An execution abandoned by a cancelled query is interrupted by
//!   [`rlm_env::Environment::recover`] (or before the next request), so the kernel is idle
//!   again and keeps its variables when the code yields to the interrupt.
//! - Start-up is lazy: [`PythonEnv::start`] spawns the kernel and returns at once
//!   (~50 ms of interpreter start and the context load overlap the first model call);
//!   the first execution waits for `ready`.

mod capture;
mod confine;
mod env;
mod error;
mod exec;
mod factory;
mod guide;
mod kernel;
mod missing_part;
mod options;
mod protocol;
#[cfg(test)]
mod protocol_fuzz;
mod reader;

pub use self::confine::KernelSandbox;
pub use self::env::PythonEnv;
pub use self::error::KernelError;
pub use self::factory::PythonFactory;
pub use self::guide::guide;
pub use self::kernel::KernelInfo;
pub use self::options::{
    PythonOptions, CAPTURE_LIMIT_BYTES, INTERRUPT_GRACE, MAX_MESSAGE_BYTES, OUTPUT_CAP_BYTES,
    READY_TIMEOUT, STDERR_TAIL_BYTES,
};
