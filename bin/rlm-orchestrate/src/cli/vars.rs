//! The arguments of `vars` and its sub-commands (list, show, get, view, set, rm,
//! clear, gc, path), and the parsing of a variable type, of `--if-sha256` and of the
//! `--lines` / `--bytes` ranges of `vars get`.

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
    /// `file` variable the file it refers to (refused if it changed since); or only a
    /// range of its lines or bytes.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars get notes
  rlm-orchestrate vars get big-log | grep ERROR
  rlm-orchestrate vars get sub-result-7 > answer.json
  rlm-orchestrate vars get big-log --lines 101:200
  rlm-orchestrate vars get big-log --bytes 0:65536
  rlm-orchestrate vars get big-log --count

Values are streamed, so values of any size print in bounded memory.

Ranges (--lines, --bytes) are taken over the variable's text: a text variable's
string, any other value's pretty-printed JSON (without the newline `vars get` adds
after it), a `file` variable's file: exactly the contents of the file whose path
`vars view KEY` prints, so `--lines A:B` prints what
`sed -n A,Bp \"$(rlm-orchestrate vars view KEY)\"` prints. Output is raw (no JSON
quoting); reading stops at the end of the range.

  --lines A:B   lines A to B, 1-based, both included, each with its newline (a
                `\\r` before it is kept; a last line without one is printed
                without one). `A:` is from A to the end, `:B` from the first line
                to B, `A` alone is line A.
  --bytes A:B   bytes A to B-1, 0-based, B excluded (a Python slice). `A:` is from
                A to the end, `:B` the first B bytes. A bound inside a multi-byte
                UTF-8 character moves forward to the next character's start, so
                only whole characters print and `A:B` then `B:C` print `A:C`
                (in a referenced file that is not UTF-8, any byte that is not
                a UTF-8 continuation byte starts a character).
  --count       prints `{\"lines\":L,\"bytes\":B,\"chars\":C}` for the text (a last
                line without a newline counts; chars are Unicode scalar values).

A range that starts past the end of the text prints nothing and exits 0 (as sed
does), with a warning on stderr giving the text's length. A malformed range
(`x:y`, `-5:`, `5:3`, line 0, `A` alone for --bytes) exits 2 and prints nothing.
The value's sha256 is checked only when the read reaches the end of the value
(a whole `vars get` always does).")]
    Get(GetArgs),

    /// Print the absolute path of a plain-text file holding a variable's text, for
    /// tools that read files line by line (made once, then shared).
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars view big-log
  grep -n ERROR \"$(rlm-orchestrate vars view big-log)\"

For a text variable the file holds its string, for any other value its
pretty-printed JSON: a view at <data-dir>/views/<sha256>.txt, named by the
value's sha256, written once (streaming) and shared by every process, and never
changed afterwards; a changed variable gets a new view. For a `file` variable it
is the file it refers to (refused, exit 2, if it changed since). Treat a view as
read-only. `vars gc` removes the views no variable has any more.")]
    View(KeyArgs),

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

Files in variables/ that are not readable variables are left alone. Text views
(`vars view`) no variable has any more are removed too, as `vars gc` does (those
made in the last two minutes are kept).")]
    Clear,

    /// Remove the text views (`vars view`) that no variable has any more, and print
    /// how many were removed.
    #[command(after_help = "\
Examples:
  rlm-orchestrate vars gc

Views made in the last two minutes are kept (another process may have just made
one for a variable written meanwhile); a process reading a removed view keeps
reading it. Files in views/ that are not views are left alone.")]
    Gc,

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

/// `vars get` options.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The variable's key.
    pub key: String,

    /// Print only lines A to B of the text (1-based, inclusive; `A:`, `:B`, `A`).
    #[arg(long, value_name = "A:B", value_parser = parse_line_range, allow_hyphen_values = true, conflicts_with_all = ["bytes", "count"])]
    pub lines: Option<LineRange>,

    /// Print only bytes A to B-1 of the text (0-based, B excluded; `A:`, `:B`).
    #[arg(long, value_name = "A:B", value_parser = parse_byte_range, allow_hyphen_values = true, conflicts_with = "count")]
    pub bytes: Option<ByteRange>,

    /// Print the text's line, byte and character counts as one line of JSON.
    #[arg(long)]
    pub count: bool,
}

/// `--lines A:B`: 1-based, inclusive; `last` `None` is the end of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRange {
    /// The first line printed (at least 1).
    pub first: u64,
    /// The last line printed (at least `first`), or the end of the text.
    pub last: Option<u64>,
}

