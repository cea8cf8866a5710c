//! `--env tools` end to end: the binary against the scripted mock model calling the
//! micro-tools natively (OpenAI and Anthropic, streamed), a 64 MB needle found with
//! grep then slice, no Python started, bad calls, repeats and the allow-list answered
//! as results, `--max-iterations` forcing a `final_answer` call, `ctx_summarize` on the
//! sub-model, a command-line model writing its calls as text, and arguments encoded
//! twice.

use rlm_test_support::mock_llm::{
    MockLlm, MockLlmThread, MockReply, MockRule, MockScript, MockToolCall,
};
use serde_json::{json, Value};

use crate::subagents::run_json;
use crate::support::{write_big_context, Sandbox};

fn mock(replies: Vec<MockReply>) -> MockLlmThread {
    MockLlm::spawn_blocking_thread(MockScript::replies(replies)).unwrap()
}

fn calls(calls: impl IntoIterator<Item = (&'static str, Value)>) -> MockReply {
    MockReply::tool_calls(
        "",
        calls
            .into_iter()
            .map(|(name, arguments)| MockToolCall::new(name, arguments)),
    )
}

fn call(name: &'static str, arguments: Value) -> MockReply {
    calls([(name, arguments)])
}

/// The results the run sent back, in order, over every request.
fn results(mock: &MockLlmThread) -> Vec<String> {
    let requests = mock.control().requests();
    let last = requests.last().unwrap();
    last.tool_results()
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

/// A python3 that cannot be started: a run that needs one fails.
const NO_PYTHON: [&str; 2] = ["--python", "/nonexistent/python3"];

#[test]
fn a_needle_in_64_mb_is_found_with_grep_then_slice_and_no_python() {
    let sb = Sandbox::new();
    let needle = "SECRET-CODE=7f3a9c";
    let context = sb.root().join("big.log");
    write_big_context(&context, 64 << 20, 40 << 20, needle);
    // Where write_big_context puts the needle: after the first whole line at 40 MiB.
    let line_len =
        "2026-11-22T09:00:00Z svc=api level=info msg=\"request served\" latency_ms=12\n".len();
    let offset = (40usize << 20).div_ceil(line_len) * line_len;
    let mock = mock(vec![
        call("ctx_length", json!({"variable": "context"})),
        call(
            "ctx_grep",
            json!({"variable": "context", "pattern": "secret-code"}),
        ),
        call(
            "ctx_slice",
            json!({"variable": "context", "start": offset, "end": offset + needle.len()}),
        ),
        call("final_answer", json!({"answer": needle})),
    ]);
    let mut args = vec!["--env", "tools", "--context", context.to_str().unwrap()];
    args.extend(NO_PYTHON);
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "What is the secret code?",
        &args,
    );
    assert_eq!(result["answer"], needle);
    assert_eq!(result["forced"], false);
    assert_eq!(result["iterations"], 4);
    let requests = mock.control().requests();
    assert_eq!(
        requests[0].tool_names(),
        [
            "ctx_length",
            "ctx_grep",
            "ctx_slice",
            "ctx_summarize",
            "ctx_map_reduce",
            "ctx_split",
            "ctx_filter",
            "ctx_map",
            "ctx_reduce",
            "final_answer"
        ]
    );
    let system = requests[0].system_prompt().unwrap();
    assert!(system.contains("To find one fact"), "{system}");
    assert!(
        system.contains("ctx_grep's first line says how many lines match"),
        "{system}"
    );
    assert!(!system.contains("```repl"), "{system}");
    assert!(requests[0].prompt_chars() < 8_000);
    let found = results(&mock);
    assert!(found[0].starts_with("context: 67108"), "{found:?}");
    let line = offset / line_len + 1;
    assert_eq!(
        found[1],
        format!(
            "1 line of context matches \"secret-code\":\noffset {offset} (line {line}): {needle}"
        )
    );
    assert_eq!(
        found[2],
        format!("context[{offset}:{}]:\n{needle}", offset + needle.len())
    );
}

#[test]
fn anthropic_tool_use_streamed_ends_with_final_in_text() {
    let sb = Sandbox::new();
    let context = sb.file("app.log", "boot ok\nvault code is 7291\nshutdown\n");
    let mock = mock(vec![
        MockReply::tool_calls(
            "Searching.",
            [MockToolCall::new(
                "ctx_grep",
                json!({"variable": "context", "pattern": "vault"}),
            )],
        ),
        MockReply::text("FINAL(7291)"),
    ]);
    let mut args = vec![
        "--env",
        "tools",
        "--provider",
        "anthropic",
        "--context",
        context.to_str().unwrap(),
    ];
    args.extend(NO_PYTHON);
    let result = run_json(
        &sb,
        &mock.control().base_url(),
        "What is the vault code?",
        &args,
    );
    assert_eq!(result["answer"], "7291");
    let requests = mock.control().requests();
    assert!(requests[0].stream());
    let answered = requests[1].tool_result_details();
    assert_eq!(answered.len(), 1);
    assert!(
        answered[0]
            .content
            .contains("offset 8 (line 2): vault code is 7291"),
        "{answered:?}"
    );
    assert!(!answered[0].is_error);
}

#[test]
fn bad_calls_repeats_and_tools_not_offered_are_results_the_model_reads() {
    let sb = Sandbox::new();
    let context = sb.file("app.log", "alpha\nbeta\n");
    let grep = || {
        (
            "ctx_grep",
            json!({"variable": "context", "pattern": "beta"}),
        )
    };
    let mock = mock(vec![
        calls([
            ("ctx_delete", json!({"variable": "context"})),
            ("ctx_grep", json!({"variable": "context"})),
            (
                "ctx_grep",
                json!({"variable": "context", "pattern": "(oops"}),
            ),
            ("ctx_grep", json!({"variable": "nope", "pattern": "x"})),
            (
                "ctx_slice",
                json!({"variable": "context", "start": 0, "end": 5}),
            ),
        ]),
        calls([grep(), grep(), grep()]),
        MockReply::text("FINAL(beta)"),
    ]);
    let mut args = vec![
        "--env",
        "tools",
        "--tools",
        "ctx_grep,ctx_length",
        "--context",
        context.to_str().unwrap(),
    ];
    args.extend(NO_PYTHON);
    let result = run_json(&sb, &mock.control().openai_base_url(), "q", &args);
    assert_eq!(result["answer"], "beta");
    let requests = mock.control().requests();
    assert_eq!(
        requests[0].tool_names(),
        ["ctx_grep", "ctx_length", "final_answer"]
    );
    let answered = results(&mock);
    assert_eq!(answered.len(), 8, "{answered:#?}");
    assert!(
        answered[0].starts_with("unknown tool `ctx_delete`"),
        "{}",
        answered[0]
    );
    assert!(
        answered[1].contains("ctx_grep") && answered[1].contains("`pattern`"),
        "{}",
        answered[1]
    );
    assert!(
        answered[2].contains("not a valid regular expression"),
        "{}",
        answered[2]
    );
    assert!(
        answered[3].contains("no variable named \"nope\""),
        "{}",
        answered[3]
    );
    assert!(
        answered[4].contains("`ctx_slice` is not offered"),
        "{}",
        answered[4]
    );
    assert_eq!(answered[5], answered[6]);
    assert!(
        answered[7].starts_with("Call not run: the same call already ran 2 times."),
        "{}",
        answered[7]
    );
    assert!(answered[7].contains(&answered[5]));
}

#[test]
fn an_unknown_tool_in_the_list_is_refused_before_anything_runs() {
    let sb = Sandbox::new();
    sb.bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "run",
            "q",
            "--env",
            "tools",
            "--tools",
            "ctx_grep,rm_rf",
            "--model",
            "m",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("unknown tool `rm_rf`"));
    assert!(!sb.data_dir().exists());
}

