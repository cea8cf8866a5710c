//! The rlm context store: variables that a model, its REPL and its sub-agents pass by
//! reference instead of by value.
//!
//! A variable is a key, a JSON value and a [`VariableRef`] (id, scope, type, size,
//! time, sha256). Values live in `<data-dir>/variables/<file>.json`, one plain JSON
//! file each (docs/store.md), so a sub-agent in any language reads them
//! with a JSON parser; the store keeps a bounded, least-recently-used share of them in
//! memory.
//! Several processes may use one data directory at once: writes are atomic renames,
//! writers of a key serialise on a lock file, and changes made elsewhere are picked up
//! by [`Store::refresh`] and [`Store::wait_for`].
//!
//! ```no_run
//! # fn main() -> Result<(), rlm_context_store::StoreError> {
//! use rlm_context_store::{SetOptions, Store};
//! let store = Store::open(".rlm-data")?;
//! let handle = store.set("chunk-0", serde_json::json!("some text"), SetOptions::default())?;
//! let path = store.persist_for_sub_agent("chunk-0")?; // give this to a sub-agent
//! # let _ = (handle, path); Ok(()) }
//! ```

mod cache;
mod disk;
mod error;
mod file_ref;
mod file_ref_checks;
mod integrity;
mod key;
mod lock;
mod nofollow;
pub mod private_fs;
mod reference;
mod store;
mod summary;
mod text;
mod variable_file;

pub use error::{Result, StoreError};
pub use file_ref::{FileChange, FileCopyError, FileRef};
pub use key::{file_name, validate_key, MAX_KEY_BYTES};
pub use private_fs::Durability;
pub use reference::{
    Expected, ListFilter, SetOptions, UnknownVariableType, VariableRef, VariableType, GLOBAL_SCOPE,
};
pub use store::{
    RefreshReport, ScanProblem, Store, StoreOptions, StoreStats, DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MEMORY_CEILING_BYTES, LOCKS_DIR, SPILL_DIR, STALE_VIEW_GRACE, VARIABLES_DIR, VIEWS_DIR,
};
pub use summary::{
    truncate_chars, SummarizeError, Summarizer, TruncatingSummarizer, CHARS_PER_TOKEN,
};
pub use text::{RangeRead, TextLine, TextMeasure, TextReader, TEXT_LINE_MAX_BYTES};
pub use variable_file::VariableFile;
