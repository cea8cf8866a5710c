//! Integration tests of the `js` environment: the embedded QuickJS engine driven
//! through [`Environment`], with the in-test [`TestHost`].
//!
//! The same ground as the Python environment's tests — persistence, output, errors,
//! final answers, variables, contexts, the helpers, host calls — plus what only an
//! embedded engine must prove: each confinement claim, notebook re-declaration, and
//! that endless loops, memory bombs and stack overflows end one step, not the run.
//! No test asserts on durations.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::{SetOptions, Store};
use rlm_orchestrator::env::js::{JsEnv, JsOptions};
use rlm_orchestrator::env::{
    CodeRepl, ContextShape, ContextSource, EnvConfig, EnvError, EnvKind, Environment, FinalAnswer,
    HistoryEntry,
};
use rlm_orchestrator::host::Host;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::test_host::{TestHost, BARRIER_PARTIES, SYNC_PREFIX};

struct Fixture {
    env: JsEnv,
    host: Arc<TestHost>,
    store: Arc<Store>,
    _dir: TempDir,
}

fn config(dir: &Path, context: Option<ContextSource>, timeout: Duration) -> EnvConfig {
    EnvConfig {
        data_dir: dir.to_owned(),
        context,
        query: "what is the answer?".into(),
        history: vec![HistoryEntry {
            query: "earlier".into(),
            answer: "before".into(),
        }],
        exec_timeout: timeout,
        depth: 0,
        max_depth: 2,
        sub_context_chars: 100_000,
        lazy_above: None,
    }
}

/// Writes `values` into a fresh store and starts an engine whose `context` is them.
async fn fixture_with(
    values: &[Value],
    shape: ContextShape,
    timeout: Duration,
    options: JsOptions,
) -> Fixture {
    let dir = TempDir::new().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let mut files = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let key = format!("context-{i}");
        store
            .set(&key, value.clone(), SetOptions::default())
            .unwrap();
        files.push(store.path_of(&key).unwrap());
    }
    let context = (!values.is_empty()).then_some(ContextSource {
        shape,
        files,
        keys: Vec::new(),
        chunk_chars: 10,
        chars: None,
        max_char: None,
        referenced: Vec::new(),
    });
    let host = TestHost::new(Arc::clone(&store));
    let env = JsEnv::start(
        config(dir.path(), context, timeout),
        Arc::clone(&host) as Arc<dyn Host>,
        options,
    )
    .await
    .unwrap();
    Fixture {
        env,
        host,
        store,
        _dir: dir,
    }
}

async fn plain() -> Fixture {
    fixture_with(
        &[],
        ContextShape::Single,
        Duration::from_secs(60),
        JsOptions::default(),
    )
    .await
}

async fn with_context(value: Value) -> Fixture {
    fixture_with(
        &[value],
        ContextShape::Single,
        Duration::from_secs(60),
        JsOptions::default(),
    )
    .await
}

/// Runs code that must not fail and returns its stdout.
async fn run(env: &mut JsEnv, code: &str) -> String {
    let outcome = env.execute(code).await.unwrap();
    assert_eq!(outcome.error, None, "code failed: {code}");
    assert!(!outcome.timed_out && !outcome.restarted, "{outcome:?}");
    outcome.stdout
}

