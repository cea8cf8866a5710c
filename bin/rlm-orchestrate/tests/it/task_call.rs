//! The helper call that answers the task exactly, shown to a code-writing model where
//! its own code cannot get there — with a block refused for setting `context` to a
//! literal, for being only a value, for being a token of the context's preview, for
//! being the REPL's error message copied back or for failing twice already, after a reply cut while it copied the context, and after
//! code that printed nothing found — copied by the model and run through
//! `run` against the mock.

use std::collections::HashMap;

use rlm_test_support::mock_llm::{MockReply, MockRule, MockScript, RecordedRequest};

use crate::plans::run_on;
use crate::support::reply_with_finish;

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

/// The call a message offers, out of its fence after "with no model:".
fn offered_call(message: &str) -> Option<String> {
    let after = message.split("with no model:\n```repl\n").nth(1)?;
    Some(after.split("\n```").next()?.to_owned())
}

/// A rule: when the last message holds `marker`, reply as `reply` says with it.
fn on(
    marker: &'static str,
    reply: impl Fn(&str) -> Option<MockReply> + Send + Sync + 'static,
) -> MockRule {
    MockRule::function(marker, move |request: &RecordedRequest| {
        let last = request.last_user_message()?;
        last.contains(marker).then(|| reply(&last)).flatten()
    })
}

/// A rule: after the offered call ran, answer with the first word it printed.
fn answer_with_printed() -> MockRule {
    on("REPL output:\n", |last| {
        if !last.contains("map_reduce(") {
            return None;
        }
        let printed = last.split("REPL output:\n").nth(1)?;
        let word = printed.split_whitespace().next()?;
        Some(MockReply::text(format!("FINAL({word})")))
    })
}

/// A rule: when the last message holds `marker`, send the line it gives after
/// "reply with exactly this line and nothing else:".
fn sends_the_final_line_after(marker: &'static str) -> MockRule {
    on(marker, |last| {
        let line = last.split("nothing else:\n").nth(1)?.lines().next()?;
        Some(MockReply::text(line.to_owned()))
    })
}

/// A model that copies the call offered in a message holding `marker`, then answers
/// with what the call printed; its first replies are added with `.then`.
fn copies_the_call_offered_after(marker: &'static str) -> MockScript {
    MockScript::new()
        .rule(on(marker, |last| {
            Some(MockReply::text(format!(
                "```repl\n{}\n```",
                offered_call(last)?
            )))
        }))
        .rule(answer_with_printed())
}

#[test]
fn a_block_that_sets_context_to_the_preview_is_refused_with_the_call_that_answers() {
    // The after-example-plan reading's js `pairs` items: `const context = `…`` holding
    // the preview, then a count over those lines. Refused, with the pairs plan as a
    // call; the model copies it and gets the exact count.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let literal = "```repl\nconst context = `person 000000: city=Lima year=1960\\nperson 000001: city=Ri`;\nconst lines = context.split('\\n');\nconsole.log(lines.length);\n```";
    let script =
        copies_the_call_offered_after("Code not run: its line").then(MockReply::text(literal));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, pairs.to_string());
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 3, "refused, the call, the answer");
    let refused = requests[1].last_user_message().unwrap_or_default();
    assert!(
        refused.contains("replaces `context` with text written into the code")
            && refused.contains(
                r#"console.log(await map_reduce({filter: {"where": "year > 2000"}, map: {"extract": "city=(\\w+)"}, reduce: {"op": "pairs"}}))"#
            ),
        "{refused}"
    );
}

#[test]
fn a_sentence_after_code_that_printed_none_is_shown_the_call_that_answers() {
    // The after-example-plan reading's `aggregate` items 1 and 4: code that found no
    // label printed `None`, then a label stated in a sentence. The correction names the
    // ranking plan as a call; copied, it gives the most frequent label.
    let task =
        "Which label appears in the most records of the context? Answer with the label only.";
    let script = copies_the_call_offered_after("it found nothing")
        .then(MockReply::text(
            "```repl\nprint('The label that appears in the most records is:', None)\n```",
        ))
        .then(MockReply::text(
            "The label that appears in the most records is \"fraud\".",
        ));
    let (mock, answer) = run_on("python", task, orders(200), script);
    assert_eq!(answer, "billing");
    let requests = mock.control().requests();
    assert_eq!(
        requests.len(),
        4,
        "None, the sentence, the call, the answer"
    );
    let corrected = requests[2].last_user_message().unwrap_or_default();
    assert!(
        corrected.contains(
            r#"print(map_reduce(map={"extract": "label=(\\w+)"}, reduce={"op": "top_k", "k": 1}))"#
        ),
        "{corrected}"
    );
}