/// `--bytes A:B`: 0-based, half-open; `end` `None` is the end of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// The first byte printed.
    pub start: u64,
    /// One past the last byte printed (at least `start`), or the end of the text.
    pub end: Option<u64>,
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

    /// Scope of the variable (default: global; an agent storing its own result,
    /// `$RLM_RESULT_KEY`, gets its parent's scope `agent:$RLM_PARENT_ID`).
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

/// Splits `A:B` (either side may be empty) or, when `single` allows it, `A` into
/// its two bounds.
fn parse_bounds(
    s: &str,
    what: &str,
    single: bool,
) -> Result<(Option<u64>, Option<u64>), InvalidValue> {
    let number = |part: &str| -> Result<Option<u64>, InvalidValue> {
        let part = part.trim();
        if part.is_empty() {
            return Ok(None);
        }
        if part.starts_with('-') {
            return Err(InvalidValue::new(format!(
                "{what} {part:?} is negative; ranges count from the start of the text (get its length with `vars get KEY --count`)"
            )));
        }
        part.parse::<u64>().map(Some).map_err(|_| {
            InvalidValue::new(format!(
                "{what} {part:?} is not a whole number; write the range as A:B, A: or :B"
            ))
        })
    };
    match s.split_once(':') {
        Some((a, b)) => Ok((number(a)?, number(b)?)),
        None if single => {
            let line = number(s)?.ok_or_else(|| {
                InvalidValue::new(format!(
                    "the range is empty; write {what}s as A:B, A:, :B or A"
                ))
            })?;
            Ok((Some(line), Some(line)))
        }
        None => Err(InvalidValue::new(format!(
            "{s:?} has no colon; write a {what} range as A:B (B excluded), A: or :B"
        ))),
    }
}

/// Parses `--lines`: `A:B`, `A:`, `:B` or `A`, 1-based and inclusive.
fn parse_line_range(s: &str) -> Result<LineRange, InvalidValue> {
    let (first, last) = parse_bounds(s, "line", true)?;
    let first = first.unwrap_or(1);
    if first == 0 || last == Some(0) {
        return Err(InvalidValue::new(
            "lines are numbered from 1 (the first line is 1:1)",
        ));
    }
    if let Some(last) = last.filter(|last| *last < first) {
        return Err(InvalidValue::new(format!(
            "the range ends (line {last}) before it starts (line {first}); write A:B with A <= B"
        )));
    }
    Ok(LineRange { first, last })
}

/// Parses `--bytes`: `A:B`, `A:` or `:B`, 0-based with B excluded.
fn parse_byte_range(s: &str) -> Result<ByteRange, InvalidValue> {
    let (start, end) = parse_bounds(s, "byte", false)?;
    let start = start.unwrap_or(0);
    if let Some(end) = end.filter(|end| *end < start) {
        return Err(InvalidValue::new(format!(
            "the range ends (byte {end}) before it starts (byte {start}); write A:B with A <= B"
        )));
    }
    Ok(ByteRange { start, end })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_ranges_are_one_based_and_inclusive() {
        let range = |first, last| Ok(LineRange { first, last });
        assert_eq!(parse_line_range("3:7"), range(3, Some(7)));
        assert_eq!(parse_line_range("3:"), range(3, None));
        assert_eq!(parse_line_range(":7"), range(1, Some(7)));
        assert_eq!(parse_line_range("5"), range(5, Some(5)));
        assert_eq!(parse_line_range(":"), range(1, None));
        assert_eq!(parse_line_range("4:4"), range(4, Some(4)));
        for bad in ["0", "0:3", "1:0", "5:3", "x:y", "-5:", "", "1:2:3", "a"] {
            let error = parse_line_range(bad).unwrap_err().to_string();
            assert!(!error.is_empty(), "{bad}");
        }
        assert!(parse_line_range("5:3")
            .unwrap_err()
            .to_string()
            .contains("before it starts"));
        assert!(parse_line_range("0:3")
            .unwrap_err()
            .to_string()
            .contains("numbered from 1"));
    }

    #[test]
    fn byte_ranges_are_zero_based_and_half_open() {
        let range = |start, end| Ok(ByteRange { start, end });
        assert_eq!(parse_byte_range("0:10"), range(0, Some(10)));
        assert_eq!(parse_byte_range("10:"), range(10, None));
        assert_eq!(parse_byte_range(":10"), range(0, Some(10)));
        assert_eq!(parse_byte_range("7:7"), range(7, Some(7)));
        for bad in ["5", "5:3", "x:1", "-1:", "1:-1", "1:2:3"] {
            assert!(parse_byte_range(bad).is_err(), "{bad}");
        }
        assert!(parse_byte_range("5")
            .unwrap_err()
            .to_string()
            .contains("no colon"));
    }

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
