//! `rlm-orchestrate config show`: every `run` setting, its effective value and where
//! it came from (a flag, an `RLM_*` variable, `rlm.toml`, or the default).
//!
//! Settings reach `run` through three layers (flags > environment > `rlm.toml` >
//! defaults, see [`crate::config_file`]). Rather than re-implement that precedence,
//! this builds the very argument list `run` would get — the flags given after
//! `config show`, then `rlm.toml` folded in by [`crate::config_file::apply`] — parses
//! it with the real grammar and asks clap where each value came from. A value that
//! clap saw on the command line is a flag when the user typed it, else it came from
//! the file. API keys are never printed: only whether their variable is set.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::Path;

use anyhow::Context as _;
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use serde_json::{json, Value};

use rlm_orchestrator::corrections::{Corrections, Rule};
use rlm_orchestrator::grammar::REPL_REPLY_GBNF;
use rlm_orchestrator::provider::constrain::{documented, resolve};
use rlm_orchestrator::provider::discovery::{discover, resolve_window};
use rlm_orchestrator::provider::{ConstrainMode, Constraint, ContextWindow, Support};

use crate::cli::{Cli, ConfigShowArgs, GlobalArgs, RunArgs};
use crate::config_file::{self, CONFIG_FILE};
use crate::exit::{annotate, ExitStatus};

/// Arguments of `run` that are not settings.
const NOT_SETTINGS: [&str; 5] = ["task", "help", "version", "verbose", "quiet"];

/// One setting as reported.
#[derive(Debug, Clone, PartialEq)]
struct Setting {
    /// `model`, `max_iterations`, … (the `rlm.toml` spelling).
    name: String,
    /// The effective value: a string, an array for repeatable flags, or null.
    value: Value,
    /// `flag`, `env RLM_X`, `rlm.toml`, `default` or `unset`.
    source: String,
}

/// Runs `config show`.
pub fn show(global: &GlobalArgs, args: ConfigShowArgs) -> anyhow::Result<()> {
    let file = Path::new(CONFIG_FILE);
    let user_argv = run_argv(global, &args.run_args);
    let effective_argv = config_file::apply(user_argv.clone(), file)?;
    let typed = run_matches(user_argv)?;
    let effective = run_matches(effective_argv)?;
    let settings = settings(&typed, &effective);
    let run_args = RunArgs::from_arg_matches(&effective)
        .map_err(|e| annotate(e.into(), Some(ExitStatus::BadInput), None))?;
    let keys = keys(&run_args);
    let windows = windows(&run_args)?;
    let constraints = constraints(&run_args)?;
    let file_found = file.is_file();
    let preset = run_args.options.agent.as_ref().map(|arg| &arg.0);
    let corrections = &run_args.options.corrections.0;

    let mut out = io::stdout().lock();
    let written = if args.json {
        let object = json!({
            "settings": settings
                .iter()
                .map(|s| json!({"name": s.name, "value": s.value, "source": s.source}))
                .collect::<Vec<_>>(),
            "api_keys": keys
                .iter()
                .map(|k| json!({"for": k.role, "variable": k.variable, "set": k.set}))
                .collect::<Vec<_>>(),
            "config_file": {"path": CONFIG_FILE, "found": file_found},
            "context_windows": windows
                .iter()
                .map(|(role, window)| json!({"for": role, "tokens": window.tokens, "source": window.source, "from": window.source.to_string()}))
                .collect::<Vec<_>>(),
            "agent_preset": preset,
            "corrections": Rule::ALL
                .iter()
                .map(|rule| json!({"rule": rule.name(), "on": corrections.is_on(*rule), "handles": rule.handles(), "hooks": rule.hooks().iter().map(|h| h.as_str()).collect::<Vec<_>>()}))
                .collect::<Vec<_>>(),
            "constrain": constraints
                .iter()
                .map(|c| json!({"for": c.role, "mode": c.mode.as_str(), "server_supports": c.support, "sends": sent_fields(&c.sends)}))
                .collect::<Vec<_>>(),
            "reply_grammar": REPL_REPLY_GBNF,
        });
        writeln!(out, "{object:#}")
    } else {
        let mut text = table(&settings, &keys, file_found);
        text.push_str("\nContext windows (tokens per request, prompt and answer):\n");
        for (role, window) in &windows {
            text.push_str(&format!("  {role}: {window}\n"));
        }
        text.push_str(&corrections_section(corrections));
        text.push_str(&constrain_section(&constraints));
        if let Some(preset) = preset {
            text = preset_file(&text, preset);
        }
        out.write_all(text.as_bytes())
    };
    match written.and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(e).context("failed to write the settings")
        }
        _ => Ok(()),
    }
}

