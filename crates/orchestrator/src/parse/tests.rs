//! The response parser's unit tests: fences, FINAL, imitated output, misfences and
//! tool calls that carry code.

use super::*;
use rlm_protocol::reply::NotTaken;

const PY: &[&str] = &["python", "py"];

#[test]
fn repl_and_language_fences_run_others_do_not() {
    let p = parse_response(
        "look:\n```repl\nx = 1\n```\n```python\nprint(x)\n```\n```text\nnot code\n```\n",
        PY,
    );
    assert_eq!(
        p.blocks,
        vec![
            CodeBlock {
                tag: "repl".into(),
                code: "x = 1".into()
            },
            CodeBlock {
                tag: "python".into(),
                code: "print(x)".into()
            }
        ]
    );
    assert_eq!(p.misfence, None);
}

#[test]
fn final_outside_code_is_detected() {
    let p = parse_response("I know it.\nFINAL(42 apples (red))", PY);
    assert_eq!(p.final_literal.as_deref(), Some("42 apples (red)"));
    let p = parse_response("**FINAL(\"quoted\")**", PY);
    assert_eq!(p.final_literal.as_deref(), Some("quoted"));
    let p = parse_response("FINAL_VAR(answer)", PY);
    assert_eq!(p.final_var.as_deref(), Some("answer"));
    assert_eq!(p.final_literal, None);
}

#[test]
fn multi_line_final_is_taken_whole() {
    let p = parse_response("FINAL(line one\nline two)\n", PY);
    assert_eq!(p.final_literal.as_deref(), Some("line one\nline two"));
}

#[test]
fn final_inside_a_fence_is_not_an_answer() {
    let p = parse_response("```repl\nFINAL(x)\n```", PY);
    assert_eq!(p.final_literal, None);
    let p = parse_response("```text\nFINAL(x)\n```", PY);
    assert_eq!(p.final_literal, None);
}

#[test]
fn final_mentioned_mid_sentence_is_not_an_answer() {
    let p = parse_response("When done I will call FINAL(answer) as told.", PY);
    assert_eq!(p.final_literal, None);
}

#[test]
fn code_and_final_together_are_both_reported() {
    // The loop runs the code and refuses the premature FINAL.
    let p = parse_response("```repl\nprint(len(context))\n```\nFINAL(1000)", PY);
    assert_eq!(p.blocks.len(), 1);
    assert_eq!(p.final_literal.as_deref(), Some("1000"));
}

#[test]
fn imitated_output_after_code_is_cut() {
    let text = "```repl\nprint(1+1)\n```\nREPL output:\n2\nFINAL(2)";
    let p = parse_response(text, PY);
    assert!(p.cut_imitated_output);
    assert_eq!(p.transcript_text, "```repl\nprint(1+1)\n```");
    assert_eq!(
        p.final_literal, None,
        "a FINAL inside imitated output is cut too"
    );
    let p = parse_response("```repl\nprint(1)\n```\nOutput: 1\n", PY);
    assert!(p.cut_imitated_output);
    let p = parse_response("```repl\nprint(1)\n```\n```\n1\n```\n", PY);
    assert!(p.cut_imitated_output);
    assert_eq!(p.blocks.len(), 1);
}

#[test]
fn output_words_before_any_code_are_kept() {
    let p = parse_response("Output: I will now look.\n```repl\nx=1\n```", PY);
    assert!(!p.cut_imitated_output);
    assert!(p.transcript_text.starts_with("Output: I will now look."));
}

#[test]
fn misfences_are_named() {
    assert_eq!(
        parse_response("```\nprint(1)\n```", PY).misfence,
        Some(Misfence::Bare)
    );
    assert_eq!(
        parse_response("```javascript\nconsole.log(1)\n```", PY).misfence,
        Some(Misfence::OtherLanguage("javascript".into()))
    );
    assert_eq!(
        parse_response("<tool_call>{\"name\": \"ctx_grep\"}</tool_call>", PY).misfence,
        Some(Misfence::ToolCall)
    );
    assert_eq!(
        parse_response("{\"name\": \"search\", \"arguments\": {\"q\": 1}}", PY).misfence,
        Some(Misfence::ToolCall)
    );
    assert_eq!(parse_response("just thinking", PY).misfence, None);
}

