//! What a REPL is given to work on: `context` (text, JSON, a list of files, in every
//! layout a variable file may have), its `context_chunks`, `query` and `history`, the
//! slots a persistent session adds with each query, and contexts that cannot load.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::sync::Arc;

use rlm_context_store::{SetOptions, Store};
use rlm_env::{CodeRepl, ContextShape, EnvError, Environment, HistoryEntry};
use rlm_test_support::repl::{error_of, run, source, text_source, EXEC_TIMEOUT};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::lang::{json_of, plain, start, start_over, with_context, Lang};

async fn history_grows_with_push_history<L: Lang>() {
    let mut f = plain::<L>().await;
    f.env
        .push_history(HistoryEntry {
            query: "second".into(),
            answer: "two".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        json_of::<L>(&mut f.env, "history").await,
        json!([{"query": "earlier", "answer": "before"}, {"query": "second", "answer": "two"}])
    );
}
both!(history_grows_with_push_history);

async fn next_query_adds_context_slots<L: Lang>() {
    let mut f = with_context::<L>(json!("first")).await;
    let second = text_source(&f.store, "second", "second text");
    f.env
        .next_query("the second query", Some(second))
        .await
        .unwrap();
    let slots = format!(
        "[query, context, context_0, context_1, contexts, {}]",
        L::len("context_chunks")
    );
    assert_eq!(
        json_of::<L>(&mut f.env, &slots).await,
        json!([
            "the second query",
            "second text",
            "first",
            "second text",
            ["first", "second text"],
            3
        ])
    );
    // Provided names are not the model's variables.
    run(&mut f.env, &L::assign("mine", "1")).await;
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
    let now = format!("[query, context, {}]", L::len("contexts"));
    assert_eq!(
        json_of::<L>(&mut f.env, &now).await,
        json!(["third", "second text", 2])
    );
}
both!(next_query_adds_context_slots);

/// A REPL started without a context gets its first one as slot 0.
async fn a_first_context_from_next_query_is_slot_0<L: Lang>() {
    let mut f = plain::<L>().await;
    let source = text_source(&f.store, "slot", "the second context");
    f.env.next_query("next?", Some(source)).await.unwrap();
    let slots = format!("[query, context, context_0, {}]", L::len("contexts"));
    assert_eq!(
        json_of::<L>(&mut f.env, &slots).await,
        json!(["next?", "the second context", "the second context", 1])
    );
}
both!(a_first_context_from_next_query_is_slot_0);

async fn a_context_that_cannot_load_is_refused_and_the_session_goes_on<L: Lang>() {
    let mut f = plain::<L>().await;
    run(&mut f.env, &L::assign("kept", "7")).await;
    let missing = source(
        ContextShape::Single,
        vec![f.store.data_dir().join("variables/nowhere.json")],
        10,
    );
    let error = f.env.next_query("q", Some(missing)).await.unwrap_err();
    assert!(
        matches!(error, EnvError::Request { .. }) && error.to_string().contains("nowhere.json"),
        "{error}"
    );
    assert_eq!(
        json_of::<L>(&mut f.env, "[kept, context, contexts]").await,
        json!([7, null, []])
    );
}
both!(a_context_that_cannot_load_is_refused_and_the_session_goes_on);

/// A context file that is gone fails the first request as a start error naming it.
async fn a_missing_context_file_fails_the_start<L: Lang>() {
    let dir = TempDir::new().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let context = source(
        ContextShape::Single,
        vec![dir.path().join("missing.json")],
        100,
    );
    let mut f = start_over::<L>(dir, store, Some(context), L::options()).await;
    let error = f.env.execute("1").await.unwrap_err();
    assert!(matches!(error, EnvError::Start { .. }), "{error:?}");
    assert!(error.to_string().contains("missing.json"), "{error}");
}
both!(a_missing_context_file_fails_the_start);

async fn json_and_list_contexts_load<L: Lang>() {
    let mut f = with_context::<L>(json!({"users": [{"name": "ann"}, {"name": "bob"}]})).await;
    assert_eq!(
        json_of::<L>(&mut f.env, "context['users'][1]['name']").await,
        json!("bob")
    );
    let mut f = start::<L>(
        &[json!("first text"), json!([1, 2, 3])],
        ContextShape::List,
        EXEC_TIMEOUT,
        L::options(),
    )
    .await;
    assert_eq!(
        json_of::<L>(&mut f.env, "context").await,
        json!(["first text", [1, 2, 3]])
    );
    // context_chunks (10 chars per chunk here): the text's chunks, then the list whole.
    let chunks = format!(
        "[{}, context_chunks[0], context_chunks[1]]",
        L::len("context_chunks")
    );
    assert_eq!(
        json_of::<L>(&mut f.env, &chunks).await,
        json!([2, "first text", [1, 2, 3]])
    );
    let unicode = "naïve — 日本語 😀 and a \"quote\"\n\tend";
    let mut f = with_context::<L>(json!(unicode)).await;
    assert_eq!(json_of::<L>(&mut f.env, "context").await, json!(unicode));
}
both!(json_and_list_contexts_load);

async fn context_chunks_is_a_lazy_sequence<L: Lang>() {
    let mut f = with_context::<L>(json!("abcdefghij".repeat(3) + "xyz")).await;
    assert_eq!(
        json_of::<L>(&mut f.env, &L::len("context_chunks")).await,
        json!(4)
    );
    assert_eq!(
        json_of::<L>(&mut f.env, "context_chunks[3]").await,
        json!("xyz")
    );
    assert_eq!(
        json_of::<L>(&mut f.env, L::CHUNKS_1_TO_3).await,
        json!(["abcdefghij", "abcdefghij"])
    );
    assert_eq!(
        json_of::<L>(&mut f.env, L::CHUNKS_JOINED_ARE_CONTEXT).await,
        json!(true)
    );
    match L::CHUNK_PAST_THE_END {
        Ok(echo) => assert_eq!(run(&mut f.env, "context_chunks[4]").await, echo),
        Err(error) => {
            let got = error_of(&mut f.env, "context_chunks[4]").await;
            assert!(got.contains(error), "{got}");
        }
    }
}
both!(context_chunks_is_a_lazy_sequence);

/// A text stored by streaming, a file written by another program with `\u` escapes
/// (surrogate pairs included), and a plain JSON file in another layout all load.
///
/// The js engine reads variable files through the store, which checks the recorded
/// sha256 and refuses the hand-escaped file; the python kernel reads it as it is.
async fn streamed_foreign_and_escaped_files_load<L: Lang>() {
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
    store
        .set("escaped", json!("x"), SetOptions::default())
        .unwrap();
    let escaped = store.path_of("escaped").unwrap();
    let header = std::fs::read_to_string(&escaped).unwrap();
    let header = header.lines().next().unwrap();
    let body = "\\u00e9t\\u00e9 \\ud83d\\ude00 \\/slash \\\\ \\\" q".repeat(20);
    std::fs::write(&escaped, format!("{header}\n\"value\":\"{body}\"}}")).unwrap();
    let expected_escaped: String = serde_json::from_str(&format!("\"{body}\"")).unwrap();
    let foreign = dir.path().join("foreign.json");
    std::fs::write(
        &foreign,
        r#"{"value": ["a", {"b": 1}], "ref": {"key": "foreign"}}"#,
    )
    .unwrap();
    let context = source(ContextShape::List, vec![streamed, escaped, foreign], 100);
    let mut f = start_over::<L>(dir, store, Some(context), L::small_load_chunks()).await;
    let loaded: Value = json_of::<L>(&mut f.env, "context").await;
    assert_eq!(loaded, json!([text, expected_escaped, ["a", {"b": 1}]]));
}
both!(
    streamed_foreign_and_escaped_files_load,
    js: [#[ignore = "js refuses a variable file rewritten with \\u escapes under its old header: \"does not match its recorded sha256\" (python loads it); decide which is right"]]
);
