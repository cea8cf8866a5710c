//! The loop's reply protocol as a GBNF grammar, written once: some prose, then either
//! one ```` ```repl ```` block or `FINAL(…)` / `FINAL_VAR(name)` on a line of its own.
//!
//! Sent as the `grammar` of a code environment's root requests where the server takes
//! grammars (`--constrain`, [`crate::provider::constrain`]), it makes the replies small
//! models get wrong impossible: a fence the loop does not read, a second block, an
//! unclosed `FINAL(`, a `FINAL` inside prose or an example. What it cannot fix is what
//! the reply says: wrong code, wrong reasoning (docs/constrain.md).
//!
//! Prose lines never start the way a taken action or a fence would (`FINAL`, a
//! backtick, or the markers the parser looks past: spaces, `*`, `_`, `>`), so the one
//! action is the one at the end. The tests hold the grammar to the loop's own parser
//! ([`crate::parse::parse_response`]) over a corpus of replies: every reply it accepts
//! takes exactly its one action, every reply it refuses is one the corpus shows wrong.

/// The GBNF of one code-environment reply.
pub const REPL_REPLY_GBNF: &str = r#"root ::= prose action
prose ::= line*
line ::= "\n" | head [^\n]* "\n"
head ::= [^`F \t*_>\n] | "F" notinal
notinal ::= [^I\n] | "I" ([^N\n] | "N" ([^A\n] | "A" [^L\n]))
action ::= block | final
block ::= "```repl\n" codeline* "```" "\n"?
codeline ::= "\n" | codehead [^\n]* "\n"
codehead ::= [^`\n] | "`" ([^`\n] | "`" [^`\n])
final ::= ("FINAL(" argument ")" | "FINAL_VAR(" name ")") "\n"?
argument ::= ([^()\n] | "(" argument ")")*
name ::= [A-Za-z_] [A-Za-z0-9_]*
"#;

mod schema;

pub use schema::{schema_to_gbnf, UnconvertibleSchema};

#[cfg(test)]
mod gbnf;
#[cfg(test)]
mod tests;
