//! The engine's confinement and guards: nothing reachable but what rlm gives, an
//! interrupt that caught exceptions cannot swallow, memory bombs and stack overflows
//! that end one step, not the run.

use std::time::Duration;

use serde_json::Value;

use rlm_env::{CodeRepl, ContextShape};
use rlm_env_js::JsOptions;
use rlm_test_support::repl::{error_of, run, EXEC_TIMEOUT};

use crate::support::{fixture_with, plain, JsFixture};

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

/// Catching the interrupt does not keep the code running (python's kernel, by
/// contrast, lets code catch `KeyboardInterrupt` and is replaced if it goes on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catching_the_interrupt_does_not_keep_code_running() {
    let mut f = fixture_with(
        &[],
        ContextShape::Single,
        Duration::from_millis(500),
        JsOptions::default(),
    )
    .await;
    let outcome = f
        .env
        .execute("try { while (true) {} } catch (e) { console.log('caught') }")
        .await
        .unwrap();
    assert!(outcome.timed_out);
    assert!(!outcome.stdout.contains("caught"), "{}", outcome.stdout);
}

/// An engine whose contexts are `values`, with a 64 MiB memory limit.
async fn with_64_mib(values: &[Value]) -> JsFixture {
    let options = JsOptions {
        memory_limit_bytes: Some(64 << 20),
        ..JsOptions::default()
    };
    fixture_with(values, ContextShape::Single, EXEC_TIMEOUT, options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_ends_the_step_not_the_run() {
    let mut f = with_64_mib(&[]).await;
    run(&mut f.env, "var kept = 7").await;
    let outcome = f
        .env
        .execute("var hog = []\nwhile (true) hog.push(new Array(100000).fill(1))")
        .await
        .unwrap();
    let error = outcome.error.unwrap();
    assert!(error.contains("out of memory"), "{error}");
    assert!(error.contains("all of the runtime's 64 MiB"), "{error}");
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

/// A block a small model wrote for a count of record pairs: `exec` twice per pass
/// starts over after the last match, so the loop never ends. The error names the limit
/// and the cause, so the model has more to go on than an `InternalError:` it copies
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regex_loop_that_never_ends_is_told_as_out_of_memory_with_its_cause() {
    // An odd count of matches: the push takes the null, and the next `exec` starts over.
    let records: String = (0..401)
        .map(|i| format!("person {i:06}: city=Lima year={}\n", 1950 + i % 70))
        .collect();
    let mut f = with_64_mib(&[Value::String(records)]).await;
    let code = "const regex = /city=(\\w+) year=(\\d+)/g;\nlet matches = [];\nwhile (regex.exec(context) !== null) {\n  matches.push(regex.exec(context));\n}\nconsole.log(matches.length)";
    let outcome = f.env.execute(code).await.unwrap();
    let error = outcome.error.unwrap();
    assert!(error.starts_with("InternalError: out of memory"), "{error}");
    assert!(error.contains("a loop that never ends"), "{error}");
    assert!(error.contains("context.matchAll(re)"), "{error}");
    assert!(f.env.execute("1 + 1").await.unwrap().error.is_none());
}

/// The local model's block of after-echo-seed6, js `pairs` item 0, cut down: QuickJS
/// names only a position; the line it points at is shown under the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_shows_the_line_of_the_cell_it_points_at() {
    let mut f = plain().await;
    let code = "const pairs = ['a:b:c'];\nfor (const pair of pairs) {\n  const [_, _, year] = pair.split(':');\n}";
    let error = f.env.execute(code).await.unwrap().error.unwrap();
    assert!(
        error.starts_with("SyntaxError: invalid redefinition"),
        "{error}"
    );
    assert!(
        error.ends_with("\n    line 3: const [_, _, year] = pair.split(':');"),
        "{error}"
    );
    let error = f
        .env
        .execute("let o = null;\no.x")
        .await
        .unwrap()
        .error
        .unwrap();
    assert!(error.starts_with("TypeError"), "{error}");
    assert!(error.ends_with("\n    line 2: o.x"), "{error}");
}

/// s20c-seed25, js `aggregate` item 1: a `split('label=')[1]` over every line, one of
/// them with no `label=`; the model read the TypeError as `context` not being defined.
/// The error names the part and the filter to write first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_part_missing_on_some_line_is_told_with_the_filter_to_write() {
    let mut f = plain().await;
    let code = r"const text = 'records\nid=1 label=fraud\nid=2 label=returns';
const labels = text.split('\n').map(line => line.split('label=')[1].split(' ')[0]);";
    let error = f.env.execute(code).await.unwrap().error.unwrap();
    assert!(
        error.starts_with("TypeError: cannot read property 'split' of undefined"),
        "{error}"
    );
    assert!(
        error.contains("`.split('label=')[1]` is undefined on a line that has no 'label='")
            && error.contains("filter(line => line.includes('label='))"),
        "{error}"
    );
}

/// after-echo-seed6, js `aggregate` item 1: `require` of the context's file, three
/// times. The error says there are no modules and `context` holds the text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_is_told_there_are_no_modules_and_context_holds_the_text() {
    let mut f = plain().await;
    let code = "const context = require('/data/aggregate-32k.txt');";
    let error = f.env.execute(code).await.unwrap().error.unwrap();
    assert!(
        error.starts_with("ReferenceError: require is not defined"),
        "{error}"
    );
    assert!(
        error.contains(
            "This REPL has no modules, files or network: `context` already holds the whole context"
        ),
        "{error}"
    );
    let error = f
        .env
        .execute("undefinedName + 1")
        .await
        .unwrap()
        .error
        .unwrap();
    assert!(!error.contains("no modules"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thrown_null_reads_as_null_not_as_running_out_of_memory() {
    let mut f = plain().await;
    let outcome = f.env.execute("throw null").await.unwrap();
    assert_eq!(outcome.error.as_deref(), Some("Uncaught null"));
    let outcome = f.env.execute("throw 42").await.unwrap();
    assert_eq!(outcome.error.as_deref(), Some("Uncaught 42"));
    for rejects in [
        "await Promise.reject(null)",
        "await new Promise((_, reject) => reject(null))",
    ] {
        let outcome = f.env.execute(rejects).await.unwrap();
        assert_eq!(outcome.error.as_deref(), Some("Uncaught null"), "{rejects}");
    }
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
