//! `rlm-orchestrate repl` against the scripted mock model: queries piped on stdin
//! (answers on stdout, one per query) and typed on a pseudo-terminal (prompt, line
//! history, Ctrl-C), with the kernel, its variables and `history` kept across queries.

use std::time::Duration;

use rlm_test_support::mock_llm::{MockControl, MockLlm, MockLlmThread, MockReply, MockScript};
use serde_json::Value;

use crate::support::mock_replies as mock;
use crate::support::{Sandbox, BIN};

/// The flags pointing `repl` at the mock, quietly.
fn flags(sb: &Sandbox, mock: &MockControl) -> Vec<String> {
    [
        "--data-dir",
        &sb.data_dir().display().to_string(),
        "-q",
        "repl",
        "--base-url",
        &mock.openai_base_url(),
        "--model",
        "mock",
        "--retry-base-delay-ms",
        "5",
        "--exec-timeout",
        "30",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn repl_cmd(sb: &Sandbox, mock: &MockLlmThread) -> assert_cmd::Command {
    let mut cmd = sb.bare();
    cmd.env_remove("OPENAI_API_KEY")
        .args(flags(sb, &mock.control()));
    cmd
}

fn stdout_of(output: &std::process::Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn piped_queries_share_the_kernel_and_see_history() {
    let sb = Sandbox::new();
    let context = sb.file("words.txt", "alpha beta gamma");
    let mock = mock(&[
        "```repl\nfound = context.split()[1]\nprint(found)\n```",
        "FINAL(the second word is beta)",
        "```repl\nprint(history)\nprint('found =', found, '| query =', query)\n```",
        "FINAL_VAR(found)",
    ]);
    let out = repl_cmd(&sb, &mock)
        .arg("--context")
        .arg(&context)
        .write_stdin("What is the second word?\n\n   \nAnd the variable?\n")
        .assert()
        .success();
    assert_eq!(
        stdout_of(out.get_output()),
        "the second word is beta\nbeta\n"
    );

    let requests = mock.control().requests();
    assert_eq!(requests.len(), 4);
    let first = requests[0].last_user_message().unwrap();
    assert!(
        first.starts_with("Task: What is the second word?"),
        "{first}"
    );
    assert!(!first.contains("- history:"), "{first}");
    let second = requests[2].last_user_message().unwrap();
    assert!(second.starts_with("Task: And the variable?"), "{second}");
    assert!(
        second.contains("- history: 1 earlier queries and answers are in `history`"),
        "{second}"
    );
    // The second query's code read `history` and a variable of the first query.
    let output = requests[3].last_user_message().unwrap();
    assert!(
        output.contains(
            "[{'query': 'What is the second word?', 'answer': 'the second word is beta'}]"
        ),
        "{output}"
    );
    assert!(
        output.contains("found = beta | query = And the variable?"),
        "{output}"
    );
    // Two runs, two traces.
    let runs = std::fs::read_dir(sb.data_dir().join("runs"))
        .unwrap()
        .count();
    assert_eq!(runs, 2);
}

#[test]
fn commands_list_variables_runs_and_help() {
    let sb = Sandbox::new();
    let context = sb.file("notes.md", "some notes");
    let mock = mock(&["```repl\nnumbers = [1, 2, 3]\n```", "FINAL(done)"]);
    let out = repl_cmd(&sb, &mock)
        .arg("--context")
        .arg(&context)
        .write_stdin(":help\nMake a list\n:vars\n:runs\n:nonsense\n:quit\nnever asked\n")
        .assert()
        .success();
    let stdout = stdout_of(out.get_output());
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stdout.contains("Commands:\n  :context PATH"), "{stdout}");
    assert!(stdout.contains("\ndone\n"), "{stdout}");
    // The store's variables as `vars list` shows them, then the REPL's.
    assert!(
        stdout.contains("KEY") && stdout.contains("SCOPE") && stdout.contains("-context"),
        "{stdout}"
    );
    assert!(stdout.contains("REPL variables:"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("numbers") && l.contains("list") && l.contains("[1, 2, 3]")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("answered") && l.ends_with("Make a list")),
        "{stdout}"
    );
    assert!(stderr.contains("unknown command :nonsense"), "{stderr}");
    // `:quit` stopped reading: the last line was never a query.
    assert_eq!(mock.control().request_count(), 2);
}

#[test]
fn json_output_has_one_object_per_query_and_failures_exit_1() {
    let sb = Sandbox::new();
    let script = MockScript::new()
        .then(MockReply::text("FINAL(one)"))
        .then(MockReply::error(400, "no such model"))
        .then(MockReply::text("FINAL(three)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let out = repl_cmd(&sb, &mock)
        .arg("--json")
        .write_stdin("first\nsecond\nthird\n")
        .assert()
        .code(1);
    let lines: Vec<Value> = stdout_of(out.get_output())
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["answer"], "one");
    assert_eq!(lines[1]["query"], "second");
    assert!(
        lines[1]["error"].as_str().unwrap().contains("400"),
        "{lines:?}"
    );
    assert_eq!(lines[2]["answer"], "three");
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("1 of 3 queries failed"), "{stderr}");
}

#[test]
fn a_context_given_with_colon_context_gets_its_own_slot() {
    let sb = Sandbox::new();
    let first = sb.file("first.txt", "first text");
    let second = sb.file("second.txt", "second text");
    let mock = mock(&[
        "FINAL(ok)",
        "```repl\nprint(context, '|', context_0, '|', contexts)\n```",
        "FINAL(slots)",
    ]);
    let input = format!("one\n:context {}\ntwo\n", second.display());
    repl_cmd(&sb, &mock)
        .arg("--context")
        .arg(&first)
        .write_stdin(input)
        .assert()
        .success();
    let requests = mock.control().requests();
    let opening = requests[1].last_user_message().unwrap();
    assert!(opening.contains("- contexts: 2 slots"), "{opening}");
    let output = requests[2].last_user_message().unwrap();
    assert!(
        output.contains("second text | first text | ['first text', 'second text']"),
        "{output}"
    );
}

#[test]
fn a_bad_context_exits_2_before_any_query() {
    let sb = Sandbox::new();
    let mock = mock(&["FINAL(never)"]);
    let out = repl_cmd(&sb, &mock)
        .arg("--context")
        .arg(sb.root().join("missing.txt"))
        .write_stdin("a query\n")
        .assert()
        .code(2);
    assert_eq!(stdout_of(out.get_output()), "");
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("missing.txt"), "{stderr}");
    assert_eq!(mock.control().request_count(), 0);
}

#[test]
fn settings_come_from_rlm_toml_as_for_run() {
    let sb = Sandbox::new();
    sb.file("rlm.toml", "model = \"from-file\"\n");
    let mock = mock(&["FINAL(ok)"]);
    let mut cmd = sb.bare();
    cmd.env_remove("OPENAI_API_KEY")
        .env_remove("RLM_MODEL")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["repl", "--base-url", &mock.control().openai_base_url()])
        .write_stdin("q\n")
        .assert()
        .success()
        .stdout("ok\n");
    assert_eq!(mock.control().requests()[0].model(), Some("from-file"));
}

