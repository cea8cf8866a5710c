//! Finding the `FINAL(…)` / `FINAL_VAR(…)` a reply takes: the last one written at the
//! start of a line outside code that [`Reply::taken`] accepts, with its argument up to
//! the `)` that closes it.
//!
//! Linear: the candidates are found in one pass over the lines, and they are judged
//! from the last, so the argument of only the one taken is read (the review's reply of
//! 280 KB of `FINAL(\n` read every candidate's argument to the end, 19.6 s). Arguments
//! read for candidates the rule then refuses count against [`SCAN_BUDGET_PER_BYTE`].

use rlm_protocol::reply::{Action, Reply};

use super::{Outside, Quoted};

/// A `NAME(` call found at the start of a line.
#[derive(Debug)]
pub(super) enum Call {
    /// Its argument, up to the `)` that closes it.
    Closed(String),
    /// No `)` closes it.
    Unclosed,
}

/// Bytes of arguments read, per byte of the reply, before the search for a taken call
/// gives up (plus [`SCAN_BUDGET_BASE`]): a reply of candidates that are each refused
/// after a long argument cannot make the search quadratic.
const SCAN_BUDGET_PER_BYTE: usize = 4;

/// Bytes of arguments any reply may have read.
const SCAN_BUDGET_BASE: usize = 64 * 1024;

/// The last `name(…)` call at the start of a line of `outside` (after optional
/// markdown emphasis, inline code or quote markers) that the reply takes; those the
/// rule refuses on the way are added to `quoted`.
pub(super) fn last_taken(
    outside: &Outside,
    reply: &Reply<'_>,
    name: &str,
    quoted: &mut Vec<Quoted>,
) -> Option<Call> {
    let text = outside.text.as_str();
    let mut candidates = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let lead = line.len()
            - line
                .trim_start_matches([' ', '\t', '*', '_', '>', '`'])
                .len();
        let rest = &line[lead..];
        if rest.starts_with(name) && rest[name.len()..].starts_with('(') {
            candidates.push(offset + lead);
        }
        offset += line.len();
    }
    let mut budget = SCAN_BUDGET_PER_BYTE
        .saturating_mul(text.len())
        .saturating_add(SCAN_BUDGET_BASE);
    for start in candidates.into_iter().rev() {
        let after_paren = start + name.len() + 1;
        let (call, end, work) = balanced_argument(&text[after_paren..]);
        let span = outside.in_reply(start)..outside.in_reply(after_paren + end);
        match reply.taken(Action::Answer, span) {
            Ok(()) => return Some(call),
            Err(why) => quoted.push(Quoted {
                action: format!("{name}(…)"),
                why,
            }),
        }
        budget = budget.checked_sub(work)?;
    }
    None
}

/// The argument of a call whose `(` ends just before `after_paren`: up to the `)` that
/// balances it outside quotes, else (an unbalanced quote) the last `)` when the
/// parentheses alone balance; unclosed when they do not. Also the offset just past the
/// call (its `)`, or the end), and how many bytes were read.
fn balanced_argument(after_paren: &str) -> (Call, usize, usize) {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut blank_before = true;
    for (i, c) in after_paren.char_indices() {
        let only_space_before = blank_before;
        blank_before &= c.is_whitespace();
        if let Some(q) = quote {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                _ if c == q => quote = None,
                _ => {}
            }
            continue;
        }
        match c {
            '"' | '\'' if depth > 0 || only_space_before => quote = Some(c),
            '(' => depth += 1,
            ')' if depth == 0 => {
                let argument = after_paren[..i].trim().to_owned();
                return (Call::Closed(argument), i + 1, i + 1);
            }
            ')' => depth -= 1,
            _ => {}
        }
    }
    let work = 3 * after_paren.len();
    if !parens_close(after_paren) {
        return (Call::Unclosed, after_paren.len(), work);
    }
    match after_paren.rfind(')') {
        Some(end) => (
            Call::Closed(after_paren[..end].trim().to_owned()),
            end + 1,
            work,
        ),
        None => (Call::Unclosed, after_paren.len(), work),
    }
}

/// True when a `)` closes the call, counting parentheses only (quotes ignored).
fn parens_close(after_paren: &str) -> bool {
    let mut depth = 0usize;
    for c in after_paren.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return true,
            ')' => depth -= 1,
            _ => {}
        }
    }
    false
}

/// `"x"` / `'x'` → `x` when the whole argument is one quoted literal.
pub(super) fn unquote(arg: &str) -> &str {
    for q in ['"', '\''] {
        if arg.len() >= 2
            && arg.starts_with(q)
            && arg.ends_with(q)
            && !arg[1..arg.len() - 1].contains(q)
        {
            return &arg[1..arg.len() - 1];
        }
    }
    arg
}
