//! Keeping the root conversation inside the model's window (docs/windows.md).
//!
//! Before each request the loop calls [`History::fit`]. When the conversation, with
//! room kept for the answer, would not fit the window, the older steps' longest
//! messages are cut in the middle first, longest first, so that a short result stays
//! whole while long ones shrink; only when that is not enough do the oldest steps leave
//! the conversation, each replaced by a one-line record — what was run, what it found,
//! which variables it made — in the first user message. The system prompt and the task
//! with the context's metadata always stay, and the last step too unless nothing else
//! helps: its longest message is cut in the middle, and only when that is not enough (a
//! window barely larger than the task) does it become a record as well. The full text
//! of every step cut or compacted is handed back to the loop, which keeps it in the
//! trace and in a store variable the model can read.

use serde_json::{json, Value};

use crate::format::one_line;
use crate::provider::{ChatMessage, ChatRequest, Role, TokenEstimator, ToolSpec};

/// Characters of each part of a record (what ran, what it found).
const RECORD_PART_CHARS: usize = 160;
/// Records shown one per line; older ones are counted on one line.
const RECORDS_SHOWN: usize = 12;
/// No message is cut below this many characters (the older steps' nor the last's).
const MIN_CUT_CHARS: usize = 400;

/// One step of the conversation: the messages of an iteration, from the model's reply
/// to the message that fed its results back.
#[derive(Debug, Clone)]
struct Span {
    iteration: u32,
    /// Index in the conversation of the step's first message.
    start: usize,
    /// Variables the step made (names the model did not have before it).
    made: Vec<String>,
    /// Whether the step's full text is already archived (it was cut before).
    archived: bool,
}

/// What one call of [`History::fit`] did.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Compaction {
    /// The iterations whose steps were compacted.
    pub iterations: Vec<u32>,
    /// Estimated prompt tokens before and after.
    pub tokens_before: u64,
    /// Estimated prompt tokens after.
    pub tokens_after: u64,
    /// Characters cut from long messages to make it fit (0: none).
    pub cut_chars: usize,
    /// The iterations whose messages were cut in the middle (older steps first, then
    /// the last).
    pub cut_steps: Vec<u32>,
    /// The compacted steps, whole: `{iteration, messages: [{role, content}]}` each.
    pub archived: Vec<Value>,
}

/// The conversation's steps and the records of those compacted.
#[derive(Debug)]
pub(super) struct History {
    /// The first user message as first written (the records follow it).
    first_message: String,
    /// Steps still in the conversation, oldest first.
    spans: Vec<Span>,
    /// One line per compacted step.
    records: Vec<String>,
    /// Where the compacted steps' full text is kept (named in the records' header).
    archive_key: Option<String>,
}

/// The conversation does not fit even with every step compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the system prompt and the task (with the records of any compacted steps) take about {needed} tokens, over the {budget} tokens the model's window leaves before the answer's room; shorten the task or --system-prompt, or use a model with a larger window (--context-window, if the server's is larger than rlm thinks)")]
pub struct WindowTooSmall {
    /// Estimated tokens of what must stay.
    pub needed: u64,
    /// Tokens the window leaves for the prompt.
    pub budget: u64,
}

impl History {
    /// A conversation whose first user message is `first_message`; compacted steps are
    /// said to be kept in the store variable `archive_key`, when there is one.
    pub(super) fn new(first_message: &str, archive_key: Option<String>) -> Self {
        Self {
            first_message: first_message.to_owned(),
            spans: Vec::new(),
            records: Vec::new(),
            archive_key,
        }
    }

    /// Marks the start of iteration `iteration`'s step at message index `start`.
    pub(super) fn begin_step(&mut self, iteration: u32, start: usize) {
        self.spans.push(Span {
            iteration,
            start,
            made: Vec::new(),
            archived: false,
        });
    }

    /// Notes the variables the current step made.
    pub(super) fn made(&mut self, names: Vec<String>) {
        if let Some(span) = self.spans.last_mut() {
            span.made = names;
        }
    }

