//! Reading a model's response: code blocks, final answers, and the ways models
//! misbehave around them.
//!
//! Only fences tagged `repl` or the environment's own language are executed. A final
//! answer (`FINAL(...)`, `FINAL_VAR(name)`) counts only at the start of a line in text
//! outside every fence. Text after a code block that imitates REPL output is cut, so
//! the transcript only ever shows real output. A response that holds code the loop
//! will not run (a bare fence, another language, a tool-call-looking blob) is flagged
//! so the loop can tell the model which fence to use — except a tool call that carries
//! its code (`{"code": …}`, `<parameter name="code">…`, as models trained on tool
//! calling write them): that code runs, as if fenced, and the model is told the form.
//!
//! Every action found — a block, a `FINAL`, a tool call's code — is one the reply
//! *takes* only as [`rlm_protocol::reply`] judges it: not quoted, declined, put off or
//! shown as an example ([`ParsedResponse::quoted`] lists those). Each scan is linear in
//! the reply: a hostile reply of a megabyte is read in one pass, not once per
//! candidate.

mod final_call;
#[cfg(test)]
mod tests;
mod tool_call;

use std::ops::Range;

use rlm_protocol::reply::{Fence, NotTaken, Reply};

/// A fenced block the environment should run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeBlock {
    /// The fence's tag (`repl`, `python`, …).
    pub tag: String,
    /// The code, without the fences.
    pub code: String,
}

/// Code the model wrote in a form the loop does not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misfence {
    /// A fence with no tag.
    Bare,
    /// A fence tagged with a language the environment does not run.
    OtherLanguage(String),
    /// An XML or JSON blob that looks like a native tool call.
    ToolCall,
}

/// An action the reply writes but does not take ([`rlm_protocol::reply`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quoted {
    /// What was written, as the model is told of it (`FINAL(…)`, `a ```repl block`).
    pub action: String,
    /// Why it is not taken.
    pub why: NotTaken,
}

/// A response taken apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedResponse {
    /// The response as it goes into the transcript (imitated output cut).
    pub transcript_text: String,
    /// Blocks to execute, in order.
    pub blocks: Vec<CodeBlock>,
    /// `FINAL(...)` found outside code: its content.
    pub final_literal: Option<String>,
    /// `FINAL_VAR(name)` found outside code: the name.
    pub final_var: Option<String>,
    /// `FINAL` or `FINAL_VAR` when the last such call outside code was opened and never
    /// closed (no `)` ends it: a reply cut short, or a slip); it is then not an answer.
    pub unclosed_final: Option<&'static str>,
    /// True when imitated REPL output was cut.
    pub cut_imitated_output: bool,
    /// Set when no block will run but the response holds code in the wrong form.
    pub misfence: Option<Misfence>,
    /// True when the one block to run was taken out of a tool call (XML or JSON).
    pub from_tool_call: bool,
    /// Actions the reply writes without taking them (quoted, declined, an example…),
    /// in the order they were judged.
    pub quoted: Vec<Quoted>,
}

/// Tags executed by every environment.
const REPL_TAG: &str = "repl";

/// Line starts that mark text imitating REPL output.
const IMITATION_MARKERS: [&str; 6] = [
    "repl output",
    "output:",
    "execution output",
    "[execution output",
    "result:",
    "stdout:",
];