#[test]
fn a_block_of_only_a_value_after_the_refusal_is_refused_with_the_call_again() {
    // The after-task-call-seed6 reading's js `pairs` items 0, 1 and 4: the literal
    // refused, the model answered with an array of city names and sent it until
    // forced. The array is not run either; the refusal shows the call again, and the
    // model that copies it gets the exact count.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let literal = "```repl\nconst context = `person 000000: city=Lima year=1960\\nperson 000001: city=Ri`;\nconsole.log(context.length);\n```";
    let script = copies_the_call_offered_after("is only a value written into the code")
        .then(MockReply::text(literal))
        .then(MockReply::text(
            "```repl\n[[\"Lima\", \"Accra\", \"Quito\", \"Osaka\"]]\n```",
        ));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, pairs.to_string());
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 4, "refused twice, the call, the answer");
    let refused = requests[2].last_user_message().unwrap_or_default();
    // The call is the one block shown: the array is named on a line, not fenced.
    assert!(
        refused.contains("Send this block; it computes the answer from `context` exactly")
            && refused.matches("```").count() == 2
            && refused.contains("`[[\"Lima\", \"Accra\", \"Quito\", \"Osaka\"]]` is only a value"),
        "{refused}"
    );
}

#[test]
fn the_same_value_sent_again_runs_the_call_in_its_place() {
    // The after-shown-seed7 reading's js `pairs` items 2, 3 and 4 and after-value-seed8
    // item 0: the array of city names sent again after its refusal, until forced, the
    // offered call never copied. The second time, the call runs in the array's place
    // and the model is shown its output and the exact FINAL line.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let array = "```repl\n[[\"Quito\", \"Perth\", \"Tunis\", \"Riga\"]]\n```";
    // after-value-seed8 item 2: a number no code printed, sent three times.
    let number = "```repl\n10\n```";
    for value in [array, number] {
        let script = MockScript::new()
            .rule(sends_the_final_line_after("In its place"))
            .then(MockReply::text(value))
            .then(MockReply::text(value));
        let (mock, answer) = run_on("js", task, records.clone(), script);
        assert_eq!(answer, pairs.to_string(), "{value}");
        let requests = mock.control().requests();
        assert_eq!(requests.len(), 3, "{value}: the value twice, the answer");
        let first = requests[1].last_user_message().unwrap_or_default();
        assert!(first.contains("is only a value"), "{first}");
        let again = requests[2].last_user_message().unwrap_or_default();
        assert!(
            again.contains("before, and it is a value, not code")
                && again.contains("In its place the call that computes the task's answer")
                && again.contains(&format!("REPL output:\n{pairs}\n"))
                && again.contains(&format!("nothing else:\nFINAL({pairs})")),
            "{again}"
        );
    }
    // The array's first refusal fences only the call, not the array.
    let script = MockScript::new()
        .then(MockReply::text(array))
        .then(MockReply::text("FINAL(1)"));
    let (mock, _) = run_on("js", task, records, script);
    let first = mock.control().requests()[1]
        .last_user_message()
        .unwrap_or_default();
    assert!(
        first.contains("Send this block; it computes the answer")
            && first.matches("```").count() == 2,
        "{first}"
    );
}

#[test]
fn a_word_sent_as_code_is_offered_the_call_and_again_runs_it() {
    // The head-seed10 reading's js `aggregate` item 4: after its literal was refused,
    // the model sent `payments` as code five times (`ReferenceError: payments is not
    // defined`) and was forced with it, the wrong label. The first failure is told
    // what a word is and offered the call; the same word again has the call run in its
    // place.
    let task =
        "Which label appears in the most records of the context? Answer with the label only.";
    let script = MockScript::new()
        .rule(sends_the_final_line_after("In its place"))
        .then(MockReply::text("```repl\npayments\n```"))
        .then(MockReply::text("```repl\npayments\n```"));
    let (mock, answer) = run_on("js", task, orders(200), script);
    assert_eq!(answer, "billing");
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 3, "the word twice, the answer");
    let first = requests[1].last_user_message().unwrap_or_default();
    assert!(
        first.contains("payments is not defined")
            && first.contains("`payments` ran as code, and no variable of the REPL has that name")
            && offered_call(&first).is_some_and(|call| call.contains("top_k")),
        "{first}"
    );
    // The word its code printed last, sent as code, is the answer.
    let script = MockScript::new()
        .then(MockReply::text("```repl\nconsole.log('support')\n```"))
        .then(MockReply::text("```repl\nsupport;\n```"));
    let (mock, answer) = run_on("js", task, orders(200), script);
    assert_eq!(answer, "support");
    assert_eq!(mock.control().requests().len(), 2, "no correction");
}

