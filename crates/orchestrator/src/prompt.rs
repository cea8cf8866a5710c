//! The prompts the loop sends: a system prompt naming the protocol and helpers, a
//! first user message describing the task and the context by metadata only, and the
//! messages that feed REPL output and state (budget, variable inventory) back.
//!
//! Nothing here ever sees the context itself, only a [`ContextInfo`]; the first
//! message's size is bounded whatever the context's size.

use std::fmt::Write as _;

use crate::context::{ContextInfo, CHUNK_CHARS};
use crate::env::{ExecOutcome, ReplVariable};
use crate::format::{clip, human_bytes};
use crate::parse::Misfence;
use rlm_protocol::reply::NotTaken;

pub use rlm_env::{system_prompt, EnvGuide, PromptFeatures};

/// A context above this many bytes gets a "large" note (docs/loop.md, size notes).
pub const WARN_BYTES: u64 = 100 * 1024;
/// Above this, the note says the context must be chunked.
pub const CHUNK_BYTES: u64 = 1024 * 1024;
/// Above this total, the note says to delegate.
pub const MAX_TOTAL_BYTES: u64 = 10 * 1024 * 1024;

/// Where the run stands, shown to the model each turn.
#[derive(Debug, Clone, Copy, Default)]
pub struct Budget {
    /// 1-based iteration about to run.
    pub iteration: u32,
    /// `--max-iterations`.
    pub max_iterations: u32,
    /// This run's depth.
    pub depth: u32,
    /// `--max-depth`.
    pub max_depth: u32,
    /// Tokens used so far (prompt + completion, this run and its sub-calls).
    pub tokens_used: u64,
    /// Token budget, if any.
    pub max_tokens: Option<u64>,
}

/// What earlier queries of a persistent session left in the REPL (all zero for a
/// single run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionState {
    /// Earlier `{query, answer}` pairs in `history`.
    pub history_len: usize,
    /// Contexts loaded so far, one slot each (`contexts[i]`, `context_<i>`); `context`
    /// is the latest.
    pub context_slots: usize,
}

/// The size notes for a context of this size.
pub fn size_warnings(info: &ContextInfo) -> Vec<String> {
    let mut notes = Vec::new();
    let bytes = info.total_bytes;
    if bytes > CHUNK_BYTES {
        let chunks = bytes / WARN_BYTES + 1;
        notes.push(format!(
            "requires chunking: {} is far beyond one model call; work on about {chunks} pieces (context_chunks) with llm_query_parallel or sub_rlm",
            human_bytes(bytes)
        ));
    } else if bytes > WARN_BYTES {
        notes.push(format!(
            "large: {} — never print it whole; peek and search instead",
            human_bytes(bytes)
        ));
    }
    if bytes > MAX_TOTAL_BYTES {
        notes.push(format!(
            "total size {} exceeds {}: delegate reading to sub-calls and keep only their findings",
            human_bytes(bytes),
            human_bytes(MAX_TOTAL_BYTES)
        ));
    }
    notes
}

/// How the model reaches the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Access {
    /// By writing code in a REPL where it is loaded (`python`, `js`).
    #[default]
    Code,
    /// Through the micro-tools (`tools`): there is no code, so no chunk views.
    Tools,
}