    /// Makes `messages` (sent with `tools`) fit `budget` estimated tokens: cuts the
    /// older steps' longest messages, then compacts the oldest steps (all but the
    /// last), then cuts the last step's longest messages. `Ok(None)` when it already fit.
    pub(super) fn fit(
        &mut self,
        messages: &mut Vec<ChatMessage>,
        tools: &[ToolSpec],
        budget: u64,
        estimator: &TokenEstimator,
    ) -> Result<Option<Compaction>, WindowTooSmall> {
        let estimate = |messages: &[ChatMessage]| {
            estimator.request_tokens(&ChatRequest {
                messages: messages.to_vec(),
                tools: tools.to_vec(),
                ..ChatRequest::default()
            })
        };
        let tokens_before = estimate(messages);
        if tokens_before <= budget {
            return Ok(None);
        }
        let mut compaction = Compaction {
            iterations: Vec::new(),
            tokens_before,
            tokens_after: tokens_before,
            cut_chars: 0,
            cut_steps: Vec::new(),
            archived: Vec::new(),
        };
        self.cut_older_steps(messages, budget, &estimate, &mut compaction);
        while self.spans.len() > 1 && estimate(messages) > budget {
            let span = self.spans.remove(0);
            let end = self.spans[0].start;
            let removed: Vec<ChatMessage> = messages.drain(span.start..end).collect();
            for later in &mut self.spans {
                later.start -= removed.len();
            }
            self.records.push(record(&span, &removed));
            compaction.iterations.push(span.iteration);
            if !span.archived {
                compaction.archived.push(archive(span.iteration, &removed));
            }
            self.rewrite_first(messages);
        }
        if estimate(messages) > budget {
            if let Some(start) = self.spans.last().map(|s| s.start) {
                let indices = (start..messages.len()).collect();
                let cuts = cut_longest(messages, indices, budget, &estimate, CutTo::Excess, "");
                if !cuts.is_empty() {
                    compaction.cut_chars +=
                        cuts.iter().map(|c| c.chars_cut(messages)).sum::<usize>();
                    compaction
                        .cut_steps
                        .extend(self.spans.last().map(|s| s.iteration));
                }
            }
        }
        if estimate(messages) > budget {
            // Even cut, the last step does not fit beside the task: it becomes a record
            // too, rather than the run failing.
            if let Some(span) = self.spans.pop() {
                let removed: Vec<ChatMessage> = messages.drain(span.start..).collect();
                self.records.push(record(&span, &removed));
                compaction.iterations.push(span.iteration);
                compaction.archived.push(archive(span.iteration, &removed));
                self.rewrite_first(messages);
            }
        }
        compaction.tokens_after = estimate(messages);
        if compaction.tokens_after > budget {
            let kept = messages.len().min(2);
            return Err(WindowTooSmall {
                needed: estimate(&messages[..kept]),
                budget,
            });
        }
        Ok(Some(compaction))
    }

    /// Cuts the middle of the longest messages of the steps before the last, longest
    /// first, each down to [`MIN_CUT_CHARS`], until the conversation fits: a long result
    /// read long ago gives way before a short one leaves with its step. Each step cut is
    /// archived whole first, once.
    fn cut_older_steps(
        &mut self,
        messages: &mut [ChatMessage],
        budget: u64,
        estimate: &dyn Fn(&[ChatMessage]) -> u64,
        compaction: &mut Compaction,
    ) {
        let (Some(first), Some(last)) = (self.spans.first(), self.spans.last()) else {
            return;
        };
        let older = (first.start..last.start).collect();
        let where_kept = match &self.archive_key {
            Some(key) => format!("; the step's whole text is in `{key}`"),
            None => String::new(),
        };
        let cuts = cut_longest(messages, older, budget, estimate, CutTo::Floor, &where_kept);
        let older_spans = self.spans.len() - 1;
        for cut in &cuts {
            compaction.cut_chars += cut.chars_cut(messages);
            let Some(slot) = self.spans[..older_spans]
                .iter()
                .rposition(|span| span.start <= cut.index)
            else {
                continue;
            };
            let end = self.spans[slot + 1].start;
            let span = &mut self.spans[slot];
            if !compaction.cut_steps.contains(&span.iteration) {
                compaction.cut_steps.push(span.iteration);
            }
            if !span.archived {
                span.archived = true;
                // The step as it was: its messages, those cut this time as they were.
                let mut whole = messages[span.start..end].to_vec();
                for earlier in cuts.iter().filter(|c| (span.start..end).contains(&c.index)) {
                    whole[earlier.index - span.start].content = earlier.original.clone();
                }
                compaction.archived.push(archive(span.iteration, &whole));
            }
        }
    }

