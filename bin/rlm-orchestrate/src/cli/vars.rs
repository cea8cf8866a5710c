//! The arguments of `vars` and its sub-commands (list, show, get, set, rm, clear,
//! path), and the parsing of a variable type and of `--if-sha256`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use rlm_context_store::{Expected, VariableType};

use super::InvalidValue;

/// `vars`: one of its sub-commands.
#[derive(Debug, Args)]
pub struct VarsArgs {
    /// What to do with the variables.
    #[command(subcommand)]
    pub command: VarsCommand,
}

/// The `vars` sub-commands.
#[derive(Debug, Subcommand)]
pub enum VarsCommand {
    /// List variables: key, type, scope, size, creation time, short sha256.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars list
  rlm-orchestrate vars list --scope agent:root --type result
  rlm-orchestrate vars list --json | jq -r '.[].key'

Unreadable files in variables/ are reported as warnings on stderr and skipped.")]
    List(ListArgs),

    /// Show a variable's reference (metadata) and a preview of its value.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars show chunk-3
  rlm-orchestrate vars show chunk-3 --json | jq -r .ref.sha256")]
    Show(ShowArgs),

    /// Print a variable's value: text as is, anything else as pretty JSON, and for a
    /// `file` variable the file it refers to (refused if it changed since).
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars get notes
  rlm-orchestrate vars get big-log | grep ERROR
  rlm-orchestrate vars get sub-result-7 > answer.json

Values are streamed, so values of any size print in bounded memory.")]
    Get(KeyArgs),

    /// Store a value: VALUE or the contents of --file, as text or (--json) as JSON.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars set notes 'remember the milk'
  rlm-orchestrate vars set big-log --file server.log
  rlm-orchestrate vars set huge-log --ref /data/huge.log
  cat report.md | rlm-orchestrate vars set report --file -
  rlm-orchestrate vars set config --json '{\"depth\": 2}'
  rlm-orchestrate vars set tail --type stream --file tail.log
  rlm-orchestrate vars set counter --json 1 --if-sha256 none
  sha=$(rlm-orchestrate vars show counter --json | jq -r .ref.sha256)
  rlm-orchestrate vars set counter --json 2 --if-sha256 \"$sha\"

Text files are streamed (bounded memory) unless --json or --if-sha256 is given.
A value that is not valid UTF-8 (text) or not valid JSON (--json) is rejected with
exit code 2 and the stored value is left as it was; a failed --if-sha256 check exits 3.")]
    Set(SetArgs),

    /// Remove a variable.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars rm chunk-3

Exits 4 when the variable does not exist.")]
    Rm(KeyArgs),

    /// Remove every variable in the data directory and print how many were removed.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars clear
  RLM_DATA_DIR=/tmp/scratch rlm-orchestrate vars clear

Files in variables/ that are not readable variables are left alone.")]
    Clear,

    /// Print the absolute path of a variable's file, as given to sub-agents (for a
    /// `file` variable: the file it refers to).
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars path chunk-3
  jq -r .value \"$(rlm-orchestrate vars path chunk-3)\"

The file is plain JSON; the data is under its \"value\" field.")]
    Path(KeyArgs),
}

/// `vars list` options.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only variables of this scope (global, agent:ID, session:ID, …).
    #[arg(long, value_name = "SCOPE")]
    pub scope: Option<String>,

    /// Only variables of this type.
    #[arg(long = "type", value_name = "TYPE", value_enum)]
    pub var_type: Option<TypeArg>,

    /// Print a JSON array of references exactly as stored.
    #[arg(long)]
    pub json: bool,
}

/// `vars show` options.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The variable's key.
    pub key: String,

    /// Print `{"ref": …, "path": …, "preview": …}` as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A sub-command taking just a key.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// The variable's key.
    pub key: String,
}

/// `vars set` options.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// The variable's key: any UTF-8, 1 to 512 bytes.
    pub key: String,

    /// The value, stored as text (parsed as JSON with --json).
    #[arg(required_unless_present_any = ["file", "reference"], conflicts_with_all = ["file", "reference"])]
    pub value: Option<String>,

    /// Read the value from FILE instead; `-` reads stdin.
    #[arg(short, long, value_name = "FILE", conflicts_with = "reference")]
    pub file: Option<PathBuf>,

    /// Store a `file` variable that refers to PATH where it is (nothing is copied;
    /// readers check the file has not changed), as `run --context PATH` does.
    #[arg(long = "ref", value_name = "PATH", conflicts_with_all = ["json", "var_type", "if_sha256"])]
    pub reference: Option<PathBuf>,

    /// Parse VALUE or FILE as JSON instead of storing it as text.
    #[arg(long)]
    pub json: bool,

    /// Scope of the variable (default: global).
    #[arg(long, value_name = "SCOPE")]
    pub scope: Option<String>,

    /// Type of the variable (default: inferred from the value; `stream` only when given).
    #[arg(long = "type", value_name = "TYPE", value_enum)]
    pub var_type: Option<TypeArg>,

    /// Write only if the variable's current sha256 is HEX, or with `none` only if it
    /// does not exist yet; otherwise exit 3.
    #[arg(long = "if-sha256", value_name = "HEX|none", value_parser = parse_expected)]
    pub if_sha256: Option<Expected>,

    /// Refuse a --file value larger than this many bytes (a device or an endless pipe
    /// never ends); the default and the variable are those of `run --max-context-bytes`.
    #[arg(long, value_name = "N", default_value_t = 1 << 30, env = "RLM_MAX_CONTEXT_BYTES")]
    pub max_bytes: u64,
}

/// A variable type as written on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TypeArg {
    /// A string.
    Text,
    /// A JSON array, object or scalar.
    Json,
    /// An object with `entries` or `memories`.
    Memory,
    /// An object with `result` or `output`.
    Result,
    /// Streaming data; never inferred.
    Stream,
}

impl From<TypeArg> for VariableType {
    fn from(t: TypeArg) -> Self {
        match t {
            TypeArg::Text => Self::Text,
            TypeArg::Json => Self::Json,
            TypeArg::Memory => Self::Memory,
            TypeArg::Result => Self::Result,
            TypeArg::Stream => Self::Stream,
        }
    }
}

/// Parses `--if-sha256`: `none`, or 64 hex digits.
fn parse_expected(s: &str) -> Result<Expected, InvalidValue> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(Expected::Absent);
    }
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(Expected::Sha256(s.to_ascii_lowercase()));
    }
    Err(InvalidValue::new(
        "expected a sha256 (64 hex digits) or `none`",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_sha256_accepts_none_and_hex_only() {
        assert_eq!(parse_expected("NONE"), Ok(Expected::Absent));
        let hex = "AB".repeat(32);
        assert_eq!(
            parse_expected(&hex),
            Ok(Expected::Sha256(hex.to_ascii_lowercase()))
        );
        assert!(parse_expected("abc").is_err());
        assert!(parse_expected(&"g".repeat(64)).is_err());
    }
}
