//! The kernel as a process: output written below Python (the shell, children, raw
//! fds), `input()` and `sys.exit`, a kernel that dies or ignores the interrupt and is
//! replaced (its slots and history reloaded), no process left behind, start errors.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::Store;
use rlm_env::{CodeRepl, ContextShape, EnvError, Environment, HistoryEntry, Host};
use rlm_env_python::{PythonEnv, PythonOptions};
use rlm_test_support::procs::running;
use rlm_test_support::repl::{config, run, text_source};
use rlm_test_support::test_host::TestHost;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::support::{fixture_with, json_of, plain, python_options, wait_gone, with_context};

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

/// s20c-seed25 (the js form, js `aggregate` item 1): a `split('label=')[1]` over
/// every line of a context whose first line has no `label=`. The traceback is told the
/// part is missing there and the filter to write first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_part_missing_on_some_line_is_told_with_the_filter_to_write() {
    let mut f = with_context(json!("records\nid=1 label=fraud\nid=2 label=returns")).await;
    let code = "labels = [line.split('label=')[1] for line in context.splitlines()]";
    let error = f.env.execute(code).await.unwrap().error.unwrap();
    assert!(
        error.contains("IndexError: list index out of range")
            && error.contains("`[line for line in context.splitlines() if 'label=' in line]`"),
        "{error}"
    );
}

/// `sys.exit` in a cell is an error the model sees, not the end of the kernel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_is_an_error_and_the_kernel_goes_on() {
    let mut f = plain().await;
    run(&mut f.env, "a = 1").await;
    let exit = f.env.execute("import sys; sys.exit(3)").await.unwrap();
    assert!(exit.error.unwrap().contains("SystemExit"));
    assert_eq!(run(&mut f.env, "a + 1").await, "2\n");
}

/// The slots a session added, its latest query and its whole history are loaded
/// again into a kernel that replaces a dead one (js has no way to kill its engine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_slots_and_history_survive_a_restart() {
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
async fn a_missing_interpreter_is_a_start_error() {
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
}
