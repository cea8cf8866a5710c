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
