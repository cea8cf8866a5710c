//! What a cell is in JavaScript: notebook declarations, top-level `await`, what
//! `console` prints, what may be thrown, and the helpers' JavaScript-only forms.

use rlm_env::{CodeRepl, FinalAnswer};
use rlm_test_support::repl::{error_of, run};
use serde_json::json;

use crate::support::{json_of, plain, with_context};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_level_declarations_persist_and_may_be_declared_again() {
    let mut f = plain().await;
    run(
        &mut f.env,
        "const total = 1\nlet list = [1, 2]\nclass Box { constructor(v) { this.v = v } }\nfunction twice(n) { return 2 * n }",
    )
    .await;
    assert_eq!(
        run(&mut f.env, "twice(total) + list.length + new Box(3).v").await,
        "7\n"
    );
    // The model rewrites the cell: every name is declared again.
    run(
        &mut f.env,
        "const total = 10\nlet list = []\nclass Box { constructor(v) { this.v = -v } }\nfunction twice(n) { return 3 * n }",
    )
    .await;
    assert_eq!(
        run(&mut f.env, "twice(total) + list.length + new Box(3).v").await,
        "27\n"
    );
    let outcome = f.env.execute("FINAL_VAR('total')").await.unwrap();
    assert_eq!(
        outcome.final_answer,
        Some(FinalAnswer::Var {
            name: "total".into(),
            value: "10".into()
        })
    );
    let names: Vec<String> = f
        .env
        .variables()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    for name in ["total", "list", "Box", "twice"] {
        assert!(names.contains(&name.to_owned()), "{names:?}");
    }
    // Block-scoped declarations stay in their block.
    run(
        &mut f.env,
        "{ let inner = 1 }\nfor (let i = 0; i < 2; i++) {}",
    )
    .await;
    assert!(error_of(&mut f.env, "inner")
        .await
        .contains("ReferenceError"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_level_await_and_promises_work() {
    let mut f = plain().await;
    assert_eq!(
        run(&mut f.env, "const a = await llm_query('hi')\na").await,
        "\"answer to hi\"\n"
    );
    assert_eq!(
        run(
            &mut f.env,
            "await Promise.all([llm_query('x'), llm_query('y')])"
        )
        .await,
        "[\"answer to x\",\"answer to y\"]\n"
    );
    // Forgetting `await` gives a Promise, not a crash.
    assert_eq!(
        run(&mut f.env, "typeof llm_query('z').then").await,
        "\"function\"\n"
    );
}

/// `console.log` joins its arguments with spaces and writes objects as JSON;
/// `console.error` and `console.warn` go to stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_formats_its_arguments() {
    let mut f = plain().await;
    let outcome = f
        .env
        .execute("console.log('one', 2, {a: [1]})\nconsole.error('warned')\nconsole.warn('careful')\nprint('three')")
        .await
        .unwrap();
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.stdout, "one 2 {\"a\":[1]}\nthree\n");
    assert_eq!(outcome.stderr, "warned\ncareful\n");
}

/// Any value may be thrown, and a rejected promise awaited at the top level is an
/// error too; the engine goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thrown_values_and_rejected_promises_are_errors() {
    let mut f = plain().await;
    run(&mut f.env, "var a = 1").await;
    let value = error_of(&mut f.env, "throw 'just a string'").await;
    assert!(value.contains("just a string"), "{value}");
    let rejected = error_of(&mut f.env, "await Promise.reject(new Error('nope'))").await;
    assert!(rejected.contains("Error: nope"), "{rejected}");
    assert_eq!(run(&mut f.env, "a + 1").await, "2\n");
}

/// `search` takes a `RegExp` as well as a pattern string.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_takes_a_regexp() {
    let mut f = with_context(json!(
        "line one\nERROR disk full\nline three\nerror: lower\nERROR again"
    ))
    .await;
    let hits = json_of(
        &mut f.env,
        "var __result = search(context, /ERROR/i, false, 1)",
    )
    .await;
    assert_eq!(hits.as_array().unwrap().len(), 1);
    assert_eq!(hits[0]["line"], 2);
}

/// The raw bridge's arguments must be a JSON object: text that is not JSON is refused
/// as an invalid call and never reaches the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_host_call_whose_arguments_are_not_json_is_refused() {
    let mut f = plain().await;
    let reply = run(&mut f.env, "await __rlm_host('llm_query', 'not json')").await;
    assert!(reply.contains("invalid call of llm_query"), "{reply}");
    assert!(f.host.calls("llm_query").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_calling_exec_twice_a_pass_gets_a_note_after_its_output() {
    // The after-value-seed8 reading's js `pairs` item 1, the loop as the model wrote it.
    let mut f = with_context(json!(
        "city=Lima year=2001\ncity=Riga year=2002\ncity=Oslo year=2003\ncity=Rome year=2004\n"
    ))
    .await;
    let code = "const regex = /city=(\\w+) year=(\\d+)/g;\nlet matches = [];\nwhile (regex.exec(context) !== null) {\n  matches.push(regex.exec(context));\n}\nconsole.log(matches.length);";
    let outcome = f.env.execute(code).await.unwrap();
    let output = outcome.combined_output();
    assert!(output.starts_with("2\n"), "{output}");
    assert!(
        output.contains("note: your loop calls `regex.exec(…)` in its test and again in its body"),
        "{output}"
    );
    let kept = "let m; const found = [];\nwhile ((m = regex.exec(context)) !== null) { found.push(m[1]); }\nconsole.log(found.length);";
    assert_eq!(f.env.execute(kept).await.unwrap().combined_output(), "4\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regex_literal_is_its_pattern_where_a_helper_takes_one() {
    // The s18c-seed16 js `aggregate` item 0 and s18b-seed15 item 3: `{regex}` with
    // `const regex = /label=loyalty/` reached the host as `{"regex": {}}`.
    let mut f = plain().await;
    assert_eq!(
        run(
            &mut f.env,
            "const regex = /label=loyalty/i\nconsole.log(JSON.stringify(__rlm_plain({regex})))"
        )
        .await,
        "{\"regex\":\"label=loyalty\"}\n"
    );
    assert_eq!(run(&mut f.env, "console.log(/a|b/)").await, "\"a|b\"\n");
}