    /// The first user message: as written, then the records of the compacted steps.
    fn rewrite_first(&self, messages: &mut [ChatMessage]) {
        let Some(first) = messages.get_mut(1) else {
            return;
        };
        let mut text = self.first_message.clone();
        let where_kept = match &self.archive_key {
            Some(key) => format!("; their full text is in the store variable `{key}`"),
            None => String::new(),
        };
        text.push_str(&format!(
            "\n\nEarlier steps, compacted to fit the model's window (what ran → what it found){where_kept}:\n"
        ));
        let hidden = self.records.len().saturating_sub(RECORDS_SHOWN);
        if hidden > 0 {
            text.push_str(&format!("- {hidden} earlier steps, not listed\n"));
        }
        for line in &self.records[hidden..] {
            text.push_str(line);
            text.push('\n');
        }
        first.content = text;
    }
}

/// How far [`cut_longest`] cuts each message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CutTo {
    /// To what the excess over the budget asks (the last step: the model has not read
    /// it yet, so as much of it stays as fits).
    Excess,
    /// To [`MIN_CUT_CHARS`] at once (older steps, read already: one cut each, not a
    /// little more on every later request, each cut changing the prompt's prefix).
    Floor,
}

/// One message cut by [`cut_longest`].
#[derive(Debug)]
struct Cut {
    /// Its index in the conversation.
    index: usize,
    /// Its text before the cut.
    original: String,
}

impl Cut {
    /// Characters the cut took out of the message, less the marker it left.
    fn chars_cut(&self, messages: &[ChatMessage]) -> usize {
        let now = messages[self.index].content.chars().count();
        self.original.chars().count().saturating_sub(now)
    }
}

/// Cuts the middle of the longest of `cuttable` (indices into `messages`), one message
/// at a time, each as `to` says but never below [`MIN_CUT_CHARS`], until the
/// conversation fits or none is left longer than twice that; `where_kept` ends the
/// marker left in the cut. Returns the messages cut, in the order cut.
fn cut_longest(
    messages: &mut [ChatMessage],
    mut cuttable: Vec<usize>,
    budget: u64,
    estimate: &dyn Fn(&[ChatMessage]) -> u64,
    to: CutTo,
    where_kept: &str,
) -> Vec<Cut> {
    let mut cuts = Vec::new();
    // Each pass cuts one message for good, so the passes end.
    loop {
        let over = estimate(messages).saturating_sub(budget);
        if over == 0 {
            return cuts;
        }
        let longest = cuttable
            .iter()
            .copied()
            .enumerate()
            .max_by_key(|&(_, i)| messages[i].content.chars().count())
            .filter(|&(_, i)| messages[i].content.chars().count() > 2 * MIN_CUT_CHARS);
        let Some((slot, index)) = longest else {
            return cuts;
        };
        cuttable.remove(slot);
        let chars = messages[index].content.chars().count();
        let keep = match to {
            CutTo::Floor => MIN_CUT_CHARS,
            // What the excess takes, and a little more for the marker.
            CutTo::Excess => {
                let ratio = estimator_ratio(estimate, &messages[index]);
                let excess = ((over as f64 * ratio).ceil() as usize).saturating_add(200);
                chars.saturating_sub(excess).max(MIN_CUT_CHARS)
            }
        };
        let cut = cut_middle(&messages[index].content, keep, where_kept);
        let original = std::mem::replace(&mut messages[index].content, cut);
        cuts.push(Cut { index, original });
    }
}

/// Characters per estimated token of `message` (for sizing a cut).
fn estimator_ratio(estimate: &dyn Fn(&[ChatMessage]) -> u64, message: &ChatMessage) -> f64 {
    let tokens = estimate(std::slice::from_ref(message)).max(1);
    let chars = message.content.chars().count().max(1);
    chars as f64 / tokens as f64
}