#[test]
fn a_call_run_in_a_value_s_place_is_not_a_third_correction() {
    // The head-seed10 reading's js `pairs` item 3: two arrays refused, the second sent
    // again had the call run in its place (3757) — and the run stopped there, a third
    // reply of only a value, forced before the model saw the count: it answered 4.
    // (A list after a refused value now runs the call at once: two other refusals
    // come first here.)
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let literal = "```repl\nconst context = `person 000000: city=Lima year=1960\\nperson 000001: city=Ri`;\nconsole.log(context.length);\n```";
    let script = MockScript::new()
        .rule(sends_the_final_line_after("In its place"))
        .then(MockReply::text(literal))
        .then(MockReply::text("```repl\n10\n```"))
        .then(MockReply::text(
            "```repl\n[[\"Lisbon\", \"Perth\"], [\"Lisbon\", \"Quito\"]]\n```",
        ));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, pairs.to_string());
    let requests = mock.control().requests();
    assert_eq!(
        requests.len(),
        4,
        "three values, then the answer, not forced"
    );
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
fn a_sentence_sent_as_code_twice_runs_the_call_in_its_place() {
    // The after-inplace-seed8 reading's `aggregate` item 2: a sentence stating a label,
    // fenced as code, run (a SyntaxError) and sent until forced. Not run; sent again,
    // the task's call runs in its place.
    let task =
        "Which label appears in the most records of the context? Answer with the label only.";
    let sentence = "```repl\nThe label that appears in the most records is: support\n```";
    let script = MockScript::new()
        .rule(sends_the_final_line_after("nothing else:\n"))
        .then(MockReply::text(sentence))
        .then(MockReply::text(sentence));
    let (mock, answer) = run_on("js", task, orders(200), script);
    assert_eq!(answer, "billing");
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 3, "the sentence twice, the answer");
    let first = requests[1].last_user_message().unwrap_or_default();
    assert!(
        first.contains("is a sentence, not code") && first.contains("Send this block"),
        "{first}"
    );
    let again = requests[2].last_user_message().unwrap_or_default();
    assert!(
        again.contains("before, and it is a sentence, not code"),
        "{again}"
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
fn the_task_s_call_that_printed_its_answer_is_followed_by_the_final_line() {
    // The head-seed9 reading's js `pairs` items: the model sent the task's call, saw
    // the count, and sent the call again until refused and forced. After the call
    // printed only its answer, the model is shown the exact FINAL line, last.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let call = r#"console.log(await map_reduce({filter: {"where": "year > 2000"}, map: {"extract": "city=(\\w+)"}, reduce: {"op": "pairs"}}))"#;
    let script = MockScript::new()
        .rule(sends_the_final_line_after(
            "That call computes the task's answer",
        ))
        .then(MockReply::text(format!("```repl\n{call}\n```")));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, pairs.to_string());
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 2, "the call, the answer");
    let after = requests[1].last_user_message().unwrap_or_default();
    assert!(
        after.contains(&format!("REPL output:\n{pairs}\n"))
            && after.contains(&format!(
                "If {pairs} answers the task, reply with exactly this line and nothing else:\nFINAL({pairs})\n\nState:"
            )),
        "{after}"
    );
    // The call as a middle block of a reply: the blocks after it ran on, and no line
    // is shown.
    let script = MockScript::new()
        .then(MockReply::text(format!(
            "```repl\n{call}\n```\n```repl\nconsole.log('more')\n```"
        )))
        .then(MockReply::text(format!("FINAL({pairs})")));
    let (mock, _) = run_on("js", task, people(300).0, script);
    let after = mock.control().requests()[1]
        .last_user_message()
        .unwrap_or_default();
    assert!(!after.contains("nothing else:\nFINAL("), "{after}");
    // Other code that prints a number the first time is shown no such line.
    let records = people(300).0;
    let length = records.len();
    // (Its answer names no `2000`, what the task selects by: questioned once, the
    // call run in its place, then taken.)
    let script = MockScript::new()
        .then(MockReply::text("```repl\nconsole.log(context.length)\n```"))
        .then(MockReply::text(format!("FINAL({length})")))
        .then(MockReply::text(format!("FINAL({length})")))
        .then(MockReply::text(format!("FINAL({length})")));
    let (mock, _) = run_on("js", task, records, script);
    let after = mock.control().requests()[1]
        .last_user_message()
        .unwrap_or_default();
    assert!(!after.contains("FINAL("), "{after}");
}

