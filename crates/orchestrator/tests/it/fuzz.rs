//! Fuzz targets (bolero) for what reads text a model or a server wrote: the response
//! parser and the text tool-call protocol.
//!
//! `cargo test` runs each target over its corpus (`tests/it/__fuzz__/<target>/corpus`)
//! and a bounded number of random inputs; a long run is
//! `BOLERO_RANDOM_TEST_TIME_MS=600000 cargo test -p rlm-orchestrator --test it fuzz::`
//! (or `cargo bolero test` where a fuzzing engine is installed). Each target checks the
//! parser never panics and its output keeps the invariants callers rely on.

use rlm_orchestrator::env::tools::parse_text_calls;
use rlm_orchestrator::parse::parse_response;

/// Pieces a model's reply is made of: each input byte picks one (plus raw bytes), so
/// random inputs are mostly fences, tags and answers rather than noise.
const PIECES: &[&str] = &[
    "```",
    "```repl\n",
    "```python\n",
    "```js\n",
    "```tool\n",
    "\n",
    " ",
    "FINAL(",
    "FINAL_VAR(",
    ")",
    "x",
    "answer",
    "REPL output:\n",
    "print(1)",
    "{",
    "}",
    "\"",
    ":",
    ",",
    "[",
    "]",
    "\"tool\"",
    "\"name\"",
    "\"arguments\"",
    "ctx_grep",
    "final_answer",
    "é",
    "\u{1F600}",
    "\\",
    "~~~",
    "<tool_call>",
    "</tool_call>",
    "1 + 2",
    "null",
];

/// `bytes` as a reply: a byte below the number of pieces picks one, any other byte is
/// itself (as Latin-1).
fn reply_from(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| match PIECES.get(usize::from(b)) {
            Some(piece) => (*piece).to_owned(),
            None => char::from(b).to_string(),
        })
        .collect()
}

#[test]
fn response_parser() {
    bolero::check!().for_each(|bytes: &[u8]| {
        let text = reply_from(bytes);
        let parsed = parse_response(&text, &["python", "py"]);
        // The transcript never grows beyond the response, and every block's code
        // comes from it.
        assert!(parsed.transcript_text.len() <= text.len());
        for block in &parsed.blocks {
            assert!(text.contains(block.code.trim()), "{block:?}");
        }
        if !parsed.blocks.is_empty() {
            assert!(parsed.misfence.is_none());
        }
    });
}

#[test]
fn text_tool_calls() {
    bolero::check!().for_each(|bytes: &[u8]| {
        let text = reply_from(bytes);
        for call in parse_text_calls(&text) {
            assert!(!call.name.is_empty(), "{call:?}");
        }
    });
}
