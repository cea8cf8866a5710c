//! Code that does not finish: interrupted at the execution timeout (a host call it
//! waits on included) or abandoned by a cancelled query and stopped by `recover`. In
//! each case the REPL keeps its variables and takes the next cell.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::time::Duration;

use rlm_env::{CodeRepl, ContextShape, Environment};
use rlm_test_support::repl::run;
use serde_json::json;

use crate::lang::{json_of, start, Lang};

/// The execution timeout of the tests that reach it.
const SHORT_TIMEOUT: Duration = Duration::from_millis(500);

/// How long a test waits for an execution it then abandons.
const ABANDON_AFTER: Duration = Duration::from_millis(300);

async fn an_endless_loop_is_interrupted_and_the_repl_survives<L: Lang>() {
    let mut f = start::<L>(&[], ContextShape::Single, SHORT_TIMEOUT, L::options()).await;
    run(&mut f.env, &L::assign("kept", "'still here'")).await;
    let outcome = f.env.execute(L::PRINT_THEN_LOOP).await.unwrap();
    assert!(outcome.timed_out, "{outcome:?}");
    assert!(!outcome.restarted, "{outcome:?}");
    assert_eq!(outcome.stdout, "before\n");
    assert!(
        outcome.combined_output().contains("execution timeout"),
        "{outcome:?}"
    );
    let error = outcome.error.unwrap();
    assert!(error.contains(L::INTERRUPTED), "{error}");
    assert_eq!(run(&mut f.env, "kept").await, L::echo(&json!("still here")));
    assert_eq!(L::restarts(&f.env), 0);
}
both!(an_endless_loop_is_interrupted_and_the_repl_survives);

/// A host call in flight at the timeout is cancelled: the code after it never runs,
/// not even later.
async fn a_host_call_in_flight_is_cancelled_at_the_timeout<L: Lang>() {
    let mut f = start::<L>(&[], ContextShape::Single, SHORT_TIMEOUT, L::options()).await;
    run(&mut f.env, &L::assign("kept", "'still here'")).await;
    // A `sync:` call waits for three more that never come.
    let code = format!(
        "{}\n{}\n{}",
        L::assign("before", "1"),
        L::call("llm_query('sync:alone')"),
        L::assign("after", "1")
    );
    let outcome = f.env.execute(&code).await.unwrap();
    assert!(outcome.timed_out, "{outcome:?}");
    let error = outcome.error.unwrap();
    assert!(error.contains(L::CALL_INTERRUPTED), "{error}");
    let defined = format!("[{}, {}]", L::defined("before"), L::defined("after"));
    assert_eq!(
        json_of::<L>(&mut f.env, &defined).await,
        json!([true, false])
    );
    // The abandoned continuation never runs later.
    run(&mut f.env, &L::call("llm_query('hi')")).await;
    assert_eq!(
        json_of::<L>(&mut f.env, &L::defined("after")).await,
        json!(false)
    );
    assert_eq!(run(&mut f.env, "kept").await, L::echo(&json!("still here")));
}
both!(a_host_call_in_flight_is_cancelled_at_the_timeout);

async fn recover_stops_an_abandoned_execution_and_keeps_variables<L: Lang>() {
    let mut f = start::<L>(
        &[],
        ContextShape::Single,
        Duration::from_secs(600),
        L::options(),
    )
    .await;
    run(&mut f.env, &L::assign("kept", "'still here'")).await;
    // The caller goes away while the code runs (a cancelled query).
    let abandoned = tokio::time::timeout(ABANDON_AFTER, f.env.execute(L::ENDLESS_LOOP)).await;
    assert!(abandoned.is_err(), "an endless loop finished");
    f.env.recover().await.unwrap();
    assert_eq!(run(&mut f.env, "kept").await, L::echo(&json!("still here")));
    assert_eq!(L::restarts(&f.env), 0);
    // Without an explicit recover, the next request settles it first.
    let waiting = L::call("llm_query('sync:alone')");
    let abandoned = tokio::time::timeout(ABANDON_AFTER, f.env.execute(&waiting)).await;
    assert!(abandoned.is_err());
    assert_eq!(run(&mut f.env, "kept").await, L::echo(&json!("still here")));
    assert_eq!(L::restarts(&f.env), 0);
}
both!(recover_stops_an_abandoned_execution_and_keeps_variables);