#[test]
fn code_that_printed_zero_twice_is_offered_the_task_s_call_not_final_zero() {
    // The final-line-seed9 reading's python `aggregate` items 0 and 3: a regex that
    // matched nothing printed `0` twice, the model was offered `FINAL(0)` after the
    // second run and after the third send, and answered 0 (the counts were 129 and 47).
    // The task's call is offered instead, after the second run and with the repeat.
    let task = "How many records in the context have label=returns? Answer with a number.";
    let zero = "```repl\nimport re\nprint(len(re.findall(r'label: returns', context)))\n```";
    for (marker, replies) in [
        ("printed 0 before", 2),
        ("the same code already ran 2 times", 3),
    ] {
        // Copies the call only where `marker` is, then sends the FINAL line offered.
        let model = MockScript::new()
            .rule(on(marker, |last| {
                let call = offered_call(last)?;
                Some(MockReply::text(format!("```repl\n{call}\n```")))
            }))
            .rule(sends_the_final_line_after("That call computes"));
        let script = (0..replies).fold(model, |script, _| script.then(MockReply::text(zero)));
        let (mock, answer) = run_on("python", task, orders(200), script);
        assert_eq!(answer, "40", "{marker}");
        let requests = mock.control().requests();
        assert_eq!(
            requests.len(),
            replies + 2,
            "{marker}: then the call, the answer"
        );
        let offered = requests[replies].last_user_message().unwrap_or_default();
        assert!(
            offered.contains("0 often means the code matched nothing")
                && !offered.contains("FINAL(0)")
                && offered_call(&offered).is_some_and(|call| call.contains("map_reduce(")),
            "{offered}"
        );
    }
}

#[test]
fn prose_stating_what_no_output_showed_is_offered_the_call_and_again_runs_it() {
    // The final-line-seed9 reading's js `aggregate` item 4: code printed `000001 label`,
    // then a label stated in a sentence four times until forced (the sentence was the
    // answer). Offered the call; the same prose again has it run in its place.
    let task =
        "Which label appears in the most records of the context? Answer with the label only.";
    let prose = "The label that appears in the most records of the context is `returns`.";
    let script = MockScript::new()
        .rule(sends_the_final_line_after("In its place"))
        .then(MockReply::text("```repl\nconsole.log('000001 label')\n```"))
        .then(MockReply::text(prose))
        .then(MockReply::text(prose));
    let (mock, answer) = run_on("js", task, orders(200), script);
    assert_eq!(answer, "billing");
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 4, "the code, the prose twice, the answer");
    let first = requests[2].last_user_message().unwrap_or_default();
    assert!(
        first.contains("your last output does not end in a value it states")
            && offered_call(&first).as_deref()
                == Some(
                    r#"console.log(await map_reduce({map: {"extract": "label=(\\w+)"}, reduce: {"op": "top_k", "k": 1}}))"#
                ),
        "{first}"
    );
    let again = requests[3].last_user_message().unwrap_or_default();
    assert!(
        again.contains("the same answer in prose as before")
            && again.contains("REPL output:\nbilling")
            && again.contains("nothing else:\nFINAL(billing)"),
        "{again}"
    );
}

#[test]
fn a_reply_cut_while_it_copied_the_context_is_shown_the_call_that_answers() {
    // The after-task-call-seed6 reading's js `pairs` item 2: the records written out
    // into `const context = `…`` until the output-token limit cut the reply, three
    // times. The cut reply is told not to copy the context, with the pairs call; the
    // model copies the call and gets the exact count.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let cut = "```repl\nconst context = `person 000000: city=Lima year=1960\\nperson 000001: city=Riga year=1973\\nperson 00";
    let script = copies_the_call_offered_after("while it wrote text into `context`")
        .then(reply_with_finish(cut, "length"));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, pairs.to_string());
    assert_eq!(
        mock.control().requests().len(),
        3,
        "cut, the call, the answer"
    );
}