#[test]
fn a_temperature_out_of_range_is_refused() {
    let sb = Sandbox::new();
    sb.bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "q", "--temperature", "NaN", "--model", "m"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "\"NaN\" is not a temperature from 0 to 2",
        ));
}

/// Arguments encoded twice (the wire's argument text is a JSON string holding the
/// object, as some chat templates write them) are read as the object, not refused.
#[test]
fn arguments_encoded_twice_are_read_as_the_object() {
    let sb = Sandbox::new();
    let context = sb.file("app.log", "alpha\nbeta\n");
    let twice = |object: Value| serde_json::to_string(&object.to_string()).unwrap();
    let mock = mock(vec![
        MockReply::tool_calls(
            "",
            [MockToolCall::raw(
                "ctx_grep",
                twice(json!({"variable": "context", "pattern": "beta"})),
            )],
        ),
        MockReply::tool_calls(
            "",
            [MockToolCall::raw(
                "final_answer",
                twice(json!({"answer": "line 2"})),
            )],
        ),
    ]);
    let mut args = vec!["--env", "tools", "--context", context.to_str().unwrap()];
    args.extend(NO_PYTHON);
    let result = run_json(&sb, &mock.control().openai_base_url(), "q", &args);
    assert_eq!(result["answer"], "line 2");
    assert_eq!(result["forced"], false);
    let answered = results(&mock);
    assert!(answered[0].contains("beta"), "{answered:?}");
}