/// The first user message: task, context metadata, size notes and state.
pub fn first_message(
    query: &str,
    context: Option<&ContextInfo>,
    budget: &Budget,
    session: SessionState,
    access: Access,
) -> String {
    let mut text = String::with_capacity(1024 + query.len());
    let _ = writeln!(text, "Task: {query}\n");
    match context {
        None => text.push_str("Context: none was given (`context` is None).\n"),
        Some(info) => {
            text.push_str(match access {
                Access::Code => "Context (loaded in the REPL as `context`; it is not shown here):\n",
                Access::Tools => "Context (the variable `context`, read through the tools; it is not shown here):\n",
            });
            let _ = writeln!(text, "- type: {}", info.kind);
            let about = if info.estimated { "about " } else { "" };
            let _ = write!(
                text,
                "- size: {about}{} characters ({})",
                info.total_chars,
                human_bytes(info.total_bytes)
            );
            if let Some(items) = info.items {
                let _ = write!(text, ", {items} items");
            }
            if let Some(lines) = info.lines {
                let _ = write!(text, ", {about}{lines} lines");
            }
            if info.estimated {
                text.push_str(" (estimated from samples: the file was not read whole)");
            }
            text.push('\n');
            if info.lazy && access == Access::Code {
                text.push_str("- lazy: `context` is a read-only view of the file, not a str: len(), slices, find/count/`in`, `for line in context` (lines), splitlines(), finditer(regex) and search()/peek()/context_chunks work without loading it; other str methods and str(context) load it whole and fail when it does not fit in memory\n");
            }
            let _ = match access {
                Access::Code => writeln!(text, "- source: {}", clip(&info.origin, 200)),
                // Small models take a path for the variable's name.
                Access::Tools => writeln!(
                    text,
                    "- source: {} (not a variable name: give the tools \"context\")",
                    clip(&info.origin, 200)
                ),
            };
            if !info.skipped.is_empty() {
                let _ = writeln!(
                    text,
                    "- skipped (not in `context`): {}",
                    clip(&info.skipped.join(", "), 2000)
                );
            }
            let _ = writeln!(
                text,
                "- preview (first {} characters): {}",
                crate::context::PREVIEW_CHARS,
                json_quoted(&info.preview)
            );
            match access {
                Access::Code => {
                    if info.kind == "str" && info.total_chars > CHUNK_CHARS {
                        let _ = writeln!(
                            text,
                            "- chunks: `context_chunks` is a list view of {} pieces of {CHUNK_CHARS} characters",
                            info.total_chars.div_ceil(CHUNK_CHARS)
                        );
                    }
                    for note in size_warnings(info) {
                        let _ = writeln!(text, "- note: {note}");
                    }
                }
                Access::Tools if info.total_bytes > WARN_BYTES => {
                    text.push_str("- note: far too large to read whole: find what matters with ctx_grep, then read around it with ctx_slice\n");
                }
                Access::Tools => {}
            }
        }
    }
    let slots = session.context_slots;
    if slots > 1 {
        let last = slots - 1;
        let _ = match access {
            Access::Code => writeln!(
                text,
                "- contexts: {slots} slots, one per context given in this session: `contexts[0]` … `contexts[{last}]` (also `context_0` … `context_{last}`); `context` is the latest"
            ),
            Access::Tools => writeln!(
                text,
                "- contexts: {slots}, one per context given in this session: `context_0` … `context_{last}`; `context` is the latest"
            ),
        };
    }
    let history_len = session.history_len;
    if history_len > 0 && access == Access::Code {
        let _ = writeln!(
            text,
            "- history: {history_len} earlier queries and answers are in `history` (a list of {{\"query\", \"answer\"}})"
        );
    }
    text.push('\n');
    text.push_str(&state_block(budget, &[], 0));
    text.push_str(match access {
        Access::Code => "\nStart by writing code in a ```repl block.",
        Access::Tools => "\nStart by calling a tool.",
    });
    text
}

/// One executed block as it goes into the transcript.
pub fn exec_report(code: &str, language: &str, shaped_output: &str) -> String {
    let output = if shaped_output.trim().is_empty() {
        "(no output)"
    } else {
        shaped_output
    };
    format!("Code executed:\n```{language}\n{code}\n```\n\nREPL output:\n{output}")
}

/// The notice after the task's exact helper call ran and printed only `value`: that
/// is the task's answer, and the exact line that sends it, last.
pub fn task_call_printed(value: &str) -> String {
    format!(
        "That call computes the task's answer from `context` exactly. If {value} answers the task, reply with exactly this line and nothing else:\nFINAL({value})"
    )
}

/// The notice after a `ctx_grep` of `word`, which the task names, found lines (under
/// `--env tools`): what the task asks about is in view; answer when it answers the
/// whole task, since the same search finds the same lines.
pub fn task_word_found(word: &str) -> String {
    format!(
        "Your grep of \"{word}\", which the task names, found the lines above. If what you have found answers the whole task, call final_answer with the answer now; the same search again finds the same lines."
    )
}

/// The notice after a `ctx_map_reduce` of the task's own exact plan gave `answer`
/// ([`crate::rlm`]'s `exact_plan_ran`): the call to answer with, written out.
pub fn exact_plan_answered(answer: &str) -> String {
    let quoted = serde_json::to_string(answer).unwrap_or_default();
    format!(
        "That plan is the task's exact plan, so its result answers the task: {answer}. Call final_answer with {{\"answer\": {quoted}}} now; the same plan again gives the same result."
    )
}

/// The notice after a `ctx_grep` of `word` found lines, for a task that names `count`
/// keys (`multi-needle`): which keys no grep has found yet (`missing`), or, when none
/// is left, to answer with all of them.
pub fn task_keys_found(word: &str, count: usize, missing: &[&str]) -> String {
    if missing.is_empty() {
        format!(
            "Your grep of \"{word}\" found the lines above. You have found lines for every one of the {count} keys the task names: call final_answer now with the whole answer the task asks for."
        )
    } else {
        format!(
            "Your grep of \"{word}\" found the lines above. The task names {count} keys; not found yet: {}. Grep each of them; when you have them all, call final_answer with the whole answer the task asks for.",
            missing.join(", ")
        )
    }
}

/// The notice questioning a `FINAL` answer, `answer`, that no output of the run
/// showed, after the last code printed `printed`: the answer should come from what the
/// code found; the printed value's exact line, last. The same answer sent again is
/// taken.
pub fn answer_unlike_output(answer: &str, printed: &str) -> String {
    format!(
        "Your answer {answer} is in no output of your code: your last code printed {printed}. An answer comes from what the code found, not from a variable's name or a guess. To look further, run code that prints the answer. If {printed} answers the task, reply with exactly this line and nothing else:\nFINAL({printed})"
    )
}

