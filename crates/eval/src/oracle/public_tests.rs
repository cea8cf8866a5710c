//! The oracle on the public benchmarks' suites: the baseline's prompt in each
//! benchmark's framing is answered right, and the Python the oracle writes for the RLM
//! arm, run by `python3` over the whole context, prints the right answer.

use super::{code_for, reply};
use crate::framing::Speaker;
use crate::oolong::Set;
use crate::ruler::Task;
use crate::score::score;
use crate::suite::{generate_with, Item, Options, Suite};

fn public_items(length: u64, indices: std::ops::Range<u32>) -> Vec<(Item, String)> {
    let hay = crate::suite::tests::fixture();
    let trec = crate::oolong::tests::trec();
    let options = Options {
        haystack: Some(&hay),
        trec: Some(&trec),
        ..Options::default()
    };
    let suites = Task::ALL
        .into_iter()
        .map(Suite::Ruler)
        .chain([Suite::Oolong(Set::TrecCoarse)]);
    let mut out = Vec::new();
    for suite in suites {
        for index in indices.clone() {
            let mut text = Vec::new();
            let item = generate_with(suite, length, index, 12, 21, &options, &mut text)
                .unwrap_or_else(|e| panic!("{suite}: {e}"));
            out.push((item, String::from_utf8(text).unwrap_or_default()));
        }
    }
    out
}

#[test]
fn the_baseline_prompt_in_each_benchmarks_framing_is_answered_right() {
    for length in [4_096, 30_000] {
        for (item, context) in public_items(length, 0..6) {
            let framing = item
                .framing
                .clone()
                .unwrap_or_else(|| panic!("{}", item.suite));
            let messages = framing.messages(&context, &item.question);
            let texts: Vec<&str> = messages.iter().map(|(_, t)| t.as_str()).collect();
            let answer = reply(&texts).unwrap_or_default();
            assert_eq!(
                score(&item.expected, &answer),
                1.0,
                "{} {length} #{}: {} -> {answer}",
                item.suite,
                item.index,
                item.question
            );
            if item.suite == Suite::Oolong(Set::TrecCoarse) {
                assert_eq!(messages[0].0, Speaker::System);
            }
        }
    }
}

#[test]
fn the_code_the_oracle_writes_prints_the_right_answer() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut script = String::new();
    let mut items = Vec::new();
    for (n, (item, context)) in public_items(20_000, 0..12).into_iter().enumerate() {
        // Every RULER task once, every trec_coarse item (its question kinds vary).
        if matches!(item.suite, Suite::Ruler(_)) && item.index > 0 {
            continue;
        }
        let path = dir.path().join(format!("{n}.txt"));
        std::fs::write(&path, &context).unwrap_or_else(|e| panic!("{e}"));
        let first = reply(&["system", &format!("Task: {}\n\nContext: …", item.question)])
            .unwrap_or_default();
        assert!(first.contains("```repl"), "{}: {first}", item.question);
        let code = code_for(&item.question).unwrap_or_else(|| panic!("{}", item.question));
        script.push_str(&format!(
            "def item_{n}():\n    ns = {{'context': open({:?}).read(), 'print': lambda *a: None, '__name__': 'item'}}\n    exec(compile({}, 'item', 'exec'), ns)\n    return ns.get('answer', '')\nprint(repr(item_{n}()))\n",
            path.display().to_string(),
            serde_json::to_string(&code).unwrap_or_default()
        ));
        items.push(item);
    }
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    let answers: Vec<&str> = printed.lines().collect();
    assert_eq!(answers.len(), items.len());
    for (item, answer) in items.iter().zip(answers) {
        let answer = answer.trim_matches('\'');
        assert_eq!(
            score(&item.expected, answer),
            1.0,
            "{}: {} -> {answer}",
            item.suite,
            item.question
        );
    }
}