/// Takes a response apart. `language_tags` are the tags besides `repl` that run
/// (`["python", "py"]` for the Python kernel).
pub fn parse_response(response: &str, language_tags: &[&str]) -> ParsedResponse {
    let reply = Reply::read(response);
    let runs = |tag: &str| {
        let tag = tag.to_ascii_lowercase();
        tag == REPL_TAG || language_tags.iter().any(|t| *t == tag)
    };

    let mut parsed = ParsedResponse::default();
    let mut kept = String::with_capacity(response.len());
    let mut outside = Outside::default();
    let mut seen_code = false;
    let mut other_fence: Option<Misfence> = None;
    for segment in segments(&reply) {
        match segment {
            Segment::Text(range) => {
                let text = &response[range.clone()];
                if seen_code {
                    if let Some(cut) = imitation_start(text) {
                        parsed.cut_imitated_output = true;
                        kept.push_str(&text[..cut]);
                        outside.push(range.start, &text[..cut]);
                        break;
                    }
                }
                kept.push_str(text);
                outside.push(range.start, text);
                outside.text.push('\n');
            }
            Segment::Fence(fence) => {
                let tag = &fence.tag;
                if seen_code && !runs(tag) && tag.is_empty() {
                    // A bare fence right after code is almost always imitated output.
                    parsed.cut_imitated_output = true;
                    break;
                }
                let raw = &response[fence.span.clone()];
                kept.push_str(raw);
                if !raw.ends_with('\n') {
                    kept.push('\n');
                }
                let code = response[fence.body.clone()].trim_end_matches('\n');
                if runs(tag) {
                    match reply.fence_taken(fence) {
                        Ok(()) => {
                            seen_code = true;
                            parsed.blocks.push(CodeBlock {
                                tag: tag.clone(),
                                code: code.to_owned(),
                            });
                        }
                        Err(why) => parsed.quoted.push(Quoted {
                            action: format!("a ```{tag} block"),
                            why,
                        }),
                    }
                } else if other_fence.is_none() && !code.trim().is_empty() {
                    other_fence = Some(if tag.is_empty() {
                        Misfence::Bare
                    } else {
                        Misfence::OtherLanguage(tag.clone())
                    });
                }
            }
        }
    }
    parsed.transcript_text = kept.trim_end().to_owned();
    for name in ["FINAL_VAR", "FINAL"] {
        let argument = match final_call::last_taken(&outside, &reply, name, &mut parsed.quoted) {
            Some(final_call::Call::Closed(arg)) => Some(final_call::unquote(&arg).to_owned()),
            Some(final_call::Call::Unclosed) => {
                parsed.unclosed_final = Some(name);
                None
            }
            None => None,
        };
        if name == "FINAL" {
            parsed.final_literal = argument;
        } else {
            parsed.final_var = argument;
        }
    }
    if parsed.blocks.is_empty()
        && parsed.final_literal.is_none()
        && parsed.final_var.is_none()
        && parsed.unclosed_final.is_none()
    {
        parsed.misfence = other_fence.or_else(|| {
            tool_call::looks_like_tool_call(&outside.text).then_some(Misfence::ToolCall)
        });
        let xml_call = match &parsed.misfence {
            Some(Misfence::ToolCall) => true,
            Some(Misfence::OtherLanguage(tag)) => {
                matches!(tag.as_str(), "xml" | "tool_call" | "tool_code")
            }
            _ => false,
        };
        let may_carry_code = xml_call
            || parsed.misfence.is_none()
            || matches!(&parsed.misfence, Some(Misfence::OtherLanguage(tag)) if tag == "json");
        if may_carry_code {
            if let Some(code) = tool_call::code(&reply, xml_call, &mut parsed.quoted) {
                parsed.blocks.push(CodeBlock {
                    tag: REPL_TAG.to_owned(),
                    code,
                });
                parsed.misfence = None;
                parsed.from_tool_call = true;
            }
        }
    }
    parsed
}

/// The text of a reply outside its fences, joined with a line break after each piece
/// (what `FINAL` is looked for in), and where each piece came from in the reply.
#[derive(Debug, Default)]
struct Outside {
    text: String,
    /// `(offset in text, offset in the reply)` where each piece starts.
    pieces: Vec<(usize, usize)>,
}

impl Outside {
    fn push(&mut self, from: usize, piece: &str) {
        self.pieces.push((self.text.len(), from));
        self.text.push_str(piece);
    }

    /// The reply's offset of byte `at` of [`Outside::text`].
    fn in_reply(&self, at: usize) -> usize {
        let index = self.pieces.partition_point(|(start, _)| *start <= at);
        match index.checked_sub(1).and_then(|i| self.pieces.get(i)) {
            Some((start, from)) => from + (at - start),
            None => at,
        }
    }
}

/// A piece of a reply: prose between fences, or a fence.
enum Segment<'r> {
    Text(Range<usize>),
    Fence(&'r Fence),
}

/// The reply as prose and fences, in order (an unclosed fence runs to the end).
fn segments<'r>(reply: &'r Reply<'_>) -> Vec<Segment<'r>> {
    let mut segments = Vec::new();
    let mut at = 0;
    for fence in reply.fences() {
        if fence.span.start > at {
            segments.push(Segment::Text(at..fence.span.start));
        }
        segments.push(Segment::Fence(fence));
        at = fence.span.end;
    }
    if at < reply.text().len() {
        segments.push(Segment::Text(at..reply.text().len()));
    }
    segments
}

/// Byte offset of the first line in `text` that imitates REPL output.
fn imitation_start(text: &str) -> Option<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let lower = line
            .trim_start()
            .trim_start_matches(['*', '#', '>', ' '])
            .to_ascii_lowercase();
        if IMITATION_MARKERS.iter().any(|m| lower.starts_with(m)) {
            return Some(offset);
        }
        offset += line.len();
    }
    None
}
