//! Issue 53, items 1 and 2: every agent that started ends with a result, and no key an
//! agent printed reaches a stored result, the trace, `runs show` or the model — when
//! it fails, when it times out, when its code cell times out first, and on Ctrl-C.
//! Nested runs (`sub_rlm`) end the same way: a child still running when its cell times
//! out, or on Ctrl-C, leaves its result and its end.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockRule, MockScript};
use serde_json::Value;

use crate::real_cli_support::survivors;
use crate::support::{interrupt_and_wait, Sandbox};

/// An Anthropic-shaped key the agent found somewhere (not one rlm was given).
const ANTHROPIC_KEY: &str =
    "sk-ant-api03-Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0LzXcVbNm-Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0LzXcVbNmAA";
/// An OpenAI-shaped key, likewise.
const OPENAI_KEY: &str = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90";
/// The run's own key (`OPENAI_API_KEY`), passed to the agent with `--agent-env`.
const RUN_KEY: &str = "run-own-key-VALUE-0123456789xyz";

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Panics naming the file of `dir` that holds one of the keys.
fn assert_no_key_under(dir: &Path) {
    for file in walk(dir) {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap_or_default()).into_owned();
        assert_no_key(&format!("{}", file.display()), &text);
    }
}

fn assert_no_key(what: &str, text: &str) {
    for key in [
        ANTHROPIC_KEY,
        OPENAI_KEY,
        RUN_KEY,
        "sk-ant-api03",
        "sk-proj-",
    ] {
        assert!(!text.contains(key), "{key} leaked into {what}:\n{text}");
    }
}

/// The agent: writes a mark file named after its id (so a test knows it started),
/// prints the keys, then fails at once (`MODE=fail`) or sleeps (`MODE=hang`).
fn agent_script(sb: &Sandbox) -> PathBuf {
    let marks = sb.root().join("started");
    std::fs::create_dir_all(&marks).unwrap();
    sb.file(
        "agent.sh",
        format!(
            "touch {marks}/$RLM_AGENT_ID\n\
             echo \"err={ANTHROPIC_KEY}\" >&2\n\
             echo \"openai {OPENAI_KEY} own $OPENAI_API_KEY\" >&2\n\
             echo \"stdout has {ANTHROPIC_KEY} too\"\n\
             if grep -q MODE=hang \"$1\"; then exec sleep 60; fi\n\
             exit 1\n",
            marks = marks.display()
        ),
    )
}

/// How many agents have started.
fn started(sb: &Sandbox) -> usize {
    std::fs::read_dir(sb.root().join("started")).map_or(0, |d| d.count())
}

/// `run` with the agent script and `extra` flags, the mock answering `replies`.
fn agent_run(sb: &Sandbox, mock: &MockLlmThread, extra: &[&str]) -> std::process::Command {
    let agent = agent_script(sb);
    let context = sb.file("context.txt", "a plain context\n");
    let mut cmd = std::process::Command::new(crate::support::BIN);
    cmd.current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("RUST_LOG")
        .env("OPENAI_API_KEY", RUN_KEY)
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "Ask the agents.", "--context"])
        .arg(&context)
        .args(["--base-url", &mock.control().openai_base_url()])
        .args(["--model", "root-model", "--retry-base-delay-ms", "5"])
        .arg("--agent-cmd")
        .arg(format!("sh {} {{prompt_file}}", agent.display()))
        .args(["--agent-env", "OPENAI_API_KEY", "--max-parallel", "4"])
        .args(extra);
    cmd
}

/// Every `sub-result-*` variable, parsed.
fn results(sb: &Sandbox) -> Vec<Value> {
    let list: Vec<Value> =
        serde_json::from_slice(&sb.vars(&["list", "--json"]).output().unwrap().stdout).unwrap();
    list.iter()
        .filter_map(|v| v["key"].as_str())
        .filter(|key| key.starts_with("sub-result-"))
        .map(|key| {
            let raw = sb.get(key);
            assert_no_key(&format!("vars get {key}"), &String::from_utf8_lossy(&raw));
            serde_json::from_slice(&raw).unwrap()
        })
        .collect()
}