#[test]
fn out_of_iterations_the_model_must_call_final_answer() {
    let sb = Sandbox::new();
    let context = sb.file("app.log", "alpha\n");
    let mock = mock(vec![
        call("ctx_length", json!({"variable": "context"})),
        call("ctx_grep", json!({"variable": "context", "pattern": "a"})),
        call("final_answer", json!({"answer": "one line"})),
    ]);
    let mut args = vec![
        "--env",
        "tools",
        "--temperature",
        "0",
        "--max-iterations",
        "2",
        "--context",
        context.to_str().unwrap(),
    ];
    args.extend(NO_PYTHON);
    let result = run_json(&sb, &mock.control().openai_base_url(), "q", &args);
    assert_eq!(result["answer"], "one line");
    assert_eq!(result["forced"], true);
    let requests = mock.control().requests();
    assert_eq!(requests[0].body["tool_choice"], "auto");
    assert_eq!(requests[0].body["temperature"], 0.0);
    assert_eq!(
        requests[2].body["tool_choice"],
        json!({"type": "function", "function": {"name": "final_answer"}})
    );
}

#[test]
fn ctx_summarize_asks_the_sub_model_and_a_stored_variable_is_read_by_key() {
    let sb = Sandbox::new();
    sb.set(&["notes", "the deploy failed twice, then passed"]);
    let mock = mock(vec![
        call(
            "ctx_summarize",
            json!({"variable": "notes", "instruction": "How did the deploy go?"}),
        ),
        MockReply::text("two failures, then a pass"),
        MockReply::text("FINAL(it passed on the third try)"),
    ]);
    let mut args = vec!["--env", "tools"];
    args.extend(NO_PYTHON);
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "How did the deploy go?",
        &args,
    );
    assert_eq!(result["answer"], "it passed on the third try");
    let requests = mock.control().requests();
    assert_eq!(requests[1].model(), Some("sub-model"));
    let sub_prompt = requests[1].last_user_message().unwrap();
    assert!(
        sub_prompt.contains("How did the deploy go?"),
        "{sub_prompt}"
    );
    assert!(
        sub_prompt.contains("the deploy failed twice, then passed"),
        "{sub_prompt}"
    );
    assert!(requests[1].tool_names().is_empty());
    assert_eq!(
        results(&mock),
        ["summary of notes:\ntwo failures, then a pass"]
    );
}

/// A command-line model has no tool calling: it writes its calls as text and reads
/// the results as text. This one greps, then answers from what the result showed.
#[test]
fn a_forced_answer_in_a_sentence_is_asked_once_for_final_answer() {
    // The forced request names final_answer; a model that answers in a sentence is
    // asked once more for the answer alone, and its call is the answer.
    let sb = Sandbox::new();
    let context = sb.file("app.log", "alpha\n");
    let mock = mock(vec![
        call("ctx_length", json!({"variable": "context"})),
        MockReply::text("The log has one line, and the answer is \"alpha\"."),
        call("final_answer", json!({"answer": "alpha"})),
    ]);
    let mut args = vec![
        "--env",
        "tools",
        "--max-iterations",
        "1",
        "--context",
        context.to_str().unwrap(),
    ];
    args.extend(NO_PYTHON);
    let result = run_json(&sb, &mock.control().openai_base_url(), "q", &args);
    assert_eq!(result["answer"], "alpha");
    assert_eq!(result["forced"], true);
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[2]
        .last_user_message()
        .unwrap_or_default()
        .starts_with("Your reply called no final_answer."));
}

