//! The combinators one step at a time (`ctx_split`, `ctx_filter`, `ctx_map`,
//! `ctx_reduce`) in every environment, against the mock: each step leaves a variable
//! the next takes (pieces by reference, not copies), a map over budget is refused
//! before any call, a failing leaf is reported, pieces of a changed file are refused.

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockRule, MockScript, MockToolCall};
use serde_json::{json, Value};

use super::plans::{
    after_step, leaf_requests, plan_stages, printed, run, run_code, runs_show, LEAF,
};
use crate::support::Sandbox;

/// The variable `key` of the sandbox's store, through `vars get`.
fn var(sb: &Sandbox, key: &str) -> Value {
    let out = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["vars", "get", key])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn python_steps_leave_variables_the_next_step_takes() {
    let code = "pieces = ctx_split('context', by='lines', size=10)\n\
                kept = ctx_filter(pieces, regex='line [0-9]*[05]:')\n\
                results = ctx_map(kept, ask='How many errors are in this piece? Answer with a number.')\n\
                print(ctx_reduce(results, op='sum'))\n\
                print(pieces, kept, results)\n\
                print(ctx_split.last['count'], ctx_filter.last['count'], ctx_map.last['calls'])";
    let (sb, mock, printed) = run_code(code, &["--max-parallel", "4"]);
    let lines: Vec<&str> = printed.lines().collect();
    // Every piece of 10 lines holds a line 0 or 5: all 10 kept, each answers 3.
    assert_eq!(lines[0], "30", "{printed}");
    assert_eq!(lines[2], "10 10 10", "{printed}");
    assert_eq!(leaf_requests(&mock).len(), 10);
    let keys: Vec<&str> = lines[1].split(' ').collect();
    assert!(
        keys[0].starts_with("pieces-") && keys[2].starts_with("results-"),
        "{printed}"
    );
    // The pieces are byte ranges of the context's file, not its text.
    let pieces = var(&sb, keys[0]);
    assert_eq!(
        pieces["pieces_of"].as_str().map(|k| k.is_empty()),
        Some(false)
    );
    assert_eq!(pieces["pieces"].as_array().unwrap().len(), 10);
    assert_eq!(
        pieces["pieces"][1],
        json!({"index": 1, "start": 119, "end": 248, "chars": 129})
    );
    assert!(pieces.to_string().len() < 1_500, "{pieces}");
    let filtered = var(&sb, keys[1]);
    assert_eq!(filtered["filtered"], json!([{"regex": "line [0-9]*[05]:"}]));
    let results = var(&sb, keys[2]);
    assert_eq!(results[9]["result"], "3 errors");
    assert_eq!(results[9]["index"], 9);
    // The map is a plan in the trace: priced, ten leaves, done.
    let stages = plan_stages(&sb);
    assert_eq!(stages.first().map(String::as_str), Some("priced"));
    assert_eq!(stages.iter().filter(|s| *s == "leaf").count(), 10);
    assert!(runs_show(&sb).contains("10 results"), "{}", runs_show(&sb));
}

