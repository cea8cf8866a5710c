//! Integration tests of the `python` environment: a real `python3` kernel driven over
//! its protocol, with an in-test [`Host`].
//!
//! No test asserts on durations: timeouts are configured, and waits for a process to
//! disappear are bounded polls.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::{SetOptions, Store};
use rlm_orchestrator::env::python::{PythonEnv, PythonOptions};
use rlm_orchestrator::env::{
    CodeRepl, ContextShape, ContextSource, EnvConfig, EnvError, Environment, FinalAnswer,
    HistoryEntry,
};
use rlm_orchestrator::host::Host;
use rlm_test_support::procs::{running, wait_gone_async};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::test_host::{TestHost, BARRIER_PARTIES, SYNC_PREFIX};

/// Default options, with the interpreter from `RLM_TEST_PYTHON` when set (to run this
/// suite against several Python versions).
pub(crate) fn python_options() -> PythonOptions {
    match std::env::var_os("RLM_TEST_PYTHON") {
        Some(python) => PythonOptions::from(PathBuf::from(python)),
        None => PythonOptions::default(),
    }
}

pub(crate) struct Fixture {
    pub env: PythonEnv,
    pub host: Arc<TestHost>,
    pub store: Arc<Store>,
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

/// Writes `values` into a fresh store and starts a kernel whose `context` is them.
pub(crate) async fn fixture_with(
    values: &[Value],
    shape: ContextShape,
    timeout: Duration,
    options: PythonOptions,
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
    start(dir, store, context, timeout, options).await
}

async fn start(
    dir: TempDir,
    store: Arc<Store>,
    context: Option<ContextSource>,
    timeout: Duration,
    options: PythonOptions,
) -> Fixture {
    let host = TestHost::new(Arc::clone(&store));
    let env = PythonEnv::start(
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

pub(crate) async fn plain() -> Fixture {
    fixture_with(
        &[],
        ContextShape::Single,
        Duration::from_secs(60),
        python_options(),
    )
    .await
}

async fn with_context(value: Value) -> Fixture {
    fixture_with(
        &[value],
        ContextShape::Single,
        Duration::from_secs(60),
        python_options(),
    )
    .await
}

/// Runs code that must not fail and returns its stdout.
pub(crate) async fn run(env: &mut PythonEnv, code: &str) -> String {
    let outcome = env.execute(code).await.unwrap();
    assert_eq!(outcome.error, None, "code failed: {code}");
    assert!(!outcome.timed_out && !outcome.restarted, "{outcome:?}");
    outcome.stdout
}

/// The JSON the code prints on its last line.
async fn json_of(env: &mut PythonEnv, code: &str) -> Value {
    let stdout = run(env, code).await;
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Waits (bounded) until `pid` is gone; fails the test if it is not.
pub(crate) async fn wait_gone(pid: u32) {
    assert!(
        wait_gone_async(pid, Duration::from_secs(10)).await,
        "process {pid} is still running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variables_persist_and_the_last_expression_is_echoed() {
    let mut f = plain().await;
    assert_eq!(run(&mut f.env, "x = 40\ny = x + 2").await, "");
    assert_eq!(run(&mut f.env, "y").await, "42\n");
    assert_eq!(run(&mut f.env, "print(x)\nNone").await, "40\n");
    assert_eq!(run(&mut f.env, "'a' * 3").await, "'aaa'\n");
    let outcome = f.env.execute("query, history").await.unwrap();
    assert_eq!(
        outcome.stdout,
        "('what is the answer?', [{'query': 'earlier', 'answer': 'before'}])\n"
    );
    assert_eq!(f.env.kind(), rlm_orchestrator::env::EnvKind::Python);
    f.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_captured_without_breaking_the_protocol() {
    let mut f = plain().await;
    let code = r#"
import os, sys, subprocess
print("one")
os.system("echo from-shell")
sys.stderr.write("warned\n")
subprocess.run(["sh", "-c", "echo err-from-child >&2"])
os.write(1, b"raw fd write\n")
sys.stdout.buffer.write(b"bytes\n")
print("two")
"#;
    let outcome = f.env.execute(code).await.unwrap();
    assert_eq!(outcome.error, None);
    assert_eq!(
        outcome.stdout,
        "one\nfrom-shell\nraw fd write\nbytes\ntwo\n"
    );
    assert_eq!(outcome.stderr, "warned\nerr-from-child\n");
    // The kernel still answers, and input() cannot eat protocol messages.
    let outcome = f.env.execute("input()").await.unwrap();
    assert!(outcome.error.unwrap().contains("EOFError"));
    assert_eq!(run(&mut f.env, "1 + 1").await, "2\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_capped_with_a_marker() {
    let options = PythonOptions {
        output_cap_bytes: 1000,
        ..python_options()
    };
    let mut f = fixture_with(&[], ContextShape::Single, Duration::from_secs(60), options).await;
    let outcome = f
        .env
        .execute("for i in range(10000): print('line', i)\nimport os; os.system('seq 1 100000')")
        .await
        .unwrap();
    assert!(outcome.stdout.starts_with("line 0\nline 1\n"));
    assert!(outcome.stdout.contains("[output truncated"));
    assert!(outcome.stdout.len() < 1200, "{}", outcome.stdout.len());
    assert_eq!(run(&mut f.env, "print('small')").await, "small\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exceptions_come_back_as_tracebacks() {
    let mut f = plain().await;
    let outcome = f
        .env
        .execute("a = 1\ndef f():\n    return missing_name\nf()")
        .await
        .unwrap();
    let error = outcome.error.unwrap();
    assert!(error.starts_with("Traceback"), "{error}");
    assert!(error.contains("return missing_name"), "{error}");
    assert!(
        error.contains("NameError: name 'missing_name' is not defined"),
        "{error}"
    );
    assert!(!error.contains("rlm-driver"), "{error}");
    // Code before the error ran.
    assert_eq!(run(&mut f.env, "a").await, "1\n");
    let syntax = f.env.execute("def (:").await.unwrap().error.unwrap();
    assert!(syntax.contains("SyntaxError"), "{syntax}");
    let exit = f.env.execute("import sys; sys.exit(3)").await.unwrap();
    assert!(exit.error.unwrap().contains("SystemExit"));
    assert_eq!(run(&mut f.env, "a + 1").await, "2\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn final_var_and_submit_finish_from_code() {
    let mut f = plain().await;
    let outcome = f
        .env
        .execute("answer = 'forty-two'\nFINAL_VAR('answer')")
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
        .execute("data = {'n': [1, 2]}\nFINAL_VAR(data)")
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
    assert!(outcome.error.unwrap().contains("no variable named 'nope'"));
    let outcome = f
        .env
        .execute("SUBMIT({'answer': 42, 'why': ('a', 'b')})")
        .await
        .unwrap();
    assert_eq!(
        outcome.final_answer,
        Some(FinalAnswer::Submit {
            value: json!({"answer": 42, "why": ["a", "b"]})
        })
    );
    let outcome = f.env.execute("SUBMIT(answer=1)").await.unwrap();
    assert_eq!(
        outcome.final_answer,
        Some(FinalAnswer::Submit {
            value: json!({"answer": 1})
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
        "import re\nitems = list(range(100))\nname = 'x' * 500\ndef helper(): pass",
    )
    .await;
    let vars = f.env.variables().await.unwrap();
    let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["items", "name", "helper"]);
    assert_eq!(vars[0].type_name, "list");
    assert_eq!(vars[0].size, 100);
    assert_eq!(vars[1].size, 500);
    assert!(vars.iter().all(|v| v.preview.chars().count() <= 80));
    let shown = run(&mut f.env, "SHOW_VARS()").await;
    assert!(
        shown.starts_with("items: list, size 100 = [0, 1, 2"),
        "{shown}"
    );
    // Rebinding a provided name makes it a user variable.
    run(&mut f.env, "context = context.upper()").await;
    let vars = f.env.variables().await.unwrap();
    assert!(vars.iter().any(|v| v.name == "context"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_grows_with_push_history() {
    let mut f = plain().await;
    f.env
        .push_history(HistoryEntry {
            query: "second".into(),
            answer: "two".into(),
        })
        .await
        .unwrap();
    let history = json_of(&mut f.env, "import json; print(json.dumps(history))").await;
    assert_eq!(
        history,
        json!([{"query": "earlier", "answer": "before"}, {"query": "second", "answer": "two"}])
    );
}

/// A stored text variable as a context source.
fn text_source(store: &Store, key: &str, text: &str) -> ContextSource {
    store.set(key, json!(text), SetOptions::default()).unwrap();
    ContextSource {
        shape: ContextShape::Single,
        files: vec![store.path_of(key).unwrap()],
        keys: Vec::new(),
        chunk_chars: 4,
        chars: None,
        max_char: None,
        referenced: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_query_adds_context_slots_that_survive_a_restart() {
    let mut f = with_context(json!("first")).await;
    let second = text_source(&f.store, "second", "second text");
    f.env
        .next_query("the second query", Some(second))
        .await
        .unwrap();
    let code = "import json; print(json.dumps([query, context, context_0, context_1, contexts, len(context_chunks)]))";
    let expected = json!([
        "the second query",
        "second text",
        "first",
        "second text",
        ["first", "second text"],
        3
    ]);
    assert_eq!(json_of(&mut f.env, code).await, expected);
    // Provided names are not the model's variables.
    run(&mut f.env, "mine = 1").await;
    let names: Vec<String> = f
        .env
        .variables()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["mine"]);
    // Without a context only the query changes.
    f.env.next_query("third", None).await.unwrap();
    assert_eq!(
        json_of(
            &mut f.env,
            "print(json.dumps([query, context, len(contexts)]))"
        )
        .await,
        json!(["third", "second text", 2])
    );
    // A new kernel gets every slot, the latest query and the history again.
    f.env
        .push_history(HistoryEntry {
            query: "second".into(),
            answer: "two".into(),
        })
        .await
        .unwrap();
    let outcome = f.env.execute("import os\nos._exit(3)").await.unwrap();
    assert!(outcome.error.is_some());
    let outcome = f
        .env
        .execute("import json; print(json.dumps([query, context, contexts, len(history)]))")
        .await
        .unwrap();
    assert!(outcome.restarted, "{outcome:?}");
    assert_eq!(
        serde_json::from_str::<Value>(outcome.stdout.trim()).unwrap(),
        json!(["third", "second text", ["first", "second text"], 2])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_the_kernel_cannot_load_is_refused_and_the_session_goes_on() {
    let mut f = plain().await;
    run(&mut f.env, "kept = 7").await;
    let missing = ContextSource {
        shape: ContextShape::Single,
        files: vec![f.store.data_dir().join("variables/nowhere.json")],
        keys: Vec::new(),
        chunk_chars: 10,
        chars: None,
        max_char: None,
        referenced: Vec::new(),
    };
    let error = f.env.next_query("q", Some(missing)).await.unwrap_err();
    assert!(
        matches!(error, EnvError::Request { .. }) && error.to_string().contains("nowhere.json"),
        "{error}"
    );
    assert_eq!(
        json_of(
            &mut f.env,
            "import json; print(json.dumps([kept, context, contexts]))"
        )
        .await,
        json!([7, null, []])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_interrupts_an_abandoned_execution_and_keeps_variables() {
    let mut f = plain().await;
    run(&mut f.env, "kept = 'still here'").await;
    let pid = f.env.pid();
    // The caller goes away while the code runs (a cancelled query).
    let abandoned = tokio::time::timeout(
        Duration::from_millis(300),
        f.env.execute("while True:\n    pass"),
    )
    .await;
    assert!(abandoned.is_err(), "an endless loop finished");
    f.env.recover().await.unwrap();
    assert_eq!(f.env.pid(), pid);
    assert_eq!(run(&mut f.env, "kept").await, "'still here'\n");
    // Without an explicit recover, the next request settles it first.
    let abandoned = tokio::time::timeout(
        Duration::from_millis(300),
        f.env.execute("llm_query('sync:alone')"),
    )
    .await;
    assert!(abandoned.is_err());
    assert_eq!(run(&mut f.env, "kept").await, "'still here'\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_replaces_a_kernel_that_ignores_the_interrupt() {
    let options = PythonOptions {
        interrupt_grace: Duration::from_millis(300),
        ..python_options()
    };
    let mut f = fixture_with(
        &[json!("ctx")],
        ContextShape::Single,
        Duration::from_secs(60),
        options,
    )
    .await;
    run(&mut f.env, "lost = 1").await;
    let old = f.env.pid().unwrap();
    let code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass";
    let abandoned = tokio::time::timeout(Duration::from_millis(300), f.env.execute(code)).await;
    assert!(abandoned.is_err());
    f.env.recover().await.unwrap();
    wait_gone(old).await;
    let outcome = f.env.execute("context").await.unwrap();
    assert!(outcome.restarted, "{outcome:?}");
    assert_eq!(outcome.stdout, "'ctx'\n");
    assert!(f.env.execute("lost").await.unwrap().error.is_some());
}

/// Text that exercises every escape, every str kind and chunk boundaries.
fn tricky_texts() -> Vec<String> {
    let ascii = "plain \"quoted\" back\\slash\n\ttab\r\u{0001}\u{001f} / end".repeat(7);
    let latin1 = format!("{ascii}caf\u{e9} na\u{ef}ve \u{ff}");
    let ucs2 = format!("{latin1} \u{0100}\u{20ac} \u{4e2d}\u{6587} done");
    let ucs4 = format!("{ucs2} \u{1f600}\u{1f680} emoji \\\\ \"\"");
    let late = format!("{}\u{1f600}", "a".repeat(300));
    vec![ascii, latin1, ucs2, ucs4, late, "x".into(), String::new()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_contexts_load_exactly_through_the_fast_path() {
    for chunk in [16, 61, 1 << 20] {
        for text in tricky_texts() {
            let options = PythonOptions {
                load_chunk_bytes: Some(chunk),
                ..python_options()
            };
            let mut f = fixture_with(
                &[json!(text)],
                ContextShape::Single,
                Duration::from_secs(60),
                options,
            )
            .await;
            let info = f.env.wait_ready().await.unwrap();
            if text.chars().count() >= 2 {
                assert_eq!(info.load_method, "fast", "chunk {chunk}: {text:?}");
            }
            let loaded = json_of(
                &mut f.env,
                "import json; print(json.dumps([type(context).__name__, context]))",
            )
            .await;
            assert_eq!(loaded, json!(["str", text]), "chunk {chunk}");
            // The str is a normal one: hashing, equality and slicing agree.
            let same = json_of(
                &mut f.env,
                "c2 = ''.join(list(context)); print(json.dumps([c2 == context, hash(c2) == hash(context), len(context)]))",
            )
            .await;
            assert_eq!(same, json!([true, true, text.chars().count()]));
            f.env.shutdown().await;
        }
    }
}

/// Loads `text` with the given size hints and checks that `context` is exactly it and
/// a canonical str (a str wider than its content would compare unequal).
async fn load_with_hints(text: &str, chars: Option<u64>, max_char: Option<u32>) {
    let dir = TempDir::new().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    store
        .set("ctx", json!(text), SetOptions::default())
        .unwrap();
    let context = ContextSource {
        shape: ContextShape::Single,
        files: vec![store.path_of("ctx").unwrap()],
        keys: Vec::new(),
        chunk_chars: 100,
        chars,
        max_char,
        referenced: Vec::new(),
    };
    let options = PythonOptions {
        load_chunk_bytes: Some(29),
        ..python_options()
    };
    let mut f = start(dir, store, Some(context), Duration::from_secs(60), options).await;
    assert_eq!(f.env.wait_ready().await.unwrap().load_method, "fast");
    let loaded = json_of(
        &mut f.env,
        "import json; c2 = ''.join(list(context)); print(json.dumps([context, c2 == context, hash(c2) == hash(context)]))",
    )
    .await;
    assert_eq!(
        loaded,
        json!([text, true, true]),
        "hints {chars:?} {max_char:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_hints_are_used_but_never_trusted() {
    let ucs2 = "\u{4e2d}\u{6587} and \"ascii\"\n".repeat(20);
    let count = ucs2.chars().count() as u64;
    load_with_hints(&ucs2, Some(count), Some(0xffff)).await;
    // Too narrow a class, too small a size, too wide a class: all still exact.
    load_with_hints(&ucs2, Some(5), Some(0x7f)).await;
    load_with_hints("plain ascii text, long enough", Some(2), Some(0x10ffff)).await;
    load_with_hints("caf\u{e9} latin", None, Some(0xffff)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_foreign_and_escaped_files_load_too() {
    let dir = TempDir::new().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let text = "streamed line\n".repeat(50) + "caf\u{e9}";
    store
        .set_text_from_reader(
            "streamed",
            &mut text.as_bytes(),
            "test",
            SetOptions::default(),
        )
        .unwrap();
    let streamed = store.path_of("streamed").unwrap();
    // Same layout, but written with \u escapes (surrogate pairs) by "another program".
    store
        .set("escaped", json!("x"), SetOptions::default())
        .unwrap();
    let escaped = store.path_of("escaped").unwrap();
    let header = std::fs::read_to_string(&escaped).unwrap();
    let header = header.lines().next().unwrap();
    let body = "\\u00e9t\\u00e9 \\ud83d\\ude00 \\/slash \\\\ \\\" q".repeat(20);
    std::fs::write(&escaped, format!("{header}\n\"value\":\"{body}\"}}")).unwrap();
    let expected_escaped: String = serde_json::from_str(&format!("\"{body}\"")).unwrap();
    // A plain JSON file in another layout.
    let foreign = dir.path().join("foreign.json");
    std::fs::write(
        &foreign,
        r#"{"value": ["a", {"b": 1}], "ref": {"key": "foreign"}}"#,
    )
    .unwrap();
    let context = ContextSource {
        shape: ContextShape::List,
        files: vec![streamed, escaped, foreign],
        keys: Vec::new(),
        chunk_chars: 100,
        chars: None,
        max_char: None,
        referenced: Vec::new(),
    };
    let options = PythonOptions {
        load_chunk_bytes: Some(37),
        ..python_options()
    };
    let mut f = start(dir, store, Some(context), Duration::from_secs(60), options).await;
    let loaded = json_of(&mut f.env, "import json; print(json.dumps(context))").await;
    assert_eq!(loaded, json!([text, expected_escaped, ["a", {"b": 1}]]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_list_contexts_load() {
    let mut f = with_context(json!({"users": [{"name": "ann"}, {"name": "bob"}]})).await;
    assert_eq!(
        run(&mut f.env, "context['users'][1]['name']").await,
        "'bob'\n"
    );
    let mut f = fixture_with(
        &[json!("first text"), json!([1, 2, 3])],
        ContextShape::List,
        Duration::from_secs(60),
        python_options(),
    )
    .await;
    assert_eq!(
        run(&mut f.env, "context").await,
        "['first text', [1, 2, 3]]\n"
    );
    // context_chunks (10 chars per chunk here): the text's chunks, then the list whole.
    assert_eq!(
        run(
            &mut f.env,
            "len(context_chunks), context_chunks[0], context_chunks[-1]"
        )
        .await,
        "(2, 'first text', [1, 2, 3])\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_chunks_is_a_lazy_sequence() {
    let mut f = with_context(json!("abcdefghij".repeat(3) + "xyz")).await;
    assert_eq!(run(&mut f.env, "len(context_chunks)").await, "4\n");
    assert_eq!(run(&mut f.env, "context_chunks[3]").await, "'xyz'\n");
    assert_eq!(
        run(&mut f.env, "context_chunks[1:3]").await,
        "['abcdefghij', 'abcdefghij']\n"
    );
    assert_eq!(
        run(&mut f.env, "''.join(context_chunks) == context").await,
        "True\n"
    );
    let error = f.env.execute("context_chunks[4]").await.unwrap().error;
    assert!(error.unwrap().contains("IndexError"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_slices_lists_dicts_and_strings() {
    let mut f = plain().await;
    assert_eq!(
        run(&mut f.env, "peek(list(range(20)), 2, 5)").await,
        "[2, 3, 4]\n"
    );
    assert_eq!(
        run(&mut f.env, "peek({'b': 1, 'a': 2, 'c': 3}, 1, 3)").await,
        "{'a': 2, 'c': 3}\n"
    );
    assert_eq!(
        run(&mut f.env, "peek('hello world')").await,
        "'hello worl'\n"
    );
    assert_eq!(
        run(&mut f.env, "peek('hello world', 6, 11)").await,
        "'world'\n"
    );
    assert!(f.env.execute("peek(3)").await.unwrap().error.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_finds_literals_and_regexes_with_locations() {
    let mut f = with_context(json!(
        "line one\nERROR disk full\nline three\nerror: lower\nERROR again"
    ))
    .await;
    let hits = json_of(
        &mut f.env,
        "import json; print(json.dumps(search(context, 'ERROR')))",
    )
    .await;
    assert_eq!(hits.as_array().unwrap().len(), 2);
    assert_eq!(hits[0]["line"], 2);
    assert_eq!(hits[0]["offset"], 9);
    assert_eq!(hits[1]["line"], 5);
    assert!(hits[0]["preview"].as_str().unwrap().contains("disk full"));
    let hits = json_of(
        &mut f.env,
        r"import json; print(json.dumps(search(context, r'(?i)error\W', regex=True, max_results=2)))",
    )
    .await;
    assert_eq!(hits.as_array().unwrap().len(), 2);
    assert_eq!(hits[1]["match"], "error:");
    let hits = json_of(
        &mut f.env,
        "print(json.dumps(search(['a cat', 'a dog', 'the dog'], 'dog')))",
    )
    .await;
    assert_eq!(hits.as_array().unwrap().len(), 2);
    assert_eq!(hits[0]["index"], 1);
    assert_eq!(hits[1]["index"], 2);
    let hits = json_of(
        &mut f.env,
        "print(json.dumps(search({'x': 'nothing', 'y': {'deep': 'needle'}}, 'needle')))",
    )
    .await;
    assert_eq!(hits[0]["key"], "y");
    let hits = json_of(
        &mut f.env,
        r"print(json.dumps(search(['v1.2', 'v12'], r'\d\.\d', regex=True)))",
    )
    .await;
    assert_eq!(hits.as_array().unwrap().len(), 1);
    assert_eq!(run(&mut f.env, "search(context, 'absent')").await, "[]\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_relevant_ranks_the_right_item_first() {
    let mut f = plain().await;
    let code = r#"
import json
docs = [
    "The weather today is sunny with a light breeze.",
    "Quarterly revenue grew by 12 percent thanks to strong cloud sales.",
    "Our cat sleeps all day on the sunny windowsill.",
    "Revenue from cloud services doubled; cloud margin improved.",
    "A recipe for bread needs flour, water, salt and yeast.",
]
top = find_relevant(docs, "cloud revenue growth", top_k=2)
print(json.dumps([t["index"] for t in top]))
"#;
    let order = json_of(&mut f.env, code).await;
    let first = order[0].as_u64().unwrap();
    assert!(first == 3 || first == 1, "{order}");
    assert_eq!(order.as_array().unwrap().len(), 2);
    let code = r#"
text = "\n".join(["filler words about nothing in particular"] * 300 + ["the secret password is swordfish"] + ["more filler"] * 300)
top = find_relevant(text, "secret password", top_k=1)
print(json.dumps(["swordfish" in top[0]["item"], top[0]["offset"] > 0]))
"#;
    assert_eq!(json_of(&mut f.env, code).await, json!([true, true]));
    let code = "print(json.dumps([r['key'] for r in find_relevant({'a': 'apples and pears', 'b': 'bread'}, 'bread')]))";
    assert_eq!(json_of(&mut f.env, code).await, json!(["b"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_calls_round_trip() {
    let mut f = plain().await;
    assert_eq!(run(&mut f.env, "llm_query('hi')").await, "'answer to hi'\n");
    assert_eq!(
        run(&mut f.env, "llm_query('hi', context=[1, 2])").await,
        "'answer to hi with [1,2]'\n"
    );
    assert_eq!(
        run(
            &mut f.env,
            "llm_query_parallel(['a', ('b', 'ctx'), 'fail'])"
        )
        .await,
        "['answer to a', 'answer to b', '[llm_query error: boom]']\n"
    );
    let parallel = f.host.calls("llm_query_parallel");
    assert_eq!(
        parallel[0]["prompts"],
        json!([{"prompt": "a"}, {"prompt": "b", "context": "ctx"}, {"prompt": "fail"}])
    );
    assert_eq!(
        run(&mut f.env, "summarize('x' * 1234)").await,
        "'summary of 1234 chars'\n"
    );
    let code = "try:\n    llm_query('fail')\nexcept HostError as e:\n    print('caught', e, isinstance(e, RuntimeError))";
    assert_eq!(
        run(&mut f.env, code).await,
        "caught the sub-model is unavailable True\n"
    );
    let outcome = f.env.execute("sub_rlm('deeper')").await.unwrap();
    assert!(outcome
        .error
        .unwrap()
        .contains("HostError: the test host does not serve sub_rlm"));
}

/// A host call with a missing or unknown argument (model code can reach the driver's
/// raw `_host` through a helper's globals) is refused with an exception naming it,
/// never a default, and the REPL goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_host_calls_name_the_argument() {
    let mut f = plain().await;
    run(&mut f.env, "_host = llm_query.__globals__['_host']").await;
    let missing = f.env.execute("_host('llm_query', {})").await.unwrap();
    let error = missing.error.unwrap();
    assert!(
        error.contains("HostError: invalid call of llm_query: missing field `prompt`"),
        "{error}"
    );
    let unknown = f
        .env
        .execute("_host('sub_rlm', {'query': 'q', 'contxt': 'typo'})")
        .await
        .unwrap();
    assert!(unknown.error.unwrap().contains("unknown field `contxt`"));
    let method = f.env.execute("_host('rm_rf', {})").await.unwrap();
    assert!(method.error.unwrap().contains("rm_rf"));
    assert!(
        f.host.calls("llm_query").is_empty(),
        "nothing reached the host"
    );
    assert_eq!(run(&mut f.env, "print(1 + 1)").await, "2\n");
}

/// A fatal host error fails the call in the model's code and then ends the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_host_error_ends_the_execution() {
    let mut f = plain().await;
    let error = f
        .env
        .execute("try:\n    llm_query('fatal')\nexcept HostError as e:\n    print('seen', e)")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, EnvError::HostFatal { message, .. } if message == "the store is gone"),
        "{error}"
    );
    // The environment itself is fine: the next execution runs.
    assert_eq!(run(&mut f.env, "print('still here')").await, "still here\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_calls_are_served_concurrently() {
    let mut f = fixture_with(
        &[],
        ContextShape::Single,
        Duration::from_secs(30),
        python_options(),
    )
    .await;
    // Each call blocks in the host until all four are in flight: this finishes only if
    // the orchestrator serves host calls concurrently.
    let code = format!(
        "from concurrent.futures import ThreadPoolExecutor\n\
         with ThreadPoolExecutor({BARRIER_PARTIES}) as pool:\n    \
             answers = list(pool.map(llm_query, ['{SYNC_PREFIX}%d' % i for i in range({BARRIER_PARTIES})]))\n\
         answers"
    );
    let outcome = f.env.execute(&code).await.unwrap();
    assert!(!outcome.timed_out, "host calls were not concurrent");
    assert_eq!(
        outcome.stdout,
        "['answer to sync:0', 'answer to sync:1', 'answer to sync:2', 'answer to sync:3']\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_helpers_use_the_host_and_read_files_directly() {
    let mut f = plain().await;
    run(&mut f.env, "r = store.set('notes', 'caf\u{e9} ' * 100)").await;
    assert_eq!(f.store.get("notes").unwrap().as_str().unwrap().len(), 600);
    assert_eq!(
        run(&mut f.env, "store.get('notes') == 'caf\u{e9} ' * 100").await,
        "True\n"
    );
    assert_eq!(
        run(
            &mut f.env,
            "r['key'], store.ref('notes')['path'].endswith('.json')"
        )
        .await,
        "('notes', True)\n"
    );
    assert_eq!(f.host.calls("store_ref").len(), 2);
    let error = f.env.execute("store.get('absent')").await.unwrap().error;
    assert!(error.unwrap().contains("HostError"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_is_interrupted_and_the_kernel_survives() {
    let mut f = fixture_with(
        &[],
        ContextShape::Single,
        Duration::from_millis(500),
        python_options(),
    )
    .await;
    run(&mut f.env, "kept = 'still here'").await;
    let pid = f.env.pid();
    let outcome = f
        .env
        .execute("print('before')\nwhile True:\n    pass")
        .await
        .unwrap();
    assert!(outcome.timed_out);
    assert!(!outcome.restarted);
    assert_eq!(outcome.stdout, "before\n");
    assert!(outcome.combined_output().contains("execution timeout"));
    assert!(outcome.error.unwrap().contains("KeyboardInterrupt"));
    assert_eq!(run(&mut f.env, "kept").await, "'still here'\n");
    assert_eq!(f.env.pid(), pid);
    // A host call in flight is cancelled too.
    let outcome = f.env.execute("llm_query('sync:lonely')").await.unwrap();
    assert!(outcome.timed_out);
    assert_eq!(run(&mut f.env, "kept").await, "'still here'\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_that_ignores_the_interrupt_is_replaced() {
    let options = PythonOptions {
        interrupt_grace: Duration::from_millis(300),
        ..python_options()
    };
    let mut f = fixture_with(
        &[json!("the context")],
        ContextShape::Single,
        Duration::from_millis(500),
        options,
    )
    .await;
    run(&mut f.env, "lost = 1").await;
    let old = f.env.pid().unwrap();
    let code = "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass";
    let outcome = f.env.execute(code).await.unwrap();
    assert!(outcome.timed_out && outcome.restarted, "{outcome:?}");
    assert!(outcome.combined_output().contains("restarted"));
    wait_gone(old).await;
    // The new kernel has the context but not the old variables.
    assert_eq!(run(&mut f.env, "context").await, "'the context'\n");
    assert!(f.env.execute("lost").await.unwrap().error.is_some());
    assert_eq!(f.env.restarts(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_kernel_is_restarted_on_the_next_execution() {
    let mut f = with_context(json!(["a", "b"])).await;
    run(&mut f.env, "lost = 1").await;
    let old = f.env.pid().unwrap();
    let outcome = f
        .env
        .execute("import os, sys\nsys.stderr.flush()\nos.write(2, b'dying now\\n')\nos._exit(7)")
        .await
        .unwrap();
    let error = outcome.error.unwrap();
    assert!(error.contains("exited with code 7"), "{error}");
    assert!(error.contains("variable"), "{error}");
    wait_gone(old).await;
    let outcome = f.env.execute("context").await.unwrap();
    assert!(outcome.restarted);
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.stdout, "['a', 'b']\n");
    assert!(f.env.execute("lost").await.unwrap().error.is_some());
    // A segfault too.
    let outcome = f
        .env
        .execute("import ctypes\nctypes.string_at(0)")
        .await
        .unwrap();
    assert!(outcome.error.unwrap().contains("SIGSEGV"));
    let outcome = f.env.execute("1").await.unwrap();
    assert!(outcome.restarted);
    assert_eq!(outcome.stdout, "1\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_process_survives_shutdown_or_drop() {
    let mut f = plain().await;
    let child = run(
        &mut f.env,
        "import subprocess\np = subprocess.Popen(['sleep', '100'])\np.pid",
    )
    .await;
    let child: u32 = child.trim().parse().unwrap();
    let kernel = f.env.pid().unwrap();
    assert!(running(child) && running(kernel));
    f.env.shutdown().await;
    wait_gone(kernel).await;
    wait_gone(child).await;
    assert_eq!(f.env.pid(), None);

    let mut f = plain().await;
    let child = run(
        &mut f.env,
        "import subprocess\np = subprocess.Popen(['sleep', '100'])\np.pid",
    )
    .await;
    let child: u32 = child.trim().parse().unwrap();
    let kernel = f.env.pid().unwrap();
    drop(f);
    wait_gone(kernel).await;
    wait_gone(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_failures_are_reported() {
    let dir = TempDir::new().unwrap();
    let host = TestHost::new(Arc::new(Store::open(dir.path()).unwrap()));
    let options = PythonOptions::from(PathBuf::from("/nonexistent/python3"));
    let error = PythonEnv::start(
        config(dir.path(), None, Duration::from_secs(5)),
        Arc::clone(&host) as Arc<dyn Host>,
        options,
    )
    .await
    .err()
    .unwrap();
    assert!(matches!(error, EnvError::Start { .. }));
    assert!(error.to_string().contains("/nonexistent/python3"));

    let context = ContextSource {
        shape: ContextShape::Single,
        files: vec![dir.path().join("missing.json")],
        keys: Vec::new(),
        chunk_chars: 100,
        chars: None,
        max_char: None,
        referenced: Vec::new(),
    };
    let mut env = PythonEnv::start(
        config(dir.path(), Some(context), Duration::from_secs(5)),
        host as Arc<dyn Host>,
        python_options(),
    )
    .await
    .unwrap();
    let error = env.execute("1").await.unwrap_err();
    assert!(matches!(error, EnvError::Start { .. }));
    assert!(error.to_string().contains("missing.json"), "{error}");
}

/// Not a test: measures loading a 512 MiB text context through the real kernel.
/// `cargo test --release -p rlm-orchestrator --test it python_env:: -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement: writes a 512 MiB variable"]
async fn measure_loading_a_512_mib_text_context() {
    const TARGET_BYTES: usize = 512 << 20;
    let dir = TempDir::new().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let line = "2024-01-01 12:00:00 INFO user=42 path=\"/api/v1/items\" status=200 latency=12ms\n";
    let text = line.repeat(TARGET_BYTES / line.len());
    store
        .set_text_from_reader("big", &mut text.as_bytes(), "bench", SetOptions::default())
        .unwrap();
    let chars = text.chars().count() as u64;
    drop(text);
    for hints in [false, true] {
        let context = ContextSource {
            shape: ContextShape::Single,
            files: vec![store.path_of("big").unwrap()],
            keys: Vec::new(),
            chunk_chars: 100_000,
            chars: hints.then_some(chars),
            max_char: hints.then_some(0x7f),
            referenced: Vec::new(),
        };
        let started = std::time::Instant::now();
        let mut f = start(
            TempDir::new().unwrap(),
            Arc::clone(&store),
            Some(context),
            Duration::from_secs(600),
            python_options(),
        )
        .await;
        let info = f.env.wait_ready().await.unwrap();
        let to_ready = started.elapsed();
        let file_bytes = std::fs::metadata(store.path_of("big").unwrap())
            .unwrap()
            .len();
        let rss = info.max_rss_kb.unwrap_or(0) * 1024;
        eprintln!(
            "hints={hints}: file {file_bytes} B, method {}, load {:.3} s, start→ready {:.3} s, peak RSS {} MiB ({:.2}x the file)",
            info.load_method,
            info.load_seconds,
            to_ready.as_secs_f64(),
            rss >> 20,
            rss as f64 / file_bytes as f64
        );
        assert_eq!(run(&mut f.env, "len(context)").await, format!("{chars}\n"));
        f.env.shutdown().await;
    }
}
