//! A `FINAL` answer of one value that no output showed, after the code printed another:
//! questioned once with the printed value's `FINAL` line, taken when sent again — run
//! through `run` against the mock, in python and js, in code and outside it.

use rlm_test_support::mock_llm::{MockReply, MockRule, MockScript, RecordedRequest};

use crate::plans::run_on;

/// Which label the most: `returns` has the most records, `loyalty` some.
const TASK: &str =
    "Which label appears in the most records of the context? Answer with the label only.";

/// Order records, `returns` in half of them.
fn orders(n: usize) -> String {
    const LABELS: [&str; 4] = ["returns", "loyalty", "returns", "billing"];
    (0..n)
        .map(|i| {
            let label = LABELS[i % LABELS.len()];
            format!("order={i:06} label={label} amount={}\n", 100 + i)
        })
        .collect()
}

/// The python block that prints the most frequent label, and leaves `label` holding
/// the last one of the loop (`billing`), as the model's code did.
const RANKS: &str = "```repl\nimport re\ncounts = {}\nfor label in re.findall(r'label=(\\w+)', context):\n    counts[label] = counts.get(label, 0) + 1\nprint(max(counts, key=counts.get))\n```";

/// A rule: send the line the last message gives after "nothing else:".
fn sends_the_offered_final_line() -> MockRule {
    MockRule::function("the offered FINAL line", |request: &RecordedRequest| {
        let last = request.last_user_message()?;
        let line = last.split("nothing else:\n").nth(1)?.lines().next()?;
        Some(MockReply::text(line.to_owned()))
    })
}

/// The last user message of each request after the first.
fn corrections(mock: &rlm_test_support::mock_llm::MockLlmThread) -> Vec<String> {
    mock.control()
        .requests()
        .iter()
        .skip(1)
        .map(|request| request.last_user_message().unwrap_or_default())
        .collect()
}

#[test]
fn a_bare_final_word_no_output_showed_is_offered_the_printed_value() {
    // The final-line-seed9 reading's python `aggregate` item 4: `returns` printed, then
    // `FINAL(loyalty)` as code. Told before how to quote the word, the model did, and
    // answered `loyalty`; now it is shown the line of the value its code printed.
    let script = MockScript::new()
        .rule(sends_the_offered_final_line())
        .then(MockReply::text(RANKS))
        .then(MockReply::text("```repl\nFINAL(loyalty)\n```"));
    let (mock, answer) = run_on("python", TASK, orders(200), script);
    assert_eq!(answer, "returns");
    let told = &corrections(&mock)[1];
    assert!(
        told.contains("`loyalty` is not a variable of the REPL")
            && told.contains("your last code printed returns")
            && offers_final_line(told, "returns")
            && !told.contains("with quotes"),
        "{told}"
    );
}

#[test]
fn a_quoted_final_no_output_showed_is_questioned_once_then_taken() {
    // The same item's next reply, `FINAL("loyalty")` in code: questioned once; sent
    // again, it is the answer — the model may know better than its code.
    let quoted = "```repl\nFINAL(\"loyalty\")\n```";
    let script = MockScript::new()
        .then(MockReply::text(RANKS))
        .then(MockReply::text(quoted))
        .then(MockReply::text(quoted));
    let (mock, answer) = run_on("python", TASK, orders(200), script);
    assert_eq!(answer, "loyalty");
    let told = corrections(&mock);
    assert_eq!(told.len(), 2, "the label, the question: {told:?}");
    assert!(
        told[1].contains("Your answer loyalty is in no output of your code")
            && offers_final_line(&told[1], "returns"),
        "{}",
        told[1]
    );
}

#[test]
fn a_final_line_no_output_showed_is_questioned_in_js_too() {
    // Outside code, in js: the count printed, another number answered.
    let task = "How many records in the context have label=returns? Answer with a number.";
    let count = "```repl\nconsole.log(context.split('\\n').filter(l => l.includes('label=returns')).length)\n```";
    let script = MockScript::new()
        .rule(sends_the_offered_final_line())
        .then(MockReply::text(count))
        .then(MockReply::text("FINAL(101)"));
    let (mock, answer) = run_on("js", task, orders(200), script);
    assert_eq!(answer, "100");
    let told = &corrections(&mock)[1];
    assert!(offers_final_line(told, "100"), "{told}");
}

#[test]
fn a_final_some_output_showed_or_the_code_computed_is_taken_at_once() {
    // A value printed by an earlier block, in another case; a FINAL of a variable.
    let listed = "```repl\nprint('Loyalty: 50')\n```";
    for (replies, expected) in [
        (vec![listed, RANKS, "FINAL(loyalty)"], "loyalty"),
        (
            vec![RANKS, "```repl\nFINAL(max(counts, key=counts.get))\n```"],
            "returns",
        ),
    ] {
        let script = replies.iter().fold(MockScript::new(), |script, reply| {
            script.then(MockReply::text(*reply))
        });
        let (mock, answer) = run_on("python", TASK, orders(200), script);
        assert_eq!(answer, expected);
        assert_eq!(
            mock.control().requests().len(),
            replies.len(),
            "no question: {:?}",
            corrections(&mock)
        );
    }
}

/// True when `message` offers the exact line `FINAL(value)` to send.
fn offers_final_line(message: &str, value: &str) -> bool {
    message.contains(&format!("nothing else:\nFINAL({value})"))
}