#[test]
fn an_error_message_sent_back_as_code_is_refused_with_the_call_that_answers() {
    // The after-question-seed6 reading's js `pairs` item 2: code that raised an error,
    // then the error text itself sent as code, and each new `SyntaxError` (the next
    // cell's number in it) for 19 iterations. The echo is not run; the refusal shows
    // the pairs call, and the model that copies it gets the exact count.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let script = copies_the_call_offered_after("the REPL's error message")
        .then(MockReply::text(
            "```repl
SyntaxError: unexpected token in expression: ''\n    at <cell 2>:1:16\n```",
        ))
        .then(MockReply::text(
            "```repl
SyntaxError: expecting ';'\n    at <cell 3>:1:25\n```",
        ));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, pairs.to_string());
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 4, "ran, refused, the call, the answer");
    let refused = requests[2].last_user_message().unwrap_or_default();
    assert!(
        refused.contains("Code not run: it is the REPL's error message (`SyntaxError: expecting ';'`) copied back")
            && refused.contains("Send that code again with the mistake fixed"),
        "{refused}"
    );
}

#[test]
fn a_failing_block_sent_a_third_time_is_shown_its_error_line_and_the_call_that_answers() {
    // The after-echo-seed6 reading's js `pairs` item 0: a block with `const [_, _,
    // year]` (a syntax error) sent four times until forced. Its error now shows that
    // line; the third copy is not run, and its refusal offers the pairs call, which the
    // model copies for the exact count.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let failing = "```repl\nconst pairs = context.split('\\n');\nfor (const pair of pairs) {\n  const [_, _, year] = pair.split(':');\n}\n```";
    let script = copies_the_call_offered_after("the same code already ran")
        .then(MockReply::text(failing))
        .then(MockReply::text(failing))
        .then(MockReply::text(failing));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, pairs.to_string());
    let requests = mock.control().requests();
    assert_eq!(
        requests.len(),
        5,
        "ran twice, refused, the call, the answer"
    );
    let failed = requests[1].last_user_message().unwrap_or_default();
    assert!(
        failed.contains("    line 3: const [_, _, year] = pair.split(':');"),
        "{failed}"
    );
}

#[test]
fn a_key_value_of_the_preview_sent_as_code_is_refused_with_the_call_that_answers() {
    // The after-echo-seed6 reading's js `aggregate` item 4: the literal refused, then
    // `label=returns` out of the preview, four times against `ReferenceError: returns
    // is not defined`. It is not run; the refusal shows the ranking call, and the model
    // that copies it gets the most frequent label.
    let task =
        "Which label appears in the most records of the context? Answer with the label only.";
    let script = copies_the_call_offered_after("is text you were shown")
        .then(MockReply::text("```repl\nlabel=fraud\n```"));
    let (mock, answer) = run_on("js", task, orders(200), script);
    assert_eq!(answer, "billing");
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 3, "refused, the call, the answer");
    let refused = requests[1].last_user_message().unwrap_or_default();
    assert!(
        refused.contains("Code not run: `label=fraud` is text you were shown (the task or the context), not code")
            && refused.contains("/label=fraud/"),
        "{refused}"
    );
}

#[test]
fn a_key_value_of_the_preview_sent_again_runs_the_call_in_its_place() {
    // The mends-seed11 reading's js `aggregate` item 1: after its literal was refused,
    // `label=returns` three times, refused each time with the call offered, and forced
    // with it. Sent again, the call runs in its place.
    let task =
        "Which label appears in the most records of the context? Answer with the label only.";
    let token = "```repl\nlabel=fraud\n```";
    let script = MockScript::new()
        .rule(sends_the_final_line_after("In its place"))
        .then(MockReply::text(token))
        .then(MockReply::text(token));
    let (mock, answer) = run_on("js", task, orders(200), script);
    assert_eq!(answer, "billing");
    let requests = mock.control().requests();
    assert_eq!(requests.len(), 3, "the token twice, the answer");
    let again = requests[2].last_user_message().unwrap_or_default();
    assert!(
        again.contains("you sent `label=fraud` before, and it is text you were shown, not code"),
        "{again}"
    );
}

#[test]
fn a_zero_answered_from_the_model_s_own_code_is_offered_the_task_s_call_once() {
    // The mends-seed11 reading's js `pairs` item 3: its own code printed 0, then "The
    // answer is 0.", offered FINAL(0), answered 0 (the count was 3920). A zero the
    // task's call did not give is offered the call, stated in prose or in FINAL.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let zero = "```repl\nconsole.log(context.split('\\n').filter(l => l.includes('city: Lima')).length)\n```";
    for (reply, marker) in [
        (
            "The answer is 0.",
            "an answer in a sentence is not taken. 0 often means",
        ),
        ("FINAL(0)", "Your answer is 0, and 0 often means"),
    ] {
        let script = copies_the_call_offered_after(marker)
            .then(MockReply::text(zero))
            .then(MockReply::text(reply));
        let (mock, answer) = run_on("js", task, records.clone(), script);
        assert_eq!(answer, pairs.to_string(), "{reply}");
        assert_eq!(
            mock.control().requests().len(),
            4,
            "{reply}: the code, the zero, the call, the answer"
        );
    }
    // The latest-seed12 reading's js `pairs` item 4: the same "The answer is 0." three
    // times, the call never copied. Sent again, the prose has the call run in its place.
    let script = MockScript::new()
        .rule(sends_the_final_line_after("In its place"))
        .then(MockReply::text(zero))
        .then(MockReply::text("The answer is 0."))
        .then(MockReply::text("The answer is 0."));
    let (mock, answer) = run_on("js", task, records.clone(), script);
    assert_eq!(answer, pairs.to_string());
    assert_eq!(
        mock.control().requests().len(),
        4,
        "the code, the prose twice, the answer"
    );
    // Sent again, the zero has the call run in its place, with the call's FINAL line;
    // sent a third time, it is taken.
    let script = MockScript::new()
        .rule(sends_the_final_line_after(
            "came again as it was questioned",
        ))
        .then(MockReply::text(zero))
        .then(MockReply::text("FINAL(0)"))
        .then(MockReply::text("FINAL(0)"));
    let (mock, answer) = run_on("js", task, records.clone(), script);
    assert_eq!(answer, pairs.to_string());
    assert_eq!(mock.control().requests().len(), 4);
    let script = MockScript::new()
        .then(MockReply::text(zero))
        .then(MockReply::text("FINAL(0)"))
        .then(MockReply::text("FINAL(0)"))
        .then(MockReply::text("FINAL(0)"));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, "0");
    assert_eq!(mock.control().requests().len(), 4);
}

