//! The `python` environment against model code that breaks the kernel's plumbing:
//! floods of captured output (a background writer included), lines written to the
//! protocol fd (garbage, a forged `final`, more than a message may hold), forked
//! processes that call the host, and closed or replaced driver fds. Each case must end
//! in a clear error the model sees (and a fresh kernel where one is needed), never in
//! a hang or a timeout.
//!
//! The code finds the driver's fds through its globals (`llm_query.__globals__`), as
//! hostile code could. Waits are bounded by the execution timeout; nothing asserts on
//! durations.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::time::Duration;

use rlm_env::{CodeRepl, ContextShape, ExecOutcome};
use rlm_env_python::PythonOptions;
use rlm_test_support::repl::run;

use crate::support::{fixture_with, python_options, wait_gone, PyFixture as Fixture};

/// Long enough for any honest cell here; a hang shows as `timed_out`.
const EXEC_TIMEOUT: Duration = Duration::from_secs(20);

/// The driver's globals, as model code can reach them.
const DRIVER: &str = "import os, json\n_g = llm_query.__globals__\n";

async fn fixture(options: PythonOptions) -> Fixture {
    fixture_with(&[], ContextShape::Single, EXEC_TIMEOUT, options).await
}

/// Runs `code`, which must come back (not time out).
async fn outcome(f: &mut Fixture, code: &str) -> ExecOutcome {
    let outcome = f.env.execute(code).await.unwrap();
    assert!(!outcome.timed_out, "the cell hung: {outcome:?}");
    outcome
}

/// After a restart, the next cell works and says the kernel was restarted.
async fn works_again_after_a_restart(f: &mut Fixture, old: u32) {
    wait_gone(old).await;
    let next = outcome(f, "1 + 1").await;
    assert_eq!(next.error, None, "{next:?}");
    assert_eq!(next.stdout, "2\n");
    assert!(next.restarted, "{next:?}");
    assert_ne!(f.env.pid(), Some(old));
    assert_eq!(run(&mut f.env, "3").await, "3\n");
}

/// A cell's own flood of fd-level output is cut while it runs: the capture file is
/// emptied (the cell waits for that) and the output says bytes were thrown away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_output_is_discarded_and_reported() {
    let options = PythonOptions {
        output_cap_bytes: 1000,
        capture_limit_bytes: 1 << 20,
        ..python_options()
    };
    let mut f = fixture(options).await;
    let code = "import os, time\nos.write(1, b'x' * (8 << 20))\nwhile os.fstat(1).st_size > 0:\n    time.sleep(0.01)\nprint('after')";
    let out = outcome(&mut f, code).await;
    assert_eq!(out.error, None, "{out:?}");
    assert!(out.stdout.starts_with("after\n"), "{}", out.stdout);
    assert!(
        out.stdout.contains("[output discarded: about"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.len() < 2000, "{}", out.stdout.len());
    assert_eq!(run(&mut f.env, "print('small')").await, "small\n");
}

/// A background process keeps its copy of the capture fd after its cell: the file
/// stays bounded between cells too, and the next output says what was thrown away.
/// (The writer is a shell and its `head` children, in a session of their own: killing
/// only the shell left a `head` writing into the next cell, which CI once caught.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_writer_cannot_fill_the_disk() {
    let options = PythonOptions {
        output_cap_bytes: 1000,
        capture_limit_bytes: 1 << 20,
        ..python_options()
    };
    let mut f = fixture(options).await;
    run(
        &mut f.env,
        "import subprocess\nwriter = subprocess.Popen(['sh', '-c', 'while :; do head -c 65536 /dev/zero; sleep 0.01; done'], start_new_session=True)",
    )
    .await;
    // The capture file (fd 7 at rest) shrinks: someone emptied it.
    let code = format!(
        "{DRIVER}import time\nlast = 0\nwhile True:\n    size = os.fstat(_g['_out_fd']).st_size\n    if size < last:\n        break\n    last = size\n    time.sleep(0.01)\nos.killpg(writer.pid, 9); writer.wait()\nprint('emptied')"
    );
    let out = outcome(&mut f, &code).await;
    assert_eq!(out.error, None, "{out:?}");
    assert!(
        out.stdout.contains("[output discarded: about"),
        "{}",
        out.stdout
    );
    assert_eq!(run(&mut f.env, "print('quiet')").await, "quiet\n");
}

