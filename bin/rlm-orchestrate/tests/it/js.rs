//! `--env js` end to end: the binary against the scripted mock model, with the model's
//! code in JavaScript — a needle in 64 MB, the prompt that describes JavaScript (and
//! only what is configured), the correction for a Python fence, parallel sub-calls
//! proven by the mock's arrival times, a 16-agent fan-out, nested runs that stay in
//! JavaScript, a persistent `repl` session, and `--system-prompt` in every environment.

use std::time::Duration;

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockRule, MockScript};
use serde_json::Value;

use crate::subagents::{run_json, SUM_AGENT};
use crate::support::mock_replies as mock;
use crate::support::{write_big_context, Sandbox};

#[test]
fn needle_in_a_64_mb_context_is_found_by_javascript() {
    let sb = Sandbox::new();
    let needle = "SECRET-CODE=7f3a9c";
    let context = sb.root().join("big.log");
    write_big_context(&context, 64 << 20, 40 << 20, needle);
    let mock = mock(&[
        "Let me search.\n```js\nconst i = context.indexOf('SECRET-CODE=')\nconst answer = context.slice(i, i + 18)\nconsole.log(i, answer, context.length)\n```",
        "FINAL_VAR(answer)",
    ]);
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "What is the secret code?",
        &["--env", "js", "--context", context.to_str().unwrap()],
    );
    assert_eq!(result["answer"], needle);
    assert_eq!(result["forced"], false);
    assert_eq!(result["iterations"], 2);
    let requests = mock.control().requests();
    let system = requests[0].system_prompt().unwrap();
    assert!(system.contains("persistent JavaScript REPL"), "{system}");
    assert!(system.contains("await llm_query(prompt"), "{system}");
    // No --agent-cmd: spawn_agent is not advertised.
    assert!(!system.contains("spawn_agent"), "{system}");
    // The first request is metadata only, whatever the context's size.
    assert!(requests[0].prompt_chars() < 8_000);
    let fed_back = requests[1].last_user_message().unwrap();
    assert!(fed_back.contains("Code executed:\n```js\n"), "{fed_back}");
    assert!(fed_back.contains(needle), "{fed_back}");
}

#[test]
fn a_python_fence_under_js_gets_a_correction_naming_js() {
    let sb = Sandbox::new();
    let mock = mock(&[
        "```python\nprint(len(context))\n```",
        "```repl\nconsole.log(typeof context)\n```",
        "FINAL(string)",
    ]);
    let context = sb.file("c.txt", "some text");
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "q",
        &["--env", "js", "--context", context.to_str().unwrap()],
    );
    assert_eq!(result["answer"], "string");
    let requests = mock.control().requests();
    let correction = requests[1].last_user_message().unwrap();
    assert!(
        correction.contains("```python blocks do not run here: this REPL runs js"),
        "{correction}"
    );
    assert!(requests[2]
        .last_user_message()
        .unwrap()
        .contains("REPL output:\nstring"));
    // The trace reader and the HTML view show a JavaScript run like any other.
    let run_id = result["run_id"].as_str().unwrap();
    let shown = |args: &[&str]| {
        let out = sb
            .bare()
            .arg("--data-dir")
            .arg(sb.data_dir())
            .args(["runs", "show", run_id])
            .args(args)
            .assert()
            .success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    let text = shown(&[]);
    assert!(text.contains("env js"), "{text}");
    assert!(text.contains("console.log(typeof context)"), "{text}");
    let html = shown(&["--html", "-"]);
    assert!(html.contains("console.log(typeof context)"), "{html}");
}

