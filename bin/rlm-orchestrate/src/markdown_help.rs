//! `rlm-orchestrate __markdown-help`: the command-line reference (`docs/cli.md`),
//! written from the clap definitions themselves, so it cannot drift from `--help`.
//!
//! Not a clap sub-command (it would show in `--help`, the completions and the reference
//! itself): `main` looks for it before parsing, as for the launcher and the watchdog. A
//! black-box test compares its output with `docs/cli.md` and says how to regenerate it.
//!
//! Every visible sub-command gets a section: what it does, its usage line, its
//! arguments and flags grouped under their help headings (each with its full help, its
//! environment variable, default and accepted values), and its examples (the
//! `after_help` text). Flags that `-h` leaves out are here too: this is the whole list.

use std::fmt::Write as _;
use std::io::Write as _;

use clap::{Arg, ArgAction, Command};

/// The first argument that makes the binary print the reference instead of running.
pub const MARKDOWN_HELP_SUBCOMMAND: &str = "__markdown-help";

/// The command that regenerates `docs/cli.md` (also named by the test that checks it).
pub const REGENERATE: &str = "cargo run -q -p rlm-orchestrate -- __markdown-help > docs/cli.md";

/// Prints the reference on stdout; exit code 1 when stdout cannot be written.
pub fn main() -> std::process::ExitCode {
    use clap::CommandFactory;
    let text = render(crate::cli::Cli::command());
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // Nothing else of the binary runs here: no logging is set up.
            let _ = writeln!(
                std::io::stderr(),
                "error: could not write the command-line reference to stdout: {error}"
            );
            std::process::ExitCode::FAILURE
        }
    }
}

/// The whole reference for `cmd` (the top-level command), as Markdown.
pub fn render(mut cmd: Command) -> String {
    // Builds every sub-command: bin names ("rlm-orchestrate vars set"), global flags
    // propagated, `--help` added.
    cmd.build();
    let mut sections = Vec::new();
    collect(&cmd, &mut sections);
    let mut out = String::new();
    let name = cmd.get_name().to_owned();
    let _ = writeln!(out, "# `{name}` command-line reference\n");
    let _ = writeln!(
        out,
        "Generated from the binary's own definitions (what `--help` prints); do not edit by \
         hand. After a change to a flag, regenerate it:\n\n```sh\n{REGENERATE}\n```\n"
    );
    let _ = writeln!(
        out,
        "Flags also come from the `RLM_*` variable named beside them and from `rlm.toml` \
         (a key per flag, dashes as underscores); flags win over the environment, which \
         wins over the file. `-h` prints the common flags of a sub-command, `--help` all \
         of them.\n"
    );
    for section in &sections {
        let path = section.get_bin_name().unwrap_or(section.get_name());
        let _ = writeln!(out, "- [`{path}`](#{})", anchor(path));
    }
    out.push('\n');
    for section in sections {
        write_command(&mut out, section);
    }
    out
}

/// `cmd` and its visible sub-commands, depth first (the generated `help` left out).
fn collect<'a>(cmd: &'a Command, into: &mut Vec<&'a Command>) {
    into.push(cmd);
    for sub in cmd.get_subcommands() {
        if !sub.is_hide_set() && sub.get_name() != "help" {
            collect(sub, into);
        }
    }
}