/// [`answer_unlike_output`] for a bare `FINAL(word)` that ran as code and failed: the
/// word is no variable, and no output showed it.
pub fn bare_final_unlike_output(word: &str, printed: &str) -> String {
    format!(
        "FINAL({word}) ran as code, and `{word}` is not a variable of the REPL. {}",
        answer_unlike_output(word, printed)
    )
}

/// The notice after the same code ran again and printed the same `value`: running it
/// once more changes nothing, and the exact line that sends the value, last — or, for
/// a zero (which most often means the pattern matched nothing), `task_call`, the call
/// that answers the task exactly, where there is one.
pub fn same_value_printed_again(value: &str, task_call: Option<&str>) -> String {
    let next = match task_call {
        Some(call) if is_zero(value) => zero_offer(value, call),
        _ => format!(
            "To look further, change the code. If {value} is your answer, reply with exactly this line and nothing else:\nFINAL({value})"
        ),
    };
    format!("The same code printed {value} before; running it again gives the same. {next}")
}

/// True when `value` is a zero (`0`, `0.0`): what a count or a sum prints when its
/// pattern matched nothing.
pub(crate) fn is_zero(value: &str) -> bool {
    value.parse::<f64>().is_ok_and(|number| number == 0.0)
}

/// What follows code that printed a zero twice, when the task has a `call` that
/// answers it exactly: the call, not the zero's `FINAL` line. The local model's regex
/// matched nothing, printed `0` twice, was offered `FINAL(0)` and answered 0 where the
/// count was 129 (docs/eval.md, final-line-seed9, python `aggregate` items 0 and 3).
fn zero_offer(value: &str, call: &str) -> String {
    format!(
        "{value} often means the code matched nothing in `context`. {}",
        call_offer(call)
    )
}

/// The report of a block that was not run because the same code already ran `times`
/// times: the output it had, and what to do instead — with the exact line to send
/// when that output ended in one `value` other than a zero, else with `task_call`, the
/// call that answers the task exactly, where there is one and it is not this code
/// (after-echo-seed6, js `pairs` item 0: a block with a syntax error sent four times).
pub fn repeated_code(
    code: &str,
    language: &str,
    times: u32,
    last_output: &str,
    value: Option<&str>,
    task_call: Option<&str>,
) -> String {
    let output = if last_output.trim().is_empty() {
        "(no output)"
    } else {
        last_output
    };
    let other_call = task_call.filter(|call| call.trim() != code.trim());
    let next = match (value, other_call) {
        (Some(value), Some(call)) if is_zero(value) => zero_offer(value, call),
        (Some(value), _) => format!(
            "To look further, change the code (another pattern, other offsets, another helper). If {value} is your answer, reply with exactly this line and nothing else:\nFINAL({value})"
        ),
        (None, _) => format!(
            "Change the code (another pattern, other offsets, another helper) or answer with FINAL(...).{}",
            task_call_offer(task_call)
        ),
    };
    format!(
        "Code not run: the same code already ran {times} times.\n```{language}\n{code}\n```\n\nIts output was:\n{output}\n\nRunning it again gives the same. {next}"
    )
}

/// The report of a block that was not run because its line `assignment` replaces
/// `context` with text written into the code: what `context` already holds, and what
/// to do instead — the helper call that answers the task, where there is one.
pub fn context_literal(
    code: &str,
    language: &str,
    assignment: &str,
    context_chars: u64,
    task_call: Option<&str>,
) -> String {
    let line: String = assignment.chars().take(80).collect();
    let cut = if line.len() < assignment.len() {
        " …"
    } else {
        ""
    };
    format!(
        "Code not run: its line\n{line}{cut}\nreplaces `context` with text written into the code.\n```{language}\n{code}\n```\n\n`context` already holds the whole context ({context_chars} characters); the text you were shown is only its first characters. Remove that line and run the rest on `context` as it is.{}",
        task_call_offer(task_call)
    )
}

/// The report of a block that was not run because it is only a value written into
/// the code: running it would only echo the value. The exact `FINAL` line when that
/// value is one `scalar`, and the helper call that answers the task, where there is one.
///
/// The block is not shown back in a fence: the local model, shown its own array of
/// city names above the offered call, sent the array again until forced (docs/eval.md,
/// after-shown-seed7, js `pairs` items 2, 3 and 4). Sent again, the call runs in its
/// place instead ([`value_ran_instead`]).
pub fn value_block(code: &str, scalar: Option<&str>, task_call: Option<&str>) -> String {
    let shown = one_line(code, 60);
    match (scalar, task_call) {
        (Some(value), _) => format!(
            "Code not run: it is only a value written into the code (`{shown}`); it reads nothing from `context` and computes nothing.\n\nIf {value} is your answer, reply with exactly this line and nothing else:\nFINAL({value})\nOtherwise write code that computes the answer from `context`.{}",
            task_call_offer(task_call)
        ),
        (None, Some(call)) => format!(
            "Code not run: `{shown}` is only a value written into the code; it reads nothing from `context` and computes nothing. Send this block; it computes the answer from `context` exactly, with no model:\n```repl\n{call}\n```"
        ),
        (None, None) => format!(
            "Code not run: `{shown}` is only a value written into the code; it reads nothing from `context` and computes nothing. Write code that computes the answer from `context` and prints it."
        ),
    }
}