/// `rlm-orchestrate [--data-dir D] run <flags…>`: what `run` would be given. A data
/// directory typed before `config` is carried over so its source stays `flag`.
fn run_argv(global: &GlobalArgs, run_flags: &[OsString]) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec!["rlm-orchestrate".into()];
    if data_dir_typed() {
        argv.push("--data-dir".into());
        argv.push(global.data_dir.clone().into_os_string());
    }
    argv.push("run".into());
    argv.extend(run_flags.iter().cloned());
    argv
}

/// Whether `--data-dir` was on the real command line (before or after `config`).
fn data_dir_typed() -> bool {
    Cli::command()
        .ignore_errors(true)
        .try_get_matches_from(std::env::args_os())
        .ok()
        .is_some_and(|m| m.value_source("data_dir") == Some(ValueSource::CommandLine))
}

/// Parses `argv` and returns the matches of its `run` sub-command.
fn run_matches(argv: Vec<OsString>) -> anyhow::Result<ArgMatches> {
    let matches = Cli::command().try_get_matches_from(argv).map_err(|e| {
        if matches!(
            e.kind(),
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
        ) {
            e.exit(); // `config show --model x --help`: the help of `run`
        }
        // clap's own text, without its `error: ` prefix and its `--help` footer.
        let text = e.render().to_string();
        let message = text
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ")
            .to_owned();
        annotate(
            anyhow::Error::msg(message),
            Some(ExitStatus::BadInput),
            Some(
                "the flags after `config show` are read as `run` flags; check them with `rlm-orchestrate run --help`, and the RLM_* variables and rlm.toml they may come from".into(),
            ),
        )
    })?;
    match matches.subcommand() {
        Some(("run", run)) => Ok(run.clone()),
        _ => Err(anyhow::anyhow!("internal error: `run` was not parsed")),
    }
}

