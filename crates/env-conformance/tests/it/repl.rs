//! The REPL itself: state that persists between cells, the echo of the last
//! expression, captured and capped output, errors the model sees, the final answer
//! (`FINAL_VAR`, `SUBMIT`) and the listing of the model's variables.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use rlm_env::{CodeRepl, ContextShape, Environment, FinalAnswer};
use rlm_test_support::repl::{error_of, run, EXEC_TIMEOUT};
use serde_json::json;

use crate::lang::{json_of, plain, start, with_context, Lang};

async fn variables_persist_and_the_last_expression_is_echoed<L: Lang>() {
    let mut f = plain::<L>().await;
    let code = format!("{}\n{}", L::assign("x", "40"), L::assign("y", "x + 2"));
    assert_eq!(run(&mut f.env, &code).await, "");
    assert_eq!(run(&mut f.env, "y").await, "42\n");
    let code = format!("print(x)\n{}", L::NOTHING);
    assert_eq!(run(&mut f.env, &code).await, "40\n");
    assert_eq!(run(&mut f.env, L::NOTHING).await, "");
    for value in [
        json!("aaa"),
        json!({"n": [1, 2]}),
        json!([1, "a", true]),
        json!(2.5),
    ] {
        assert_eq!(run(&mut f.env, &L::literal(&value)).await, L::echo(&value));
    }
    assert_eq!(
        json_of::<L>(&mut f.env, "[query, history]").await,
        json!(["what is the answer?", [{"query": "earlier", "answer": "before"}]])
    );
    assert_eq!(f.env.kind(), L::KIND);
    assert_eq!(f.env.fence_tags(), L::FENCE_TAGS);
    f.env.shutdown().await;
}
both!(variables_persist_and_the_last_expression_is_echoed);

async fn stdout_and_stderr_are_captured_apart<L: Lang>() {
    let mut f = plain::<L>().await;
    let outcome = f.env.execute(L::STDOUT_STDERR).await.unwrap();
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.stdout, "one\ntwo\n");
    assert_eq!(outcome.stderr, "warned\n");
}
both!(stdout_and_stderr_are_captured_apart);

async fn output_is_capped_with_a_marker<L: Lang>() {
    let mut f = start::<L>(&[], ContextShape::Single, EXEC_TIMEOUT, L::capped(1000)).await;
    let outcome = f.env.execute(L::FLOOD).await.unwrap();
    assert!(outcome.stdout.starts_with("line 0\nline 1\n"));
    assert!(outcome.stdout.contains("[output truncated"));
    assert!(outcome.stdout.len() < 1200, "{}", outcome.stdout.len());
    assert_eq!(run(&mut f.env, "print('small')").await, "small\n");
}
both!(output_is_capped_with_a_marker);

async fn errors_reach_the_model_and_the_code_before_them_ran<L: Lang>() {
    let mut f = plain::<L>().await;
    let error = error_of(&mut f.env, L::UNDEFINED_NAME).await;
    assert!(error.starts_with(L::UNDEFINED_NAME_SHOWS[0]), "{error}");
    for shown in L::UNDEFINED_NAME_SHOWS {
        assert!(error.contains(shown), "{shown}: {error}");
    }
    assert!(
        !error.contains(L::OWN_FRAMES),
        "own frames are hidden: {error}"
    );
    // Code before the error ran.
    assert_eq!(run(&mut f.env, "a").await, "1\n");
    let syntax = error_of(&mut f.env, L::SYNTAX_ERROR).await;
    assert!(syntax.contains("SyntaxError"), "{syntax}");
    let raised = error_of(&mut f.env, L::RAISE_TYPE_ERROR).await;
    assert!(raised.contains("TypeError: bad input"), "{raised}");
    assert_eq!(run(&mut f.env, "a + 1").await, "2\n");
}
both!(errors_reach_the_model_and_the_code_before_them_ran);

async fn final_var_and_submit_finish_from_code<L: Lang>() {
    let mut f = plain::<L>().await;
    let outcome = f.env.execute(L::FINAL_VAR_BY_NAME).await.unwrap();
    assert_eq!(outcome.stdout, "");
    assert_eq!(
        outcome.final_answer,
        Some(FinalAnswer::Var {
            name: "answer".into(),
            value: "forty-two".into()
        })
    );
    let outcome = f.env.execute(L::FINAL_VAR_BY_VALUE).await.unwrap();
    assert_eq!(
        outcome.final_answer,
        Some(FinalAnswer::Var {
            name: "data".into(),
            value: "{\"n\":[1,2]}".into()
        })
    );
    // FINAL called from code answers with its value, as models often write it.
    let outcome = f.env.execute("FINAL(6 * 7)").await.unwrap();
    assert_eq!(
        outcome.final_answer,
        Some(FinalAnswer::Var {
            name: "<FINAL>".into(),
            value: "42".into()
        })
    );
    let outcome = f.env.execute("FINAL_VAR('nope')").await.unwrap();
    assert_eq!(outcome.final_answer, None);
    let error = outcome.error.unwrap();
    assert!(error.contains(L::NO_VARIABLE_NOPE), "{error}");
    for (code, value) in L::submits() {
        let outcome = f.env.execute(code).await.unwrap();
        assert_eq!(
            outcome.final_answer,
            Some(FinalAnswer::Submit { value }),
            "{code}"
        );
    }
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
both!(final_var_and_submit_finish_from_code);

async fn variables_are_listed_without_the_helpers<L: Lang>() {
    let mut f = with_context::<L>(json!("some text")).await;
    run(&mut f.env, L::ITEMS_NAME_HELPER).await;
    let vars = f.env.variables().await.unwrap();
    let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["items", "name", "helper"]);
    assert_eq!(vars[0].type_name, L::LIST_TYPE);
    assert_eq!(vars[0].size, 100);
    assert_eq!(vars[1].size, 500);
    assert!(vars.iter().all(|v| v.preview.chars().count() <= 80));
    let shown = run(&mut f.env, "SHOW_VARS()").await;
    assert!(shown.starts_with(L::SHOW_VARS_START), "{shown}");
    // Rebinding a provided name makes it a variable of the model's.
    run(&mut f.env, L::UPPER_CONTEXT).await;
    let vars = f.env.variables().await.unwrap();
    assert!(vars.iter().any(|v| v.name == "context"));
}
both!(variables_are_listed_without_the_helpers);