/// The notice after a block of one bare `word` ran and failed because no variable has
/// that name: a word is not code, nor an answer; what to send instead — `task_call`,
/// the call that answers the task exactly, where there is one, else the word's `FINAL`
/// line or code that computes the answer. Sent again, the word is refused.
pub fn undefined_word(word: &str, task_call: Option<&str>) -> String {
    let next = match task_call {
        Some(call) => format!(
            "Send this block; it computes the answer from `context` exactly, with no model:\n```repl\n{call}\n```"
        ),
        None => format!(
            "Write code that computes the answer from `context` and prints it. If {word} is your answer, reply with exactly this line and nothing else:\nFINAL({word})"
        ),
    };
    format!(
        "`{word}` ran as code, and no variable of the REPL has that name: a word sent as code computes nothing, and it is not an answer. {next}"
    )
}

/// The report of a block refused as no code — `what` it is: a value, a sentence, a
/// word, text the model was shown — sent again, with `call`, the task's exact helper
/// call, run in its place: the call, its `output`, and the exact `FINAL` line when the
/// output ended in one `value`.
pub fn value_ran_instead(
    code: &str,
    what: &str,
    call: &str,
    output: &str,
    value: Option<&str>,
) -> String {
    let shown = one_line(code, 60);
    format!(
        "Code not run: you sent `{shown}` before, and it is {what}, not code. {}",
        call_ran_in_place(call, output, value)
    )
}

/// The report of an answer questioned with the task's `call` and sent again unchanged,
/// with the call run in its place: the call, its `output`, and the exact `FINAL` line
/// when the output ended in one `value`. Sent a third time, the answer is taken.
pub fn questioned_answer_ran_instead(
    answer: &str,
    call: &str,
    output: &str,
    value: Option<&str>,
) -> String {
    format!(
        "Your answer {answer} came again as it was questioned. {}\n\nIf {answer} is still your answer, send FINAL({answer}) once more: it is then taken.",
        call_ran_in_place(call, output, value)
    )
}

/// What the task's exact `call`, run in place of a reply, did: the call, its `output`,
/// and the exact `FINAL` line when the output ended in one `value`.
fn call_ran_in_place(call: &str, output: &str, value: Option<&str>) -> String {
    let output = if output.trim().is_empty() {
        "(no output)"
    } else {
        output
    };
    let next = match value {
        Some(value) => format!(
            "If that answers the task, reply with exactly this line and nothing else:\nFINAL({value})"
        ),
        None => "Answer from that output with FINAL(...), or write code that computes the answer from `context`.".to_owned(),
    };
    format!(
        "In its place the call that computes the task's answer from `context` exactly, with no model, ran:\n```repl\n{call}\n```\n\nREPL output:\n{output}\n\n{next}"
    )
}

/// The report of a block not run because it is a sentence of prose, not code: what it
/// is, and the call that answers the task, where there is one (sent again, that call
/// runs in its place: [`value_ran_instead`]).
pub fn sentence_block(code: &str, task_call: Option<&str>) -> String {
    let shown = one_line(code, 80);
    match task_call {
        Some(call) => format!(
            "Code not run: `{shown}` is a sentence, not code; it computes nothing. Send this block; it computes the answer from `context` exactly, with no model:\n```repl\n{call}\n```"
        ),
        None => format!(
            "Code not run: `{shown}` is a sentence, not code; it computes nothing. Write code that computes the answer from `context` and prints it; once it has, reply with FINAL(answer)."
        ),
    }
}

/// `code` on one line (its lines joined by spaces), cut to `limit` characters with `…`.
fn one_line(code: &str, limit: usize) -> String {
    let joined = code.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= limit {
        joined
    } else {
        let cut: String = joined.chars().take(limit).collect();
        format!("{cut} …")
    }
}

/// The report of a block not run because it is the REPL's error message copied back
/// ([`crate::rlm`]'s echo check): what it is, and what to send instead.
pub fn echoed_error(code: &str, language: &str, header: &str, task_call: Option<&str>) -> String {
    format!(
        "Code not run: it is the REPL's error message (`{header}`) copied back, not code; run, it only raises another error.\n```{language}\n{code}\n```\n\nThe error came from your code before it. Send that code again with the mistake fixed, or new code that computes the answer from `context`.{}",
        task_call_offer(task_call)
    )
}

/// The report of a block not run because it is only `token`, text of the task or of
/// the context's preview: what it is, and what to send instead.
pub fn shown_words(token: &str, language: &str, task_call: Option<&str>) -> String {
    format!(
        "Code not run: `{token}` is text you were shown (the task or the context), not code; run as {language}, it fails.\n\nWrite code that looks for it in `context` — a regular expression such as /{}/ over `context` — and prints what you need.{}",
        regex_of(token),
        task_call_offer(task_call)
    )
}

/// `text` as the body of a JavaScript regular expression literal (`/…/`) that
/// matches it as written, also read the same by Python's `re`. Not `regex::escape`:
/// it escapes `-`, `#`, `&` and `~` too, which a `/…/u` literal rejects and which make
/// a key such as `eager-yak-46` harder for a small model to copy.
fn regex_of(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escape = r"\^$.|?*+()[]{}/".contains(c);
            escape.then_some('\\').into_iter().chain(std::iter::once(c))
        })
        .collect()
}