/// Sixteen sub-calls of one `llm_query_parallel` all reach the model before the first
/// of them is answered: they run at once, not one after another.
#[test]
fn parallel_sub_calls_arrive_together() {
    let sb = Sandbox::new();
    let latency = Duration::from_millis(400);
    let script = MockScript::new()
        .rule(MockRule::contains(
            "piece ",
            MockReply::text("ok").with_delay(latency),
        ))
        .then(MockReply::text(
            "```js\nconst answers = await llm_query_parallel(Array.from({length: 16}, (_, i) => 'piece ' + i))\nconst more = await Promise.all([llm_query('piece a'), llm_query('piece b'), llm_query('piece c'), llm_query('piece d')])\nconsole.log(answers.length, more.length)\n```",
        ))
        .then(MockReply::text("FINAL(sixteen)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "fan out",
        &["--env", "js", "--max-parallel", "16", "--no-cache"],
    );
    assert_eq!(result["answer"], "sixteen");
    let requests = mock.control().requests();
    let first_batch: Vec<u64> = requests
        .iter()
        .filter(|r| {
            r.last_user_message().is_some_and(|m| {
                m.starts_with("piece ")
                    && m["piece ".len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_digit())
            })
        })
        .map(|r| r.received_unix_us)
        .collect();
    assert_eq!(first_batch.len(), 16);
    let spread = first_batch.iter().max().unwrap() - first_batch.iter().min().unwrap();
    assert!(
        u128::from(spread) < latency.as_micros(),
        "the 16 calls arrived over {spread} µs: they waited for each other"
    );
    let batch: Vec<u64> = requests
        .iter()
        .filter(|r| {
            r.last_user_message().is_some_and(|m| {
                m.starts_with("piece ")
                    && m["piece ".len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_lowercase())
            })
        })
        .map(|r| r.received_unix_us)
        .collect();
    assert_eq!(batch.len(), 4);
    let spread = batch.iter().max().unwrap() - batch.iter().min().unwrap();
    assert!(
        u128::from(spread) < latency.as_micros(),
        "Promise.all calls arrived over {spread} µs"
    );
}

#[test]
fn a_16_way_fan_out_in_javascript_adds_up() {
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
            "```js\nconst lines = context.split(/\\s+/).filter(Boolean)\nconst n = Math.floor(lines.length / 16) + 1\nconst keys = []\nfor (let i = 0; i < 16; i++) {\n  await store.set(`chunk-${i}`, lines.slice(i * n, (i + 1) * n).join(' '))\n  keys.push(`chunk-${i}`)\n}\nconst answers = await spawn_agents(keys.map(k => ['sum the numbers', [k]]))\nconst total = answers.reduce((sum, a) => sum + parseInt(a, 10), 0)\nconsole.log(answers, total)\n```",
        ))
        .then(MockReply::text("FINAL_VAR(total)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let agent_cmd = format!("python3 {} {{prompt_file}}", agent.display());
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "add all the numbers",
        &[
            "--env",
            "js",
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
    // With --agent-cmd the prompt advertises the agents.
    let system = mock.control().requests()[0].system_prompt().unwrap();
    assert!(
        system.contains("await spawn_agents([[task, refs], ...])"),
        "{system}"
    );
}

#[test]
fn nested_runs_stay_in_javascript() {
    let sb = Sandbox::new();
    let script = MockScript::new()
        .rule(MockRule::contains(
            "Task: count the words",
            MockReply::text("```js\nconst n = context.split(' ').length\n```\nFINAL_VAR(n)"),
        ))
        .then(MockReply::text(
            "```js\nconst answer = await sub_rlm('count the words', 'one two three four')\nconsole.log('child said', answer)\n```",
        ))
        .then(MockReply::text("FINAL_VAR(answer)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "delegate",
        &["--env", "js"],
    );
    assert_eq!(result["answer"], "4");
    assert_eq!(result["depth_reached"], 1);
    // The child's own trace says it ran JavaScript.
    let child_env: Vec<String> = std::fs::read_dir(sb.data_dir().join("runs"))
        .unwrap()
        .map(|dir| {
            let events = std::fs::read_to_string(dir.unwrap().path().join("events.jsonl")).unwrap();
            let first: Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
            format!("{}:{}", first["depth"], first["env"].as_str().unwrap())
        })
        .collect();
    assert!(child_env.contains(&"1:js".to_owned()), "{child_env:?}");
    assert!(child_env.contains(&"0:js".to_owned()), "{child_env:?}");
}

#[test]
fn a_repl_session_keeps_javascript_variables_and_history() {
    let sb = Sandbox::new();
    let context = sb.file("words.txt", "alpha beta gamma");
    let mock = mock(&[
        "```js\nconst found = context.split(' ')[1]\nconsole.log(found)\n```",
        "FINAL(the second word is beta)",
        "```js\nconsole.log(JSON.stringify(history), found, query)\n```",
        "FINAL_VAR(found)",
    ]);
    let out = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["-q", "repl", "--env", "js", "--base-url"])
        .arg(mock.control().openai_base_url())
        .args(["--model", "mock", "--context"])
        .arg(&context)
        .write_stdin("What is the second word?\nAnd the variable?\n")
        .assert()
        .success();
    assert_eq!(
        String::from_utf8(out.get_output().stdout.clone()).unwrap(),
        "the second word is beta\nbeta\n"
    );
    let output = mock.control().requests()[3].last_user_message().unwrap();
    assert!(
        output.contains(
            "[{\"query\":\"What is the second word?\",\"answer\":\"the second word is beta\"}] beta And the variable?"
        ),
        "{output}"
    );
}

#[test]
fn system_prompt_file_replaces_the_prompt_in_every_environment() {
    let sb = Sandbox::new();
    let prompt = sb.file(
        "prompt.txt",
        "You are a careful analyst. Use ```repl blocks.",
    );
    for env in ["python", "js"] {
        let mock = mock(&["FINAL(ok)"]);
        let result = run_json(
            &sb,
            &mock.control().openai_base_url(),
            "q",
            &["--env", env, "--system-prompt", prompt.to_str().unwrap()],
        );
        assert_eq!(result["answer"], "ok");
        assert_eq!(
            mock.control().requests()[0].system_prompt().as_deref(),
            Some("You are a careful analyst. Use ```repl blocks."),
            "{env}"
        );
    }
    let missing = sb.root().join("missing.txt");
    sb.bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "run",
            "q",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--system-prompt",
        ])
        .arg(&missing)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("failed to read --system-prompt"));
}

/// An endless loop, a memory bomb and a stack overflow each end one step with an error
/// the model reads; the run goes on to its answer and the store is untouched.
#[test]
fn runaway_code_ends_a_step_not_the_run() {
    let sb = Sandbox::new();
    sb.set(&["kept", "a stored value"]);
    let mock = mock(&[
        "```js\nvar before = 'set before'\nwhile (true) {}\n```",
        "```js\nconst hog = []\nwhile (true) hog.push(new Array(100000).fill(7))\n```",
        "```js\nfunction down(n) { return down(n + 1) }\ndown(0)\n```",
        "```js\nconsole.log(before, (await store.get('kept')))\n```",
        "FINAL(survived)",
    ]);
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "misbehave",
        &["--env", "js", "--exec-timeout", "1", "--js-memory-mb", "64"],
    );
    assert_eq!(result["answer"], "survived");
    assert_eq!(result["forced"], false);
    let requests = mock.control().requests();
    let fed_back = |i: usize| requests[i].last_user_message().unwrap();
    assert!(fed_back(1).contains("interrupted"), "{}", fed_back(1));
    assert!(fed_back(2).contains("out of memory"), "{}", fed_back(2));
    assert!(
        fed_back(3).contains("Maximum call stack size exceeded"),
        "{}",
        fed_back(3)
    );
    let last = fed_back(4);
    assert!(last.contains("a stored value"), "{last}");
    assert_eq!(sb.get("kept"), b"a stored value");
}