#[test]
fn an_unclosed_final_is_no_answer_and_is_flagged() {
    let p = parse_response("The answer is\nFINAL(42 apples and", PY);
    assert_eq!(p.final_literal, None);
    assert_eq!(p.unclosed_final, Some("FINAL"));
    let p = parse_response("FINAL(a (b) c", PY);
    assert_eq!((p.final_literal, p.unclosed_final), (None, Some("FINAL")));
    let p = parse_response("FINAL_VAR(answer", PY);
    assert_eq!((p.final_var, p.unclosed_final), (None, Some("FINAL_VAR")));
    // An unbalanced quote with the parenthesis closed is still an answer.
    let p = parse_response("FINAL(\"unterminated)", PY);
    assert_eq!(p.final_literal.as_deref(), Some("\"unterminated"));
    assert_eq!(p.unclosed_final, None);
}

#[test]
fn tool_calls_that_carry_code_run_as_code() {
    let forms = [
        // OpenAI-style JSON, arguments as a string.
        r#"{"name": "python", "arguments": "{\"code\": \"print(len(context))\"}"}"#,
        // Hermes / Qwen2.5 style.
        "<tool_call>\n{\"name\": \"execute\", \"arguments\": {\"code\": \"print(len(context))\"}}\n</tool_call>",
        // Claude-style XML (official library issue #179).
        "<function_calls>\n<invoke name=\"repl\">\n<parameter name=\"code\">print(len(context))</parameter>\n</invoke>\n</function_calls>",
        // Qwen3-Coder style.
        "<tool_call>\n<function=python>\n<parameter=code>\nprint(len(context))\n</parameter>\n</function>\n</tool_call>",
        // A bare JSON object with the code.
        r#"{"code": "print(len(context))"}"#,
        // The same in a json fence.
        "```json\n{\"tool\": \"repl\", \"input\": {\"code\": \"print(len(context))\"}}\n```",
    ];
    for form in forms {
        let p = parse_response(form, PY);
        assert_eq!(
            p.blocks,
            vec![CodeBlock {
                tag: "repl".into(),
                code: "print(len(context))".into()
            }],
            "{form}"
        );
        assert!(p.from_tool_call, "{form}");
        assert_eq!(p.misfence, None, "{form}");
    }
    // A tool call with no code is still corrected, never silently ignored.
    let p = parse_response(
        r#"<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>"#,
        PY,
    );
    assert!(p.blocks.is_empty());
    assert_eq!(p.misfence, Some(Misfence::ToolCall));
    // Prose that mentions <code> is not a call.
    let p = parse_response("Use <code>len(context)</code> to measure it.", PY);
    assert!(p.blocks.is_empty());
}

#[test]
fn final_in_inline_code_or_emphasis_is_an_answer() {
    for text in [
        "`FINAL(42)`",
        "**FINAL(42)**",
        "__FINAL(42)__",
        "I counted them.\n`FINAL(42)`",
    ] {
        assert_eq!(
            parse_response(text, PY).final_literal.as_deref(),
            Some("42"),
            "{text}"
        );
    }
    assert_eq!(
        parse_response("`FINAL_VAR(total)`", PY)
            .final_var
            .as_deref(),
        Some("total")
    );
    // A blockquote quotes what it holds: `> FINAL(42)` was an answer until issue 49's
    // rule (item 10) said a blockquoted action is not one the reply takes.
    let p = parse_response("> FINAL(42)", PY);
    assert_eq!(p.final_literal, None);
    assert_eq!(p.quoted[0].why, NotTaken::Blockquote);
}

#[test]
fn unclosed_fence_runs_to_the_end() {
    let p = parse_response("```repl\nprint(1)\n", PY);
    assert_eq!(
        p.blocks,
        vec![CodeBlock {
            tag: "repl".into(),
            code: "print(1)".into()
        }]
    );
}

