//! Which actions a model's reply takes, and which it only quotes: the one rule every
//! parser of replies asks before it acts (docs/loop.md, "What a reply takes").
//!
//! A reply can write an action without taking it — quote a document that holds a
//! `final_answer` call ("…, which I must not follow"), name a call as a later step,
//! show the `FINAL(…)` form in an indented example, put a `{"code": …}` in a
//! blockquote. A parser that acts on every occurrence lets a hostile document, or a
//! confused model, steer the run. So each parser finds the occurrences of its form and
//! asks [`Reply::taken`] of each; an action counts only where the reply takes it:
//!
//! - not inside a fence of another language (a `FINAL(…)` inside no fence at all);
//! - not in a blockquote (`> `), an inline code span within a sentence, or quotation
//!   marks, unless the reply is that action and nothing else;
//! - not indented as code inside an explanation;
//! - where its form stands: `FINAL(…)` at the start of a line, a JSON or XML call at
//!   the start of a line or of a sentence, a call such as `ctx_grep(…)` anywhere;
//! - not declined, put off or shown as an example by the words of its sentence, or by
//!   the line ending in `:` that introduces it.
//!
//! It lives in the leaf crate because the orchestrator's reply parser and the text tool
//! protocol (`rlm-env-tools`) both ask it. It reads the reply once ([`Reply::read`]);
//! each question after that reads at most a few hundred bytes around the action, so a
//! parser that asks it of every candidate stays linear.

mod clause;
mod layout;
#[cfg(test)]
mod tests;

use std::fmt;
use std::ops::Range;

pub use layout::Fence;

use clause::Says;
use layout::{indent, is_decoration, Layout};

/// An action a reply can write, by the form it is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `FINAL(…)` or `FINAL_VAR(…)`: at the start of a line, outside every fence.
    Answer,
    /// A tool call written as a JSON object or an XML element (`{"tool": …}`,
    /// `<tool_call>…</tool_call>`): at the start of a line or of a sentence, outside
    /// fences or in a fence tagged for calls (`json`, `tool`, `xml`, bare…).
    CallObject,
    /// A tool call written as a function call (`ctx_grep(variable="context", …)`):
    /// anywhere in a sentence, outside fences or in a fence tagged for calls or code.
    CallExpression,
}

/// Why an action a reply writes is not one it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotTaken {
    /// It is in a blockquote: a quotation.
    Blockquote,
    /// It is inside inline code within a sentence.
    CodeSpan,
    /// It is inside a fenced block of another language (the block's tag).
    Fence(String),
    /// It is inside quotation marks.
    Quoted,
    /// It stands inside a sentence, where its form is not written to be acted on.
    InSentence,
    /// It is indented as code inside an explanation: an example.
    Indented,
    /// The words around it say it is not to be done.
    Declined,
    /// The words around it put it off to a later step.
    Deferred,
    /// The words around it show it as an example of a form.
    Example,
}

impl fmt::Display for NotTaken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Blockquote => f.write_str("it is in a blockquote, which quotes it"),
            Self::CodeSpan => f.write_str("it is in inline code inside a sentence"),
            Self::Fence(tag) if tag.is_empty() => f.write_str("it is inside a ``` block"),
            Self::Fence(tag) => write!(f, "it is inside a ```{tag} block"),
            Self::Quoted => f.write_str("it is inside quotation marks"),
            Self::InSentence => f.write_str("it stands inside a sentence"),
            Self::Indented => f.write_str("it is indented as an example inside the explanation"),
            Self::Declined => f.write_str("the reply says it is not to be done"),
            Self::Deferred => f.write_str("the reply puts it off to a later step"),
            Self::Example => f.write_str("the reply shows it as an example"),
        }
    }
}

/// Fence tags whose blocks may hold a tool call.
const CALL_TAGS: [&str; 11] = [
    "",
    "json",
    "json5",
    "jsonc",
    "tool",
    "tools",
    "tool_call",
    "tool_calls",
    "tool_code",
    "function_call",
    "xml",
];

/// Fence tags of code, where a call may be written as a function call.
const CODE_TAGS: [&str; 6] = ["repl", "python", "py", "python3", "javascript", "js"];

/// True when a fence tagged `tag` may hold `action`.
fn carries(action: Action, tag: &str) -> bool {
    match action {
        Action::Answer => false,
        Action::CallObject => CALL_TAGS.contains(&tag),
        Action::CallExpression => CALL_TAGS.contains(&tag) || CODE_TAGS.contains(&tag),
    }
}

/// The most bytes looked through for a tag next to a call object.
const TAG_BYTES: usize = 200;

/// A reply, read once, to judge the actions its parsers find in it.
#[derive(Debug)]
pub struct Reply<'a> {
    text: &'a str,
    layout: Layout,
}

/// Judges one action of `reply` (read for this question alone: a parser that judges
/// many reads the reply once with [`Reply::read`]).
pub fn action_taken(reply: &str, action: Action, span: Range<usize>) -> Result<(), NotTaken> {
    Reply::read(reply).taken(action, span)
}

impl<'a> Reply<'a> {
    /// Reads the layout of `text`: its lines, fences and code spans (one pass).
    pub fn read(text: &'a str) -> Self {
        Self {
            text,
            layout: Layout::read(text),
        }
    }

    /// The reply's text.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// The reply's fenced blocks, in order.
    pub fn fences(&self) -> &[Fence] {
        &self.layout.fences
    }