#[test]
fn a_map_over_budget_is_refused_before_any_call_and_a_bad_step_says_what_to_give() {
    let code = "pieces = ctx_split('context', by='lines', size=10)\n\
                try:\n    ctx_map(pieces, ask='How many errors?')\nexcept Exception as e:\n    print('refused:', e)\n\
                store.set('notes', 'some text')\n\
                try:\n    ctx_map('notes', count='x')\nexcept Exception as e:\n    print('wrong:', e)\n\
                try:\n    ctx_map('context', count='x')\nexcept Exception as e:\n    print('missing:', e)\n\
                try:\n    ctx_filter(pieces, regex='a', ask='b')\nexcept Exception as e:\n    print('two:', e)\n\
                try:\n    ctx_reduce(pieces, op='median')\nexcept Exception as e:\n    print('op:', e)";
    let (sb, mock, printed) = run_code(code, &["--max-llm-calls", "6"]);
    assert!(
        printed.contains("refused: the plan was refused before any call"),
        "{printed}"
    );
    assert!(printed.contains("10 model calls"), "{printed}");
    assert!(
        printed.contains("wrong: `notes` is not a set of pieces: give the variable ctx_split or ctx_filter returned"),
        "{printed}"
    );
    assert!(
        printed.contains("missing: no variable `context`: give the pieces variable ctx_split or ctx_filter returned"),
        "{printed}"
    );
    assert!(
        printed.contains(
            "two: the plan is not valid: `filter` takes one of regex, where, ask, not several"
        ),
        "{printed}"
    );
    assert!(
        printed.contains("op: the plan is not valid: `reduce`: unknown variant `median`"),
        "{printed}"
    );
    assert!(leaf_requests(&mock).is_empty());
    assert_eq!(plan_stages(&sb), ["refused"]);
}