/// The sentence that offers `task_call`, the helper call that answers the task exactly
/// (empty without one).
fn task_call_offer(task_call: Option<&str>) -> String {
    task_call.map_or(String::new(), |call| {
        format!(" For this task one call computes the answer exactly, with no model:\n```repl\n{call}\n```")
    })
}

/// The user message after a turn: block reports, notices, then the current state.
pub fn turn_message(
    reports: &[String],
    notices: &[String],
    budget: &Budget,
    variables: &[ReplVariable],
    max_vars: usize,
) -> String {
    let mut text = reports.join("\n\n");
    for notice in notices {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(notice);
    }
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(&state_block(budget, variables, max_vars));
    text
}

/// Budget counters and the bounded variable inventory.
pub fn state_block(budget: &Budget, variables: &[ReplVariable], max_vars: usize) -> String {
    let mut text = format!(
        "State: iteration {} of {} · depth {} of {} · tokens used {}",
        budget.iteration, budget.max_iterations, budget.depth, budget.max_depth, budget.tokens_used
    );
    if let Some(max) = budget.max_tokens {
        let _ = write!(text, " of {max}");
    }
    text.push('\n');
    if variables.is_empty() {
        text.push_str("Your variables: none yet\n");
        return text;
    }
    text.push_str("Your variables:\n");
    for v in variables.iter().take(max_vars) {
        let _ = writeln!(
            text,
            "- {} ({}, size {}): {}",
            v.name,
            v.type_name,
            v.size,
            clip(&v.preview, 80)
        );
    }
    if variables.len() > max_vars {
        let _ = writeln!(
            text,
            "- … and {} more (SHOW_VARS() lists them)",
            variables.len() - max_vars
        );
    }
    text
}

/// Why a response without a usable action gets a correction, in words for the model.
pub fn correction(misfence: Option<&Misfence>, language: &str) -> String {
    match misfence {
        Some(Misfence::Bare) => format!(
            "Your code was in a fence without a tag, so it did not run. Code runs only in ```repl fences (or ```{language})."
        ),
        Some(Misfence::OtherLanguage(tag)) => format!(
            "```{tag} blocks do not run here: this REPL runs {language}. Put {language} code in a ```repl fence."
        ),
        Some(Misfence::ToolCall) => format!(
            "There are no native tool calls here. Write {language} code in a ```repl fence instead, for example:\n```repl\nprint(len(context))\nprint(peek(context, 0, 500))\n```"
        ),
        None => "Your message had no code to run and no final answer. Write code in a ```repl block to explore the context, or answer with FINAL(...) on its own line.".to_owned(),
    }
}

/// The correction of a reply in prose that states `value`, the value the last block
/// printed, without `FINAL`: the exact line to send, which a small model copies where
/// it does not follow the general rule (Qwen2.5-Coder-1.5B wrote "The answer is 290."
/// ten times after the general correction, docs/eval.md, the matrix reading). With
/// `task_call`, a zero or a value that is not `unfit`'s shape of the task's answer is
/// offered that call instead.
pub fn answer_in_prose(value: &str, task_call: Option<&str>, unfit: Option<&str>) -> String {
    match (task_call, unfit) {
        (Some(call), Some(what)) => format!(
            "Your message had no code to run and no final answer: an answer in a sentence is not taken. {value} is not {what}, as the task's answer is: the code most likely read the wrong part of the records. {}",
            call_offer(call)
        ),
        (Some(call), None) if is_zero(value) => format!(
            "Your message had no code to run and no final answer: an answer in a sentence is not taken. {}",
            zero_offer(value, call)
        ),
        _ => format!(
            "Your message had no code to run and no final answer: an answer in a sentence is not taken. If {value} is your answer, reply with exactly this line and nothing else:\nFINAL({value})\nOtherwise write code in a ```repl block."
        ),
    }
}

/// The notice questioning a `FINAL(0)` — a zero the task's `call` did not give: a zero
/// most often means the code matched nothing; the call that computes the answer
/// exactly. The same answer sent again is taken.
pub fn zero_answer(value: &str, call: &str) -> String {
    format!(
        "Your answer is {value}, and {} If it prints {value} too, {value} is the answer.",
        zero_offer(value, call)
    )
}

/// The notice questioning an answer that is not `what` the task's answer is (a time
/// `02:21` for "which label"): the code read the wrong thing; `call` computes the
/// answer exactly. The same answer sent again is taken.
pub fn unfit_answer(value: &str, what: &str, call: &str) -> String {
    format!(
        "Your answer is {value}, but the task's answer is {what}: the code most likely read the wrong part of the records. {} If it prints {value} too, {value} is the answer.",
        call_offer(call)
    )
}