/// `text` cut to about `keep` characters: its start and end, with a marker between
/// that ends with `where_kept`.
fn cut_middle(text: &str, keep: usize, where_kept: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= keep {
        return text.to_owned();
    }
    let head = keep * 2 / 3;
    let tail = keep - head;
    let removed = chars.len() - head - tail;
    let mut out: String = chars[..head].iter().collect();
    out.push_str(&format!(
        "\n[… {removed} characters cut here to fit the model's window{where_kept} …]\n"
    ));
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// One line for a compacted step: what ran, what it found, what it made. What a record
/// keeps is chosen by position (its first characters), never by the task's words.
fn record(span: &Span, messages: &[ChatMessage]) -> String {
    let mut ran = Vec::new();
    let mut found = Vec::new();
    for message in messages {
        match message.role {
            Role::Assistant if !message.tool_calls.is_empty() => {
                for call in &message.tool_calls {
                    ran.push(format!("{}({})", call.name, call.arguments.trim()));
                }
            }
            Role::Assistant => ran.extend(code_of(&message.content)),
            Role::Tool => found.push(message.content.clone()),
            Role::User => found.extend(results_of(&message.content)),
            Role::System => {}
        }
    }
    let ran = if ran.is_empty() {
        "no code".to_owned()
    } else {
        one_line(&ran.join(" ; "), RECORD_PART_CHARS)
    };
    let found = if found.is_empty() {
        "nothing".to_owned()
    } else {
        one_line(&found.join(" | "), RECORD_PART_CHARS)
    };
    let made = if span.made.is_empty() {
        String::new()
    } else {
        format!(
            "; made {}",
            one_line(&span.made.join(", "), RECORD_PART_CHARS)
        )
    };
    format!("- step {}: {ran} → {found}{made}", span.iteration)
}

/// The code of a reply's fenced blocks, or its text when it has none.
fn code_of(reply: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut inside: Option<String> = None;
    for line in reply.lines() {
        let fence = line.trim_start().starts_with("```");
        match (&mut inside, fence) {
            (None, true) => inside = Some(String::new()),
            (Some(code), true) => {
                blocks.push(std::mem::take(code));
                inside = None;
            }
            (Some(code), false) => {
                if !code.is_empty() {
                    code.push_str("; ");
                }
                code.push_str(line.trim());
            }
            (None, false) => {}
        }
    }
    if let Some(code) = inside.filter(|c| !c.is_empty()) {
        blocks.push(code);
    }
    if blocks.is_empty() && !reply.trim().is_empty() {
        blocks.push(format!("(said) {}", reply.trim()));
    }
    blocks
}

/// What a message feeding results back reported: each block's output or each call's
/// result, else its notices (the state block is left out).
fn results_of(message: &str) -> Vec<String> {
    let body = message.split("\n\nState: ").next().unwrap_or(message);
    let body = body.strip_prefix("State: ").map_or(body, |_| "");
    let mut results = Vec::new();
    for part in body.split("\n\nCode executed:") {
        if let Some((_, output)) = part.split_once("REPL output:\n") {
            results.push(output.trim().to_owned());
        } else if let Some((_, result)) = part
            .split_once(":\n")
            .filter(|(label, _)| label.starts_with("Result of") || label.starts_with("Error from"))
        {
            results.push(result.trim().to_owned());
        } else if !part.trim().is_empty() && !part.trim_start().starts_with("Code executed:") {
            results.push(part.trim().to_owned());
        }
    }
    results
}

/// A compacted step, whole, for the trace and the store.
fn archive(iteration: u32, messages: &[ChatMessage]) -> Value {
    json!({
        "iteration": iteration,
        "messages": messages.iter().map(|m| json!({
            "role": m.role,
            "content": m.content,
            "tool_calls": m.tool_calls,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(code: &str, output: &str) -> [ChatMessage; 2] {
        [
            ChatMessage::assistant(format!("Let me look.\n```repl\n{code}\n```")),
            ChatMessage::user(format!(
                "Code executed:\n```python\n{code}\n```\n\nREPL output:\n{output}\n\nState: iteration 2 of 20 · depth 0 of 1 · tokens used 10\nYour variables: none yet\n"
            )),
        ]
    }

    /// A conversation of `steps` steps of `output_chars` characters of output each.
    fn conversation(steps: u32, output_chars: usize) -> (Vec<ChatMessage>, History) {
        let mut messages = vec![
            ChatMessage::system("You are an RLM."),
            ChatMessage::user("Task: count the apples."),
        ];
        let mut history = History::new("Task: count the apples.", Some("run-1-history".into()));
        for iteration in 1..=steps {
            history.begin_step(iteration, messages.len());
            messages.extend(step(
                &format!("print(context.count('apple{iteration}'))"),
                &format!("{iteration}{}", "x".repeat(output_chars)),
            ));
            history.made(vec![format!("hits_{iteration}")]);
        }
        (messages, history)
    }

    #[test]
    fn a_conversation_that_fits_is_left_alone() {
        let (mut messages, mut history) = conversation(3, 100);
        let before = messages.clone();
        let fitted = history.fit(&mut messages, &[], 10_000, &TokenEstimator::default());
        assert_eq!(fitted, Ok(None));
        assert_eq!(messages, before);
    }

    #[test]
    fn the_older_steps_long_results_are_cut_before_any_step_leaves() {
        let (mut messages, mut history) = conversation(6, 3_000);
        let compaction = history
            .fit(&mut messages, &[], 3_000, &TokenEstimator::default())
            .unwrap()
            .expect("it did not fit");
        assert!(compaction.tokens_before > 3_000 && compaction.tokens_after <= 3_000);
        assert!(compaction.iterations.is_empty(), "{compaction:?}");
        assert!(!compaction.cut_steps.is_empty());
        assert!(
            compaction.cut_steps.iter().all(|&i| i < 6),
            "the last step stays whole"
        );
        assert!(compaction.cut_chars > 0);
        // Every step still has its reply and its results; the cut ones say where the
        // rest is, and are archived whole, once each.
        assert_eq!(messages.len(), 2 + 2 * 6);
        assert_eq!(compaction.archived.len(), compaction.cut_steps.len());
        for &iteration in &compaction.cut_steps {
            let results = &messages[2 * iteration as usize + 1].content;
            assert!(
                results.contains("cut here to fit the model's window; the step's whole text is in `run-1-history`"),
                "{results}"
            );
            assert!(results.starts_with("Code executed:"), "the start stays");
            assert!(results.contains("Your variables"), "the end stays");
        }
        let archived = compaction.archived[0]["messages"][1]["content"]
            .as_str()
            .unwrap();
        assert!(archived.contains(&"x".repeat(3_000)));
        assert!(messages
            .last()
            .unwrap()
            .content
            .contains(&"x".repeat(3_000)));
    }

    #[test]
    fn a_short_result_stays_whole_while_long_ones_are_cut() {
        let mut messages = vec![
            ChatMessage::system("You are an RLM."),
            ChatMessage::user("Task: find the number."),
        ];
        let mut history = History::new("Task: find the number.", None);
        history.begin_step(1, messages.len());
        let found = format!("offset 5120: the number is 4417 {}", "y".repeat(200));
        messages.extend(step("grep('number')", &found));
        for iteration in 2..=8 {
            history.begin_step(iteration, messages.len());
            messages.extend(step(
                &format!("print(context[{iteration}000:{iteration}000+2000])"),
                &"z".repeat(2_000),
            ));
        }
        let compaction = history
            .fit(&mut messages, &[], 2_500, &TokenEstimator::default())
            .unwrap()
            .unwrap();
        assert!(compaction.iterations.is_empty(), "{compaction:?}");
        assert!(!compaction.cut_steps.contains(&1), "{compaction:?}");
        assert!(
            messages[3].content.contains(&found),
            "the short result is whole"
        );
        assert!(messages[5].content.contains("characters cut here"));
    }

    #[test]
    fn the_oldest_steps_become_records_when_cutting_is_not_enough() {
        let (mut messages, mut history) = conversation(12, 3_000);
        let estimator = TokenEstimator::default();
        let compaction = history
            .fit(&mut messages, &[], 1_500, &estimator)
            .unwrap()
            .expect("it did not fit");
        assert!(compaction.tokens_before > 1_500 && compaction.tokens_after <= 1_500);
        assert!(!compaction.iterations.is_empty());
        assert_eq!(compaction.iterations[0], 1, "the oldest leave first");
        // A step cut and then compacted is archived once.
        let mut archived: Vec<u64> = compaction
            .archived
            .iter()
            .map(|a| a["iteration"].as_u64().unwrap())
            .collect();
        archived.sort_unstable();
        let before = archived.len();
        archived.dedup();
        assert_eq!(archived.len(), before, "{archived:?}");
        assert_eq!(messages[0].content, "You are an RLM.");
        let first = &messages[1].content;
        assert!(first.starts_with("Task: count the apples."), "{first}");
        assert!(first.contains("`run-1-history`"), "{first}");
        assert!(
            first.contains("- step 1: print(context.count('apple1')) → 1xxx"),
            "{first}"
        );
        assert!(first.contains("; made hits_1"), "{first}");
        assert!(
            !first.contains("State:"),
            "the state block is not a finding: {first}"
        );
        assert!(messages.last().unwrap().content.contains("apple12"));
    }

    #[test]
    fn a_step_cut_by_one_fit_and_compacted_by_a_later_is_archived_once() {
        let (mut messages, mut history) = conversation(6, 3_000);
        let estimator = TokenEstimator::default();
        let first = history
            .fit(&mut messages, &[], 3_000, &estimator)
            .unwrap()
            .unwrap();
        let second = history
            .fit(&mut messages, &[], 1_000, &estimator)
            .unwrap()
            .unwrap();
        assert!(!second.iterations.is_empty());
        let mut iterations: Vec<u64> = first
            .archived
            .iter()
            .chain(&second.archived)
            .map(|a| a["iteration"].as_u64().unwrap())
            .collect();
        let all = iterations.len();
        iterations.sort_unstable();
        iterations.dedup();
        assert_eq!(iterations.len(), all, "{iterations:?}");
    }

    #[test]
    fn a_last_step_too_long_for_the_window_is_cut_in_the_middle() {
        let (mut messages, mut history) = conversation(2, 30_000);
        let compaction = history
            .fit(&mut messages, &[], 4_000, &TokenEstimator::default())
            .unwrap()
            .unwrap();
        assert_eq!(compaction.iterations, [1]);
        assert!(compaction.cut_chars > 0);
        assert!(compaction.tokens_after <= 4_000);
        let last = &messages.last().unwrap().content;
        assert!(last.contains("characters cut here to fit the model's window"));
        assert!(last.starts_with("Code executed:"), "the start stays");
        assert!(last.contains("Your variables"), "the end stays");
    }

    #[test]
    fn a_last_step_that_cannot_be_cut_enough_becomes_a_record_too() {
        let mut messages = vec![
            ChatMessage::system("s".repeat(2_100)),
            ChatMessage::user("Task: count."),
        ];
        let mut history = History::new("Task: count.", None);
        history.begin_step(1, messages.len());
        // An output too short to cut (under 800 characters), too long to keep.
        messages.extend(step("print(len(context))", &"x".repeat(500)));
        // System and task take ~720 tokens; the step's ~250 more do not fit 900.
        let compaction = history
            .fit(&mut messages, &[], 900, &TokenEstimator::default())
            .unwrap()
            .unwrap();
        assert_eq!(compaction.iterations, [1]);
        assert_eq!(compaction.cut_chars, 0);
        assert_eq!(messages.len(), 2);
        assert!(messages[1]
            .content
            .contains("- step 1: print(len(context)) → xxxx"));
    }

    #[test]
    fn a_task_too_long_for_the_window_is_an_error_naming_the_sizes() {
        let mut messages = vec![
            ChatMessage::system("s".repeat(3_000)),
            ChatMessage::user("t".repeat(3_000)),
        ];
        let mut history = History::new(&messages[1].content.clone(), None);
        let error = history
            .fit(&mut messages, &[], 1_000, &TokenEstimator::default())
            .unwrap_err();
        assert_eq!(error.budget, 1_000);
        assert!(error.needed > 1_900, "{error:?}");
        assert!(error.to_string().contains("--context-window"));
    }

    #[test]
    fn many_records_are_bounded() {
        let (mut messages, mut history) = conversation(30, 600);
        history
            .fit(&mut messages, &[], 1_600, &TokenEstimator::default())
            .unwrap()
            .unwrap();
        let first = &messages[1].content;
        assert!(first.contains("earlier steps, not listed"), "{first}");
        assert_eq!(first.matches("- step ").count(), RECORDS_SHOWN);
    }

    #[test]
    fn tool_steps_record_their_calls_and_results() {
        let span = Span {
            iteration: 3,
            start: 2,
            made: Vec::new(),
            archived: false,
        };
        let call = crate::provider::ToolCall {
            id: "c1".into(),
            name: "ctx_grep".into(),
            arguments: r#"{"variable":"context","pattern":"apple"}"#.into(),
        };
        let messages = [
            ChatMessage::assistant_calls("", vec![call]),
            ChatMessage::tool_result("c1", "line 4: an apple", false),
            ChatMessage::user("State: iteration 4 of 20"),
        ];
        let line = record(&span, &messages);
        assert_eq!(
            line,
            r#"- step 3: ctx_grep({"variable":"context","pattern":"apple"}) → line 4: an apple"#
        );
    }
}