/// The anchor GitHub gives a heading made of `text` in backticks.
fn anchor(text: &str) -> String {
    text.chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// One command's section.
fn write_command(out: &mut String, cmd: &Command) {
    let path = cmd.get_bin_name().unwrap_or(cmd.get_name());
    let top = !path.contains(' ');
    let _ = writeln!(out, "## `{path}`\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", escape(&about.to_string()));
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    let _ = writeln!(out, "Usage: `{usage}`\n");
    let subs: Vec<&Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    if !subs.is_empty() {
        let _ = writeln!(out, "**Sub-commands**\n");
        for sub in subs {
            let sub_path = sub.get_bin_name().unwrap_or(sub.get_name());
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let _ = writeln!(
                out,
                "- [`{}`](#{}): {}",
                sub.get_name(),
                anchor(sub_path),
                escape(&about)
            );
        }
        out.push('\n');
    }
    // Headings in the order their first flag comes, as `--help` prints them.
    let mut groups: Vec<(String, Vec<&Arg>)> = Vec::new();
    let mut shared_run_flags = false;
    for arg in cmd.get_arguments() {
        if arg.is_hide_set() || (!top && arg.is_global_set()) {
            continue;
        }
        if shares_run_flags(cmd, arg) {
            shared_run_flags = true;
            continue;
        }
        if !top && matches!(arg.get_action(), ArgAction::Help | ArgAction::Version) {
            continue;
        }
        let heading = match arg.get_help_heading() {
            Some(heading) => heading.to_owned(),
            None if arg.is_positional() => "Arguments".to_owned(),
            None => "Options".to_owned(),
        };
        match groups.iter_mut().find(|(h, _)| *h == heading) {
            Some((_, args)) => args.push(arg),
            None => groups.push((heading, vec![arg])),
        }
    }
    // Arguments first, then the flags, as in `--help`.
    groups.sort_by_key(|(heading, _)| heading != "Arguments");
    for (heading, args) in groups {
        let _ = writeln!(out, "**{heading}**\n");
        for arg in args {
            write_arg(out, arg);
        }
        out.push('\n');
    }
    if shared_run_flags {
        let run = format!("{} run", root_name(path));
        let _ = writeln!(
            out,
            "**Run flags**: every flag of [`{run}`](#{}) ({}).\n",
            anchor(&run),
            crate::cli::run_options::HEADINGS.join(", ")
        );
    }
    if !top {
        let _ = writeln!(
            out,
            "Also the global flags of [`{}`](#{}).\n",
            root_name(path),
            anchor(root_name(path))
        );
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        let _ = writeln!(out, "```text\n{}\n```\n", after.to_string().trim_end());
    }
}

/// Whether `arg` of `cmd` is one of the run flags `run` shares with `repl`, `eval`,
/// `mcp` and `config show` (listed once, under `run`).
fn shares_run_flags(cmd: &Command, arg: &Arg) -> bool {
    cmd.get_name() != "run"
        && arg
            .get_help_heading()
            .is_some_and(|h| crate::cli::run_options::HEADINGS.contains(&h))
}

/// The top-level command's name in a sub-command's path.
fn root_name(path: &str) -> &str {
    path.split(' ').next().unwrap_or(path)
}

/// One argument: its spelling, its help, then environment variable, default and values.
fn write_arg(out: &mut String, arg: &Arg) {
    let takes_value = arg.get_action().takes_values();
    let value_names: Vec<String> = arg
        .get_value_names()
        .map(|names| names.iter().map(|n| n.to_string()).collect())
        .unwrap_or_else(|| vec![arg.get_id().as_str().to_owned()]);
    let mut spelling = String::new();
    if arg.is_positional() {
        let (open, close) = if arg.is_required_set() {
            ('<', '>')
        } else {
            ('[', ']')
        };
        spelling = value_names
            .iter()
            .map(|n| format!("{open}{n}{close}"))
            .collect::<Vec<_>>()
            .join(" ");
    } else {
        let mut names = Vec::new();
        if let Some(short) = arg.get_short() {
            names.push(format!("-{short}"));
        }
        if let Some(long) = arg.get_long() {
            names.push(format!("--{long}"));
        }
        spelling.push_str(&names.join(", "));
        if takes_value {
            for name in &value_names {
                let _ = write!(spelling, " <{name}>");
            }
        }
    }
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    // Continuation lines indented, so each paragraph stays in its list item.
    let help: Vec<String> = escape(help.trim())
        .lines()
        .enumerate()
        .map(|(i, line)| {
            if i == 0 || line.is_empty() {
                line.to_owned()
            } else {
                format!("  {line}")
            }
        })
        .collect();
    let help = help.join("\n");
    let _ = write!(out, "- `{spelling}`: {help}");
    let mut facts = Vec::new();
    if let Some(env) = arg.get_env() {
        facts.push(format!("env `{}`", env.to_string_lossy()));
    }
    let flag_like = matches!(
        arg.get_action(),
        ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count | ArgAction::Help
    ) || matches!(arg.get_action(), ArgAction::Version);
    if !flag_like && !arg.is_hide_default_value_set() {
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .collect();
        if !defaults.is_empty() {
            facts.push(format!("default `{}`", defaults.join(",")));
        }
    }
    if matches!(arg.get_action(), ArgAction::Append | ArgAction::Count) {
        facts.push("repeatable".to_owned());
    }
    let values: Vec<_> = arg
        .get_possible_values()
        .into_iter()
        .filter(|v| !v.is_hide_set())
        .collect();
    let explained = values.iter().any(|v| v.get_help().is_some());
    if takes_value && !values.is_empty() && !explained {
        let names: Vec<String> = values
            .iter()
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        facts.push(format!("values: {}", names.join(", ")));
    }
    if !facts.is_empty() {
        let _ = write!(out, " _[{}]_", facts.join("; "));
    }
    out.push('\n');
    // Values with help of their own: one line each, beneath the flag.
    if takes_value && explained {
        for value in values {
            let help = value.get_help().map(|h| h.to_string()).unwrap_or_default();
            let _ = writeln!(out, "  - `{}`: {}", value.get_name(), escape(&help));
        }
    }
}

/// `text` with `<` outside code spans written as `&lt;`, so Markdown does not take
/// `<data-dir>` for a tag.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.push(c);
            }
            '<' if !in_code => out.push_str("&lt;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference() -> String {
        use clap::CommandFactory;
        render(crate::cli::Cli::command())
    }

    #[test]
    fn every_visible_subcommand_has_a_section() {
        use clap::CommandFactory;
        let text = reference();
        let mut cmd = crate::cli::Cli::command();
        cmd.build();
        let mut all = Vec::new();
        collect(&cmd, &mut all);
        assert!(all.len() > 10, "{} commands", all.len());
        for sub in all {
            let path = sub.get_bin_name().unwrap_or(sub.get_name());
            assert!(text.contains(&format!("## `{path}`\n")), "{path}");
        }
        assert!(!text.contains("## `rlm-orchestrate help`"));
    }

    #[test]
    fn a_flag_shows_its_help_env_default_and_values() {
        let text = reference();
        let line = text
            .lines()
            .find(|l| l.starts_with("- `--provider <PROVIDER>`"))
            .unwrap_or_default();
        assert!(line.contains("API of the root model"), "{line}");
        assert!(line.contains("env `RLM_PROVIDER`"), "{line}");
        assert!(line.contains("default `openai`"), "{line}");
        assert!(text.contains("\n  - `anthropic`: "), "{text}");
        assert!(
            text.contains("\n  - `python`: A persistent python3 process"),
            "{text}"
        );
        // Values without help of their own are listed inline.
        let small = Command::new("t").arg(
            Arg::new("x")
                .long("x")
                .env("T_X")
                .value_parser(["a", "b"])
                .default_value("a"),
        );
        let line = render(small)
            .lines()
            .find(|l| l.starts_with("- `--x <x>`"))
            .map(str::to_owned)
            .unwrap_or_default();
        assert!(
            line.ends_with("_[env `T_X`; default `a`; values: `a`, `b`]_"),
            "{line}"
        );
    }

    #[test]
    fn hidden_flags_stay_out_and_boolean_flags_have_no_default() {
        let text = reference();
        assert!(!text.contains("--child-spec"));
        let json = text
            .lines()
            .find(|l| l.starts_with("- `--json`"))
            .unwrap_or_default();
        assert!(!json.contains("default"), "{json}");
    }

    #[test]
    fn examples_are_kept_and_angle_brackets_escaped() {
        let text = reference();
        assert!(text.contains("```text\nExamples:\n  rlm-orchestrate run"));
        // The run flags are listed once, under `run`.
        assert_eq!(text.matches("- `--max-llm-calls <N>`").count(), 1);
        assert!(text.contains("**Run flags**: every flag of [`rlm-orchestrate run`]"));
        assert_eq!(escape("a <b> `<c>`"), "a &lt;b> `<c>`");
        assert_eq!(
            anchor("rlm-orchestrate vars set"),
            "rlm-orchestrate-vars-set"
        );
    }
}