/// The notice questioning an answer printed by code that does not name `value`, what
/// the task selects its records by (`fraud` of "the records with label=fraud"): it most
/// likely counted or added every record; `call` computes the answer exactly. The same
/// answer sent again is taken.
pub fn unselected_answer(answer: &str, value: &str, call: &str) -> String {
    format!(
        "Your answer is {answer}, but the code that printed it does not select the records by `{value}` as the task asks: it most likely counted or added every record. {} If it prints {answer} too, {answer} is the answer.",
        call_offer(call)
    )
}

/// The notice questioning an answer printed by code that pairs no records, where the
/// task asks how many pairs share their `field=` value: it most likely counted the
/// records; `call` computes the answer exactly. Sent again, the call runs in its place.
pub fn unpaired_answer(answer: &str, field: &str, call: &str) -> String {
    format!(
        "Your answer is {answer}, but the task asks for pairs of records that share their `{field}=` value, and the code that printed it pairs nothing (no count per `{field}` value with n*(n-1)/2, no combinations): it most likely counted records. {} If it prints {answer} too, {answer} is the answer.",
        call_offer(call)
    )
}

/// The notice questioning an answer written as a sentence where the task states its
/// answer's `form`: the answer alone, in that form, with `how` (`FINAL(...)`, the
/// `final_answer` call). Sent again as it is, it is taken.
pub fn answer_not_in_form(form: &str, how: &str) -> String {
    format!(
        "Your answer is a sentence, and the task says: \"{form}\" Give only the answer, in that form, with {how} — no sentence around it. If the sentence is the answer you mean, send it again as it is."
    )
}

/// The task's exact `call`, offered as a block to send.
fn call_offer(call: &str) -> String {
    format!("Change the code, or send this block; it computes the answer from `context` exactly, with no model:\n```repl\n{call}\n```")
}

/// The correction of a reply in prose, with no code and no final answer, after code
/// whose output does not end in a value the prose states: an answer in a sentence is
/// not taken, and `call`, the task's exact helper call, computes it. The local model's code printed
/// `000001 label`, and it stated a label in a sentence four times until forced
/// (docs/eval.md, final-line-seed9 js `aggregate` item 4).
pub fn answer_not_printed(call: &str) -> String {
    format!(
        "Your message had no code to run and no final answer: an answer in a sentence is not taken, and your last output does not end in a value it states. Send this block; it computes the answer from `context` exactly, with no model:\n```repl\n{call}\n```"
    )
}

/// The report of the same prose sent again after [`answer_not_printed`], with `call`
/// run in its place: the call, its `output`, and the exact `FINAL` line when the output
/// ended in one `value`.
pub fn prose_ran_instead(call: &str, output: &str, value: Option<&str>) -> String {
    format!(
        "Your message is the same answer in prose as before, with no code and no final answer. {}",
        call_ran_in_place(call, output, value)
    )
}

/// The correction of a reply with no code and no final answer after a block whose
/// output ended in `nothing` (`null`, `None` …): whatever the reply states, the code
/// found nothing, so it is a guess. Names the peek that shows how the context is
/// written, in the REPL's `language`, and what to do next — and `task_call`, the
/// helper call that answers the task exactly, where there is one.
pub fn answer_after_nothing(nothing: &str, language: &str, task_call: Option<&str>) -> String {
    let peek = match language {
        "python" => "print(context[:300])",
        _ => "console.log(context.slice(0, 300))",
    };
    format!(
        "Your message had no code to run and no final answer, and your last code printed {nothing}: it found nothing, so an answer now would be a guess. Look at how the context is written ({peek} in a ```repl block), fix the code that printed {nothing} to match it, and run it again.{}",
        task_call_offer(task_call)
    )
}

/// The form of a reply a correction was given for, in words (`a bare fence`…), for
/// the message that stops a run after repeated corrections.
pub fn misfence_form(misfence: Option<&Misfence>) -> String {
    match misfence {
        Some(Misfence::Bare) => "code in a fence without a tag".to_owned(),
        Some(Misfence::OtherLanguage(tag)) => format!("code in a ```{tag} fence"),
        Some(Misfence::ToolCall) => "a tool call, which does not run here".to_owned(),
        None => "without code or a final answer".to_owned(),
    }
}

/// Told when code came as a tool call (XML or JSON) and was run as code.
pub fn tool_call_ran_as_code(language: &str) -> String {
    format!("Your tool call was run as {language} code; there are no tool calls here. Next time write the code in a ```repl fence.")
}

/// Told when `FINAL(...)` came in the same message as code.
pub const PREMATURE_FINAL: &str = "Your FINAL(...) was written in the same message as code, before that code ran, so it was not accepted. Read the output above, then answer with FINAL(...) or FINAL_VAR(name) in a message without code.";

/// Told when a reply stopped at the model's output-token limit: nothing of it ran and
/// it was not taken as the final answer (its end, a `FINAL(` among it, is missing).
pub const TRUNCATED_REPLY: &str = "Your last reply was cut off at the output-token limit, so none of it was run and it was not taken as the final answer. Answer again, shorter: less code per reply, and a short FINAL(...) — build a long answer in a variable and give FINAL_VAR(name).";

