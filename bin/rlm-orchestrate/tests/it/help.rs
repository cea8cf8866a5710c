//! `--help` texts: snapshots, so a change to the interface shows up in review, and a
//! check that every sub-command carries examples.

use crate::support::Sandbox;

fn help(args: &[&str]) -> String {
    let sb = Sandbox::new();
    let out = sb.bare().args(args).arg("--help").assert().success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

#[test]
fn top_level_help() {
    insta::assert_snapshot!(help(&[]));
}

#[test]
fn vars_help() {
    insta::assert_snapshot!(help(&["vars"]));
}

#[test]
fn vars_set_help() {
    insta::assert_snapshot!(help(&["vars", "set"]));
}

#[test]
fn every_subcommand_has_examples() {
    for args in [
        &["vars"][..],
        &["vars", "list"],
        &["vars", "show"],
        &["vars", "get"],
        &["vars", "view"],
        &["vars", "gc"],
        &["vars", "set"],
        &["vars", "rm"],
        &["vars", "clear"],
        &["vars", "path"],
    ] {
        let text = help(args);
        assert!(
            text.contains("Examples:\n  rlm-orchestrate"),
            "{args:?}:\n{text}"
        );
    }
}

#[test]
fn usage_errors_exit_2() {
    let sb = Sandbox::new();
    sb.bare().args(["vars", "frobnicate"]).assert().code(2);
    sb.bare().args(["--no-such-flag"]).assert().code(2);
    sb.bare().arg("vars").assert().code(2);
}

/// `-h` of `args` at 80 columns.
fn short_help(args: &[&str]) -> String {
    let sb = Sandbox::new();
    let out = sb
        .bare()
        .env("COLUMNS", "80")
        .args(args)
        .arg("-h")
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

#[test]
fn short_help_fits_a_screen() {
    for args in [
        &[][..],
        &["run"],
        &["repl"],
        &["eval"],
        &["mcp"],
        &["config", "show"],
        &["vars"],
        &["vars", "set"],
        &["runs"],
        &["runs", "show"],
        &["completions"],
    ] {
        let text = short_help(args);
        let lines = text.lines().count();
        assert!(lines < 70, "`{args:?} -h` is {lines} lines:\n{text}");
    }
}

#[test]
fn short_help_keeps_the_examples_and_long_help_every_flag() {
    for sub in ["run", "repl", "eval", "mcp"] {
        let short = short_help(&[sub]);
        let long = help(&[sub]);
        assert!(
            short.contains("Examples:\n  rlm-orchestrate"),
            "{sub} -h:\n{short}"
        );
        assert!(
            long.contains("Examples:\n  rlm-orchestrate"),
            "{sub} --help:\n{long}"
        );
        assert!(
            short.contains("--help prints them all"),
            "{sub} -h:\n{short}"
        );
        assert!(!short.contains("--memory-ceiling-mb"), "{sub} -h:\n{short}");
        assert!(
            long.contains("--memory-ceiling-mb"),
            "{sub} --help:\n{long}"
        );
        assert!(short.contains("--model <M>"), "{sub} -h:\n{short}");
    }
    let long = help(&["run"]);
    for heading in [
        "Context:",
        "Model:",
        "Environment:",
        "Confinement:",
        "Sub-agents:",
        "Budgets:",
        "Output:",
        "Advanced:",
    ] {
        assert!(
            long.contains(&format!("\n{heading}\n")),
            "{heading}:\n{long}"
        );
    }
}

/// `docs/cli.md` is what `__markdown-help` prints today.
#[test]
fn docs_cli_md_is_current() {
    let sb = Sandbox::new();
    let out = sb.bare().arg("__markdown-help").assert().success();
    let want = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let line = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(have.lines().count().min(want.lines().count()));
        panic!(
            "docs/cli.md is stale (first difference at line {}: {:?} where the binary prints {:?}); \
             regenerate it with `cargo run -q -p rlm-orchestrate -- __markdown-help > docs/cli.md`",
            line + 1,
            have.lines().nth(line).unwrap_or("<end of file>"),
            want.lines().nth(line).unwrap_or("<end of output>")
        );
    }
}
