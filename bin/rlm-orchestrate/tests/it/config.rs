//! `config show` (each setting's value and source: flag, env, `rlm.toml`, default),
//! `completions`, and the `--help` texts of the commands they belong with, including a
//! walk over every sub-command checking that its help carries examples.

use serde_json::Value;

use crate::support::Sandbox;

/// `config show --json <flags>` in the sandbox, with `env` set; returns the parsed output.
fn show(sb: &Sandbox, env: &[(&str, &str)], flags: &[&str]) -> Value {
    let mut cmd = sb.bare();
    cmd.env_remove("RLM_MODEL").env_remove("RLM_MAX_DEPTH");
    for (name, value) in env {
        cmd.env(name, value);
    }
    let out = cmd
        .args(["config", "show", "--json"])
        .args(flags)
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

/// `(value, source)` of a setting.
fn setting(report: &Value, name: &str) -> (Value, String) {
    let found = report["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no setting {name} in {report}"));
    (
        found["value"].clone(),
        found["source"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn config_show_tells_where_each_setting_comes_from() {
    let sb = Sandbox::new();
    sb.file(
        "rlm.toml",
        "max_iterations = 7\nmodel = \"file-model\"\nmax_depth = 5\nexec_timeout = 9\n",
    );
    let report = show(
        &sb,
        &[("RLM_MODEL", "env-model"), ("RLM_MAX_DEPTH", "4")],
        &[
            "--max-depth",
            "3",
            "--context",
            "a.txt",
            "--context",
            "b.txt",
        ],
    );
    // A flag beats the environment, which beats the file, which beats the default.
    assert_eq!(setting(&report, "max_depth"), ("3".into(), "flag".into()));
    assert_eq!(
        setting(&report, "model"),
        ("env-model".into(), "env RLM_MODEL".into())
    );
    assert_eq!(
        setting(&report, "max_iterations"),
        ("7".into(), "rlm.toml".into())
    );
    assert_eq!(
        setting(&report, "exec_timeout"),
        ("9".into(), "rlm.toml".into())
    );
    assert_eq!(
        setting(&report, "max_output_chars"),
        ("20000".into(), "default".into())
    );
    assert_eq!(
        setting(&report, "context"),
        (serde_json::json!(["a.txt", "b.txt"]), "flag".into())
    );
    assert_eq!(setting(&report, "base_url").1, "unset");
    assert_eq!(report["config_file"]["found"], true);
}

#[test]
fn the_data_dir_is_a_setting_too() {
    let sb = Sandbox::new();
    let report = show(&sb, &[], &[]);
    assert_eq!(
        setting(&report, "data_dir"),
        ("./.rlm-data".into(), "default".into())
    );
    let out = sb
        .bare()
        .args(["--data-dir", "/tmp/elsewhere", "config", "show", "--json"])
        .assert()
        .success();
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        setting(&report, "data_dir"),
        ("/tmp/elsewhere".into(), "flag".into())
    );
    let report = show(&sb, &[("RLM_DATA_DIR", "/tmp/env-dir")], &[]);
    assert_eq!(
        setting(&report, "data_dir"),
        ("/tmp/env-dir".into(), "env RLM_DATA_DIR".into())
    );
}

#[test]
fn api_keys_are_reported_but_never_printed() {
    let sb = Sandbox::new();
    let secret = "sk-test-0123456789-do-not-print";
    for json in [true, false] {
        let mut cmd = sb.bare();
        cmd.env("OPENAI_API_KEY", secret)
            .env_remove("ANTHROPIC_API_KEY")
            .args(["config", "show"]);
        if json {
            cmd.arg("--json");
        }
        cmd.args(["--sub-provider", "anthropic"]);
        let out = cmd.assert().success();
        let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        assert!(!stdout.contains(secret), "the key leaked:\n{stdout}");
        if json {
            let report: Value = serde_json::from_str(&stdout).unwrap();
            assert_eq!(
                report["api_keys"],
                serde_json::json!([
                    {"for": "model", "variable": "OPENAI_API_KEY", "set": true},
                    {"for": "sub_model", "variable": "ANTHROPIC_API_KEY", "set": false},
                ])
            );
        } else {
            assert!(stdout.contains("OPENAI_API_KEY  set"), "{stdout}");
            assert!(stdout.contains("ANTHROPIC_API_KEY  not set"), "{stdout}");
        }
    }
}

#[test]
fn config_show_rejects_what_run_would_reject() {
    let sb = Sandbox::new();
    sb.bare()
        .args(["config", "show", "--max-iterations", "many"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--max-iterations"))
        .stderr(predicates::str::contains("hint:"));
    sb.file("rlm.toml", "modle = \"x\"\n");
    sb.bare()
        .args(["config", "show"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("unknown setting `modle`"));
}

#[test]
fn completions_are_generated_for_every_shell() {
    let sb = Sandbox::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = sb.bare().args(["completions", shell]).assert().success();
        let script = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        assert!(script.contains("rlm-orchestrate"), "{shell}");
        assert!(
            script.contains("max-iterations"),
            "{shell}: run flags missing"
        );
    }
    sb.bare().args(["completions", "tcsh"]).assert().code(2);
}

fn help(args: &[&str]) -> String {
    let sb = Sandbox::new();
    let out = sb.bare().args(args).arg("--help").assert().success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

#[test]
fn run_help() {
    insta::assert_snapshot!(help(&["run"]));
}

#[test]
fn config_help() {
    insta::assert_snapshot!(help(&["config"]));
}

#[test]
fn config_show_help() {
    insta::assert_snapshot!(help(&["config", "show"]));
}

/// The sub-command names listed under `Commands:` in a help text (`help` excluded).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| l.as_bytes().get(2).is_some_and(|b| *b != b' '))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|name| name != "help")
        .collect()
}

#[test]
fn every_help_of_every_subcommand_has_examples() {
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    let mut checked = 0;
    while let Some(path) = queue.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        assert!(
            text.contains("Examples:\n  rlm-orchestrate") || text.contains("Examples:\n  RLM_"),
            "`rlm-orchestrate {} --help` has no examples:\n{text}",
            args.join(" ")
        );
        checked += 1;
        for name in subcommands(&text) {
            let mut child = path.clone();
            child.push(name);
            queue.push(child);
        }
    }
    assert!(checked >= 12, "only {checked} help texts found");
}

/// `config show --agent NAME` with its output saved as a file.
fn saved_preset(sb: &Sandbox, name: &str) -> (String, std::path::PathBuf) {
    let out = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .args(["config", "show", "--agent", name])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let file = sb.file(&format!("saved-{name}.toml"), &text);
    (text, file)
}

#[test]
fn every_preset_printed_by_config_show_reads_back_unchanged() {
    let sb = Sandbox::new();
    for name in ["claude", "codex", "llm"] {
        let (text, file) = saved_preset(&sb, name);
        let built_in = show(&sb, &[], &["--agent", name]);
        let read_back = show(&sb, &[], &["--agent", file.to_str().unwrap()]);
        assert_eq!(
            read_back["agent_preset"], built_in["agent_preset"],
            "{name}:\n{text}"
        );
        // The settings are there, as comments, and the preset keeps its own comments.
        assert!(
            text.contains("# ") && text.contains("max_iterations"),
            "{text}"
        );
        assert!(
            text.contains("\n# Print it with `rlm-orchestrate config show --agent"),
            "{text}"
        );
    }
}

#[test]
fn an_agent_preset_is_printed_as_toml_that_runs_again_as_a_file() {
    let sb = Sandbox::new();
    let (text, _) = saved_preset(&sb, "codex");
    assert!(text.contains("OPENAI_API_KEY (not set)"), "{text}");
    // The printed preset, changed, is a preset file.
    let changed = text.replace("name = \"codex\"", "name = \"my-codex\"");
    let file = sb.file("my-codex.toml", changed);
    let report = show(&sb, &[], &["--agent", file.to_str().unwrap()]);
    assert_eq!(report["agent_preset"]["name"], "my-codex");
    assert!(report["agent_preset"]["confined_command"]
        .as_str()
        .unwrap()
        .contains("--dangerously-bypass-approvals-and-sandbox"));
    // A wrong name or a broken file is a usage error naming the fix.
    sb.bare()
        .args(["config", "show", "--agent", "claud"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "the built-in ones are claude, codex, llm",
        ));
    let broken = sb.file("broken.toml", "name = \"x\"\ncommand = \"a '\"\n");
    sb.bare()
        .args(["config", "show", "--agent", broken.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("agent preset `x`"));
    // --agent and --agent-cmd together are refused.
    sb.bare()
        .args([
            "config",
            "show",
            "--agent",
            "claude",
            "--agent-cmd",
            "x {prompt}",
        ])
        .assert()
        .code(2);
}