#[test]
fn a_cli_model_writes_its_calls_as_text() {
    let sb = Sandbox::new();
    let context = sb.file("app.log", "boot ok\nSECRET-CODE=abc123\nshutdown\n");
    let model = sb.file(
        "model.sh",
        r#"prompt=$(cat)
case "$prompt" in
  *"Result of ctx_grep"*)
    code=$(printf '%s\n' "$prompt" | grep -o 'SECRET-CODE=[a-z0-9]*' | head -n 1)
    echo "FINAL($code)" ;;
  *)
    printf 'Let me search.\n```tool\n{"tool": "ctx_grep", "arguments": {"variable": "context", "pattern": "secret"}}\n```\n' ;;
esac
"#,
    );
    let llm_cmd = format!("sh {}", model.display());
    let out = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args([
            "run",
            "What is the secret code?",
            "--env",
            "tools",
            "--provider",
            "cli",
        ])
        .args([
            "--llm-cmd",
            &llm_cmd,
            "--context",
            context.to_str().unwrap(),
            "--json",
        ])
        .args(NO_PYTHON)
        .assert()
        .success();
    let result: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(result["answer"], "SECRET-CODE=abc123");
    assert_eq!(result["iterations"], 2);
}

/// `ctx_summarize` over a context too large for one sub-call starts a nested run one
/// level deeper, in the same environment, given the context by reference: the child
/// greps the whole variable with the tools and its answer is the summary.
#[test]
fn ctx_summarize_over_a_large_context_is_a_nested_run_with_the_tools() {
    let sb = Sandbox::new();
    let mut log = "quiet line\n".repeat(5_000);
    log.push_str("the vault code is 7291\n");
    let context = sb.file("app.log", log);
    let script = MockScript::new()
        .rule(MockRule::function("the child, after its grep", |request| {
            (request.model() == Some("sub-model") && !request.tool_results().is_empty())
                .then(|| MockReply::text("FINAL(the code is 7291)"))
        }))
        .rule(MockRule::function("the child's first turn", |request| {
            (request.model() == Some("sub-model")).then(|| {
                MockReply::tool_calls(
                    "",
                    [MockToolCall::new(
                        "ctx_grep",
                        json!({"variable": "context", "pattern": "vault"}),
                    )],
                )
            })
        }))
        .then(call(
            "ctx_summarize",
            json!({"variable": "context", "instruction": "Find the vault code"}),
        ))
        .then(MockReply::text("FINAL(7291)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let mut args = vec![
        "--env",
        "tools",
        "--sub-context-chars",
        "2000",
        "--context",
        context.to_str().unwrap(),
    ];
    args.extend(NO_PYTHON);
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "What is the vault code?",
        &args,
    );
    assert_eq!(result["answer"], "7291");
    assert_eq!(result["sub_agents"], 1);
    assert_eq!(result["depth_reached"], 1);
    let requests = mock.control().requests();
    let child: Vec<_> = requests
        .iter()
        .filter(|r| r.model() == Some("sub-model"))
        .collect();
    assert_eq!(child.len(), 2, "the child's two turns");
    // The child runs under --env tools too, over the parent's context by reference.
    assert_eq!(
        child[0].tool_names(),
        [
            "ctx_length",
            "ctx_grep",
            "ctx_slice",
            "ctx_summarize",
            "ctx_map_reduce",
            "ctx_split",
            "ctx_filter",
            "ctx_map",
            "ctx_reduce",
            "final_answer"
        ]
    );
    assert!(child[0]
        .last_user_message()
        .unwrap()
        .contains("Task: Find the vault code"));
    assert!(child[1].tool_results()[0]
        .1
        .contains("the vault code is 7291"));
    assert_eq!(
        results(&mock),
        ["summary of context (by a nested run over all of it):\nthe code is 7291"]
    );
}

