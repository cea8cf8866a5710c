//! Settings from `rlm.toml` in the working directory.
//!
//! Precedence is flags > `RLM_*` environment > `rlm.toml` > defaults. clap already
//! gives flags precedence over the environment; the file is folded in by turning each
//! of its settings into a flag placed *before* the user's own flags (so theirs win,
//! `args_override_self`), and skipping any setting whose environment variable is set.
//!
//! ```toml
//! model = "gpt-4o-mini"
//! base_url = "http://127.0.0.1:8080/v1"
//! max_iterations = 30
//! context = ["notes.md", "log.txt"]
//! no_stream = true
//! ```

use std::ffi::OsString;
use std::path::Path;

use anyhow::Context as _;
use clap::CommandFactory;

use crate::cli::Cli;
use crate::exit::bad_input;

/// The settings file looked for in the working directory.
pub const CONFIG_FILE: &str = "rlm.toml";

/// Sub-commands whose flags `rlm.toml` may set.
const CONFIGURABLE: [&str; 4] = ["run", "repl", "eval", "mcp"];

/// Returns `args` with the settings of `file` (if it exists) inserted after the
/// sub-command name.
pub fn apply(args: Vec<OsString>, file: &Path) -> anyhow::Result<Vec<OsString>> {
    let Some(position) = args
        .iter()
        .position(|a| CONFIGURABLE.iter().any(|c| a == c))
    else {
        return Ok(args);
    };
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(args),
        Err(e) => return Err(e).with_context(|| format!("failed to read {}", file.display())),
    };
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| bad_input(format!("{} is not valid TOML: {e}", file.display())))?;
    let subcommand = args[position].to_string_lossy().into_owned();
    let flags = flags_for(&subcommand, &table, file)?;
    let mut out = args;
    let tail = out.split_off(position + 1);
    out.extend(flags);
    out.extend(tail);
    Ok(out)
}

fn flags_for(subcommand: &str, table: &toml::Table, file: &Path) -> anyhow::Result<Vec<OsString>> {
    let command = Cli::command();
    let Some(sub) = command.find_subcommand(subcommand) else {
        return Ok(Vec::new());
    };
    let mut flags = Vec::new();
    for (key, value) in table {
        let long = key.replace('_', "-");
        let Some(arg) = sub
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()))
        else {
            return Err(bad_input(format!(
                "{}: unknown setting `{key}`; settings are the long flags of `rlm-orchestrate {subcommand}` (see --help), with _ or -",
                file.display()
            )));
        };
        if arg
            .get_env()
            .is_some_and(|env| std::env::var_os(env).is_some())
        {
            continue; // the environment wins over the file
        }
        let takes_value = arg.get_action().takes_values();
        let items: Vec<&toml::Value> = match value {
            toml::Value::Array(items) => items.iter().collect(),
            single => vec![single],
        };
        for item in items {
            match (item, takes_value) {
                (toml::Value::Boolean(true), false) => {
                    flags.push(OsString::from(format!("--{long}")))
                }
                (toml::Value::Boolean(false), false) => {}
                (toml::Value::String(s), true) => {
                    flags.push(OsString::from(format!("--{long}={s}")))
                }
                (toml::Value::Integer(n), true) => {
                    flags.push(OsString::from(format!("--{long}={n}")))
                }
                (toml::Value::Float(x), true) => {
                    flags.push(OsString::from(format!("--{long}={x}")))
                }
                (toml::Value::Boolean(b), true) => {
                    flags.push(OsString::from(format!("--{long}={b}")))
                }
                _ => {
                    return Err(bad_input(format!(
                        "{}: setting `{key}` has the wrong kind of value ({})",
                        file.display(),
                        if takes_value {
                            "expected a string or number"
                        } else {
                            "expected true or false"
                        }
                    )))
                }
            }
        }
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn file_settings_go_before_the_users_flags() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rlm.toml");
        std::fs::write(
            &file,
            "max_iterations = 7\nno_stream = true\ncontext = [\"a.txt\", \"b.txt\"]\n",
        )
        .unwrap();
        let out = apply(
            args(&["rlm", "run", "task", "--max-iterations", "3"]),
            &file,
        )
        .unwrap();
        assert_eq!(
            out,
            args(&[
                "rlm",
                "run",
                "--context=a.txt",
                "--context=b.txt",
                "--max-iterations=7",
                "--no-stream",
                "task",
                "--max-iterations",
                "3"
            ])
        );
    }

    #[test]
    fn unknown_settings_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rlm.toml");
        std::fs::write(&file, "modle = \"x\"\n").unwrap();
        let err = apply(args(&["rlm", "run", "t"]), &file).unwrap_err();
        assert!(err.to_string().contains("unknown setting `modle`"), "{err}");
    }

    #[test]
    fn no_file_or_other_subcommand_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("rlm.toml");
        assert_eq!(
            apply(args(&["rlm", "run", "t"]), &missing).unwrap(),
            args(&["rlm", "run", "t"])
        );
        assert_eq!(
            apply(args(&["rlm", "vars", "list"]), &missing).unwrap(),
            args(&["rlm", "vars", "list"])
        );
    }
}