/// Told when a reply stopped at the output-token limit while it was writing text into
/// `context`: that the context is there already, and the call that answers the task,
/// where there is one.
pub fn truncated_context_literal(context_chars: u64, task_call: Option<&str>) -> String {
    format!(
        "Your last reply was cut off at the output-token limit while it wrote text into `context`, so none of it was run. Do not copy the context into the code: `context` already holds the whole context ({context_chars} characters). Write code that reads `context` as it is.{}",
        task_call_offer(task_call)
    )
}

/// Told under `--env tools` when a reply stopped at the output-token limit.
pub const TRUNCATED_REPLY_TOOLS: &str = "Your last reply was cut off at the output-token limit, so none of its tool calls were run and it was not taken as the final answer. Answer again, shorter: fewer calls per reply, and a short FINAL(...) or final_answer.";

/// Told when `FINAL(` or `FINAL_VAR(` (`name`) was opened and never closed.
pub fn unclosed_final(name: &str) -> String {
    format!(
        "Your {name}( was never closed with `)`, so it was not taken as the final answer. Write it again, whole, with its closing parenthesis: {name}(...)."
    )
}

/// Told when a reply that did nothing wrote actions it did not take
/// ([`rlm_protocol::reply`]): what was not acted on and why (the first three), and how
/// an action is taken.
pub fn not_taken<'a>(quoted: impl IntoIterator<Item = (&'a str, &'a NotTaken)>) -> String {
    let listed: Vec<String> = quoted
        .into_iter()
        .take(3)
        .map(|(action, why)| format!("{action} ({why})"))
        .collect();
    format!(
        "Not acted on: {}. An action counts only where your reply takes it: on a line of its own, not quoted, not in a blockquote or an indented example, not described as something not to do or to do later.",
        listed.join("; ")
    )
}

/// What a reply under `--env tools` that ran nothing and answered nothing held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsMiss {
    /// Code, which does not run there.
    Code,
    /// A tool's name, but no call that could be read.
    UnreadableCall,
    /// Neither.
    Nothing,
}

/// The correction for a reply under `--env tools` that called no tool and gave no
/// final answer.
pub fn tools_correction(miss: ToolsMiss) -> String {
    let lead = match miss {
        ToolsMiss::Code => "No code runs here: you work by calling tools.",
        ToolsMiss::UnreadableCall => "Your message names a tool, but no call could be read from it: give the tool's name and its arguments as one JSON object, with plain values.",
        ToolsMiss::Nothing => "Your message called no tool and gave no final answer.",
    };
    format!("{lead} Call a tool (for example ctx_grep on `context` with a word from the task), or answer: FINAL(…) on its own line, the answer inside the parentheses.")
}

/// Told when `FINAL(...)` or `final_answer` came with other tool calls.
pub const PREMATURE_FINAL_TOOLS: &str = "Your final answer came in the same message as other tool calls, before you saw their results, so it was not accepted. Read the results, then answer in a message of its own.";

/// What the forced request says first when the iterations ran out (when the loop
/// stopped for another reason, that reason is said instead).
pub const ITERATIONS_USED: &str = "You have used every iteration.";

/// The forced request when iterations are exhausted or the loop stopped: after
/// [`ITERATIONS_USED`] or the reason it stopped.
pub const FORCE_FINAL: &str = "Do not write code. Answer now with your best answer from what you have learned, on its own line: FINAL(your answer).";

/// Sent when iterations are exhausted, or the loop stopped, under `--env tools`.
pub const FORCE_FINAL_TOOLS: &str = "Do not call any more tools except final_answer. Answer now with your best answer from what you have learned: call final_answer with it, or write FINAL(…) on its own line with the answer inside the parentheses.";

/// Sent once when the forced answer came as prose with no `FINAL(...)`: the answer
/// alone, which a caller can compare and use.
pub const FORCED_PROSE: &str = "Your reply has no FINAL line. Reply with one line only: FINAL(the answer), with just the answer inside the parentheses (the number, the word or the value the task asks for), no sentence around it.";

/// [`FORCED_PROSE`] under `--env tools`.
pub const FORCED_PROSE_TOOLS: &str = "Your reply called no final_answer. Call final_answer with just the answer (the number, the word or the value the task asks for), no sentence around it.";

/// A note for an execution that timed out or restarted the REPL, if any.
pub fn exec_notices(outcome: &ExecOutcome) -> Option<String> {
    outcome.restarted.then(|| "Note: the REPL was restarted; variables you defined are gone (context and helpers are loaded again).".to_owned())
}