/// `runs show` of the (one) run; nested runs are not listed without `--all`.
fn runs_show(sb: &Sandbox) -> String {
    let runs = |args: &[&str]| {
        sb.bare()
            .arg("--data-dir")
            .arg(sb.data_dir())
            .arg("runs")
            .args(args)
            .output()
            .unwrap()
    };
    let list: Vec<Value> = serde_json::from_slice(&runs(&["list", "--json"]).stdout).unwrap();
    assert_eq!(list.len(), 1, "{list:#?}");
    let out = runs(&["show", list[0]["run_id"].as_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The mock: one cell that starts the agents, then a final answer.
fn mock(code: &str) -> MockLlmThread {
    MockLlm::spawn_blocking_thread(MockScript::replies([
        MockReply::text(code),
        MockReply::text("FINAL(done)"),
    ]))
    .unwrap()
}

/// Seen failing before the fix: the failing agent's `stderr_tail` held both keys and
/// the run's own key; `vars get`, the model's next request and the trace showed them.
#[test]
fn keys_a_failing_or_timed_out_agent_prints_reach_no_result_trace_or_model() {
    let sb = Sandbox::new();
    let mock = mock(
        "```repl\nr = spawn_agents([('MODE=fail', []), ('MODE=hang', [])])\nprint('agents:', r)\n```",
    );
    let out = agent_run(
        &sb,
        &mock,
        &["--agent-timeout", "2", "--exec-timeout", "60"],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_no_key("stderr", &stderr);
    assert_no_key("stdout", &String::from_utf8_lossy(&out.stdout));
    let results = results(&sb);
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(results.iter().any(|r| r["exit_code"] == 1), "{results:#?}");
    assert!(
        results.iter().any(|r| r["timed_out"] == true),
        "{results:#?}"
    );
    for result in &results {
        let tail = result["stderr_tail"].as_str().unwrap();
        assert!(tail.contains("err=[redacted key]"), "{result}");
        assert!(
            tail.contains("own [redacted OPENAI_API_KEY]"),
            "the run's own key, by name: {result}"
        );
    }
    for request in mock.control().requests() {
        assert_no_key("a request to the model", &request.body.to_string());
    }
    assert_no_key("runs show", &runs_show(&sb));
    assert_no_key_under(&sb.data_dir());
    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );
}

/// Seen failing before the fix: the cell's `--exec-timeout` ended the call, the agent
/// was killed with no `sub-result`, and `runs show` said "no end recorded".
#[test]
fn a_cell_timing_out_first_stops_its_agent_with_a_timeout_result() {
    cell_times_out_first(
        "```repl\nr = spawn_agent('MODE=hang')\nprint('agent:', r)\n```",
        "python",
    );
}

/// The same in JavaScript, whose engine abandons the call its own way.
#[test]
fn a_javascript_cell_timing_out_first_stops_its_agent_with_a_timeout_result() {
    cell_times_out_first(
        "```js\nconst r = await spawn_agent('MODE=hang')\nconsole.log('agent:', r)\n```",
        "js",
    );
}

fn cell_times_out_first(code: &str, env: &str) {
    let sb = Sandbox::new();
    let mock = mock(code);
    let started_at = Instant::now();
    let out = agent_run(
        &sb,
        &mock,
        &["--exec-timeout", "3", "--agent-timeout", "50", "--env", env],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    cell_timed_out(&sb, &out, started_at);
}

/// An agent timeout shorter than the cell's: the agent's own timeout ends it.
#[test]
fn an_agent_timeout_shorter_than_the_cell_ends_the_agent_first() {
    let sb = Sandbox::new();
    let mock = mock("```repl\nr = spawn_agent('MODE=hang')\nprint('agent:', r)\n```");
    let out = agent_run(
        &sb,
        &mock,
        &["--exec-timeout", "40", "--agent-timeout", "1"],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = results(&sb);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["timed_out"], true, "{}", results[0]);
    assert_eq!(results[0]["timeout_secs"], 1.0, "{}", results[0]);
    let shown = runs_show(&sb);
    assert!(shown.contains("· timed out"), "{shown}");
    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );
}

/// After Ctrl-C: `expected` results, each an error that says it was cancelled, and as
/// many ends that `runs show` prints as cancelled (none unrecorded).
fn assert_every_end_cancelled(sb: &Sandbox, expected: usize) {
    let results = results(sb);
    assert_eq!(results.len(), expected, "{results:#?}");
    for result in &results {
        assert_eq!(result["status"], "error", "{result}");
        assert_eq!(result["cancelled"], true, "{result}");
    }
    let shown = runs_show(sb);
    assert!(!shown.contains("no end recorded"), "{shown}");
    assert_eq!(
        shown.matches("· was cancelled").count(),
        expected,
        "{shown}"
    );
}

/// Seen failing before the fix: after Ctrl-C the agents had no `sub-result`, though
/// the docs promise a `"cancelled"` object.
#[test]
fn ctrl_c_leaves_a_cancelled_result_for_every_running_agent() {
    let sb = Sandbox::new();
    let mock = mock(
        "```repl\nr = spawn_agents([('MODE=hang', []), ('MODE=hang', []), ('MODE=hang', [])])\n```",
    );
    let mut child = agent_run(&sb, &mock, &[])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while started(&sb) < 3 {
        assert!(Instant::now() < deadline, "the agents did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = interrupt_and_wait(&mut child);
    assert_eq!(status.code(), Some(130));
    assert_every_end_cancelled(&sb, 3);
    assert_no_key_under(&sb.data_dir());
    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );
}

/// The task of a nested run the mock keeps waiting (its model answers after a minute).
const SLOW_CHILD: &str = "slow-child";

/// The mock: the root's cell starts nested runs (`code`), then a final answer; a child
/// on [`SLOW_CHILD`] gets its answer only after a minute.
fn nested_mock(code: &str) -> MockLlmThread {
    MockLlm::spawn_blocking_thread(
        MockScript::replies([MockReply::text(code), MockReply::text("FINAL(done)")]).rule(
            MockRule::contains(
                format!("Task: {SLOW_CHILD}"),
                MockReply::text("FINAL(too late)").with_delay(Duration::from_secs(60)),
            ),
        ),
    )
    .unwrap()
}

/// `run --json` of a root whose children are nested runs, with `extra` flags.
fn nested_run(sb: &Sandbox, mock: &MockLlmThread, extra: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(crate::support::BIN);
    cmd.current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "Ask the children.", "--json", "--model", "mock"])
        .args(["--base-url", &mock.control().openai_base_url()])
        .args(["--retry-base-delay-ms", "5", "--max-parallel", "4"])
        .args(extra);
    cmd
}

/// How many requests of slow children the mock has received.
fn slow_children_asking(mock: &MockLlmThread) -> usize {
    let needle = format!("Task: {SLOW_CHILD}");
    mock.control()
        .requests()
        .iter()
        .filter(|request| request.prompt_text().contains(&needle))
        .count()
}

/// Seen failing before the fix: the cell's `--exec-timeout` killed the child run with
/// no `sub-result` and no end recorded.
#[test]
fn a_cell_timing_out_first_stops_its_nested_run_with_a_timeout_result() {
    nested_cell_times_out_first(
        &format!("```repl\nr = sub_rlm('{SLOW_CHILD}', 'a context')\nprint('child:', r)\n```"),
        "python",
    );
}

/// The same in JavaScript.
#[test]
fn a_javascript_cell_timing_out_first_stops_its_nested_run_with_a_timeout_result() {
    nested_cell_times_out_first(
        &format!(
            "```js\nconst r = await sub_rlm('{SLOW_CHILD}', 'a context')\nconsole.log('child:', r)\n```"
        ),
        "js",
    );
}

fn nested_cell_times_out_first(code: &str, env: &str) {
    let sb = Sandbox::new();
    let mock = nested_mock(code);
    let started_at = Instant::now();
    let out = nested_run(
        &sb,
        &mock,
        &["--exec-timeout", "3", "--agent-timeout", "50", "--env", env],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    cell_timed_out(&sb, &out, started_at);
}

/// What a run whose one code cell (3 s) ran past `--exec-timeout` while its one child
/// hung leaves: the run answered in time, the child's result says it timed out with
/// the cell, the trace records its end, and no process is left behind.
fn cell_timed_out(sb: &Sandbox, out: &Output, started_at: Instant) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        started_at.elapsed() < Duration::from_secs(45),
        "the cell's timeout did not hold"
    );
    let results = results(sb);
    assert_eq!(results.len(), 1, "{stderr}");
    let result = &results[0];
    assert_eq!(result["status"], "error", "{result}");
    assert_eq!(result["timed_out"], true, "{result}");
    assert_eq!(result["timeout_secs"], 3.0, "{result}");
    assert!(
        result["error"].as_str().unwrap().contains("--exec-timeout"),
        "{result}"
    );
    let shown = runs_show(sb);
    assert!(!shown.contains("no end recorded"), "{shown}");
    assert!(
        shown.contains("timed out (its code cell ran past --exec-timeout)"),
        "{shown}"
    );
    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );
}