/// Every setting of `run`, in the order of `run --help`.
fn settings(typed: &ArgMatches, effective: &ArgMatches) -> Vec<Setting> {
    let command = Cli::command();
    let Some(run) = command.find_subcommand("run") else {
        return Vec::new();
    };
    let mut args: Vec<&clap::Arg> = run
        .get_arguments()
        .filter(|a| !a.is_positional() && !NOT_SETTINGS.contains(&a.get_id().as_str()))
        .collect();
    // `--data-dir` is global: declared on the top level, propagated to `run`.
    args.extend(command.get_arguments().filter(|a| a.get_id() == "data_dir"));
    args.into_iter()
        .map(|arg| {
            let id = arg.get_id().as_str();
            let source = match effective.value_source(id) {
                Some(ValueSource::CommandLine)
                    if typed.value_source(id) == Some(ValueSource::CommandLine) =>
                {
                    "flag".to_owned()
                }
                Some(ValueSource::CommandLine) => CONFIG_FILE.to_owned(),
                Some(ValueSource::EnvVariable) => match arg.get_env() {
                    Some(name) => format!("env {}", name.to_string_lossy()),
                    None => "env".to_owned(),
                },
                Some(ValueSource::DefaultValue) => "default".to_owned(),
                _ => "unset".to_owned(),
            };
            let raw: Vec<String> = effective
                .get_raw(id)
                .map(|values| values.map(|v| v.to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            let repeatable = matches!(arg.get_action(), clap::ArgAction::Append);
            let value = match (repeatable, raw.as_slice()) {
                (true, _) => json!(raw),
                (false, []) => Value::Null,
                (false, [one]) => json!(one),
                (false, many) => json!(many.last()),
            };
            Setting {
                name: id.to_owned(),
                value,
                source,
            }
        })
        .collect()
}

/// The root and sub-model's context windows, as a run would find them: configured,
/// else asked of the server (a few seconds at most), else known, else the default.
fn windows(args: &RunArgs) -> anyhow::Result<Vec<(&'static str, ContextWindow)>> {
    let root = crate::settings::root_provider_config(args);
    let sub = crate::settings::sub_provider_config(args, &root);
    let runtime = crate::runtime::build()?;
    Ok(runtime.block_on(async {
        vec![
            ("model", resolve_window(&root).await),
            ("sub_model", resolve_window(&sub).await),
        ]
    }))
}

/// What `--constrain` resolves to for one model.
struct ConstraintFound {
    role: &'static str,
    mode: ConstrainMode,
    /// What the server said (or its API documents) it takes; `None`: nothing.
    support: Option<Support>,
    sends: Constraint,
}

/// What `--constrain` and `--sub-constrain` resolve to, as a run would resolve them:
/// a hosted API by its documentation, any other server by asking it (one round).
fn constraints(args: &RunArgs) -> anyhow::Result<Vec<ConstraintFound>> {
    let root = crate::settings::root_provider_config(args);
    let sub = crate::settings::sub_provider_config(args, &root);
    let runtime = crate::runtime::build()?;
    Ok(runtime.block_on(async {
        let mut found = Vec::new();
        for (role, config) in [("model", &root), ("sub_model", &sub)] {
            let support = match documented(config) {
                Some(support) => Some(support),
                None if config.constrain == ConstrainMode::Off => None,
                None => discover(config).await.and_then(|facts| facts.constrain),
            };
            found.push(ConstraintFound {
                role,
                mode: config.constrain,
                sends: resolve(config.constrain, support.as_ref()),
                support,
            });
        }
        found
    }))
}

/// The fields a constraint puts in a request, as `config show --json` lists them.
fn sent_fields(sends: &Constraint) -> Value {
    json!({
        "grammar": sends.grammar.map(|field| field.name()),
        "json_schema": sends.json_schema,
        // A JSON reply's schema goes as a grammar made from it (a server that takes
        // grammars and no schema).
        "json_as_grammar": sends.grammar.is_some() && sends.json_schema.is_none(),
        "strict_tools": sends.strict_tools,
        // Native tools go with the schema of one call (a server that returns calls as
        // text).
        "tool_calls_schema": sends.sends_call_schema(),
    })
}

/// The text section on constrained replies, with the grammar of a code reply.
fn constrain_section(found: &[ConstraintFound]) -> String {
    let mut text = String::from("\nConstrained replies (--constrain, docs/constrain.md):\n");
    for c in found {
        let said = c.support.map_or_else(
            || "the server says nothing".to_owned(),
            |s| format!("the server takes {s}"),
        );
        let mut sends = Vec::new();
        if let Some(field) = c.sends.grammar {
            sends.push(format!("code replies' grammar as `{}`", field.name()));
        }
        match (c.sends.json_schema, c.sends.grammar) {
            (Some(form), _) => {
                sends.push(format!("JSON replies' schema as response_format {form:?}"));
            }
            (None, Some(field)) => sends.push(format!(
                "JSON replies' schema as a grammar made from it (`{}`)",
                field.name()
            )),
            (None, None) => {}
        }
        if c.sends.strict_tools {
            sends.push("strict tools".to_owned());
        }
        if c.sends.sends_call_schema() {
            sends.push("native tools with the schema of one call".to_owned());
        }
        let sends = if sends.is_empty() {
            "nothing".to_owned()
        } else {
            sends.join(", ")
        };
        text.push_str(&format!(
            "  {}: {} ({said}): sends {sends}\n",
            c.role, c.mode
        ));
    }
    text.push_str("\nThe grammar a code reply is held to where it is sent (GBNF):\n");
    for line in REPL_REPLY_GBNF.lines() {
        text.push_str(&format!("  {line}\n"));
    }
    text
}

/// Whether the variable holding a model's key is set.
struct KeyStatus {
    role: &'static str,
    variable: String,
    set: bool,
}

/// The key variables the root and sub models would read (never their values).
fn keys(args: &RunArgs) -> Vec<KeyStatus> {
    let root = crate::settings::root_provider_config(args);
    let sub = crate::settings::sub_provider_config(args, &root);
    [("model", &root), ("sub_model", &sub)]
        .into_iter()
        .filter_map(|(role, config)| {
            let variable = config.key_env()?.to_owned();
            let set = rlm_process::secret_var(&variable).is_some_and(|v| !v.is_empty());
            Some(KeyStatus {
                role,
                variable,
                set,
            })
        })
        .collect()
}

fn table(settings: &[Setting], keys: &[KeyStatus], file_found: bool) -> String {
    let shown: Vec<(String, String)> = settings
        .iter()
        .map(|s| {
            let value = match &s.value {
                Value::Null => "-".to_owned(),
                Value::String(v) => v.clone(),
                Value::Array(items) if items.is_empty() => "-".to_owned(),
                Value::Array(items) => items
                    .iter()
                    .map(|i| i.as_str().unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(", "),
                other => other.to_string(),
            };
            (s.name.clone(), value)
        })
        .collect();
    let name_width = shown.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let value_width = shown
        .iter()
        .map(|(_, v)| v.chars().count())
        .max()
        .unwrap_or(0)
        .min(40);
    let mut text = format!(
        "{:name_width$}  {:value_width$}  SOURCE\n",
        "SETTING", "VALUE"
    );
    for ((name, value), setting) in shown.iter().zip(settings) {
        text.push_str(&format!(
            "{name:name_width$}  {value:value_width$}  {}\n",
            setting.source
        ));
    }
    text.push_str("\nAPI keys (values are never shown):\n");
    if keys.is_empty() {
        text.push_str("  none needed (--provider cli)\n");
    }
    for key in keys {
        text.push_str(&format!(
            "  {:9}  {}  {}\n",
            key.role,
            key.variable,
            if key.set { "set" } else { "not set" }
        ));
    }
    text.push_str(&format!(
        "\nSettings file: {CONFIG_FILE} in the working directory ({}).\n\
         Precedence: flag > environment (RLM_*) > {CONFIG_FILE} > default.\n",
        if file_found { "found" } else { "not found" }
    ));
    text
}

/// The correction rules, in the order the loop asks them, and which are on.
fn corrections_section(corrections: &Corrections) -> String {
    let mut text = format!(
        "\nCorrections (--corrections {}; docs/loop.md):\n",
        corrections.to_list()
    );
    let width = Rule::ALL.iter().map(|r| r.name().len()).max().unwrap_or(0);
    for rule in Rule::ALL {
        let hooks: Vec<&str> = rule.hooks().iter().map(|h| h.as_str()).collect();
        text.push_str(&format!(
            "  {:width$}  {:3}  {} ({})\n",
            rule.name(),
            if corrections.is_on(rule) { "on" } else { "off" },
            rule.handles(),
            hooks.join(", ")
        ));
    }
    text
}

/// With an agent preset in effect, the whole report is that preset's file, which
/// `--agent FILE` reads back as it is: the settings as comments, then the preset.
fn preset_file(settings: &str, preset: &rlm_orchestrator::agents::AgentPreset) -> String {
    let passed: Vec<String> = preset
        .pass_env
        .iter()
        .map(|name| {
            let set = rlm_process::secret_var(name).is_some_and(|v| !v.is_empty());
            format!("{name} ({})", if set { "set" } else { "not set" })
        })
        .collect();
    let mut text = String::new();
    for line in settings.lines() {
        text.push_str(if line.is_empty() { "#" } else { "# " });
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(&format!(
        "#\n# Agent preset `{}`: this output is its file; save it, change it, and use it with\n\
         # --agent FILE. Passed to the agent when set: {}.\n\n{}",
        preset.name,
        if passed.is_empty() {
            "nothing".to_owned()
        } else {
            passed.join(", ")
        },
        preset.to_toml()
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn find<'a>(settings: &'a [Setting], name: &str) -> &'a Setting {
        settings.iter().find(|s| s.name == name).unwrap()
    }

    #[test]
    fn flags_file_and_defaults_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rlm.toml");
        std::fs::write(&file, "max_iterations = 7\ncontext = [\"a.txt\"]\n").unwrap();
        let typed = argv(&["rlm-orchestrate", "run", "--max-depth", "3"]);
        let effective = config_file::apply(typed.clone(), &file).unwrap();
        let settings = settings(
            &run_matches(typed).unwrap(),
            &run_matches(effective).unwrap(),
        );
        assert_eq!(find(&settings, "max_depth").source, "flag");
        assert_eq!(find(&settings, "max_depth").value, json!("3"));
        assert_eq!(find(&settings, "max_iterations").source, "rlm.toml");
        assert_eq!(find(&settings, "context").value, json!(["a.txt"]));
        assert_eq!(find(&settings, "exec_timeout").source, "default");
        assert_eq!(find(&settings, "exec_timeout").value, json!("120"));
        assert_eq!(find(&settings, "data_dir").value, json!("./.rlm-data"));
        assert!(settings
            .iter()
            .all(|s| s.name != "task" && s.name != "help"));
    }

    #[test]
    fn bad_flags_are_usage_errors_with_a_hint() {
        let err = run_matches(argv(&["rlm-orchestrate", "run", "--max-depth", "x"])).unwrap_err();
        assert_eq!(crate::exit::status_of(&err), ExitStatus::BadInput);
        assert!(err.to_string().contains("--max-depth"), "{err}");
    }
}
