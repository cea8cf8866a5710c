//! The combinator helpers of a code REPL hand their reductions to the host whole:
//! `ctx_reduce` takes every option a reduction has (`group_by`'s key, value and
//! aggregation, `argmax`'s value), the answer is the plan crate's reduction of the
//! stored results, a reduction's own error reaches the model's code as a `HostError`
//! that names what in the plan is wrong, and `map_reduce` sends its plan as written.

use rlm_test_support::repl::{error_of, run};
use serde_json::{json, Value};

use crate::lang::{json_of, plain, Lang};

/// Sales as CSV lines: date, kiosk, total.
fn sales() -> Value {
    json!([
        "2024-05-01,kiosk-3,4.50",
        "2024-05-01,kiosk-1,2",
        "2024-05-02,kiosk-3,1.25\n2024-05-02,kiosk-7,9",
    ])
}

/// The kiosk of a sales line, and its total.
const KIOSK: &str = "^[^,]*,([^,]+),";
const TOTAL: &str = r",([\d.]+)$";

async fn ctx_reduce_groups_counts_and_ranks_stored_records<L: Lang>() {
    let mut f = plain::<L>().await;
    run(
        &mut f.env,
        &L::call(&format!("store.set('sales', {})", L::literal(&sales()))),
    )
    .await;
    let cases = [
        (
            json!({"op": "group_by", "key": KIOSK, "value": TOTAL, "agg": "sum"}),
            "kiosk-7: 9\nkiosk-3: 5.75\nkiosk-1: 2",
        ),
        (
            json!({"op": "group_by", "key": KIOSK, "agg": "count", "k": 1}),
            "kiosk-3: 2",
        ),
        (
            json!({"op": "group_by", "key": KIOSK, "value": TOTAL, "agg": "min"}),
            "kiosk-7: 9\nkiosk-1: 2\nkiosk-3: 1.25",
        ),
        (
            json!({"op": "argmax", "value": TOTAL}),
            "2024-05-02,kiosk-7,9",
        ),
    ];
    for (options, want) in cases {
        let answer = json_of::<L>(&mut f.env, &L::call(&L::ctx_reduce("sales", &options))).await;
        assert_eq!(answer, json!(want), "{options}");
    }
    // Hosts an extract listed, one result a piece: how many distinct, case ignored.
    let hosts = json!(["a.example", "b.example\nA.example", "c.example"]);
    run(
        &mut f.env,
        &L::call(&format!("store.set('hosts', {})", L::literal(&hosts))),
    )
    .await;
    let distinct = L::ctx_reduce("hosts", &json!({"op": "count_distinct"}));
    assert_eq!(
        json_of::<L>(&mut f.env, &L::call(&distinct)).await,
        json!("3")
    );
    // The options reached the host as the reduction's own fields.
    let sent = f.host.calls("plan_reduce");
    assert_eq!(
        sent[0],
        json!({"results": "sales", "reduce": {"op": "group_by", "key": KIOSK, "value": TOTAL, "agg": "sum"}})
    );
}
both!(ctx_reduce_groups_counts_and_ranks_stored_records);

async fn a_reduction_s_error_names_what_in_the_plan_is_wrong<L: Lang>() {
    let mut f = plain::<L>().await;
    let rows = json!(["GET /a 200 12ms", "GET /b 200 n/a", "POST /a 500 7ms"]);
    run(
        &mut f.env,
        &L::call(&format!("store.set('access', {})", L::literal(&rows))),
    )
    .await;
    let cases = [
        (
            json!({"op": "group_by", "key": r"^\w+ (\S+)", "value": r"(\S+)$", "agg": "sum"}),
            r#"the value pattern "(\\S+)$" captured 3 values that are not numbers: "12ms" (record 1), "n/a" (record 2), "7ms" (record 3)"#,
        ),
        (
            json!({"op": "group_by", "key": r"user=(\w+)", "agg": "count"}),
            r#"the key pattern "user=(\\w+)" of `group_by` matched none of the 3 records (the first: "GET /a 200 12ms")"#,
        ),
        (
            json!({"op": "group_by", "key": r"^(\w+)", "agg": "max"}),
            r#"`group_by` with "agg": "max" needs a `value` pattern"#,
        ),
    ];
    for (options, says) in cases {
        let error = error_of(&mut f.env, &L::call(&L::ctx_reduce("access", &options))).await;
        assert!(
            error.contains("HostError") && error.contains(says),
            "{options}: {error}"
        );
    }
    // The REPL goes on.
    assert_eq!(run(&mut f.env, "print(1 + 1)").await, "2\n");
}
both!(a_reduction_s_error_names_what_in_the_plan_is_wrong);

async fn map_reduce_sends_a_record_reduction_as_written<L: Lang>() {
    let mut f = plain::<L>().await;
    let plan = json!({
        "split": {"by": "lines"},
        "map": {"extract": "^.*$"},
        "reduce": {"op": "group_by", "key": r#""host": "([^"]+)""#, "value": r#""ms": (\d+)"#, "agg": "max", "k": 3},
    });
    // The test host runs no plans: the call is refused, and recorded as sent.
    let error = error_of(
        &mut f.env,
        &L::call(&format!("map_reduce({})", L::literal(&plan))),
    )
    .await;
    assert!(error.contains("does not serve run_plan"), "{error}");
    let sent = f.host.calls("run_plan");
    assert_eq!(sent[0]["plan"]["reduce"], plan["reduce"]);
}
both!(map_reduce_sends_a_record_reduction_as_written);