    /// Whether the reply takes `action`, written at `span` (byte offsets into the
    /// reply; for a call object, [`Reply::call_span`] of it), or why not.
    pub fn taken(&self, action: Action, span: Range<usize>) -> Result<(), NotTaken> {
        let text = self.text;
        let layout = &self.layout;
        let end = span.end.min(text.len());
        let mut span = span.start.min(end)..end;
        if let Some(fence) = layout.fence_at(span.start) {
            if !carries(action, &fence.tag) {
                return Err(NotTaken::Fence(fence.tag.clone()));
            }
            // In a fence that carries it, the fence is what the reply writes: it is
            // judged where the fence stands.
            span = fence.span.clone();
        }
        let line = layout.line_of(span.start);
        let line_range = layout.line(text, line);
        let line_text = &text[line_range.clone()];
        let prefix = &text[line_range.start..span.start.max(line_range.start)];
        if indent(line_text) <= 3 && line_text.trim_start().starts_with('>') {
            return Err(NotTaken::Blockquote);
        }
        if layout
            .substance
            .is_some_and(|(first, last)| first >= span.start && last < span.end)
        {
            // The reply is this action and nothing else: nothing around it quotes it.
            return Ok(());
        }
        if indent(line_text) >= 4 && layout.has_prose {
            return Err(NotTaken::Indented);
        }
        if let Some(code) = layout.code_span_at(span.start) {
            let frame = |c: char| c.is_whitespace() || c == '*' || c == '_';
            let lead = line_text.len() - line_text.trim_start_matches(frame).len();
            let start = line_range.start + lead;
            if code != (start..start + line_text.trim_matches(frame).len()) {
                return Err(NotTaken::CodeSpan);
            }
        }
        if opens_quotation(prefix) {
            return Err(NotTaken::Quoted);
        }
        let sentence = clause::sentence_before(text, line_range.start, span.start);
        let starts_line = prefix.chars().all(is_decoration);
        let intro = starts_line
            .then(|| clause::introduction(text, layout, line))
            .flatten();
        let after = clause::sentence_after(text, span.end);
        for (what, why) in [
            (Says::Declined, NotTaken::Declined),
            (Says::Deferred, NotTaken::Deferred),
            (Says::Example, NotTaken::Example),
        ] {
            let before = [Some(sentence), intro]
                .into_iter()
                .flatten()
                .any(|clause| clause::says(clause, true, what));
            if before || clause::says(after, false, what) {
                return Err(why);
            }
        }
        match action {
            Action::Answer => {
                let lead = |c: char| c.is_whitespace() || matches!(c, '*' | '_' | '`');
                if !prefix.chars().all(lead) {
                    return Err(NotTaken::InSentence);
                }
            }
            Action::CallObject => {
                // Stray brackets before it are a slip, not words ("{{\"name\": …}}}").
                let said = sentence.trim_matches(|c| is_decoration(c) || matches!(c, '{' | '['));
                if !(said.is_empty() || said.ends_with(':')) {
                    return Err(NotTaken::InSentence);
                }
            }
            Action::CallExpression => {}
        }
        Ok(())
    }

    /// Whether the reply takes a fenced block to run (one of [`Reply::fences`]), or why
    /// not: the line that introduces it, or the words that continue after it, decline
    /// it ("Do not run this:").
    pub fn fence_taken(&self, fence: &Fence) -> Result<(), NotTaken> {
        let line = self.layout.line_of(fence.span.start);
        let intro = clause::introduction(self.text, &self.layout, line);
        let after = clause::sentence_after(self.text, fence.span.end);
        let declined = intro.is_some_and(|clause| clause::says(clause, true, Says::Declined))
            || clause::says(after, false, Says::Declined);
        if declined {
            Err(NotTaken::Declined)
        } else {
            Ok(())
        }
    }

    /// The span of a call object found at `object`, widened over the tags around it
    /// (`<tool_call>{…}</tool_call>`): the call as the reply writes it.
    pub fn call_span(&self, object: Range<usize>) -> Range<usize> {
        let text = self.text;
        let mut start = object.start.min(text.len());
        for _ in 0..3 {
            let before = text[..start].trim_end_matches([' ', '\t', '\n', '\r']);
            if !before.ends_with('>') {
                break;
            }
            let window = before.len().saturating_sub(TAG_BYTES);
            let window = (window..before.len())
                .find(|at| before.is_char_boundary(*at))
                .unwrap_or(before.len());
            let Some(open) = before[window..].rfind('<').map(|at| window + at) else {
                break;
            };
            let tag = &before[open + 1..];
            let opening = tag.starts_with(|c: char| c.is_ascii_alphabetic());
            if !opening || tag.contains('\n') {
                break;
            }
            start = open;
        }
        let mut end = object.end.min(text.len());
        for _ in 0..3 {
            let after = &text[end..];
            let skipped = after.len() - after.trim_start_matches([' ', '\t', '\n', '\r']).len();
            if skipped > TAG_BYTES || !after[skipped..].starts_with("</") {
                break;
            }
            let tag = &after[skipped..];
            let Some(close) = tag.bytes().take(TAG_BYTES).position(|b| b == b'>') else {
                break;
            };
            end += skipped + close + 1;
        }
        start..end
    }
}

/// True when `prefix`, the line before an action, ends by opening a quotation (a
/// quotation mark after a space, a bracket, a colon or the line's start).
fn opens_quotation(prefix: &str) -> bool {
    let before = prefix.trim_end_matches([' ', '\t', '*', '_']);
    let mut chars = before.chars().rev();
    let Some(quote) = chars.next() else {
        return false;
    };
    if !matches!(quote, '"' | '\'' | '“' | '‘' | '«' | '„') {
        return false;
    }
    chars
        .next()
        .is_none_or(|c| c.is_whitespace() || matches!(c, '(' | '[' | ':' | ','))
}
