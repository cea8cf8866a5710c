//! Sub-calls end to end: nested `sub_rlm` runs as child processes on the sub-model,
//! memoised sub-calls, and budgets that hold across the process tree.

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockRule, MockScript};
use serde_json::Value;

use crate::support::Sandbox;

pub(crate) fn run_json(sb: &Sandbox, base_url: &str, task: &str, extra: &[&str]) -> Value {
    let out = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "run",
            task,
            "--base-url",
            base_url,
            "--model",
            "root-model",
            "--sub-model",
            "sub-model",
        ])
        .args(["--retry-base-delay-ms", "5", "--json"])
        .args(extra)
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

#[test]
fn sub_rlm_runs_a_child_process_with_its_own_loop_on_the_sub_model() {
    let sb = Sandbox::new();
    let script = MockScript::new()
        // The child's first turn: it sees its task and a context passed by reference.
        .rule(MockRule::contains(
            "Task: count the lines",
            MockReply::text("```repl\nn = len(context.splitlines())\n```\nFINAL_VAR(n)"),
        ))
        .then(MockReply::text(
            "```repl\nanswer = sub_rlm('count the lines', context=context[:40])\nprint('child said', answer)\n```",
        ))
        .then(MockReply::text("FINAL_VAR(answer)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let context = sb.file(
        "c.txt",
        "line one\nline two\nline three\nline four\nline five\n",
    );
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "how many lines in the first 40 chars?",
        &["--context", context.to_str().unwrap()],
    );
    // The first 40 characters hold four whole lines and the start of a fifth.
    assert_eq!(result["answer"], "5");
    assert_eq!(result["sub_agents"], 1);
    assert_eq!(result["depth_reached"], 1);
    let requests = mock.control().requests();
    let child_requests: Vec<_> = requests
        .iter()
        .filter(|r| r.model() == Some("sub-model"))
        .collect();
    assert!(
        !child_requests.is_empty(),
        "the child did not use the sub-model"
    );
    // The child ran its own loop: a first turn and one after its FINAL_VAR… in one turn.
    assert!(child_requests[0]
        .last_user_message()
        .unwrap()
        .contains("Task: count the lines"));
    // Its result variable exists, scoped to the parent, and its trace names the parent.
    let vars: Vec<Value> = serde_json::from_slice(
        &sb.vars(&["list", "--json"])
            .assert()
            .success()
            .get_output()
            .stdout,
    )
    .unwrap();
    let sub_result = vars
        .iter()
        .find(|v| v["key"].as_str().unwrap().starts_with("sub-result-"))
        .unwrap();
    assert!(
        sub_result["scope"].as_str().unwrap().starts_with("agent:"),
        "{sub_result}"
    );
    let runs: Vec<_> = std::fs::read_dir(sb.data_dir().join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 2, "expected a root run and a child run");
    let child_summary = runs
        .iter()
        .map(|dir| {
            serde_json::from_str::<Value>(
                &std::fs::read_to_string(dir.join("summary.json")).unwrap(),
            )
            .unwrap()
        })
        .find(|s| s["depth"] == 1)
        .unwrap();
    assert!(child_summary["parent_id"].is_string());
    assert_eq!(child_summary["answer"], "5");
    // The child was described by a private spec file, not by flags on its command
    // line: its task and settings are there, typed, with its context by reference.
    let child_id = child_summary["agent_id"].as_str().unwrap();
    let spec_path = sb.data_dir().join("agents").join(child_id).join("run.json");
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(&spec_path).unwrap()).unwrap();
    assert_eq!(spec["formatVersion"], 1);
    assert_eq!(spec["query"], "count the lines");
    assert_eq!(spec["settings"]["model"]["model"], "sub-model");
    assert_eq!(spec["context_var"], format!("sub-context-{child_id}"));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&spec_path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(
        sub_result["key"].as_str().unwrap(),
        format!("sub-result-{child_id}")
    );
    assert_eq!(
        sub_result["scope"],
        format!("agent:root-{}", result["run_id"].as_str().unwrap())
    );
}