#[test]
fn a_model_that_repeats_one_call_is_forced_to_answer() {
    // A model that sends the same call until its iterations run out: the third run of
    // the call is refused (`repeat_limit`), and the third such refusal in a row ends
    // the loop.
    let sb = Sandbox::new();
    let context = sb.file("app.log", "line one\nline two\n");
    let grep = || {
        call(
            "ctx_grep",
            json!({"variable": "context", "pattern": "vault"}),
        )
    };
    let mock = mock(vec![
        grep(),
        grep(),
        grep(),
        grep(),
        grep(),
        call("final_answer", json!({"answer": "no vault code"})),
    ]);
    let mut args = vec!["--env", "tools", "--context", context.to_str().unwrap()];
    args.extend(["--max-iterations", "12"]);
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "What is the vault code?",
        &args,
    );
    assert_eq!(result["answer"], "no vault code");
    assert_eq!(result["forced"], true);
    assert_eq!(result["iterations"], 5);
    let last = mock.control().requests().pop().unwrap();
    let texts = last.message_texts().join("\n");
    assert!(
        texts.contains("the same correction (repeat_limit) again, after 2 corrections"),
        "{texts}"
    );
}

#[test]
fn a_plan_whose_regex_filter_is_a_comparison_is_told_to_use_where() {
    // A filter {"regex": "year > 2000"} keeps no piece (no line holds that text): the
    // result says why and names the `where` filter, from the filter alone (never a
    // plan derived from the task); the plan sent with it counts.
    let sb = Sandbox::new();
    let context = sb.file("people.txt", crate::plans::six_people());
    let by_regex = call(
        "ctx_map_reduce",
        json!({"variable": "context", "filter": {"regex": "year > 2000"}, "map": {"extract": "city=(\\w+)"}, "reduce": {"op": "pairs"}}),
    );
    let by_where = call(
        "ctx_map_reduce",
        json!({"variable": "context", "filter": {"where": "year > 2000"}, "map": {"extract": "city=(\\w+)"}, "reduce": {"op": "pairs"}}),
    );
    let model = mock(vec![
        by_regex,
        by_where,
        call("final_answer", json!({"answer": "2"})),
    ]);
    let mut args = vec!["--env", "plan", "--context", context.to_str().unwrap()];
    args.extend(NO_PYTHON);
    let result = run_json(
        &sb,
        &model.control().openai_base_url(),
        "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.",
        &args,
    );
    assert_eq!(result["answer"], "2");
    let results = results(&model);
    assert!(
        results[0].starts_with(r#"ctx_map_reduce kept no piece: no line matches the filter {"regex": "year > 2000"}: a pattern matches text, it does not compare numbers"#)
            && results[0].contains(r#"kept by the filter {"where": "year > 2000"} of ctx_map_reduce"#)
            && !results[0].contains("task"),
        "{}",
        results[0]
    );
    // Lima 2004 and 2010, Oslo 2001 and 2003: two pairs.
    assert!(results[1].starts_with("2\n(plan:"), "{}", results[1]);
}

#[test]
fn a_grep_worded_like_the_question_is_shown_the_line_that_says_it_otherwise() {
    // The pattern says "number", the line "numbers", with words between: no line
    // matches, and the grep's result shows the line sharing the most words with it,
    // so the model answers from it on its next call.
    let sb = Sandbox::new();
    let mut text = String::new();
    for i in 0..400 {
        text.push_str(&format!(
            "Paragraph {i} talks about the weather and the sea.\n"
        ));
        if i == 271 {
            text.push_str("One of the spare rotation codes for north-gate-05 is: 8812345.\n");
        }
    }
    let context = sb.file("essay.txt", text);
    let model = mock(vec![
        call(
            "ctx_grep",
            json!({"variable": "context", "pattern": "spare rotation code for north-gate-05"}),
        ),
        call("final_answer", json!({"answer": "8812345"})),
    ]);
    let mut args = vec!["--env", "tools", "--context", context.to_str().unwrap()];
    args.extend(NO_PYTHON);
    let result = run_json(
        &sb,
        &model.control().openai_base_url(),
        "What is the spare rotation code for north-gate-05 mentioned in the text?",
        &args,
    );
    assert_eq!(result["answer"], "8812345");
    assert_eq!(model.control().requests().len(), 2);
    let results = results(&model);
    assert!(
        results[0]
            .starts_with(r#"no line of context matches "spare rotation code for north-gate-05""#)
            && results[0].contains("The line that shares the most words with the pattern")
            && results[0].contains(
                "(line 273): One of the spare rotation codes for north-gate-05 is: 8812345."
            ),
        "{}",
        results[0]
    );
}