#[test]
fn an_answer_not_of_the_task_s_shape_is_offered_the_task_s_call_once() {
    // The s18-seed14 reading's js `aggregate` item 4: code split each record on spaces
    // and took its second word, the time `02:21`, as the label; "The label … is
    // `02:21`." was shown its FINAL line, and 02:21 was the answer. A value that is no
    // single word, where the task's answer is one `label=` value, is offered the call,
    // stated in prose or in FINAL.
    let task =
        "Which label appears in the most records of the context? Answer with the label only.";
    let time = "```repl\nconst labels = context.split('\\n').map(r => r.split(' ')[1]);\nconsole.log(labels[0]);\n```";
    for (reply, marker) in [
        (
            "The label that appears in the most records of the context is `14:02`.",
            "14:02 is not one `label=` value, a single word, as the task's answer is",
        ),
        (
            "FINAL(14:02)",
            "Your answer is 14:02, but the task's answer is one `label=` value, a single word",
        ),
    ] {
        let script = copies_the_call_offered_after(marker)
            .then(MockReply::text(time))
            .then(MockReply::text(reply));
        let (mock, answer) = run_on("js", task, orders(200), script);
        assert_eq!(answer, "billing", "{reply}");
        assert_eq!(
            mock.control().requests().len(),
            4,
            "{reply}: the code, the time, the call, the answer"
        );
    }
    // Sent again, a FINAL of another shape has the call run in its place, and a third
    // time it is taken; a word is never questioned so.
    for (reply, taken) in [("FINAL(14:02)", 4), ("FINAL(fraud)", 2)] {
        let script = MockScript::new()
            .then(MockReply::text(time))
            .then(MockReply::text(reply))
            .then(MockReply::text(reply))
            .then(MockReply::text(reply));
        let (mock, answer) = run_on("js", task, orders(200), script);
        assert_eq!(answer, reply["FINAL(".len()..reply.len() - 1], "{reply}");
        assert_eq!(mock.control().requests().len(), taken, "{reply}");
    }
}