/// The JSON the code's last expression evaluates to.
async fn json_of(env: &mut JsEnv, code: &str) -> Value {
    let stdout = run(env, &format!("{code}\nJSON.stringify(__result)")).await;
    let quoted: String = serde_json::from_str(stdout.trim_end()).unwrap();
    serde_json::from_str(&quoted).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The error of code that must fail.
async fn error_of(env: &mut JsEnv, code: &str) -> String {
    env.execute(code).await.unwrap().error.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn globals_persist_and_the_last_expression_is_echoed() {
    let mut f = plain().await;
    assert_eq!(run(&mut f.env, "var x = 40\nvar y = x + 2").await, "");
    assert_eq!(run(&mut f.env, "y").await, "42\n");
    assert_eq!(run(&mut f.env, "'a'.repeat(3)").await, "\"aaa\"\n");
    assert_eq!(run(&mut f.env, "({n: [1, 2]})").await, "{\"n\":[1,2]}\n");
    assert_eq!(
        run(&mut f.env, "[query, history]").await,
        "[\"what is the answer?\",[{\"query\":\"earlier\",\"answer\":\"before\"}]]\n"
    );
    assert_eq!(run(&mut f.env, "undefined").await, "");
    assert_eq!(f.env.kind(), EnvKind::Js);
    assert_eq!(f.env.fence_tags(), ["js", "javascript"]);
    f.env.shutdown().await;
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_output_is_captured_and_capped() {
    let mut f = plain().await;
    let outcome = f
        .env
        .execute("console.log('one', 2, {a: [1]})\nconsole.error('warned')\nconsole.warn('careful')\nprint('three')")
        .await
        .unwrap();
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.stdout, "one 2 {\"a\":[1]}\nthree\n");
    assert_eq!(outcome.stderr, "warned\ncareful\n");
    let options = JsOptions {
        output_cap_bytes: 1000,
        ..JsOptions::default()
    };
    let mut f = fixture_with(&[], ContextShape::Single, Duration::from_secs(60), options).await;
    let outcome = f
        .env
        .execute("for (let i = 0; i < 10000; i++) console.log('line', i)")
        .await
        .unwrap();
    assert!(outcome.stdout.starts_with("line 0\nline 1\n"));
    assert!(outcome.stdout.contains("[output truncated"));
    assert!(outcome.stdout.len() < 1200, "{}", outcome.stdout.len());
    assert_eq!(run(&mut f.env, "print('small')").await, "small\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_reach_the_model_and_the_code_before_them_ran() {
    let mut f = plain().await;
    let error = error_of(
        &mut f.env,
        "var a = 1\nfunction f() { return missing_name }\nf()",
    )
    .await;
    assert!(
        error.starts_with("ReferenceError:") && error.contains("missing_name"),
        "{error}"
    );
    assert!(error.contains("at f"), "{error}");
    assert!(
        !error.contains("<rlm-"),
        "prelude frames are hidden: {error}"
    );
    assert_eq!(run(&mut f.env, "a").await, "1\n");
    let thrown = error_of(&mut f.env, "throw new TypeError('bad input')").await;
    assert!(thrown.starts_with("TypeError: bad input"), "{thrown}");
    let syntax = error_of(&mut f.env, "function (").await;
    assert!(syntax.starts_with("SyntaxError"), "{syntax}");
    let value = error_of(&mut f.env, "throw 'just a string'").await;
    assert!(value.contains("just a string"), "{value}");
    let rejected = error_of(&mut f.env, "await Promise.reject(new Error('nope'))").await;
    assert!(rejected.contains("Error: nope"), "{rejected}");
    assert_eq!(run(&mut f.env, "a + 1").await, "2\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn final_var_and_submit_finish_from_code() {
    let mut f = plain().await;
    let outcome = f
        .env
        .execute("var answer = 'forty-two'\nFINAL_VAR('answer')")
        .await
        .unwrap();
    assert_eq!(outcome.stdout, "");
    assert_eq!(
        outcome.final_answer,
        Some(FinalAnswer::Var {
            name: "answer".into(),
            value: "forty-two".into()
        })
    );
    let outcome = f
        .env
        .execute("var data = {n: [1, 2]}\nFINAL_VAR(data)")
        .await
        .unwrap();
    assert_eq!(
        outcome.final_answer,
        Some(FinalAnswer::Var {
            name: "data".into(),
            value: "{\"n\":[1,2]}".into()
        })
    );
    let outcome = f.env.execute("FINAL_VAR('nope')").await.unwrap();
    assert_eq!(outcome.final_answer, None);
    assert!(outcome
        .error
        .unwrap()
        .contains("no variable named \"nope\""));
    let outcome = f
        .env
        .execute("SUBMIT({answer: 42, why: ['a', 'b'], skipped: undefined})")
        .await
        .unwrap();
    assert_eq!(
        outcome.final_answer,
        Some(FinalAnswer::Submit {
            value: json!({"answer": 42, "why": ["a", "b"]})
        })
    );
    // FINAL_VAR written outside code.
    assert_eq!(
        f.env.final_var("answer").await.unwrap().as_deref(),
        Some("forty-two")
    );
    assert_eq!(
        f.env.final_var("\"data\"").await.unwrap().as_deref(),
        Some("{\"n\":[1,2]}")
    );
    assert_eq!(f.env.final_var("missing").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variables_are_listed_without_the_helpers() {
    let mut f = with_context(json!("some text")).await;
    run(
        &mut f.env,
        "const items = Array.from({length: 100}, (_, i) => i)\nvar name = 'x'.repeat(500)\nfunction helper() {}",
    )
    .await;
    let vars = f.env.variables().await.unwrap();
    let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["items", "name", "helper"]);
    assert_eq!(vars[0].type_name, "Array");
    assert_eq!(vars[0].size, 100);
    assert_eq!(vars[1].size, 500);
    assert!(vars.iter().all(|v| v.preview.chars().count() <= 80));
    let shown = run(&mut f.env, "SHOW_VARS()").await;
    assert!(
        shown.starts_with("\"items: Array, size 100 = [0,1,2"),
        "{shown}"
    );
    // Rebinding a provided name makes it a variable of the model's.
    run(&mut f.env, "context = context.toUpperCase()").await;
    let vars = f.env.variables().await.unwrap();
    assert!(vars.iter().any(|v| v.name == "context"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_grows_and_query_slots_are_added() {
    let mut f = plain().await;
    f.env
        .push_history(HistoryEntry {
            query: "second".into(),
            answer: "two".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        json_of(&mut f.env, "var __result = history").await,
        json!([{"query": "earlier", "answer": "before"}, {"query": "second", "answer": "two"}])
    );
    f.store
        .set("slot", json!("the second context"), SetOptions::default())
        .unwrap();
    let source = ContextSource {
        shape: ContextShape::Single,
        files: vec![f.store.path_of("slot").unwrap()],
        keys: Vec::new(),
        chunk_chars: 4,
        chars: None,
        max_char: None,
        referenced: Vec::new(),
    };
    f.env.next_query("next?", Some(source)).await.unwrap();
    assert_eq!(
        json_of(
            &mut f.env,
            "var __result = [query, context, context_0, contexts.length]"
        )
        .await,
        json!(["next?", "the second context", "the second context", 1])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_list_contexts_load() {
    let mut f = with_context(json!({"users": [{"name": "ada"}], "n": 2})).await;
    assert_eq!(run(&mut f.env, "context.users[0].name").await, "\"ada\"\n");
    let mut f = fixture_with(
        &[json!("first file"), json!(["a", "b"])],
        ContextShape::List,
        Duration::from_secs(60),
        JsOptions::default(),
    )
    .await;
    assert_eq!(
        run(&mut f.env, "[context.length, context[0], context[1][1]]").await,
        "[2,\"first file\",\"b\"]\n"
    );
    // context_chunks cuts the string items and keeps the others whole, as in Python.
    assert_eq!(
        run(
            &mut f.env,
            "[context_chunks.length, context_chunks[0], context_chunks[1]]"
        )
        .await,
        "[2,\"first file\",[\"a\",\"b\"]]\n"
    );
    let unicode = "naïve — 日本語 😀 and a \"quote\"\n\tend";
    let mut f = with_context(json!(unicode)).await;
    assert_eq!(
        run(&mut f.env, "context").await,
        format!("{}\n", serde_json::to_string(unicode).unwrap())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_chunks_is_a_lazy_view() {
    let mut f = with_context(json!("abcdefghij".repeat(3) + "xyz")).await;
    assert_eq!(run(&mut f.env, "context_chunks.length").await, "4\n");
    assert_eq!(run(&mut f.env, "context_chunks[3]").await, "\"xyz\"\n");
    assert_eq!(
        run(&mut f.env, "context_chunks.slice(1, 3)").await,
        "[\"abcdefghij\",\"abcdefghij\"]\n"
    );
    assert_eq!(
        run(&mut f.env, "[...context_chunks].join('') === context").await,
        "true\n"
    );
    assert_eq!(run(&mut f.env, "context_chunks[4]").await, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_search_and_find_relevant_work_like_pythons() {
    let mut f = with_context(json!(
        "line one\nERROR disk full\nline three\nerror: lower\nERROR again"
    ))
    .await;
    assert_eq!(
        run(
            &mut f.env,
            "peek(Array.from({length: 20}, (_, i) => i), 2, 5)"
        )
        .await,
        "[2,3,4]\n"
    );
    assert_eq!(
        run(&mut f.env, "peek({b: 1, a: 2, c: 3}, 1, 3)").await,
        "{\"a\":2,\"c\":3}\n"
    );
    assert_eq!(
        run(&mut f.env, "peek('hello world')").await,
        "\"hello worl\"\n"
    );
    assert!(error_of(&mut f.env, "peek(3)").await.contains("TypeError"));
    let hits = json_of(&mut f.env, "var __result = search(context, 'ERROR')").await;
    assert_eq!(hits.as_array().unwrap().len(), 2);
    assert_eq!(hits[0]["line"], 2);
    assert_eq!(hits[0]["offset"], 9);
    assert_eq!(hits[1]["line"], 5);
    assert!(hits[0]["preview"].as_str().unwrap().contains("disk full"));
    let hits = json_of(
        &mut f.env,
        r"var __result = search(context, '[Ee][Rr][Rr][Oo][Rr]\\W', true, 2).concat(search(context, /ERROR/i, false, 1))",
    )
    .await;
    assert_eq!(hits.as_array().unwrap().len(), 3);
    assert_eq!(hits[1]["match"], "error:");
    let hits = json_of(
        &mut f.env,
        "var __result = search(['a cat', 'a dog', 'the dog'], 'dog').concat(search({x: 'no', y: {deep: 'needle'}}, 'needle'))",
    )
    .await;
    assert_eq!(hits[0]["index"], 1);
    assert_eq!(hits[1]["index"], 2);
    assert_eq!(hits[2]["key"], "y");
    let code = r#"
var docs = [
  "The weather today is sunny with a light breeze.",
  "Quarterly revenue grew by 12 percent thanks to strong cloud sales.",
  "Our cat sleeps all day on the sunny windowsill.",
  "Revenue from cloud services doubled; cloud margin improved.",
  "A recipe for bread needs flour, water, salt and yeast.",
]
var text = Array(300).fill("filler words about nothing").concat(["the secret password is swordfish"], Array(300).fill("more filler")).join("\n")
var top = find_relevant(text, "secret password", 1)
var __result = [find_relevant(docs, "cloud revenue growth", 2).map(t => t.index), top[0].item.includes("swordfish"), top[0].offset > 0, find_relevant({a: "apples", b: "bread"}, "bread").map(r => r.key)]
"#;
    let result = json_of(&mut f.env, code).await;
    let first = result[0][0].as_u64().unwrap();
    assert!(first == 3 || first == 1, "{result}");
    assert_eq!(result[0].as_array().unwrap().len(), 2);
    assert_eq!(result[1], true);
    assert_eq!(result[2], true);
    assert_eq!(result[3], json!(["b"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_calls_round_trip() {
    let mut f = plain().await;
    assert_eq!(
        run(&mut f.env, "await llm_query('hi', [1, 2])").await,
        "\"answer to hi with [1,2]\"\n"
    );
    assert_eq!(
        run(
            &mut f.env,
            "await llm_query_parallel(['a', ['b', 'ctx'], 'fail'])"
        )
        .await,
        "[\"answer to a\",\"answer to b\",\"[llm_query error: boom]\"]\n"
    );
    let parallel = f.host.calls("llm_query_parallel");
    assert_eq!(
        parallel[0]["prompts"],
        json!([{"prompt": "a"}, {"prompt": "b", "context": "ctx"}, {"prompt": "fail"}])
    );
    assert_eq!(
        run(&mut f.env, "await summarize('x'.repeat(1234))").await,
        "\"summary of 1234 chars\"\n"
    );
    let code = "try { await llm_query('fail') } catch (e) { console.log('caught', e.message, e instanceof HostError, e instanceof Error) }";
    assert_eq!(
        run(&mut f.env, code).await,
        "caught the sub-model is unavailable true true\n"
    );
    let error = error_of(&mut f.env, "await sub_rlm('deeper')").await;
    assert!(
        error.contains("HostError: the test host does not serve sub_rlm"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_host_calls_name_the_argument() {
    let mut f = plain().await;
    let reply = run(&mut f.env, "await __rlm_host('llm_query', '{}')").await;
    assert!(
        reply.contains("invalid call of llm_query: missing field `prompt`"),
        "{reply}"
    );
    let reply = run(
        &mut f.env,
        "await __rlm_host('sub_rlm', JSON.stringify({query: 'q', contxt: 'typo'}))",
    )
    .await;
    assert!(reply.contains("unknown field `contxt`"), "{reply}");
    let reply = run(&mut f.env, "await __rlm_host('rm_rf', '{}')").await;
    assert!(reply.contains("rm_rf"), "{reply}");
    let reply = run(&mut f.env, "await __rlm_host('llm_query', 'not json')").await;
    assert!(reply.contains("invalid call of llm_query"), "{reply}");
    assert!(
        f.host.calls("llm_query").is_empty(),
        "nothing reached the host"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_host_error_ends_the_execution() {
    let mut f = plain().await;
    let error = f
        .env
        .execute("try { await llm_query('fatal') } catch (e) { console.log('seen', e.message) }")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, EnvError::HostFatal { message, .. } if message == "the store is gone"),
        "{error}"
    );
    assert_eq!(run(&mut f.env, "print('still here')").await, "still here\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_calls_run_concurrently() {
    let mut f = fixture_with(
        &[],
        ContextShape::Single,
        Duration::from_secs(30),
        JsOptions::default(),
    )
    .await;
    // Each call blocks in the host until all four are in flight: this finishes only if
    // the calls of one Promise.all run at once.
    let code = format!(
        "await Promise.all(Array.from({{length: {BARRIER_PARTIES}}}, (_, i) => llm_query('{SYNC_PREFIX}' + i)))"
    );
    let outcome = f.env.execute(&code).await.unwrap();
    assert!(!outcome.timed_out, "host calls were not concurrent");
    assert_eq!(
        outcome.stdout,
        "[\"answer to sync:0\",\"answer to sync:1\",\"answer to sync:2\",\"answer to sync:3\"]\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_helpers_go_through_the_host() {
    let mut f = plain().await;
    run(
        &mut f.env,
        "var r = await store.set('notes', 'caf\u{e9} '.repeat(100))",
    )
    .await;
    assert_eq!(f.store.get("notes").unwrap().as_str().unwrap().len(), 600);
    assert_eq!(
        run(
            &mut f.env,
            "(await store.get('notes')) === 'caf\u{e9} '.repeat(100)"
        )
        .await,
        "true\n"
    );
    assert_eq!(
        run(
            &mut f.env,
            "[r.key, (await store.ref('notes')).path.endsWith('.json'), (await store.list()).length]"
        )
        .await,
        "[\"notes\",true,1]\n"
    );
    run(&mut f.env, "await store.delete('notes')").await;
    assert!(!f.store.has("notes"));
    let error = error_of(&mut f.env, "await store.get('absent')").await;
    assert!(error.contains("HostError"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_but_what_rlm_gives_is_reachable() {
    let mut f = plain().await;
    for name in [
        "require",
        "fetch",
        "process",
        "Deno",
        "Bun",
        "XMLHttpRequest",
        "WebSocket",
        "std",
        "os",
        "module",
        "exports",
        "__dirname",
        "setTimeout",
    ] {
        assert_eq!(
            run(&mut f.env, &format!("typeof {name}")).await,
            "\"undefined\"\n",
            "{name} must not exist"
        );
    }
    for module in [
        "os",
        "std",
        "fs",
        "node:fs",
        "./local.js",
        "https://example.com/x.js",
    ] {
        let error = error_of(&mut f.env, &format!("await import('{module}')")).await;
        assert!(error.contains("could not load module"), "{module}: {error}");
    }
    // A static import is not even valid in a cell.
    assert!(error_of(&mut f.env, "import fs from 'fs'")
        .await
        .contains("SyntaxError"));
    // eval and Function stay inside the same sandbox.
    assert_eq!(
        run(&mut f.env, "new Function('return typeof require')()").await,
        "\"undefined\"\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_is_interrupted_and_the_engine_survives() {
    let mut f = fixture_with(
        &[],
        ContextShape::Single,
        Duration::from_millis(500),
        JsOptions::default(),
    )
    .await;
    run(&mut f.env, "var kept = 'still here'").await;
    let outcome = f.env.execute("while (true) {}").await.unwrap();
    assert!(outcome.timed_out, "{outcome:?}");
    assert!(outcome.error.unwrap().contains("interrupted"));
    assert!(!outcome.restarted);
    assert_eq!(run(&mut f.env, "kept").await, "\"still here\"\n");
    // Catching the interrupt does not keep the code running.
    let outcome = f
        .env
        .execute("try { while (true) {} } catch (e) { console.log('caught') }")
        .await
        .unwrap();
    assert!(outcome.timed_out);
    assert!(!outcome.stdout.contains("caught"), "{}", outcome.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_calls_awaited_past_the_timeout_are_cancelled() {
    let mut f = fixture_with(
        &[],
        ContextShape::Single,
        Duration::from_millis(500),
        JsOptions::default(),
    )
    .await;
    // A `sync:` call waits for three more that never come.
    let outcome = f
        .env
        .execute("var before = 1\nawait llm_query('sync:alone')\nvar after = 1")
        .await
        .unwrap();
    assert!(outcome.timed_out, "{outcome:?}");
    assert!(outcome.error.unwrap().contains("stopped at the timeout"));
    assert_eq!(
        run(&mut f.env, "typeof before + typeof after").await,
        "\"numberundefined\"\n"
    );
    // The abandoned continuation never runs later.
    run(&mut f.env, "await llm_query('hi')").await;
    assert_eq!(run(&mut f.env, "typeof after").await, "\"undefined\"\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_ends_the_step_not_the_run() {
    let options = JsOptions {
        memory_limit_bytes: Some(64 << 20),
        ..JsOptions::default()
    };
    let mut f = fixture_with(&[], ContextShape::Single, Duration::from_secs(60), options).await;
    run(&mut f.env, "var kept = 7").await;
    let outcome = f
        .env
        .execute("var hog = []\nwhile (true) hog.push(new Array(100000).fill(1))")
        .await
        .unwrap();
    let error = outcome.error.unwrap();
    assert!(error.contains("out of memory"), "{error}");
    // Either the runtime recovered (variables kept) or it was rebuilt and said so.
    let next = f.env.execute("hog = null; typeof kept").await.unwrap();
    if outcome.restarted {
        assert_eq!(next.stdout, "\"undefined\"\n");
    } else {
        assert_eq!(next.error, None);
        assert_eq!(next.stdout, "\"number\"\n");
    }
    let huge = f.env.execute("'x'.repeat(1 << 30)").await.unwrap();
    assert!(huge.error.is_some());
    assert!(f.env.execute("1 + 1").await.unwrap().error.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_overflow_is_an_error_and_the_engine_survives() {
    let mut f = plain().await;
    run(&mut f.env, "var kept = 'yes'").await;
    let error = error_of(
        &mut f.env,
        "function down(n) { return down(n + 1) + 1 }\ndown(0)",
    )
    .await;
    assert!(
        error.contains("Maximum call stack size exceeded"),
        "{error}"
    );
    assert!(error.lines().count() <= 15, "the stack is cut: {error}");
    assert_eq!(run(&mut f.env, "kept").await, "\"yes\"\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_stops_an_abandoned_execution_and_keeps_variables() {
    let mut f = fixture_with(
        &[],
        ContextShape::Single,
        Duration::from_secs(600),
        JsOptions::default(),
    )
    .await;
    run(&mut f.env, "var kept = 5").await;
    // The caller gives up on a running execution (a cancelled query).
    let abandoned =
        tokio::time::timeout(Duration::from_millis(300), f.env.execute("while (true) {}")).await;
    assert!(abandoned.is_err());
    f.env.recover().await.unwrap();
    assert_eq!(run(&mut f.env, "kept").await, "5\n");
    assert_eq!(f.env.restarts(), 0);
}
