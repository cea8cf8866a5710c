//! Corrections of a code-writing model's answers that the loop still makes over record
//! tasks — a forced answer that reads what the last reply was told, a number sent as
//! code, a final sentence where the task states its form — run through `run` against
//! the mock. (The helper call derived from the task's words, which these tests once
//! showed offered and run, is gone: nothing reads the task to answer it.)

use std::collections::HashMap;

use rlm_test_support::mock_llm::{MockReply, MockScript};

use crate::plans::run_on;

/// The people records of the `pairs` suite: `person 000042: city=Lima year=2004`.
fn people(n: usize) -> (String, u64) {
    const CITIES: [&str; 4] = ["Lima", "Riga", "Accra", "Perth"];
    let mut text = String::new();
    let mut after_2000: HashMap<&str, u64> = HashMap::new();
    for i in 0..n {
        let city = CITIES[(i * 7 + i / 3) % CITIES.len()];
        let year = 1960 + (i * 13) % 60;
        text.push_str(&format!("person {i:06}: city={city} year={year}\n"));
        if year > 2000 {
            *after_2000.entry(city).or_default() += 1;
        }
    }
    let pairs = after_2000
        .values()
        .map(|k| k * (k.saturating_sub(1)) / 2)
        .sum();
    (text, pairs)
}

/// The order records of the `aggregate` suite, `billing` the most frequent label.
fn orders(n: usize) -> String {
    const LABELS: [&str; 5] = ["fraud", "billing", "support", "billing", "returns"];
    (0..n)
        .map(|i| {
            let label = LABELS[i % LABELS.len()];
            format!(
                "2026-03-07 14:02 order={i:06} label={label} amount={}\n",
                100 + i
            )
        })
        .collect()
}

#[test]
fn the_forced_answer_after_corrections_reads_what_the_last_reply_was_told() {
    // The loop stops after a third reply of the same refused form; what that reply was
    // told — here the refusal offering the task's call — comes with the request for the
    // forced answer instead of being dropped.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, _) = people(300);
    let literal = |n: u32| {
        format!("```repl\nconst context = `person 00000{n}: city=Lima year=1960`;\nconsole.log(context.length);\n```")
    };
    let script = MockScript::new()
        .then(MockReply::text(literal(1)))
        .then(MockReply::text(literal(2)))
        .then(MockReply::text(literal(3)))
        .then(MockReply::text("FINAL(7)"));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, "7");
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 4, "three literals, the forced answer");
    let forced = requests[3].last_user_message().unwrap_or_default();
    assert!(
        forced.contains("Code not run: its line\nconst context = `person 000003")
            && forced.contains("Stop: the reply was again code that replaces `context`"),
        "{forced}"
    );
}

#[test]
fn a_number_printed_before_and_sent_as_code_twice_keeps_its_final_line() {
    // A value the model's own code printed may be its answer: sent twice as code after
    // another block ran, it is offered its FINAL line again, and no call runs in its
    // place.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, _) = people(300);
    let script = MockScript::new()
        .then(MockReply::text("```repl\nconsole.log(17)\n```"))
        .then(MockReply::text("```repl\nconsole.log('checked')\n```"))
        .then(MockReply::text("```repl\n17\n```"))
        .then(MockReply::text("```repl\n17\n```"))
        .then(MockReply::text("FINAL(17)"));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, "17");
    let requests = mock.control().requests();
    let again = requests[4].last_user_message().unwrap_or_default();
    assert!(
        again.contains("nothing else:\nFINAL(17)") && !again.contains("In its place"),
        "{again}"
    );
}

#[test]
fn the_number_the_last_block_printed_sent_as_code_is_the_answer() {
    // The after-inplace-seed8 reading's js `pairs` item 1: the task's call printed
    // 3985, then `3985` sent as code three times until forced.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let call = r#"console.log(await map_reduce({filter: {"where": "year > 2000"}, map: {"extract": "city=(\\w+)"}, reduce: {"op": "pairs"}}))"#;
    let script = MockScript::new()
        .then(MockReply::text(format!("```repl\n{call}\n```")))
        .then(MockReply::text(format!("```repl\n{pairs}\n```")));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, pairs.to_string());
    assert_eq!(mock.control().requests().len(), 2, "no correction");
}

#[test]
fn a_final_sentence_where_the_task_states_its_form_is_questioned_once() {
    // A FINAL of a sentence around the answer, where the task says "Answer with a
    // number.": asked once for the answer alone; sent again, taken.
    let task = "How many records in the context have label=billing? Answer with a number.";
    let count = "```repl\nconsole.log(context.split('\\n').filter(l => l.includes('label=billing')).length)\n```";
    let sentence =
        "FINAL(The number of records in the context that have the label billing is 80 in total.)";
    let script = MockScript::new()
        .then(MockReply::text(count))
        .then(MockReply::text(sentence))
        .then(MockReply::text("FINAL(80)"));
    let (mock, answer) = run_on("js", task, orders(200), script);
    assert_eq!(answer, "80");
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 3);
    let questioned = requests[2].last_user_message().unwrap_or_default();
    assert!(
        questioned
            .contains("Your answer is a sentence, and the task says: \"Answer with a number.\""),
        "{questioned}"
    );
    let script = MockScript::new()
        .then(MockReply::text(count))
        .then(MockReply::text(sentence))
        .then(MockReply::text(sentence));
    let (_, answer) = run_on("js", task, orders(200), script);
    assert!(answer.starts_with("The number of records"), "{answer}");
}
