//! Starting an engine for these tests: [`rlm_test_support::repl`]'s fixture with
//! js's options.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::time::Duration;

use rlm_env::ContextShape;
use rlm_env_js::{JsEnv, JsOptions};
use rlm_test_support::repl::{run, Fixture, EXEC_TIMEOUT};
use serde_json::Value;

/// An engine with its host and store.
pub type JsFixture = Fixture<JsEnv>;

/// Writes `values` into a fresh store and starts an engine whose `context` is them.
pub async fn fixture_with(
    values: &[Value],
    shape: ContextShape,
    timeout: Duration,
    options: JsOptions,
) -> JsFixture {
    Fixture::start(values, shape, timeout, |config, host| {
        JsEnv::start(config, host, options)
    })
    .await
}

/// An engine without a context.
pub async fn plain() -> JsFixture {
    fixture_with(
        &[],
        ContextShape::Single,
        EXEC_TIMEOUT,
        JsOptions::default(),
    )
    .await
}

/// An engine whose `context` is `value`.
pub async fn with_context(value: Value) -> JsFixture {
    fixture_with(
        &[value],
        ContextShape::Single,
        EXEC_TIMEOUT,
        JsOptions::default(),
    )
    .await
}

/// The JSON the code's last expression evaluates to.
pub async fn json_of(env: &mut JsEnv, code: &str) -> Value {
    let stdout = run(env, &format!("{code}\nJSON.stringify(__result)")).await;
    let quoted: String = serde_json::from_str(stdout.trim_end()).unwrap();
    serde_json::from_str(&quoted).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}