/// Waits (bounded) until the mock has received `count` requests.
fn wait_for_requests(mock: &MockControl, count: u64) {
    for _ in 0..3000 {
        if mock.request_count() >= count {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!(
        "the mock got {} requests, not {count}",
        mock.request_count()
    );
}

#[test]
fn a_terminal_gets_a_prompt_history_and_ctrl_c_cancels_only_the_query() {
    let sb = Sandbox::new();
    let mock = mock(&[
        "```repl\nkept = 'survivor'\n```",
        "FINAL(the first answer)",
        // The second query's code asks a sub-call (so the test knows it runs), then
        // loops until Ctrl-C.
        "```repl\nllm_query('inside the loop')\nimport time\nwhile True:\n    time.sleep(0.01)\n```",
        "sub-call answer",
        "FINAL_VAR(kept)",
    ]);
    let control = mock.control();
    let mut command = std::process::Command::new(BIN);
    command
        .current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .env("TERM", "xterm")
        .args(flags(&sb, &control));
    let options = rexpect::reader::Options::new()
        .timeout_ms(Some(60_000))
        .strip_ansi_escape_codes(true);
    let mut term = rexpect::spawn_with_options(command, options).unwrap();

    term.exp_string("rlm> ").unwrap();
    term.send_line("What is first?").unwrap();
    term.exp_string("the first answer").unwrap();
    term.exp_string("rlm> ").unwrap();

    term.send_line("Loop forever").unwrap();
    wait_for_requests(&control, 4);
    term.send_control('c').unwrap();
    term.exp_string("cancelled").unwrap();
    term.exp_string("rlm> ").unwrap();

    // The kernel kept the first query's variable.
    term.send_line("Still there?").unwrap();
    term.exp_string("survivor").unwrap();
    term.exp_string("rlm> ").unwrap();
    term.send_line(":quit").unwrap();
    term.exp_eof().unwrap();

    let history = std::fs::read_to_string(sb.data_dir().join("repl_history")).unwrap();
    for line in ["What is first?", "Loop forever", "Still there?", ":quit"] {
        assert!(history.lines().any(|l| l == line), "{history}");
    }
    assert_eq!(control.request_count(), 5);
}