#[test]
fn an_answer_printed_by_code_that_does_not_select_the_task_s_records_is_offered_the_call_once() {
    // The s19-seed19 reading's python `aggregate` item 2: every `amount=` summed,
    // `label=fraud` named only in a comment, and FINAL of that sum (308268 for 98784).
    // Questioned once with the task's call; the model copies it and answers its sum.
    let task =
        "What is the sum of the amount fields of the records with label=fraud? Answer with a number.";
    let records = orders(200);
    let fraud: u64 = (0..200u64).filter(|i| i % 5 == 0).map(|i| 100 + i).sum();
    let every: u64 = (0..200u64).map(|i| 100 + i).sum();
    let summed_all = [
        (
            "python",
            "```repl
import re
# the records with label=fraud
amounts = re.findall(r'amount=(\\d+)', context)
print(sum(map(int, amounts)))
```",
        ),
        (
            "js",
            "```repl
// the records with label=fraud
const amounts = context.match(/amount=(\\d+)/g).map(a => Number(a.slice(7)));
console.log(amounts.reduce((a, b) => a + b, 0));
```",
        ),
    ];
    let marker = "does not select the records by `fraud` as the task asks";
    for (env, code) in summed_all {
        let script = copies_the_call_offered_after(marker)
            .then(MockReply::text(code))
            .then(MockReply::text(format!("FINAL({every})")));
        let (mock, answer) = run_on(env, task, records.clone(), script);
        assert_eq!(answer, fraud.to_string(), "{env}");
        assert_eq!(
            mock.control().requests().len(),
            4,
            "{env}: the code, the answer, the call, the answer"
        );
        // Sent again, the call runs in its place and the model is shown its FINAL line
        // (the same reading's item sent FINAL(308268) again); sent a third time, the
        // answer is taken: the check questions, it does not refuse.
        let again = MockScript::new()
            .rule(sends_the_final_line_after(
                "came again as it was questioned",
            ))
            .then(MockReply::text(code))
            .then(MockReply::text(format!("FINAL({every})")))
            .then(MockReply::text(format!("FINAL({every})")));
        let (mock, answer) = run_on(env, task, records.clone(), again);
        assert_eq!(answer, fraud.to_string(), "{env}");
        assert_eq!(mock.control().requests().len(), 4, "{env}");
        let thrice = MockScript::new()
            .then(MockReply::text(code))
            .then(MockReply::text(format!("FINAL({every})")))
            .then(MockReply::text(format!("FINAL({every})")))
            .then(MockReply::text(format!("FINAL({every})")));
        let (mock, answer) = run_on(env, task, records.clone(), thrice);
        assert_eq!(answer, every.to_string(), "{env}");
        assert_eq!(mock.control().requests().len(), 4, "{env}");
        // The same with FINAL called in a block, as the reading's model wrote it.
        let in_a_block = MockScript::new()
            .rule(sends_the_final_line_after(
                "came again as it was questioned",
            ))
            .then(MockReply::text(code))
            .then(MockReply::text(format!("```repl\nFINAL({every})\n```")))
            .then(MockReply::text(format!("```repl\nFINAL({every})\n```")));
        let (mock, answer) = run_on(env, task, records.clone(), in_a_block);
        assert_eq!(answer, fraud.to_string(), "{env}: in a block");
        assert_eq!(mock.control().requests().len(), 4, "{env}: in a block");
    }
    // Code that names `fraud` selects: its answer is taken at once.
    let filtered = "```repl
import re
amounts = re.findall(r'label=fraud amount=(\\d+)', context)
print(sum(map(int, amounts)))
```";
    let script = MockScript::new()
        .then(MockReply::text(filtered))
        .then(MockReply::text(format!("FINAL({fraud})")));
    let (mock, answer) = run_on("python", task, records, script);
    assert_eq!(answer, fraud.to_string());
    assert_eq!(mock.control().requests().len(), 2);
}

#[test]
fn an_answer_printed_by_code_that_pairs_nothing_is_offered_the_call_once() {
    // The s19b-seed20 reading's python `pairs` items 0–2 and 4: the people born after
    // 2000 filtered and counted, `len(filtered_pairs)`, 293 for 3584 pairs. Questioned
    // once with the task's call; the model copies it and answers the pairs.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let after_2000 = records
        .lines()
        .filter(|line| {
            line.rsplit("year=")
                .next()
                .and_then(|year| year.parse::<u32>().ok())
                .is_some_and(|year| year > 2000)
        })
        .count();
    let counted = "```repl\nimport re\n# Filter pairs where both persons were born after 2000\nmatches = re.findall(r'city=(\\w+) year=(\\d+)', context)\nfiltered_pairs = [(c, y) for c, y in matches if int(y) > 2000]\nprint(len(filtered_pairs))\n```";
    let script = copies_the_call_offered_after("pairs nothing (no count per `city` value")
        .then(MockReply::text(counted))
        .then(MockReply::text(format!("FINAL({after_2000})")));
    let (mock, answer) = run_on("python", task, records.clone(), script);
    assert_eq!(answer, pairs.to_string());
    assert_eq!(
        mock.control().requests().len(),
        4,
        "the code, the count, the call, the answer"
    );
    // Code that pairs (a count per city, n*(n-1)//2): its answer is taken at once.
    let paired = "```repl\nimport re\nfrom collections import Counter\nc = Counter(city for city, y in re.findall(r'city=(\\w+) year=(\\d+)', context) if int(y) > 2000)\nprint(sum(n * (n - 1) // 2 for n in c.values()))\n```";
    let script = MockScript::new()
        .then(MockReply::text(paired))
        .then(MockReply::text(format!("FINAL({pairs})")));
    let (mock, answer) = run_on("python", task, records, script);
    assert_eq!(answer, pairs.to_string());
    assert_eq!(mock.control().requests().len(), 2);
}

#[test]
fn a_zero_answered_by_a_variable_s_name_is_offered_the_call_once() {
    // The s19c-seed21 reading's python `aggregate` item 2: code that found nothing
    // printed 0, then `FINAL(total_amount)` answered the variable's 0 (the sum was
    // 11810). A variable's value is questioned like a written one on what the task's
    // call can tell, in a block or as FINAL_VAR.
    let task =
        "What is the sum of the amount fields of the records with label=fraud? Answer with a number.";
    let fraud: u64 = (0..200u64).filter(|i| i % 5 == 0).map(|i| 100 + i).sum();
    let nothing = "```repl\nimport re\nfound = re.findall(r'label: fraud amount: (\\d+)', context)\ntotal_amount = sum(map(int, found))\nprint(total_amount)\n```";
    for answer in [
        "```repl\nFINAL(total_amount)\n```",
        "FINAL_VAR(total_amount)",
    ] {
        let script = copies_the_call_offered_after("Your answer is 0, and 0 often means")
            .then(MockReply::text(nothing))
            .then(MockReply::text(answer));
        let (mock, got) = run_on("python", task, orders(200), script);
        assert_eq!(got, fraud.to_string(), "{answer}");
        assert_eq!(
            mock.control().requests().len(),
            4,
            "{answer}: the code, the zero, the call, the answer"
        );
    }
    // A variable's value that no output showed is not questioned for that: it was
    // computed, not written.
    let computed = "```repl\nimport re\ntotal_amount = sum(int(a) for a in re.findall(r'label=fraud amount=(\\d+)', context))\nprint('done')\n```";
    let script = MockScript::new()
        .then(MockReply::text(computed))
        .then(MockReply::text("FINAL_VAR(total_amount)"));
    let (mock, got) = run_on("python", task, orders(200), script);
    assert_eq!(got, fraud.to_string());
    assert_eq!(mock.control().requests().len(), 2);
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

#[test]
fn the_same_prose_after_code_that_found_nothing_runs_the_call_in_its_place() {
    // The s18c-seed16 reading's js `aggregate` item 1: the code printed `null`, then
    // "… is \"fraud\"." three times, the call offered never copied, and the forced
    // answer that guess. Sent again, the prose has the call run in its place.
    let task =
        "Which label appears in the most records of the context? Answer with the label only.";
    let null = "```repl\nconsole.log(null)\n```";
    let guess = "The label that appears in the most records of the context is \"fraud\".";
    let script = MockScript::new()
        .rule(sends_the_final_line_after("In its place"))
        .then(MockReply::text(null))
        .then(MockReply::text(guess))
        .then(MockReply::text(guess));
    let (mock, answer) = run_on("js", task, orders(200), script);
    assert_eq!(answer, "billing");
    assert_eq!(
        mock.control().requests().len(),
        4,
        "the code, the prose twice, the answer"
    );
}

#[test]
fn another_list_after_a_refused_value_runs_the_call_in_its_place() {
    // The s18d-seed17 reading's js `pairs` item 1: the preview copied into `context`
    // (refused), then three arrays of city names, one shorter each time, each refused
    // as a new value, and the forced answer a guess. A list or map after any refused
    // value has the call run in its place.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let script = MockScript::new()
        .rule(sends_the_final_line_after("In its place"))
        .then(MockReply::text(
            "```repl\n[[\"Oslo\", \"Perth\", \"Hanoi\", \"D\"]]\n```",
        ))
        .then(MockReply::text(
            "```repl\n[[\"Oslo\", \"Perth\", \"Hanoi\"]]\n```",
        ));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, pairs.to_string());
    assert_eq!(
        mock.control().requests().len(),
        3,
        "the first list, the second run in place, the answer"
    );
}

#[test]
fn a_forced_reply_of_the_task_s_call_runs_it_and_answers_with_its_value() {
    // The s18e-seed18 reading's js `pairs` item 1: the preview copied into `context`
    // three times, refused with the task's call, and the forced reply that call in a
    // fence, taken whole as the answer. It calls no model: it runs, and its value is
    // the answer.
    let task = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";
    let (records, pairs) = people(300);
    let literal = "```repl\nconst context = `person 000000: city=Lima year=1960\\nperson 000001: city=Ri`;\nconsole.log(context.length);\n```";
    let call = r#"console.log(await map_reduce({filter: {"where": "year > 2000"}, map: {"extract": "city=(\\w+)"}, reduce: {"op": "pairs"}}))"#;
    let script = MockScript::new()
        .rule(on("Do not write code. Answer now", move |_| {
            Some(MockReply::text(format!("```repl\n{call}\n```")))
        }))
        .then(MockReply::text(literal))
        .then(MockReply::text(literal))
        .then(MockReply::text(literal));
    let (mock, answer) = run_on("js", task, records, script);
    assert_eq!(answer, pairs.to_string());
    assert_eq!(
        mock.control().requests().len(),
        4,
        "three literals, the forced reply"
    );
}