#[test]
fn at_max_depth_sub_rlm_is_a_plain_call_with_a_cut_context() {
    let sb = Sandbox::new();
    let script = MockScript::new()
        .rule(MockRule::contains(
            "[context truncated: first 8000 of 20000 characters]",
            MockReply::text("one-shot"),
        ))
        .then(MockReply::text(
            "```repl\nr = sub_rlm('what is this?', context='x' * 20000)\n```",
        ))
        .then(MockReply::text("FINAL_VAR(r)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "q",
        &["--max-depth", "0"],
    );
    assert_eq!(result["answer"], "one-shot");
    assert_eq!(result["sub_agents"], 0);
    let runs = std::fs::read_dir(sb.data_dir().join("runs"))
        .unwrap()
        .count();
    assert_eq!(runs, 1, "no child run may start at max depth");
}

#[test]
fn identical_sub_calls_are_answered_from_the_cache() {
    let sb = Sandbox::new();
    let script = MockScript::new()
        .rule(MockRule::contains("What colour is the sky?", MockReply::text("blue")))
        .then(MockReply::text("```repl\na = llm_query('What colour is the sky?')\nb = llm_query('What colour is the sky?')\nprint(a, b)\n```"))
        .then(MockReply::text("FINAL(done)"))
        .then(MockReply::text("```repl\nc = llm_query('What colour is the sky?')\n```"))
        .then(MockReply::text("FINAL(again)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let url = mock.control().openai_base_url();
    run_json(&sb, &url, "q", &[]);
    let sky = |m: &rlm_test_support::mock_llm::MockLlmThread| {
        // Sub-calls send the prompt alone; root turns only quote it in code.
        m.control()
            .requests()
            .iter()
            .filter(|r| r.last_user_message().as_deref() == Some("What colour is the sky?"))
            .count()
    };
    assert_eq!(
        sky(&mock),
        1,
        "the second identical llm_query reached the model"
    );
    // A later run shares the cache through the store; --no-cache asks again.
    run_json(&sb, &url, "q", &[]);
    assert_eq!(sky(&mock), 1);
    let cached: Vec<Value> = serde_json::from_slice(
        &sb.vars(&["list", "--scope", "cache", "--json"])
            .assert()
            .success()
            .get_output()
            .stdout,
    )
    .unwrap();
    assert_eq!(cached.len(), 1);
}

/// Issue 22 item 8: a memoised `sub_rlm` over a `file` variable is asked again after
/// the file is edited in place with its size, inode and modification time kept (the
/// reference's identity check cannot see it; the key is the file's content).
#[test]
fn a_file_edited_in_place_keeping_size_and_mtime_is_not_answered_from_the_cache() {
    use std::io::{Seek as _, Write as _};
    let sb = Sandbox::new();
    let script = MockScript::new()
        .rule(MockRule::contains(
            "Task: summarise the file",
            MockReply::text("FINAL(a summary)"),
        ))
        .or_else(MockReply::text(
            "```repl\nanswer = sub_rlm('summarise the file', context)\n```\nFINAL_VAR(answer)",
        ));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let url = mock.control().openai_base_url();
    let context = sb.file("doc.txt", "the old text of the document\n");
    let args = [
        "--context",
        context.to_str().unwrap(),
        "--lazy-context",
        "always",
    ];
    let child_runs = || {
        mock.control()
            .requests()
            .iter()
            .filter(|r| {
                r.message_texts()
                    .iter()
                    .any(|t| t.contains("Task: summarise the file"))
            })
            .count()
    };
    assert_eq!(run_json(&sb, &url, "q", &args)["answer"], "a summary");
    assert_eq!(child_runs(), 1);
    // Unchanged: the second run is answered from the cache.
    run_json(&sb, &url, "q", &args);
    assert_eq!(child_runs(), 1, "an unchanged file missed the cache");
    // Edited in place: same inode, same size, modification time set back.
    let before = std::fs::metadata(&context).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&context)
        .unwrap();
    file.seek(std::io::SeekFrom::Start(4)).unwrap();
    file.write_all(b"NEW").unwrap();
    file.set_modified(before.modified().unwrap()).unwrap();
    drop(file);
    let after = std::fs::metadata(&context).unwrap();
    use std::os::unix::fs::MetadataExt as _;
    assert_eq!(
        (after.ino(), after.len(), after.mtime(), after.mtime_nsec()),
        (
            before.ino(),
            before.len(),
            before.mtime(),
            before.mtime_nsec()
        )
    );
    run_json(&sb, &url, "q", &args);
    assert_eq!(
        child_runs(),
        2,
        "the edited file was answered from the cache"
    );
}

#[test]
fn a_spent_budget_ends_the_run_with_a_forced_answer() {
    let sb = Sandbox::new();
    let script = MockScript::new()
        .then(MockReply::text("```repl\nx = 1\n```"))
        .then(MockReply::text("```repl\nx = 2\n```"))
        .then(MockReply::text("FINAL(stopped early)"))
        .or_else(MockReply::text("```repl\nx = 3\n```"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    // Three calls: two steps and the forced answer, whose call the budget holds.
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "q",
        &["--max-llm-calls", "3"],
    );
    assert_eq!(result["forced"], true);
    assert_eq!(result["answer"], "stopped early");
    assert_eq!(result["iterations"], 2);
    assert_eq!(result["llm_calls"], 3);
    assert_eq!(mock.control().request_count(), 3);
}

/// An agent in Python: reads the variable files named in its prompt file and prints
/// the sum of the numbers in them.
pub(crate) const SUM_AGENT: &str = r#"
import re, sys
prompt = open(sys.argv[1]).read()
total = 0
for path in re.findall(r'read (/\S+) — plain UTF-8 text', prompt):
    total += sum(int(x) for x in open(path).read().split())
print(total)
"#;

#[test]
fn a_16_way_fan_out_over_a_store_split_context_adds_up() {
    let sb = Sandbox::new();
    let numbers: Vec<u64> = (1..=4000).map(|i| (i * 7919) % 1000).collect();
    let expected: u64 = numbers.iter().sum();
    let text = numbers
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    let context = sb.file("numbers.txt", text);
    let agent = sb.file("sum_agent.py", SUM_AGENT);
    let script = MockScript::new()
        .then(MockReply::text(
            "```repl\nlines = context.split()\nn = len(lines) // 16 + 1\nkeys = []\nfor i in range(16):\n    store.set(f'chunk-{i}', ' '.join(lines[i*n:(i+1)*n]))\n    keys.append(f'chunk-{i}')\nanswers = spawn_agents([('sum the numbers', [k]) for k in keys])\ntotal = sum(int(a) for a in answers)\nprint(answers, total)\n```",
        ))
        .then(MockReply::text("FINAL_VAR(total)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let agent_cmd = format!("python3 {} {{prompt_file}}", agent.display());
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "add all the numbers",
        &[
            "--context",
            context.to_str().unwrap(),
            "--agent-cmd",
            &agent_cmd,
            "--max-parallel",
            "4",
        ],
    );
    assert_eq!(result["answer"], expected.to_string());
    assert_eq!(result["sub_agents"], 16);
    // Each agent's answer is also in its sub-result variable, scoped to the root,
    // and those stored partial sums add up to the same total.
    let all: Vec<Value> = serde_json::from_slice(
        &sb.vars(&["list", "--json"])
            .assert()
            .success()
            .get_output()
            .stdout,
    )
    .unwrap();
    let sub_results: Vec<&Value> = all
        .iter()
        .filter(|v| v["key"].as_str().unwrap().starts_with("sub-result-"))
        .collect();
    assert_eq!(sub_results.len(), 16);
    let mut stored_total = 0u64;
    // The root is named by its run, not by a process id a later run may reuse.
    let root_scope = format!("agent:root-{}", result["run_id"].as_str().unwrap());
    for var in sub_results {
        assert_eq!(var["scope"], root_scope.as_str(), "{var}");
        let value = sb.get(var["key"].as_str().unwrap());
        stored_total += String::from_utf8(value)
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap();
    }
    assert_eq!(stored_total, expected);
}

/// Processes whose command line contains `marker`, zombies excluded.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'));
        if !zombie
            && String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .contains(marker)
        {
            pids.push(pid);
        }
    }
    pids
}

/// Waits (bounded) until `check` holds.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..600 {
        if check() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("timed out waiting until {what}");
}

/// A fan-out of agents that each fork a grandchild and hang; a signal to the
/// orchestrator must end every one of them and record the run as cancelled.
fn signal_during_fan_out(signal: nix::sys::signal::Signal) {
    let sb = Sandbox::new();
    // A unique sleep length marks the processes this test starts.
    let marker = format!("300.{}", std::process::id() * 1000 + signal as u32);
    let agent = sb.file("hang.sh", format!("sleep {marker}\n"));
    let agent_cmd = format!(
        "sh -c 'sh {} & sh {}; wait' {{agent_id}}",
        agent.display(),
        agent.display()
    );
    let script = MockScript::new()
        .then(MockReply::text(
            "```repl\nanswers = spawn_agents([('wait', []) for _ in range(6)])\n```",
        ))
        .or_else(MockReply::text("FINAL(unreachable)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let mut child = std::process::Command::new(crate::support::BIN)
        .current_dir(sb.root())
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "-q",
            "run",
            "wait for agents",
            "--base-url",
            &mock.control().openai_base_url(),
            "--model",
            "m",
        ])
        .args(["--agent-cmd", &agent_cmd, "--max-parallel", "3"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Three agents (the parallel limit), each with two hanging grandchildren.
    eventually("the agents are running", || {
        processes_with(&marker).len() >= 3
    });
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let mut status = None;
    eventually("rlm-orchestrate exits", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    assert_eq!(status.unwrap().code(), Some(130));
    eventually("no agent process is left", || {
        processes_with(&marker).is_empty()
    });
    let runs: Vec<_> = std::fs::read_dir(sb.data_dir().join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(runs[0].join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["status"], "cancelled");
}

#[test]
fn sigint_during_a_fan_out_leaves_no_process_behind() {
    signal_during_fan_out(nix::sys::signal::Signal::SIGINT);
}

#[test]
fn sigterm_during_a_fan_out_leaves_no_process_behind() {
    signal_during_fan_out(nix::sys::signal::Signal::SIGTERM);
}

#[test]
fn a_hanging_agent_with_grandchildren_is_killed_at_the_timeout() {
    let sb = Sandbox::new();
    let marker = format!("301.{}", std::process::id());
    let agent = sb.file(
        "hang.sh",
        format!("trap '' TERM\nsleep {marker} & sleep {marker}\n"),
    );
    let agent_cmd = format!("sh {}", agent.display());
    let script = MockScript::new()
        .then(MockReply::text(
            "```repl\nr = spawn_agent('hang', [])\nprint(r)\n```",
        ))
        .then(MockReply::text("FINAL(done)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    run_json(
        &sb,
        &mock.control().openai_base_url(),
        "q",
        &["--agent-cmd", &agent_cmd, "--agent-timeout", "1"],
    );
    let fed_back = mock.control().requests()[1].last_user_message().unwrap();
    assert!(fed_back.contains("timed_out"), "{fed_back}");
    eventually("no agent process is left", || {
        processes_with(&marker).is_empty()
    });
}
