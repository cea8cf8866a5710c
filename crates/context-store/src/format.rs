//! Transitional: the few file-format functions that callers outside this crate still
//! use, kept public only until they switch to the store's readers. Nothing here is
//! part of the store's API; it goes away once these callers have moved:
//!
//! - `rlm-orchestrator` `env/tools/read.rs` (`read_header`, `copy_text_value`,
//!   `copy_json_value`, `read_value`) → [`crate::TextReader::of_variable_files`] and
//!   [`crate::Store::text_reader`];
//! - `rlm-orchestrator` `env/js/engine.rs` (`read_header`) →
//!   [`crate::VariableFile::open`], then `file_reference` / `value_json`;
//! - `rlm-orchestrate` `runs/html.rs` (`sha256_hex`, for a CSP hash that has nothing
//!   to do with variables) → `sha2::Sha256::digest`.

pub use crate::disk::{
    copy_json_value, copy_text_value, read_header, read_value, FileHeader, ParsedHeader,
};
pub use crate::integrity::sha256_hex;
