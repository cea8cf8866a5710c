//! Numbers that would switch a limit off are refused before anything runs: exit 2 and a
//! message naming the flag, whether the number came from a flag, `RLM_*` or `rlm.toml`.

use predicates::prelude::*;

use crate::support::Sandbox;

/// `run` with `flags` against an endpoint that is never reached (nothing listens on
/// port 9 of 127.0.0.1; a refused setting stops the run before any request anyway).
fn run_with(sb: &Sandbox, flags: &[&str]) -> assert_cmd::Command {
    let mut cmd = sb.bare();
    cmd.env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "run",
            "a task",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ])
        .args(flags);
    cmd
}

/// Seen failing before the fix: each of these was accepted (NaN and negative prices
/// silently disabled `--max-cost-usd`; a zero request timeout failed every call).
#[test]
fn numbers_that_disable_limits_exit_2_naming_the_flag() {
    let cases: [(&[&str], &str); 8] = [
        (&["--max-cost-usd", "NaN"], "--max-cost-usd"),
        (&["--max-cost-usd", "-1"], "--max-cost-usd"),
        (&["--max-cost-usd", "inf"], "--max-cost-usd"),
        (&["--price-input", "-2"], "--price-input"),
        (&["--price-output", "NaN"], "--price-output"),
        (&["--request-timeout", "0"], "--request-timeout"),
        (&["--agent-timeout", "0"], "--agent-timeout"),
        (&["--exec-timeout", "0"], "--exec-timeout"),
    ];
    for (flags, flag) in cases {
        let sb = Sandbox::new();
        run_with(&sb, flags)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(flag));
        assert!(
            !sb.data_dir().join("runs").exists(),
            "{flags:?} started a run"
        );
    }
}

#[test]
fn the_environment_and_rlm_toml_are_checked_too() {
    let sb = Sandbox::new();
    run_with(&sb, &[])
        .env("RLM_MAX_COST_USD", "NaN")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--max-cost-usd"));
    sb.file("rlm.toml", "request_timeout = 0\n");
    run_with(&sb, &[])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--request-timeout"));
}