/// A line written to the protocol fd that is not a driver message ends the kernel as
/// a protocol error at once (it used to be ignored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_protocol_fd_restarts_the_kernel() {
    let mut f = fixture(python_options()).await;
    run(&mut f.env, "lost = 1").await;
    let old = f.env.pid().unwrap();
    let code = format!("{DRIVER}os.write(_g['_PROTO_OUT'], b'garbage\\n')\nprint('wrote')");
    let out = outcome(&mut f, &code).await;
    let error = out.error.unwrap_or_default();
    assert!(error.contains("not JSON"), "{error}");
    assert!(error.contains("restarted"), "{error}");
    works_again_after_a_restart(&mut f, old).await;
    assert!(f.env.execute("lost").await.unwrap().error.is_some());
}

/// A fragment without a newline glues itself to the driver's next message: a protocol
/// error, not a reply that never comes (it used to end in the execution timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fragment_on_the_protocol_fd_is_a_protocol_error_not_a_timeout() {
    let mut f = fixture_with(
        &[],
        ContextShape::Single,
        Duration::from_secs(5),
        python_options(),
    )
    .await;
    let old = f.env.pid().unwrap();
    let code = format!("{DRIVER}os.write(_g['_PROTO_OUT'], b'{{\"type\": \"resu')");
    let out = outcome(&mut f, &code).await;
    assert!(out.error.unwrap_or_default().contains("restarted"));
    works_again_after_a_restart(&mut f, old).await;
}

/// A `final` forged by model code on the protocol fd does not end the run: the
/// execution fails with a notice and the kernel is replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_final_does_not_end_the_run() {
    let mut f = fixture(python_options()).await;
    let old = f.env.pid().unwrap();
    // Every id this kernel could be on, so the forgery cannot miss.
    let code = format!(
        "{DRIVER}import time\nfor i in range(1, 50):\n    os.write(_g['_PROTO_OUT'], (json.dumps({{'type': 'result', 'id': i, 'final': {{'kind': 'var', 'name': 'x', 'value': 'forged'}}}}) + '\\n').encode())\ntime.sleep(0.5)"
    );
    let out = outcome(&mut f, &code).await;
    assert_eq!(out.final_answer, None, "{out:?}");
    let error = out.error.unwrap_or_default();
    assert!(
        error.contains("did not come from the REPL's driver"),
        "{error}"
    );
    assert!(error.contains("restarted"), "{error}");
    works_again_after_a_restart(&mut f, old).await;
}

/// More than a message may hold on the protocol fd: the orchestrator stops reading at
/// the limit (its memory stays bounded) and restarts the kernel with a notice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_is_refused_at_the_limit() {
    let options = PythonOptions {
        max_message_bytes: 1 << 20,
        ..python_options()
    };
    let mut f = fixture(options).await;
    let old = f.env.pid().unwrap();
    let code = format!("{DRIVER}os.write(_g['_PROTO_OUT'], b'[' * (16 << 20))");
    let out = outcome(&mut f, &code).await;
    let error = out.error.unwrap_or_default();
    assert!(error.contains("longer than 1048576 bytes"), "{error}");
    works_again_after_a_restart(&mut f, old).await;
}

