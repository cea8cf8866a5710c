//! Starting a code REPL for a test: its configuration, a fresh store holding its
//! contexts, the [`TestHost`] it calls, and the few helpers every REPL test needs
//! (run code that must succeed, wait for a kernel to be gone).
//!
//! Generic over the environment, so the python, the js and the shared suite start
//! theirs the same way and differ only in the function that starts one.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::{SetOptions, Store};
use rlm_env::{
    CodeRepl, ContextShape, ContextSource, EnvConfig, EnvError, ExecOutcome, HistoryEntry, Host,
};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::procs::wait_gone_async;
use crate::test_host::TestHost;

/// The execution timeout of a test that is not about timeouts.
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// Characters per `context_chunks` item of the contexts [`Fixture::start`] writes.
pub const CHUNK_CHARS: u64 = 10;

/// A started environment with its host, store and data directory.
pub struct Fixture<E> {
    /// The environment under test.
    pub env: E,
    /// The host it calls, which records every call.
    pub host: Arc<TestHost>,
    /// The store its contexts were written to and the host serves.
    pub store: Arc<Store>,
    /// Removed when the fixture is dropped.
    pub dir: TempDir,
}

/// The configuration of a REPL at depth 0 over `dir`, with the query
/// `what is the answer?` and one earlier exchange (`earlier` → `before`) in `history`.
pub fn config(dir: &Path, context: Option<ContextSource>, timeout: Duration) -> EnvConfig {
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

/// A context over `files`, cut into `chunk_chars` for `context_chunks`.
pub fn source(
    shape: ContextShape,
    files: Vec<std::path::PathBuf>,
    chunk_chars: u64,
) -> ContextSource {
    ContextSource {
        shape,
        files,
        keys: Vec::new(),
        chunk_chars,
        chars: None,
        max_char: None,
        referenced: Vec::new(),
    }
}

/// Stores `text` under `key` and returns it as a single context of 4-character chunks.
pub fn text_source(store: &Store, key: &str, text: &str) -> ContextSource {
    store.set(key, json!(text), SetOptions::default()).unwrap();
    source(ContextShape::Single, vec![store.path_of(key).unwrap()], 4)
}

impl<E: CodeRepl> Fixture<E> {
    /// Writes `values` into a fresh store (`context-0`, `context-1`, …) and starts an
    /// environment whose `context` is them, by `start(config, host)`.
    pub async fn start<F, Fut>(
        values: &[Value],
        shape: ContextShape,
        timeout: Duration,
        start: F,
    ) -> Self
    where
        F: FnOnce(EnvConfig, Arc<dyn Host>) -> Fut,
        Fut: Future<Output = Result<E, EnvError>>,
    {
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
        let context = (!values.is_empty()).then(|| source(shape, files, CHUNK_CHARS));
        Self::start_over(dir, store, context, timeout, start).await
    }

    /// Starts an environment over an existing store and `context`.
    pub async fn start_over<F, Fut>(
        dir: TempDir,
        store: Arc<Store>,
        context: Option<ContextSource>,
        timeout: Duration,
        start: F,
    ) -> Self
    where
        F: FnOnce(EnvConfig, Arc<dyn Host>) -> Fut,
        Fut: Future<Output = Result<E, EnvError>>,
    {
        let host = TestHost::new(Arc::clone(&store));
        let env = start(
            config(dir.path(), context, timeout),
            Arc::clone(&host) as Arc<dyn Host>,
        )
        .await
        .unwrap();
        Self {
            env,
            host,
            store,
            dir,
        }
    }
}

/// Runs code that must not fail, time out or restart, and returns its stdout.
pub async fn run(env: &mut (impl CodeRepl + ?Sized), code: &str) -> String {
    let outcome = env.execute(code).await.unwrap();
    assert_eq!(outcome.error, None, "code failed: {code}");
    assert!(!outcome.timed_out && !outcome.restarted, "{outcome:?}");
    outcome.stdout
}

/// Runs code that may fail and returns its outcome.
pub async fn outcome(env: &mut (impl CodeRepl + ?Sized), code: &str) -> ExecOutcome {
    env.execute(code).await.unwrap()
}

/// The error of code that must fail.
pub async fn error_of(env: &mut (impl CodeRepl + ?Sized), code: &str) -> String {
    let outcome = env.execute(code).await.unwrap();
    match outcome.error {
        Some(error) => error,
        None => panic!("code did not fail: {code}: {outcome:?}"),
    }
}

/// Waits (bounded) until `pid` is gone; fails the test if it is not.
pub async fn wait_gone(pid: u32) {
    assert!(
        wait_gone_async(pid, Duration::from_secs(10)).await,
        "process {pid} is still running"
    );
}