/// Seen failing before the fix: after Ctrl-C the children's results did not say they
/// were cancelled and the root recorded no end for them.
#[test]
fn ctrl_c_leaves_a_cancelled_result_for_every_running_nested_run() {
    let sb = Sandbox::new();
    let mock = nested_mock(&format!(
        "```repl\nr = sub_rlm_parallel([('{SLOW_CHILD}', 'a'), ('{SLOW_CHILD}', 'b')])\n```"
    ));
    let mut child = nested_run(&sb, &mock, &[])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while slow_children_asking(&mock) < 2 {
        assert!(Instant::now() < deadline, "the children did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = interrupt_and_wait(&mut child);
    assert_eq!(status.code(), Some(130));
    assert_every_end_cancelled(&sb, 2);
    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );
}

/// A nested run's own `--agent-timeout`, shorter than the cell's, ends it with a
/// timeout result of that length (seen failing before the fix: no `sub-result`).
#[test]
fn an_agent_timeout_shorter_than_the_cell_ends_the_nested_run_first() {
    let sb = Sandbox::new();
    let mock = nested_mock(&format!(
        "```repl\nr = sub_rlm('{SLOW_CHILD}', 'a context')\nprint('child:', r)\n```"
    ));
    let out = nested_run(
        &sb,
        &mock,
        &["--exec-timeout", "40", "--agent-timeout", "1"],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = results(&sb);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["timed_out"], true, "{}", results[0]);
    assert_eq!(results[0]["timeout_secs"], 1.0, "{}", results[0]);
    assert!(
        results[0]["error"]
            .as_str()
            .unwrap()
            .contains("--agent-timeout"),
        "{}",
        results[0]
    );
    let shown = runs_show(&sb);
    assert!(shown.contains("· timed out"), "{shown}");
    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );
}