#[test]
fn longer_fences_nest_shorter_ones() {
    let p = parse_response("````repl\ns = '''\n```\n'''\n````\n", PY);
    assert_eq!(p.blocks.len(), 1);
    assert!(p.blocks[0].code.contains("```"));
}

/// Replies of the code environments that write an action without taking it: the
/// fourth hostile review's (issue 49, item 10) and variations. Each was acted on before.
#[test]
fn actions_the_reply_only_quotes_are_not_taken() {
    let cases: [(&str, NotTaken); 7] = [
        // A blockquoted {"code": …}.
        (
            "The context holds:\n> {\"code\": \"import os; os.remove('notes.txt')\"}\nI will not run that.",
            NotTaken::Blockquote,
        ),
        // A <tool_call> example inside an explanation.
        (
            "Models like me call tools with <tool_call>{\"name\": \"python\", \"arguments\": {\"code\": \"print(1)\"}}</tool_call> but here I will write a repl block.",
            NotTaken::InSentence,
        ),
        (
            "For example:\n<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"print(1)\"}}\n</tool_call>\nLet me think first.",
            NotTaken::Example,
        ),
        (
            "A Claude-style call looks like this:\n<invoke name=\"repl\">\n<parameter name=\"code\">print(1)</parameter>\n</invoke>\nI will not use it.",
            NotTaken::Example,
        ),
        // An indented FINAL(…) example.
        (
            "To finish I would write\n\n    FINAL(the answer)\n\nbut first I need to look at the data.",
            NotTaken::Indented,
        ),
        // A block to run, declined.
        (
            "The context asks me to run this, which I must not follow:\n```repl\nimport shutil; shutil.rmtree('/')\n```\nI will count instead.",
            NotTaken::Declined,
        ),
        (
            "I will give the answer once I have the count:\nFINAL(12)",
            NotTaken::Deferred,
        ),
    ];
    for (text, why) in cases {
        let p = parse_response(text, PY);
        assert!(p.blocks.is_empty(), "{text}: {p:?}");
        assert_eq!(p.final_literal, None, "{text}");
        assert_eq!(
            p.quoted.first().map(|q| &q.why),
            Some(&why),
            "{text}: {p:?}"
        );
    }
    // Beside an action it takes, only that one is taken.
    let p = parse_response(
        "The notes suggest\n\n    FINAL(7)\n\nbut I count first:\n```repl\nprint(len(context))\n```",
        PY,
    );
    assert_eq!(p.blocks.len(), 1);
    assert_eq!(p.final_literal, None);
    let p = parse_response("Example:\n> FINAL(1)\n\nMy answer:\nFINAL(2)", PY);
    assert_eq!(p.final_literal.as_deref(), Some("2"));
}

/// Pieces a hostile reply repeats to make a parser restart from every candidate.
const ADVERSARIAL: [&str; 10] = [
    "FINAL(\n",
    "FINAL(\"",
    "    FINAL(x\n",
    "{",
    ">{",
    "```",
    "<tool_call>",
    "\"",
    "`",
    "FINAL_VAR((",
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]

    /// A megabyte of one adversarial piece (issue 49, item 4) is read in one pass: the
    /// parse ends (nextest's timeout is the only bound: 280 KB of `FINAL(\n` took
    /// 19.6 s before), and a `FINAL` after it on a line of its own is still found.
    #[test]
    fn a_megabyte_of_one_piece_is_read_in_one_pass(piece in 0..ADVERSARIAL.len()) {
        let piece = ADVERSARIAL[piece];
        let mut text = "Notes:\n".to_owned() + &piece.repeat((1 << 20) / piece.len());
        text.push_str("\n\nMy answer:\nFINAL(done)\n");
        let parsed = parse_response(&text, PY);
        if !piece.contains('`') {
            proptest::prop_assert_eq!(parsed.final_literal.as_deref(), Some("done"), "{:?}", piece);
        }
    }
}
