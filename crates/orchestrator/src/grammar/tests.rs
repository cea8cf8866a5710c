//! The grammar against the loop's own parser, over a corpus of replies: each reply the
//! grammar accepts takes exactly one action there; each malformed reply (the forms
//! small models write: docs/constrain.md) is refused by both.

use super::gbnf::Grammar;
use super::REPL_REPLY_GBNF;
use crate::parse::{parse_response, ParsedResponse};

/// The tags the python environment runs besides `repl`.
const PYTHON_TAGS: &[&str] = &["python", "py", "python3"];

/// Replies of the protocol's forms.
const ACCEPTED: &[&str] = &[
    "```repl\nprint(len(context))\n```",
    "```repl\nprint(len(context))\n```\n",
    "Let me look at the context first.\n```repl\nprint(context[:500])\n```",
    "First, I count the lines.\n\nThen I check them.\n```repl\nlines = context.split('\\n')\nprint(len(lines))\n```",
    "For each chunk I ask the sub-model.\n```repl\nfor c in chunks:\n    print(llm_query(c))\n\n`x` = 1\n```",
    "FINAL(42)",
    "FINAL(42)\n",
    "The count is known.\nFINAL(The answer is 42 (forty-two).)",
    "FINAL_VAR(answer)",
    "I stored it.\n\nFINAL_VAR(final_answer_2)\n",
    "Finally done.\nFINAL(Paris)",
    "FIN is a word; FINE too.\nFINAL(ok)",
    "- a list item\n1. another\nFINAL(done)",
];

/// Replies small models write that the loop cannot take as one clean action.
const REFUSED: &[&str] = &[
    // A bare fence, another fence, an unclosed one.
    "```\nprint(1)\n```",
    "```tool\n{\"name\": \"ctx_grep\"}\n```",
    // An unclosed FINAL, or one cut short.
    "FINAL(the answer is",
    "FINAL_VAR(answer",
    "FINAL(a (b)",
    // No action at all.
    "I think the answer is 42.",
    "",
    // A call written as JSON or XML instead of code.
    "{\"name\": \"llm_query\", \"arguments\": {\"prompt\": \"x\"}}",
    "<tool_call>{\"code\": \"print(1)\"}</tool_call>",
    // FINAL inside prose, quoted, or as an example.
    "The answer is FINAL(42)",
    "I could write it as follows:\n\n    FINAL(42)\n\nbut I am not sure yet.",
    "Do not write > FINAL(42) yet.",
];

/// Replies the loop would take but the grammar holds to a narrower form: one block,
/// the `repl` tag, a closed fence, nothing after the action.
const NARROWER: &[&str] = &[
    "```repl\nprint(1)\n",
    "```python\nprint(1)\n```",
    "```repl\nprint(1)\n```\n```repl\nprint(2)\n```",
    "```repl\nx = 1\n```\nFINAL_VAR(x)",
    "FINAL(42)\nThat is all.",
    "**FINAL(42)**",
    // Taken by the loop only because the reply is that action and nothing else.
    "> FINAL(42)",
    "    FINAL(42)",
    "`FINAL(42)`",
];

/// True when the parsed reply takes exactly one action, cleanly: one `repl` block, or
/// a closed `FINAL`/`FINAL_VAR`, and nothing the loop would correct.
fn one_clean_action(parsed: &ParsedResponse) -> bool {
    let finals =
        usize::from(parsed.final_literal.is_some()) + usize::from(parsed.final_var.is_some());
    let blocks = parsed.blocks.len();
    let clean = parsed.misfence.is_none()
        && parsed.unclosed_final.is_none()
        && !parsed.from_tool_call
        && parsed.quoted.is_empty();
    clean
        && ((blocks == 1 && finals == 0 && parsed.blocks[0].tag == "repl")
            || (blocks == 0 && finals == 1))
}

#[test]
fn every_reply_the_grammar_accepts_takes_one_action_in_the_loop() {
    let grammar = Grammar::parse(REPL_REPLY_GBNF);
    for reply in ACCEPTED {
        assert!(grammar.accepts(reply), "the grammar refuses {reply:?}");
        let parsed = parse_response(reply, PYTHON_TAGS);
        assert!(one_clean_action(&parsed), "{reply:?} parses as {parsed:?}");
    }
}

#[test]
fn every_malformed_reply_is_refused_by_the_grammar_and_not_taken_by_the_loop() {
    let grammar = Grammar::parse(REPL_REPLY_GBNF);
    for reply in REFUSED {
        assert!(!grammar.accepts(reply), "the grammar accepts {reply:?}");
        let parsed = parse_response(reply, PYTHON_TAGS);
        assert!(!one_clean_action(&parsed), "{reply:?} parses as {parsed:?}");
    }
    for reply in NARROWER {
        assert!(!grammar.accepts(reply), "the grammar accepts {reply:?}");
    }
}