#[test]
fn a_failing_leaf_is_reported_not_hidden() {
    let sb = Sandbox::new();
    let code = "pieces = ctx_split('context', by='lines', size=50)\n\
                try:\n    ctx_map(pieces, ask='How many errors are in this piece?')\nexcept Exception as e:\n    print('failed:', e)";
    let script = MockScript::new()
        .rule(MockRule::contains(
            "line 99",
            MockReply::error(400, "piece too odd"),
        ))
        .rule(MockRule::contains(LEAF, "15 errors"))
        .then(MockReply::text(format!("```repl\n{code}\n```")))
        .then(MockReply::text("FINAL(done)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let out = run(&sb, &mock, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = printed(&sb);
    assert!(
        printed.contains("failed: ") && printed.contains("400"),
        "{printed}"
    );
    let failed_leaves = std::fs::read_dir(sb.data_dir().join("runs"))
        .unwrap()
        .flat_map(|run| {
            let events = std::fs::read_to_string(run.unwrap().path().join("events.jsonl")).unwrap();
            events
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .filter(|e| e["kind"] == "plan" && e["failed"] == true)
                .count()
                .checked_add(0)
        })
        .sum::<usize>();
    assert_eq!(failed_leaves, 1, "the failing leaf is in the trace");
}

#[test]
fn javascript_steps_chain_the_same_way() {
    let code = "const pieces = await ctx_split('context', {by: 'chars', size: 300});\n\
                const results = await ctx_map(pieces, {count: 'error'});\n\
                console.log(await ctx_reduce(results, {op: 'sum'}));\n\
                console.log(ctx_split.last.count, ctx_map.last.calls)";
    let (sb, mock, printed) = run_code(code, &["--env", "js"]);
    assert_eq!(
        printed.lines().collect::<Vec<_>>(),
        ["30", "5 0"],
        "{printed}"
    );
    // `runs show` draws the step map with its map and no reduction (it has none yet).
    let shown = runs_show(&sb);
    assert!(
        shown.contains(r#"5 pieces, 5 kept, 0 calls"#)
            && shown.contains(r#"· map {"count":"error"}"#)
            && !shown.contains("reduce null"),
        "{shown}"
    );
    assert_eq!(
        mock.control().request_count(),
        2,
        "the root's two turns only"
    );
}

#[test]
fn the_tools_environment_offers_the_steps_and_chains_them() {
    let sb = Sandbox::new();
    // Each step's result names the variable the next takes; the mock reads it from
    // the last message (the keys are random) and calls the next step with it.
    let split = MockToolCall::new(
        "ctx_split",
        json!({"variable": "context", "by": "lines", "size": 25}),
    );
    let script = MockScript::new()
        .rule(MockRule::contains(LEAF, "7 errors"))
        .rule(after_step("Next: ctx_map", "pieces-", |key| {
            MockToolCall::new("ctx_map", json!({"pieces": key, "ask": "How many errors are in this piece? Answer with a number."}))
        }))
        .rule(after_step("Next: ctx_reduce", "results-", |key| {
            MockToolCall::new("ctx_reduce", json!({"results": key, "op": "sum"}))
        }))
        .rule(after_step("(reduced from", "", |_| {
            MockToolCall::new("final_answer", json!({"answer": "done"}))
        }))
        .then(MockReply::tool_calls("", [split]));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let out = run(&sb, &mock, &["--env", "tools"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = printed(&sb);
    assert!(printed.contains(": 4 pieces ("), "{printed}");
    assert!(
        printed.contains(": 4 results of 4 pieces (4 model calls); the first: 7 errors"),
        "{printed}"
    );
    assert!(
        printed.contains("28\n(reduced from 4 results)"),
        "{printed}"
    );
    let first = &mock.control().requests()[0];
    for tool in ["ctx_split", "ctx_filter", "ctx_map", "ctx_reduce"] {
        assert!(
            first.tool_names().contains(&tool.to_owned()),
            "{tool} offered"
        );
    }
    assert!(first
        .system_prompt()
        .unwrap()
        .contains("The same, step by step"));
}

#[test]
fn pieces_of_a_changed_file_are_refused_with_what_to_do() {
    let sb = Sandbox::new();
    let data = sb.file("data.txt", "alpha\nbeta\n".repeat(50));
    let run_with = |code: &str| {
        let script = MockScript::new()
            .then(MockReply::text(format!("```repl\n{code}\n```")))
            .then(MockReply::text("FINAL(done)"));
        let mock = MockLlm::spawn_blocking_thread(script).unwrap();
        let out = sb
            .bare()
            .arg("--data-dir")
            .arg(sb.data_dir())
            .args(["run", "count", "--model", "mock", "--no-stream"])
            // The context stays the user's file (no copy): the pieces point into it.
            .args(["--lazy-context", "always"])
            .arg("--base-url")
            .arg(mock.control().openai_base_url())
            .arg("--context")
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // One run cuts the file; the file grows; the next run maps the old pieces. (Pieces
    // of a stored text point into its content-addressed view, which never changes.)
    run_with("print(ctx_split('context', by='lines', size=10))");
    std::fs::write(&data, "alpha\nbeta\n".repeat(51)).unwrap();
    run_with(
        "key = [r['key'] for r in store.list() if r['key'].startswith('pieces-')][0]\n\
         try:\n    ctx_map(key, count='a')\nexcept Exception as e:\n    print('changed:', e)",
    );
    let printed = printed(&sb);
    assert!(
        printed
            .contains("data.txt, which changed since the split (550 bytes, now 561): split `run-"),
        "{printed}"
    );
}

/// A regex filter keeps pieces; a `count` or `extract` after it reads only the lines
/// (under a regex split, the records) it matches, one step at a time and in a whole
/// plan alike; and `pairs` counts the pairs of equal values.
#[test]
fn a_pattern_map_after_a_regex_filter_reads_the_lines_it_matches() {
    let code = "pieces = ctx_split('context', by='lines', size=50)\n\
                kept = ctx_filter(pieces, regex='error')\n\
                print(ctx_reduce(ctx_map(kept, count='line'), op='sum'))\n\
                print(ctx_reduce(ctx_map(pieces, count='line'), op='sum'))\n\
                print(map_reduce(split={'by': 'lines', 'size': 50}, filter={'regex': 'error'}, map={'count': 'line'}, reduce={'op': 'sum'}))\n\
                print(map_reduce(split={'by': 'lines', 'size': 50}, map={'extract': r'line \\d+: (\\w+)'}, reduce={'op': 'pairs'}))\n\
                print(map_reduce(split={'by': 'lines', 'size': 50}, filter={'regex': 'error'}, map={'extract': r'line \\d+: (\\w+)'}, reduce={'op': 'pairs'}))\n\
                print(map_reduce(split={'by': 'lines', 'size': 50}, filter={'regex': 'error'}, map={'ask': 'How many lines?'}, reduce={'op': 'sum'}))\n\
                records = ''.join(f'Record {i} label={\"red\" if i % 2 else \"blue\"}\\n  amount={i}\\n' for i in range(10))\n\
                print(map_reduce(input='records', split={'by': 'regex', 'pattern': '^Record', 'size': 200}, filter={'regex': 'label=red'}, map={'extract': r'amount=(\\d+)'}, reduce={'op': 'sum'}))";
    let (_, mock, printed) = run_code(code, &[]);
    let lines: Vec<&str> = printed.lines().collect();
    // 100 lines, 30 of them errors, in two pieces that both hold errors.
    assert_eq!(lines[..5], ["30", "100", "30", "2850", "435"], "{printed}");
    // An ask map reads whole pieces: both leaves asked (each answers 3).
    assert_eq!(lines[5], "6", "{printed}");
    assert_eq!(leaf_requests(&mock).len(), 2);
    // Under a regex split a record of two lines is kept whole: its amount is on the
    // line the filter does not match (1 + 3 + 5 + 7 + 9).
    assert_eq!(lines[6], "25", "{printed}");
}

/// A `where` filter keeps the records whose number field meets a condition: the
/// `pairs` suite's question (pairs of persons in one city, both born after 2000),
/// answered by a whole plan and step by step, against a count made by hand; a
/// condition that is not one is refused with what to write.
#[test]
fn a_where_filter_keeps_the_records_whose_number_meets_the_condition() {
    let code = "people = ''.join(f'person=p{i} city={[\"Oslo\", \"Lima\", \"Riga\"][i % 3]} year={1990 + (i * 7) % 25}\\n' for i in range(200))\n\
                import itertools\n\
                rows = [dict(kv.split('=') for kv in line.split()) for line in people.splitlines()]\n\
                young = [r for r in rows if int(r['year']) > 2000]\n\
                print(sum(1 for a, b in itertools.combinations(young, 2) if a['city'] == b['city']))\n\
                print(map_reduce(input='people', split={'by': 'lines', 'size': 40}, filter={'where': 'year > 2000'}, map={'extract': r'city=(\\w+)'}, reduce={'op': 'pairs'}))\n\
                pieces = ctx_split('people', by='lines', size=40)\n\
                kept = ctx_filter(pieces, where='year > 2000')\n\
                print(ctx_reduce(ctx_map(kept, extract=r'city=(\\w+)'), op='pairs'))\n\
                print(map_reduce(input='people', split={'by': 'lines', 'size': 40}, filter={'where': 'year >= 2010 and year <= 2011'}, map={'count': 'person='}, reduce={'op': 'sum'}), sum(1 for r in rows if 2010 <= int(r['year']) <= 2011))\n\
                try:\n    map_reduce(input='people', split={'by': 'lines'}, filter={'where': 'born after 2000'}, map={'count': 'x'}, reduce={'op': 'sum'})\nexcept Exception as e:\n    print('refused:', e)";
    let (_, mock, printed) = run_code(code, &[]);
    let lines: Vec<&str> = printed.lines().collect();
    let by_hand = lines[0];
    assert!(by_hand.parse::<u64>().expect("a count") > 0, "{printed}");
    assert_eq!(lines[1], by_hand, "the whole plan: {printed}");
    assert_eq!(lines[2], by_hand, "step by step: {printed}");
    let (plan, hand) = lines[3].split_once(' ').expect("two numbers");
    assert_eq!(plan, hand, "{printed}");
    assert!(
        lines[4].starts_with("refused: ")
            && lines[4].contains("`filter.where`")
            && lines[4].contains("has no comparison"),
        "{printed}"
    );
    // No model was asked for any of it.
    assert!(leaf_requests(&mock).is_empty());
}

#[test]
fn an_extract_map_reduces_every_match_not_one_per_piece() {
    // The `aggregate` suite's sum: every amount of a label, several in each piece.
    let code = "log = ''.join(f'record {i}: label={\"red\" if i % 3 == 0 else \"blue\"} amount={i}\\n' for i in range(300))\n\
                print(map_reduce(input='log', split={'by': 'lines', 'size': 50}, map={'extract': r'label=red amount=(\\d+)'}, reduce={'op': 'sum'}))\n\
                print(map_reduce(input='log', split={'by': 'lines', 'size': 50}, map={'extract': r'label=(\\w+)'}, reduce={'op': 'top_k', 'k': 1}))\n\
                print(map_reduce(input='log', split={'by': 'lines', 'size': 50}, map={'extract': r'label=green amount=(\\d+)'}, reduce={'op': 'sum'}))\n\
                print(map_reduce.last['kept'])\n\
                try:\n    map_reduce(input='log', split={'by': 'lines', 'size': 50}, map={'extract': r'label=(\\w+)'}, reduce={'op': 'sum'})\nexcept Exception as e:\n    print('words:', e)";
    let (_, mock, printed) = run_code(code, &[]);
    let lines: Vec<&str> = printed.lines().collect();
    let red: u64 = (0..300).filter(|i| i % 3 == 0).sum();
    assert_eq!(lines[0], red.to_string(), "{printed}");
    assert!(lines[1].starts_with("blue"), "{printed}");
    assert_eq!(lines[2], "0", "{printed}");
    assert_eq!(lines[3], "6", "pieces mapped, not matches: {printed}");
    // Words summed: the advice fits an extract (the local model summed cities).
    assert!(
        lines[4].starts_with("words: ")
            && lines[4]
                .contains("`sum` found no number in any of the 300 results (the first: \"red\")")
            && lines[4].contains(
                "the extract gave values, not numbers: to count them use {\"op\": \"count\"}"
            ),
        "{printed}"
    );
    assert_eq!(mock.control().request_count(), 2, "no model call");
}

#[test]
fn an_extract_map_with_too_many_matches_fails_with_what_to_do() {
    // 110 000 digits: every match would be a result held in memory and stored.
    let code = "big = '1 2 3 4 5 6 7 8 9 0\\n' * 11000\n\
                try:\n    map_reduce(input='big', split={'by': 'lines', 'size': 1000}, map={'extract': r'\\d'}, reduce={'op': 'count'})\nexcept Exception as e:\n    print(e)\n\
                print(map_reduce(input='big', split={'by': 'lines', 'size': 1000}, map={'count': r'\\d'}, reduce={'op': 'sum'}))";
    let (_, _, printed) = run_code(code, &[]);
    assert!(
        printed.contains("the `extract` map found more than 100000 matches of `\\d`; count them with `count` instead"),
        "{printed}"
    );
    assert!(printed.trim_end().ends_with("110000"), "{printed}");
}

#[test]
fn a_forged_pieces_variable_cannot_read_a_file_the_store_never_gave_out() {
    // js code reads no file; a pieces variable written with store.set must not turn
    // ctx_map into a way to read one.
    let sb = Sandbox::new();
    let secret = sb.file("secret.txt", "password=hunter2\n");
    let code = format!(
        "await store.set('pieces-forged', {{pieces_of: 'context', file: {path:?}, file_bytes: 17, split: {{by: 'lines'}}, pieces: [{{index: 0, start: 0, end: 17, chars: 17}}]}});\n\
         try {{ console.log(await ctx_map('pieces-forged', {{extract: 'password=(\\\\w+)'}})); }} catch (e) {{ console.log('refused: ' + e.message); }}",
        path = secret.display().to_string()
    );
    let (_, _, printed) = run_code(&code, &["--env", "js"]);
    assert!(
        printed.contains("refused: `pieces-forged` points into")
            && printed.contains("pieces come from ctx_split, not from store.set"),
        "{printed}"
    );
    assert!(!printed.contains("hunter2"), "{printed}");
}