fn json_quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::describe_value;

    #[test]
    fn a_value_block_is_named_on_one_line_cut_to_sixty_characters() {
        assert_eq!(one_line("[1,\n  2]", 60), "[1, 2]");
        let long = format!("[{}]", "\"Lima\", ".repeat(20));
        let shown = one_line(&long, 60);
        assert_eq!(shown.chars().count(), 62, "{shown}");
        assert!(shown.ends_with(" …"), "{shown}");
    }

    #[test]
    fn what_a_reply_did_not_take_is_named_with_why() {
        let quoted = [
            ("FINAL(…)", NotTaken::Indented),
            ("a final_answer call", NotTaken::Declined),
        ];
        insta::assert_snapshot!(not_taken(quoted.iter().map(|(a, w)| (*a, w))), @"Not acted on: FINAL(…) (it is indented as an example inside the explanation); a final_answer call (the reply says it is not to be done). An action counts only where your reply takes it: on a line of its own, not quoted, not in a blockquote or an indented example, not described as something not to do or to do later.");
    }

    #[test]
    fn a_scalar_value_block_is_offered_its_final_line() {
        let text = value_block("42", Some("42"), None);
        assert!(
            text.contains("reply with exactly this line and nothing else:\nFINAL(42)"),
            "{text}"
        );
    }

    fn info_of(text: &str) -> ContextInfo {
        describe_value(
            &serde_json::Value::String(text.to_owned()),
            "test.log".into(),
        )
    }

    #[test]
    fn a_token_becomes_a_regex_literal_body_that_keeps_dashes_plain() {
        assert_eq!(regex_of("eager-yak-46"), "eager-yak-46");
        assert_eq!(regex_of("a/b.c(d)"), r"a\/b\.c\(d\)");
    }

    #[test]
    fn skipped_directory_entries_are_named_to_the_model() {
        let mut info = info_of("text");
        info.skipped = vec!["loop (symbolic link, not followed)".into()];
        let message = first_message(
            "q",
            Some(&info),
            &Budget::default(),
            SessionState::default(),
            Access::Code,
        );
        assert!(
            message.contains("- skipped (not in `context`): loop (symbolic link, not followed)"),
            "{message}"
        );
    }

    #[test]
    fn test_prompt_no_full_context() {
        let needle = "the-secret-needle-4242";
        let context = format!("{}{needle}{}", "a".repeat(500), "b".repeat(300_000));
        let info = info_of(&context);
        let message = first_message(
            "find the needle",
            Some(&info),
            &Budget::default(),
            SessionState::default(),
            Access::Code,
        );
        assert!(!message.contains(needle));
        assert!(message.len() < 2_000, "{}", message.len());
        assert!(message.contains("300522 characters"), "{message}");
    }

    #[test]
    fn prompt_size_does_not_grow_with_the_context() {
        let small = first_message(
            "q",
            Some(&info_of(&"x".repeat(2_000))),
            &Budget::default(),
            SessionState::default(),
            Access::Code,
        );
        let large = first_message(
            "q",
            Some(&info_of(&"x".repeat(20_000_000))),
            &Budget::default(),
            SessionState::default(),
            Access::Code,
        );
        assert!(
            large.len().abs_diff(small.len()) < 600,
            "{} vs {}",
            small.len(),
            large.len()
        );
    }

    #[test]
    fn test_size_warning() {
        assert!(size_warnings(&info_of(&"x".repeat(1000))).is_empty());
        let large = size_warnings(&info_of(&"x".repeat(200 * 1024)));
        assert_eq!(large.len(), 1);
        assert!(large[0].starts_with("large"));
        let huge = size_warnings(&info_of(&"x".repeat(11 * 1024 * 1024)));
        assert!(huge[0].starts_with("requires chunking"), "{huge:?}");
        assert!(huge[1].starts_with("total size"), "{huge:?}");
    }

    #[test]
    fn test_chunking_note() {
        let message = first_message(
            "q",
            Some(&info_of(&"x".repeat(250_000))),
            &Budget::default(),
            SessionState::default(),
            Access::Code,
        );
        assert!(
            message.contains("`context_chunks` is a list view of 3 pieces"),
            "{message}"
        );
    }

    #[test]
    fn session_state_is_told_only_in_sessions() {
        let info = info_of("some text");
        let single = first_message(
            "q",
            Some(&info),
            &Budget::default(),
            SessionState::default(),
            Access::Code,
        );
        assert!(
            !single.contains("history") && !single.contains("slots"),
            "{single}"
        );
        let session = SessionState {
            history_len: 2,
            context_slots: 3,
        };
        let later = first_message("q", Some(&info), &Budget::default(), session, Access::Code);
        assert!(
            later.contains("- history: 2 earlier queries and answers are in `history`"),
            "{later}"
        );
        assert!(
            later.contains("- contexts: 3 slots") && later.contains("`context_2`"),
            "{later}"
        );
    }

    #[test]
    fn inventory_is_clip() {
        let vars: Vec<ReplVariable> = (0..30)
            .map(|i| ReplVariable {
                name: format!("v{i}"),
                type_name: "int".into(),
                size: 1,
                preview: "1".into(),
            })
            .collect();
        let state = state_block(&Budget::default(), &vars, 5);
        assert_eq!(state.lines().filter(|l| l.starts_with("- v")).count(), 5);
        assert!(state.contains("and 25 more"));
    }

    #[test]
    fn exec_report_has_the_stable_shape() {
        assert_eq!(
            exec_report("print(1)", "python", "1\n"),
            "Code executed:\n```python\nprint(1)\n```\n\nREPL output:\n1\n"
        );
    }

    #[test]
    fn human_bytes_reads_well() {
        assert_eq!(human_bytes(10), "10 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(64 << 20), "64.0 MiB");
    }
}
