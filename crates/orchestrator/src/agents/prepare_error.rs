//! Why an external agent could not be started: each reason says what failed and on
//! what, and ends up in the error object the model reads (exit code 126).

use std::io;
use std::path::PathBuf;

use rlm_context_store::StoreError;

use crate::agent_cli::MAX_ARG_BYTES;

/// Why an agent could not be started; its message goes into the error object the
/// model reads (exit code 126).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrepareError {
    /// The result variable's file cannot be named.
    #[error(transparent)]
    ResultKey(#[from] StoreError),
    /// The data directory cannot be made absolute.
    #[error("failed to resolve {}: {source}", path.display())]
    DataDir {
        /// The data directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The task writing the prompt file did not finish.
    #[error("writing the prompt file failed: {0}")]
    PromptTask(#[from] tokio::task::JoinError),
    /// The prompt file cannot be written.
    #[error("failed to write the prompt file {}: {source}", path.display())]
    PromptFile {
        /// The prompt file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The prompt does not fit in one command-line argument.
    #[error(
        "the agent's prompt is {bytes} bytes, over the {MAX_ARG_BYTES}-byte limit of one command-line argument; \
         use {{prompt_file}} or stdin in --agent-cmd instead of {{prompt}}, or shorten the task"
    )]
    PromptTooLong {
        /// The longest argument, in bytes.
        bytes: usize,
    },
    /// A confined agent's private temporary directory cannot be created.
    #[error("could not create the agent's private temporary directory: {0}")]
    TempDir(io::Error),
}
