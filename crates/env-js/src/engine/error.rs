//! Why the engine could not start, load a context or take the next query.
//!
//! None of these is told to the model as the result of its code (that is an
//! exception's text, or a host call's `RespondToModel` reply): they become an
//! [`rlm_env::EnvError`] (`Start`, `Broken` or `Request`) and end the run or the
//! session's request. Causes that only live as long as the JavaScript context (a
//! caught exception) are kept as their text.

use std::path::PathBuf;

use rlm_context_store::{FileCopyError, StoreError};

/// A failure to start the engine or to load what it is given.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EngineError {
    /// The engine was started outside a tokio runtime (host calls run on it).
    #[error("the JavaScript engine must be started from a tokio runtime: {0}")]
    NoTokioRuntime(tokio::runtime::TryCurrentError),
    /// The engine's OS thread could not be spawned.
    #[error("could not start the engine thread: {0}")]
    Thread(std::io::Error),
    /// The engine thread's own tokio runtime could not be built.
    #[error("could not start the engine's runtime: {0}")]
    ThreadRuntime(std::io::Error),
    /// The engine thread ended before it reported whether it was ready.
    #[error("the engine thread ended before it was ready")]
    EndedBeforeReady,
    /// No engine is running.
    #[error("the engine is not ready")]
    NotReady,
    /// QuickJS could not create a runtime.
    #[error("could not create a QuickJS runtime: {0}")]
    CreateRuntime(rquickjs::Error),
    /// QuickJS could not create a context.
    #[error("could not create a QuickJS context: {0}")]
    CreateContext(rquickjs::Error),
    /// A QuickJS operation on a value or a global failed.
    #[error(transparent)]
    Js(#[from] rquickjs::Error),
    /// JavaScript threw while the engine set itself up (its text).
    #[error("{0}")]
    Thrown(String),
    /// A part of the prelude threw.
    #[error("the prelude {name} failed: {error}")]
    Prelude {
        /// The part (`<rlm-core>`, …).
        name: &'static str,
        /// The exception's text.
        error: String,
    },
    /// A global function of the prelude threw.
    #[error("{name} failed: {error}")]
    Call {
        /// The function.
        name: String,
        /// The exception's text.
        error: String,
    },
    /// A provided global could not be set.
    #[error("could not set `{name}`: {error}")]
    Provide {
        /// The global.
        name: String,
        /// The exception's text.
        error: String,
    },
    /// A value could not be encoded as JSON for the engine.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// QuickJS could not parse a context value.
    #[error("could not load the context: {0}")]
    ParseContext(String),
    /// A context file is not a variable file.
    #[error("the context file {} is not a variable file: {error}", path.display())]
    NotAVariableFile {
        /// The file.
        path: PathBuf,
        /// What the store said (in the message, so not a source).
        error: StoreError,
    },
    /// The store could not read a context value (it names the file).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A referenced file is too large to load whole under `--lazy-above`.
    #[error(
        "the context {} is {size} bytes, above --lazy-above, so it would be read lazily, \
         which the js environment cannot do (QuickJS strings live in its memory): use \
         --env python, whose `context` is then a lazy view of the file, or load it \
         whole with a larger --lazy-above (or --lazy-context never)",
        path.display()
    )]
    WouldBeLazy {
        /// The referenced file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
    },
    /// A referenced file could not be read, or changed since it was referenced.
    #[error(
        "the context file {} cannot be read: {error}; start the run again to reference it \
         as it is now, or pass --copy-context",
        path.display()
    )]
    Referenced {
        /// The referenced file.
        path: PathBuf,
        /// What went wrong (in the message, so not a source).
        error: FileCopyError,
    },
    /// A referenced file is not UTF-8 text.
    #[error(
        "the context file {} is not valid UTF-8 at byte offset {offset}; convert it to UTF-8 first",
        path.display()
    )]
    NotUtf8 {
        /// The referenced file.
        path: PathBuf,
        /// The first invalid byte.
        offset: usize,
    },
    /// A referenced file's text could not be encoded as a JSON string.
    #[error("could not encode the context: {0}")]
    EncodeContext(serde_json::Error),
}
