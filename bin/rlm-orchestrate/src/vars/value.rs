//! Where `vars set` takes a value from (`--file PATH` or stdin) and whether the value
//! fits the `--type` asked for: every such failure is bad input (exit 2), found before
//! the store is opened, so the stored value is left as it was.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rlm_context_store::{StoreError, VariableType};
use rlm_orchestrator::context::{Budget, BudgetedInput, Stop, STDIN_PATH};
use serde_json::Value;

use crate::exit::{annotate, bad_input, ExitStatus, ResultExt};

/// Where `--file` reads from: a file, a device or a pipe, or stdin for `-`.
pub(super) struct Input {
    /// The file as named on the command line, or `stdin`.
    pub(super) name: String,
    /// The path to open (`-` for stdin).
    pub(super) path: PathBuf,
}

impl Input {
    /// Checks `path`, or stdin for `-`; a missing file or a directory is bad input.
    pub(super) fn check(path: &Path) -> Result<Self> {
        if path.as_os_str() == STDIN_PATH {
            return Ok(Self {
                name: "stdin".to_owned(),
                path: path.to_owned(),
            });
        }
        let name = path.display().to_string();
        let meta = fs::metadata(path)
            .with_context(|| format!("cannot read {name}"))
            .status(ExitStatus::BadInput)
            .hint(|| {
                "paths are relative to the working directory; `--file -` reads stdin".into()
            })?;
        if meta.is_dir() {
            return Err(bad_input(format!("{name} is a directory, not a file")));
        }
        Ok(Self {
            name,
            path: path.to_owned(),
        })
    }

    /// Opens the input, every byte read counted against `budget` (reading fails past
    /// its limit or once its token is cancelled).
    pub(super) fn open<'b>(&self, budget: &'b mut Budget) -> Result<BudgetedInput<'b>> {
        BudgetedInput::open(&self.path, budget)
            .with_context(|| format!("cannot read {}", self.name))
            .status(ExitStatus::BadInput)
    }
}

/// Why reading `input` stopped early, as the error to report: past `max_bytes` (bad
/// input), or cancelled by Ctrl-C / SIGTERM. Either way nothing was stored.
pub(super) fn stopped_error(input: &Input, stop: Stop, max_bytes: u64) -> anyhow::Error {
    match stop {
        Stop::OverLimit => annotate(
            anyhow::anyhow!(
                "{} is larger than --max-bytes ({max_bytes} bytes); nothing was stored",
                input.name
            ),
            Some(ExitStatus::BadInput),
            Some("raise --max-bytes (or RLM_MAX_CONTEXT_BYTES), or refer to a large file where it is with `vars set KEY --ref PATH`".to_owned()),
        ),
        Stop::Cancelled => annotate(
            anyhow::anyhow!("stopped while reading {}; nothing was stored", input.name),
            Some(ExitStatus::Cancelled),
            None,
        ),
    }
}

/// Parses JSON from `reader`; a syntax error is bad input, with line and column.
pub(super) fn parse_json(reader: impl Read, name: &str) -> Result<Value> {
    serde_json::from_reader(reader).map_err(|e| {
        let (message, hint) = if e.is_io() {
            (format!("cannot read {name}"), None)
        } else {
            (
                format!("{name} is not valid JSON"),
                Some("drop --json to store it as text".to_owned()),
            )
        };
        annotate(
            anyhow::Error::new(e).context(message),
            Some(ExitStatus::BadInput),
            hint,
        )
    })
}

/// Reads a whole text input, failing like the streaming path on invalid UTF-8.
pub(super) fn read_text(reader: &mut dyn Read, name: &str) -> Result<String> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {name}"))
        .status(ExitStatus::BadInput)?;
    String::from_utf8(bytes).map_err(|e| {
        StoreError::InvalidUtf8 {
            source_name: name.to_owned(),
            offset: e.utf8_error().valid_up_to() as u64,
        }
        .into()
    })
}

/// Refuses a `--type` that contradicts a text value.
pub(super) fn check_text_type(var_type: Option<VariableType>) -> Result<()> {
    match var_type {
        None | Some(VariableType::Text | VariableType::Stream) => Ok(()),
        Some(other) => Err(bad_input(format!(
            "a text value cannot have type {other}; add --json to parse the value as JSON"
        ))),
    }
}

/// Refuses a `--type` that contradicts a JSON value's shape.
pub(super) fn check_type(value: &Value, var_type: Option<VariableType>) -> Result<()> {
    let has_any = |keys: [&str; 2]| {
        value
            .as_object()
            .is_some_and(|map| keys.iter().any(|k| map.contains_key(*k)))
    };
    let problem = match var_type {
        None | Some(VariableType::Stream) => None,
        Some(VariableType::Text) if !value.is_string() => Some("type text needs a string"),
        Some(VariableType::Json) if value.is_string() => {
            Some("type json needs a non-string value; use --type text for a string")
        }
        Some(VariableType::Memory) if !has_any(["entries", "memories"]) => {
            Some("type memory needs an object with \"entries\" or \"memories\"")
        }
        Some(VariableType::Result) if !has_any(["result", "output"]) => {
            Some("type result needs an object with \"result\" or \"output\"")
        }
        Some(_) => None,
    };
    match problem {
        Some(problem) => Err(bad_input(problem)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn type_checks_follow_the_shapes() {
        assert!(check_type(&json!("x"), Some(VariableType::Text)).is_ok());
        assert!(check_type(&json!([1]), Some(VariableType::Text)).is_err());
        assert!(check_type(&json!({"entries": []}), Some(VariableType::Memory)).is_ok());
        assert!(check_type(&json!({"x": []}), Some(VariableType::Memory)).is_err());
        assert!(check_type(&json!({"output": 1}), Some(VariableType::Result)).is_ok());
        assert!(check_type(&json!("x"), Some(VariableType::Json)).is_err());
        assert!(check_type(&json!("x"), Some(VariableType::Stream)).is_ok());
        assert!(check_text_type(Some(VariableType::Stream)).is_ok());
        assert!(check_text_type(Some(VariableType::Memory)).is_err());
    }

    #[test]
    fn invalid_json_is_bad_input_with_position() {
        let err = parse_json(&b"{\n  \"a\": [1,]\n}"[..], "in.json").unwrap_err();
        assert_eq!(crate::exit::status_of(&err), ExitStatus::BadInput);
        let text = format!("{err:#}");
        assert!(text.contains("in.json is not valid JSON"), "{text}");
        assert!(text.contains("line 2 column"), "{text}");
    }
}
