//! Starting a kernel for these tests: [`rlm_test_support::repl`]'s fixture with
//! python's options.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::Store;
use rlm_env::{ContextShape, ContextSource};
use rlm_env_python::{PythonEnv, PythonOptions};
use rlm_test_support::repl::{run, Fixture, EXEC_TIMEOUT};
use serde_json::Value;
use tempfile::TempDir;

pub use rlm_test_support::repl::wait_gone;

/// A kernel with its host and store.
pub type PyFixture = Fixture<PythonEnv>;

/// Default options, with the interpreter from `RLM_TEST_PYTHON` when set (to run this
/// suite against several Python versions).
pub fn python_options() -> PythonOptions {
    match std::env::var_os("RLM_TEST_PYTHON") {
        Some(python) => PythonOptions::from(PathBuf::from(python)),
        None => PythonOptions::default(),
    }
}

/// Writes `values` into a fresh store and starts a kernel whose `context` is them.
pub async fn fixture_with(
    values: &[Value],
    shape: ContextShape,
    timeout: Duration,
    options: PythonOptions,
) -> PyFixture {
    Fixture::start(values, shape, timeout, |config, host| {
        PythonEnv::start(config, host, options)
    })
    .await
}

/// Starts a kernel over `store` whose `context` is `context`.
pub async fn start(
    dir: TempDir,
    store: Arc<Store>,
    context: Option<ContextSource>,
    timeout: Duration,
    options: PythonOptions,
) -> PyFixture {
    Fixture::start_over(dir, store, context, timeout, |config, host| {
        PythonEnv::start(config, host, options)
    })
    .await
}

/// A kernel without a context.
pub async fn plain() -> PyFixture {
    fixture_with(&[], ContextShape::Single, EXEC_TIMEOUT, python_options()).await
}

/// A kernel whose `context` is `value`.
pub async fn with_context(value: Value) -> PyFixture {
    fixture_with(
        &[value],
        ContextShape::Single,
        EXEC_TIMEOUT,
        python_options(),
    )
    .await
}

/// The JSON the code prints on its last line.
pub async fn json_of(env: &mut PythonEnv, code: &str) -> Value {
    let stdout = run(env, code).await;
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}
