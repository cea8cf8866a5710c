//! The helpers that look at a value without a model: `peek`, `search` (literal and
//! regex, over text, lists and nested objects) and `find_relevant`.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use rlm_test_support::repl::{error_of, run};
use serde_json::{json, Value};

use crate::lang::{json_of, plain, with_context, Lang};

async fn peek_slices_lists_dicts_and_strings<L: Lang>() {
    let mut f = plain::<L>().await;
    let numbers = L::literal(&json!((0..20).collect::<Vec<_>>()));
    assert_eq!(
        json_of::<L>(&mut f.env, &format!("peek({numbers}, 2, 5)")).await,
        json!([2, 3, 4])
    );
    // Written the same in both languages, so the keys keep this order.
    assert_eq!(
        json_of::<L>(&mut f.env, "peek({'b': 1, 'a': 2, 'c': 3}, 1, 3)").await,
        json!({"a": 2, "c": 3})
    );
    assert_eq!(
        json_of::<L>(&mut f.env, "peek('hello world')").await,
        json!("hello worl")
    );
    assert_eq!(
        json_of::<L>(&mut f.env, "peek('hello world', 6, 11)").await,
        json!("world")
    );
    let error = error_of(&mut f.env, "peek(3)").await;
    assert!(error.contains("TypeError"), "{error}");
}
both!(peek_slices_lists_dicts_and_strings);

async fn search_finds_literals_and_regexes_with_locations<L: Lang>() {
    let mut f = with_context::<L>(json!(
        "line one\nERROR disk full\nline three\nerror: lower\nERROR again"
    ))
    .await;
    let hits = json_of::<L>(&mut f.env, "search(context, 'ERROR')").await;
    assert_eq!(hits.as_array().unwrap().len(), 2);
    assert_eq!(hits[0]["line"], 2);
    assert_eq!(hits[0]["offset"], 9);
    assert_eq!(hits[1]["line"], 5);
    assert!(hits[0]["preview"].as_str().unwrap().contains("disk full"));
    let hits = json_of::<L>(&mut f.env, L::SEARCH_REGEX_AT_MOST_2).await;
    assert_eq!(hits.as_array().unwrap().len(), 2);
    assert_eq!(hits[1]["match"], "error:");
    let hits = json_of::<L>(&mut f.env, "search(['a cat', 'a dog', 'the dog'], 'dog')").await;
    assert_eq!(hits.as_array().unwrap().len(), 2);
    assert_eq!(hits[0]["index"], 1);
    assert_eq!(hits[1]["index"], 2);
    let nested = L::literal(&json!({"x": "nothing", "y": {"deep": "needle"}}));
    let hits = json_of::<L>(&mut f.env, &format!("search({nested}, 'needle')")).await;
    assert_eq!(hits[0]["key"], "y");
    let code = format!(
        "search(['v1.2', 'v12'], {}, {})",
        L::literal(&json!(r"\d\.\d")),
        L::literal(&json!(true))
    );
    let hits = json_of::<L>(&mut f.env, &code).await;
    assert_eq!(hits.as_array().unwrap().len(), 1);
    assert_eq!(
        json_of::<L>(&mut f.env, "search(context, 'absent')").await,
        json!([])
    );
}
both!(search_finds_literals_and_regexes_with_locations);

/// A search worded like a question misses the line that says it another way; what it
/// returns is still an empty list (JSON `[]`, length 0), but printed it says that
/// nothing matched and shows the lines sharing the most words with the pattern.
async fn a_search_that_matches_nothing_shows_the_nearest_lines<L: Lang>() {
    let mut f = with_context::<L>(json!(
        "intro\nOne of the spare rotation codes for north-gate is: 4417\nnothing\na rotation trick\n"
    ))
    .await;
    let pattern = "'spare rotation code for north-gate'";
    let missed = format!("search(context, {pattern})");
    assert_eq!(json_of::<L>(&mut f.env, &missed).await, json!([]));
    assert_eq!(json_of::<L>(&mut f.env, &L::len(&missed)).await, json!(0));
    let shown = run(&mut f.env, &format!("print({missed})")).await;
    assert!(shown.contains("no match for"), "{shown}");
    assert!(
        shown.contains("north-gate is: 4417") && shown.contains("a rotation trick"),
        "{shown}"
    );
    let nearest = shown.find("north-gate is: 4417").unwrap();
    let weaker = shown.find("a rotation trick").unwrap();
    assert!(
        nearest < weaker,
        "the line sharing more words comes first: {shown}"
    );
    assert!(shown.contains("line 2 (offset 6, 5 words)"), "{shown}");
    assert!(
        !shown.contains("nothing\n") && !shown.contains("intro"),
        "{shown}"
    );
    // A pattern of stop-words only has no word to rank lines by.
    let bare = run(&mut f.env, "print(search(context, 'what is the'))").await;
    assert!(
        bare.contains("no match for") && !bare.contains("line "),
        "{bare}"
    );
}
both!(a_search_that_matches_nothing_shows_the_nearest_lines);

async fn find_relevant_ranks_the_right_item_first<L: Lang>() {
    let mut f = plain::<L>().await;
    let docs = L::literal(&json!([
        "The weather today is sunny with a light breeze.",
        "Quarterly revenue grew by 12 percent thanks to strong cloud sales.",
        "Our cat sleeps all day on the sunny windowsill.",
        "Revenue from cloud services doubled; cloud margin improved.",
        "A recipe for bread needs flour, water, salt and yeast.",
    ]));
    let top = json_of::<L>(
        &mut f.env,
        &format!("find_relevant({docs}, 'cloud revenue growth', 2)"),
    )
    .await;
    let order: Vec<&Value> = top
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["index"])
        .collect();
    assert_eq!(order.len(), 2);
    assert!(order[0] == 3 || order[0] == 1, "{top}");
    let mut lines = vec!["filler words about nothing in particular"; 300];
    lines.push("the secret password is swordfish");
    lines.extend(["more filler"; 300]);
    let text = L::literal(&json!(lines.join("\n")));
    let top = json_of::<L>(
        &mut f.env,
        &format!("find_relevant({text}, 'secret password', 1)"),
    )
    .await;
    assert!(
        top[0]["item"].as_str().unwrap().contains("swordfish"),
        "{top}"
    );
    assert!(top[0]["offset"].as_u64().unwrap() > 0, "{top}");
    let dict = L::literal(&json!({"a": "apples and pears", "b": "bread"}));
    let top = json_of::<L>(&mut f.env, &format!("find_relevant({dict}, 'bread')")).await;
    let keys: Vec<&Value> = top.as_array().unwrap().iter().map(|t| &t["key"]).collect();
    assert_eq!(keys, [&json!("b")]);
}
both!(find_relevant_ranks_the_right_item_first);