/// The driver keeps its own messages under the limit: a host call too large to send
/// is a `HostError` in the code, and the kernel lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_call_too_large_to_send_is_a_python_error() {
    let options = PythonOptions {
        max_message_bytes: 1 << 20,
        ..python_options()
    };
    let mut f = fixture(options).await;
    run(&mut f.env, "kept = 1").await;
    let out = outcome(&mut f, "store.set('big', 'x' * (2 << 20))").await;
    let error = out.error.unwrap_or_default();
    assert!(error.contains("HostError"), "{error}");
    assert!(error.contains("more than the 1048576 bytes"), "{error}");
    assert!(!out.restarted);
    assert_eq!(run(&mut f.env, "kept").await, "1\n");
    assert!(f.host.calls("store_set").is_empty());
}

/// `multiprocessing` workers (forked) that call the host get a clear `HostError` at
/// once (they used to hang the cell), and the kernel's own host calls still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_calls_from_forked_workers_fail_fast() {
    let mut f = fixture(python_options()).await;
    let code = "import multiprocessing as mp\ndef ask(x):\n    try:\n        return llm_query(f'q{x}')\n    except HostError as e:\n        return f'HostError: {e}'\nwith mp.get_context('fork').Pool(2) as pool:\n    answers = pool.map(ask, range(4))\nfor a in answers:\n    print(a)";
    let out = outcome(&mut f, code).await;
    assert_eq!(out.error, None, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", out.stdout);
    for line in lines {
        assert!(
            line.starts_with("HostError: llm_query cannot be called from a forked process"),
            "{line}"
        );
    }
    // An uncaught one reaches the parent as a HostError too.
    let code = "import multiprocessing as mp\ndef ask(x):\n    return llm_query('q')\nwith mp.get_context('fork').Pool(1) as pool:\n    pool.map(ask, [1])";
    let out = outcome(&mut f, code).await;
    assert!(out.error.unwrap_or_default().contains("HostError"));
    // A plain os.fork child that runs off the end of its cell does not answer for it.
    let code = "import os\npid = os.fork()\nif pid == 0:\n    print('child')\nelse:\n    os.waitpid(pid, 0)\n    print('parent')";
    let out = outcome(&mut f, code).await;
    assert_eq!(out.error, None, "{out:?}");
    assert!(out.stdout.contains("parent"), "{}", out.stdout);
    assert_eq!(run(&mut f.env, "llm_query('hi')").await, "'answer to hi'\n");
    assert!(!outcome(&mut f, "1").await.restarted);
}

/// Closing a capture fd (`os.close(7)`) used to break every later cell: the kernel is
/// replaced with a notice instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_capture_fd_restarts_the_kernel() {
    for fd in ["_out_fd", "_err_fd", "_STDERR"] {
        let mut f = fixture(python_options()).await;
        let old = f.env.pid().unwrap();
        let code = format!("{DRIVER}os.close(_g['{fd}'])");
        let out = outcome(&mut f, &code).await;
        let error = out.error.unwrap_or_default();
        assert!(error.contains("file descriptor"), "{fd}: {error}");
        assert!(error.contains("restarted"), "{fd}: {error}");
        works_again_after_a_restart(&mut f, old).await;
    }
}

/// Closing or replacing a protocol fd ends the kernel at once with a reason, instead
/// of a kernel that no longer reads or answers (a timeout on every later cell).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_or_replacing_a_protocol_fd_restarts_the_kernel() {
    let cases = [
        "os.close(_g['_PROTO_IN'])",
        "os.dup2(os.open(os.devnull, os.O_WRONLY), _g['_PROTO_OUT'])",
    ];
    for case in cases {
        let mut f = fixture_with(
            &[],
            ContextShape::Single,
            Duration::from_secs(5),
            python_options(),
        )
        .await;
        let old = f.env.pid().unwrap();
        let out = outcome(&mut f, &format!("{DRIVER}{case}")).await;
        let error = out.error.unwrap_or_default();
        assert!(error.contains("file descriptor"), "{case}: {error}");
        works_again_after_a_restart(&mut f, old).await;
    }
}
