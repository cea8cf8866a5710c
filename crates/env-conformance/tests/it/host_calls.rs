//! Everything a REPL asks of the orchestrator goes through the host: sub-model calls
//! (one, parallel, concurrent), the `store.*` helpers, refused and malformed calls
//! (an exception the model sees) and fatal ones (the end of the execution).

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::time::Duration;

use rlm_env::{CodeRepl, ContextShape, EnvError};
use rlm_test_support::repl::{error_of, outcome, run};
use serde_json::json;

use crate::lang::{json_of, plain, said, start, Lang};

async fn host_calls_round_trip<L: Lang>() {
    let mut f = plain::<L>().await;
    assert_eq!(
        run(&mut f.env, &L::call("llm_query('hi')")).await,
        L::echo(&json!("answer to hi"))
    );
    assert_eq!(
        run(&mut f.env, &L::call(L::QUERY_WITH_CONTEXT)).await,
        L::echo(&json!("answer to hi with [1,2]"))
    );
    assert_eq!(
        run(&mut f.env, &L::call(L::PARALLEL_QUERIES)).await,
        L::echo(&json!([
            "answer to a",
            "answer to b",
            "[llm_query error: boom]"
        ]))
    );
    run(&mut f.env, &L::call(L::QUERY_SPLIT)).await;
    let split = f.host.calls("llm_query");
    assert_eq!(
        split.last().unwrap(),
        &json!({"prompt": "hi", "context": "ctx", "split": true})
    );
    assert!(split[0].get("split").is_none(), "not asked: not sent");
    let parallel = f.host.calls("llm_query_parallel");
    assert_eq!(
        parallel[0]["prompts"],
        json!([{"prompt": "a"}, {"prompt": "b", "context": "ctx"}, {"prompt": "fail"}])
    );
    let long = L::literal(&json!("x".repeat(1234)));
    assert_eq!(
        run(&mut f.env, &L::call(&format!("summarize({long})"))).await,
        L::echo(&json!("summary of 1234 chars"))
    );
    // A refused call is the language's HostError, a kind of its base error class.
    let caught = run(&mut f.env, L::CATCH_HOST_ERROR).await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&caught).unwrap(),
        json!(["the sub-model is unavailable", true, true])
    );
    let error = error_of(&mut f.env, &L::call("sub_rlm('deeper')")).await;
    assert!(
        error.contains("HostError: the test host does not serve sub_rlm"),
        "{error}"
    );
}
both!(host_calls_round_trip);

/// A host call with a missing or unknown argument (model code can reach the raw bridge
/// the helpers use) is refused with a message naming it, never a default, and the
/// REPL goes on.
async fn malformed_host_calls_name_the_argument<L: Lang>() {
    let mut f = plain::<L>().await;
    let missing = outcome(&mut f.env, &L::raw_host_call("llm_query", &json!({}))).await;
    let refusal = format!(
        "{}invalid call of llm_query: missing field `prompt`",
        L::RAW_REFUSAL
    );
    assert!(said(&missing).contains(&refusal), "{missing:?}");
    let unknown = outcome(
        &mut f.env,
        &L::raw_host_call("sub_rlm", &json!({"query": "q", "contxt": "typo"})),
    )
    .await;
    assert!(
        said(&unknown).contains("unknown field `contxt`"),
        "{unknown:?}"
    );
    let method = outcome(&mut f.env, &L::raw_host_call("rm_rf", &json!({}))).await;
    assert!(said(&method).contains("rm_rf"), "{method:?}");
    assert!(
        f.host.calls("llm_query").is_empty(),
        "nothing reached the host"
    );
    assert_eq!(run(&mut f.env, "print(1 + 1)").await, "2\n");
}
both!(malformed_host_calls_name_the_argument);

/// A fatal host error fails the call in the model's code and then ends the run.
async fn a_fatal_host_error_ends_the_execution<L: Lang>() {
    let mut f = plain::<L>().await;
    let error = f.env.execute(L::CATCH_FATAL).await.unwrap_err();
    assert!(
        matches!(&error, EnvError::HostFatal { message, .. } if message == "the store is gone"),
        "{error}"
    );
    // The environment itself is fine: the next execution runs.
    assert_eq!(run(&mut f.env, "print('still here')").await, "still here\n");
}
both!(a_fatal_host_error_ends_the_execution);

async fn host_calls_are_served_concurrently<L: Lang>() {
    let mut f = start::<L>(
        &[],
        ContextShape::Single,
        Duration::from_secs(30),
        L::options(),
    )
    .await;
    // Each call blocks in the host until all four are in flight: this finishes only if
    // the calls are in flight together and the host serves them concurrently.
    let outcome = f.env.execute(&L::concurrent_calls()).await.unwrap();
    assert!(!outcome.timed_out, "host calls were not concurrent");
    assert_eq!(
        outcome.stdout,
        L::echo(&json!([
            "answer to sync:0",
            "answer to sync:1",
            "answer to sync:2",
            "answer to sync:3"
        ]))
    );
}
both!(host_calls_are_served_concurrently);

async fn the_store_helpers_go_through_the_host<L: Lang>() {
    let mut f = plain::<L>().await;
    let notes = L::literal(&json!("caf\u{e9} ".repeat(100)));
    let set = L::call(&format!("store.set('notes', {notes})"));
    run(&mut f.env, &L::assign("r", &set)).await;
    assert_eq!(f.store.get("notes").unwrap().as_str().unwrap().len(), 600);
    let same = format!("{} == {notes}", L::call("store.get('notes')"));
    assert_eq!(json_of::<L>(&mut f.env, &same).await, json!(true));
    let code = format!(
        "[r['key'], {}, {}]",
        L::call("store.ref('notes')"),
        L::len(&L::call("store.list()"))
    );
    let got = json_of::<L>(&mut f.env, &code).await;
    assert_eq!(got[0], "notes");
    assert!(got[1]["path"].as_str().unwrap().ends_with(".json"), "{got}");
    assert_eq!(got[2], 1);
    assert_eq!(f.host.calls("store_ref").len(), L::STORE_REF_CALLS);
    run(&mut f.env, &L::call("store.delete('notes')")).await;
    assert!(!f.store.has("notes"));
    let error = error_of(&mut f.env, &L::call("store.get('absent')")).await;
    assert!(error.contains("HostError"), "{error}");
}
both!(the_store_helpers_go_through_the_host);
