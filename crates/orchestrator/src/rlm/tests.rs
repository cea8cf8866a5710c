//! The loop against a scripted model and a fake REPL: the protocol, the hook points
//! and their order, corrections as trace events, `--corrections none`, the forced
//! answer, budgets and the deadline.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::accounting::Limits;
use crate::env::tools::ToolProtocol;
use crate::env::{CodeRepl, Environment};
use crate::env::{ExecOutcome, FinalAnswer, HistoryEntry, ReplVariable};
use crate::events::ExecRecord;
use crate::events::{Event, RunIdentity};
use crate::ids::{AgentId, RunId};
use crate::provider::ChatRequest;
use crate::provider::{Completion, DeltaSink, Provider, ToolCall, Usage};

/// The mark of a scripted reply cut at the output-token limit.
const CUT: &str = "<<cut>>";

/// Replies in order (text and tool calls); records every request.
struct Scripted {
    /// How long each reply takes to come (a model slower than a deadline).
    delay: Duration,
    /// Whether the delay blocks the thread (a reply that arrives after the deadline)
    /// instead of awaiting (a call the deadline abandons).
    blocking: bool,
    replies: Mutex<VecDeque<(String, Vec<ToolCall>)>>,
    requests: Mutex<Vec<Vec<ChatMessage>>>,
    tools_sent: Mutex<Vec<Vec<String>>>,
    required: Mutex<Vec<Option<String>>>,
}

impl Scripted {
    fn new(replies: Vec<(String, Vec<ToolCall>)>) -> Arc<Self> {
        Arc::new(Self {
            delay: Duration::ZERO,
            blocking: false,
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
            tools_sent: Mutex::new(Vec::new()),
            required: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait::async_trait]
impl Provider for Scripted {
    async fn complete(
        &self,
        request: &ChatRequest,
        _: Option<DeltaSink<'_>>,
    ) -> Result<Completion, ProviderError> {
        if self.blocking {
            // A reply already on its way: the deadline's timeout cannot cut it short
            // (it polls the call first), so it arrives after the deadline.
            std::thread::sleep(self.delay);
        } else if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        self.requests.lock().unwrap().push(request.messages.clone());
        self.tools_sent
            .lock()
            .unwrap()
            .push(request.tools.iter().map(|t| t.name.clone()).collect());
        self.required
            .lock()
            .unwrap()
            .push(request.required_tool.clone());
        let (text, tool_calls) = self
            .replies
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| ("FINAL(script exhausted)".into(), Vec::new()));
        // A reply marked `<<cut>>` stopped at the output-token limit.
        let (text, truncated) = match text.strip_prefix(CUT) {
            Some(rest) => (rest.to_owned(), true),
            None => (text, false),
        };
        Ok(Completion {
            text,
            tool_calls,
            usage: Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
            },
            usage_reported: true,
            model: "scripted".into(),
            latency: Duration::ZERO,
            attempts: 1,
            truncated,
        })
    }
    fn model(&self) -> &str {
        "scripted"
    }
    fn describe(&self) -> String {
        "scripted".into()
    }
}

/// `name = value` assigns, `print(name)` prints, `submit <json>` submits,
/// `final_var name` calls FINAL_VAR from code, `boom` raises, `raise <text>` raises
/// with `<text>` as the error, `FINAL(word)` of no variable raises a `NameError`.
#[derive(Default)]
struct FakeEnv {
    vars: HashMap<String, String>,
    executed: Vec<String>,
}

#[async_trait::async_trait]
impl Environment for FakeEnv {
    fn kind(&self) -> crate::env::EnvKind {
        crate::env::EnvKind::Python
    }
    fn system_prompt(&self, features: crate::env::PromptFeatures) -> String {
        crate::env::system_prompt(&crate::env::python::guide(features))
    }
    async fn push_history(&mut self, _: HistoryEntry) -> Result<(), EnvError> {
        Ok(())
    }
    async fn next_query(
        &mut self,
        _: &str,
        _: Option<crate::env::ContextSource>,
    ) -> Result<(), EnvError> {
        Ok(())
    }
    async fn shutdown(&mut self) {}
}

#[async_trait::async_trait]
impl CodeRepl for FakeEnv {
    fn fence_tags(&self) -> &'static [&'static str] {
        &["python"]
    }
    async fn execute(&mut self, code: &str) -> Result<ExecOutcome, EnvError> {
        self.executed.push(code.to_owned());
        let mut outcome = ExecOutcome::default();
        for line in code.lines() {
            if let Some((name, value)) = line.split_once(" = ") {
                self.vars.insert(name.trim().into(), value.trim().into());
            } else if let Some(name) = line
                .strip_prefix("print(")
                .and_then(|l| l.strip_suffix(')'))
            {
                outcome.stdout.push_str(&format!(
                    "{}\n",
                    self.vars.get(name).cloned().unwrap_or_else(|| name.into())
                ));
            } else if let Some(json) = line.strip_prefix("submit ") {
                outcome.final_answer = Some(FinalAnswer::Submit {
                    value: serde_json::from_str(json).unwrap(),
                });
            } else if let Some(name) = line.strip_prefix("final_var ") {
                let value = self.vars.get(name).cloned().unwrap_or_default();
                outcome.final_answer = Some(FinalAnswer::Var {
                    name: name.into(),
                    value,
                });
            } else if let Some(error) = line.strip_prefix("raise ") {
                outcome.error = Some(error.into());
            } else if let Some(word) = line
                .strip_prefix("FINAL(")
                .and_then(|l| l.strip_suffix(')'))
                .filter(|w| !self.vars.contains_key(*w) && !w.starts_with('"'))
            {
                outcome.error = Some(format!("NameError: name '{word}' is not defined"));
            } else if line == "boom" {
                outcome.error = Some("Traceback: boom".into());
            }
        }
        Ok(outcome)
    }
    async fn final_var(&mut self, name: &str) -> Result<Option<String>, EnvError> {
        Ok(self.vars.get(name).cloned())
    }
    async fn variables(&mut self) -> Result<Vec<ReplVariable>, EnvError> {
        Ok(self
            .vars
            .iter()
            .map(|(k, v)| ReplVariable {
                name: k.clone(),
                type_name: "str".into(),
                size: v.len() as u64,
                preview: v.clone(),
            })
            .collect())
    }
}

struct Harness {
    provider: Arc<Scripted>,
    env: FakeEnv,
    outcome: LoopOutcome,
    events: Vec<Event>,
}

fn settings() -> LoopSettings {
    LoopSettings {
        max_iterations: 4,
        max_output_chars: 1000,
        redact_ratio: 0.25,
        state_vars: 10,
        depth: 0,
        max_depth: 2,
        sub_context_chars: 10_000,
        output_schema: None,
        system_prompt: None,
        agents: false,
        tool_protocol: ToolProtocol::Native,
        corrections: Corrections::all(),
    }
}

async fn run_with(replies: &[&str], settings: LoopSettings, limits: Limits) -> Harness {
    let provider = Scripted::new(
        replies
            .iter()
            .map(|s| (s.to_string(), Vec::new()))
            .collect(),
    );
    run_scripted(provider, settings, limits).await
}

async fn run_scripted(provider: Arc<Scripted>, settings: LoopSettings, limits: Limits) -> Harness {
    let model = Model {
        provider: provider.clone(),
        price: None,
        window: std::sync::Arc::new(crate::window::ModelWindow::fixed(128_000)),
    };
    let dir = tempfile::tempdir().unwrap();
    let identity = RunIdentity {
        run_id: RunId::from("r"),
        depth: 0,
        agent_id: AgentId::parse("a").unwrap(),
        parent_id: None,
    };
    let sink = EventSink::create(dir.path(), identity, vec![]).unwrap();
    let accounting = Accounting::new(limits);
    let mut env = FakeEnv::default();
    let parts = LoopParts {
        model: &model,
        env: EnvMut::Code(&mut env),
        sink: &sink,
        accounting: &accounting,
        archive: None,
    };
    let context = crate::context::describe_value(&Value::String("x".repeat(5_000)), "t".into());
    let outcome = run_loop(
        "the task",
        Some(&context),
        SessionState::default(),
        parts,
        &settings,
    )
    .await
    .unwrap();
    let text = std::fs::read_to_string(sink.dir().join("events.jsonl")).unwrap();
    let events = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Harness {
        provider,
        env,
        outcome,
        events,
    }
}

/// `events.jsonl` of a scripted run, with times zeroed: the trace format as other
/// programs read it. Each line also round-trips through [`Event`] unchanged.
#[tokio::test]
async fn the_events_file_keeps_its_shape() {
    let h = run_with(
        &[
            "Let me look.\n```repl\nanswer = computed\nprint(answer)\n```",
            "```repl\n42\n```",
            "FINAL_VAR(answer)",
        ],
        settings(),
        Limits::default(),
    )
    .await;
    let mut lines = Vec::new();
    for event in &h.events {
        let mut value = serde_json::to_value(event).unwrap();
        let back: Event = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(&back, event);
        value["ts_ms"] = 0.into();
        for timing in ["duration_ms", "latency_ms"] {
            if value.get(timing).is_some() {
                value[timing] = 0.into();
            }
        }
        lines.push(value.to_string());
    }
    insta::assert_snapshot!(lines.join("\n"));
}

fn last_user_message(h: &Harness, request: usize) -> String {
    let requests = h.provider.requests.lock().unwrap();
    requests[request].last().unwrap().content.clone()
}

/// The correction events of a run: (rule, hook, verdict, text).
fn corrections(h: &Harness) -> Vec<(String, &'static str, &'static str, String)> {
    h.events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::Correction(c) => Some((
                c.rule.clone(),
                c.hook.as_str(),
                c.verdict.as_str(),
                c.text.clone(),
            )),
            _ => None,
        })
        .collect()
}

fn with(corrections: Corrections) -> LoopSettings {
    LoopSettings {
        corrections,
        ..settings()
    }
}

// The protocol (SPEC 4.1): not a correction, the same with every rule off.

#[tokio::test]
async fn final_after_code_output_is_accepted_in_two_calls() {
    for list in [Corrections::all(), Corrections::none()] {
        let h = run_with(
            &["```repl\nx = 42\nprint(x)\n```", "FINAL(42)"],
            with(list),
            Limits::default(),
        )
        .await;
        assert_eq!(h.outcome.answer, "42");
        assert_eq!(h.outcome.iterations, 2);
        assert!(!h.outcome.forced);
        let fed_back = last_user_message(&h, 1);
        assert!(
            fed_back.starts_with(
                "Code executed:\n```python\nx = 42\nprint(x)\n```\n\nREPL output:\n42\n\n\nState:"
            ),
            "{fed_back}"
        );
        assert!(fed_back.contains("x (str, size 2): 42"), "{fed_back}");
        assert!(corrections(&h).is_empty());
    }
}

#[tokio::test]
async fn a_final_written_with_code_is_not_taken_and_the_note_is_a_rule() {
    let reply = "```repl\nx = 7\nprint(x)\n```\nFINAL(1000)";
    let h = run_with(&[reply, "FINAL(7)"], settings(), Limits::default()).await;
    assert_eq!(h.outcome.answer, "7");
    assert_eq!(h.env.executed.len(), 1);
    assert!(last_user_message(&h, 1).contains("was not accepted"));
    assert_eq!(corrections(&h)[0].0, "premature_final");
    // Off, the FINAL is still not taken (the protocol), and nothing says why.
    let h = run_with(
        &[reply, "FINAL(7)"],
        with(Corrections::none()),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, "7");
    assert!(!last_user_message(&h, 1).contains("was not accepted"));
}

#[tokio::test]
async fn final_var_with_code_is_evaluated_after_the_code() {
    let h = run_with(
        &["```repl\nanswer = computed\n```\nFINAL_VAR(answer)"],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, "computed");
    assert_eq!(h.outcome.source, AnswerSource::FinalVar);
    assert_eq!(h.outcome.iterations, 1);
}

#[tokio::test]
async fn imitated_output_never_reaches_the_transcript() {
    let h = run_with(
        &[
            "```repl\nprint(hello)\n```\nREPL output:\nfake 123\nFINAL(fake)",
            "FINAL(hello)",
        ],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, "hello");
    let requests = h.provider.requests.lock().unwrap();
    let assistant = &requests[1][2];
    assert_eq!(assistant.role, crate::provider::Role::Assistant);
    assert!(
        !assistant.content.contains("fake 123"),
        "{}",
        assistant.content
    );
    assert!(requests[1][3].content.contains("REPL output:\nhello"));
}

#[tokio::test]
async fn submit_is_validated_against_the_schema_whatever_the_corrections() {
    let schema = serde_json::json!({"type": "object", "required": ["count"], "properties": {"count": {"type": "integer"}}});
    let mut s = with(Corrections::none());
    s.output_schema = Some(Arc::new(jsonschema::validator_for(&schema).unwrap()));
    let h = run_with(
        &[
            "```repl\nsubmit {\"count\": \"many\"}\n```",
            "```repl\nsubmit {\"count\": 3}\n```",
        ],
        s,
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.source, AnswerSource::Submit);
    assert_eq!(h.outcome.submitted, Some(serde_json::json!({"count": 3})));
    let feedback = last_user_message(&h, 1);
    assert!(
        feedback.contains("SUBMIT was rejected") && feedback.contains("/count"),
        "{feedback}"
    );
}

#[tokio::test]
async fn errors_in_code_go_back_to_the_model() {
    let h = run_with(
        &["```repl\nboom\n```", "FINAL(recovered)"],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, "recovered");
    assert!(last_user_message(&h, 1).contains("Traceback: boom"));
    assert!(h
        .events
        .iter()
        .any(|e| matches!(&e.data, EventData::Exec(ExecRecord { error: true, .. }))));
}

#[tokio::test]
async fn dumping_the_context_is_redacted() {
    let big = "y".repeat(2_500);
    let h = run_with(
        &[&format!("```repl\nd = {big}\nprint(d)\n```"), "FINAL(x)"],
        with(Corrections::none()),
        Limits::default(),
    )
    .await;
    assert!(last_user_message(&h, 1).contains("[redacted: output too large]"));
}

// The hook points: their order, and every fired rule an event with the exact text.

#[tokio::test]
async fn the_hooks_are_asked_in_turn_order_and_each_fired_rule_is_an_event() {
    // One reply: a FINAL beside code (on_reply), a block of only a value (before_block),
    // a bare FINAL(word) that fails (after_block), and then an answer the protocol takes.
    let h = run_with(
        &[
            "```repl\n42\n```\n```repl\nFINAL(loyalty)\n```\nFINAL(1)",
            "FINAL(done)",
        ],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, "done");
    let fired = corrections(&h);
    let order: Vec<(&str, &str, &str)> = fired
        .iter()
        .map(|(rule, hook, verdict, _)| (rule.as_str(), *hook, *verdict))
        .collect();
    assert_eq!(
        order,
        [
            ("premature_final", "on_reply", "note"),
            ("value_block", "before_block", "refuse"),
            ("bare_final", "after_block", "note"),
        ]
    );
    // The text of each event is exactly what the model read next.
    let sent = last_user_message(&h, 1);
    for (_, _, _, text) in &fired {
        assert!(sent.contains(text.as_str()), "{text}\n---\n{sent}");
    }
    // The refused block did not run; the other did.
    assert_eq!(h.env.executed, ["FINAL(loyalty)"]);
}

#[tokio::test]
async fn the_first_refusal_wins_and_the_notes_before_it_join() {
    // A reply that did nothing but write an indented FINAL: not_taken notes it, then
    // no_action refuses it; both texts go to the model, the refusal first.
    let h = run_with(
        &[
            "I would answer:\n\n    FINAL(42)\n\nbut not yet.",
            "FINAL(42)",
        ],
        settings(),
        Limits::default(),
    )
    .await;
    let fired = corrections(&h);
    let rules: Vec<&str> = fired.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(rules, ["not_taken", "no_action"]);
    let sent = last_user_message(&h, 1);
    let refusal = sent.find(fired[1].3.as_str()).unwrap();
    let note = sent.find(fired[0].3.as_str()).unwrap();
    assert!(refusal < note, "{sent}");
}

#[tokio::test]
async fn corrections_none_sends_only_the_output_and_the_state() {
    let replies = [
        "thinking",
        "```repl\n42\n```",
        "```\nprint(1)\n```",
        "FINAL(ok)",
    ];
    let all = run_with(&replies, settings(), Limits::default()).await;
    let none = run_with(&replies, with(Corrections::none()), Limits::default()).await;
    assert_eq!(all.outcome.answer, "ok");
    assert_eq!(none.outcome.answer, "ok");
    assert_eq!(corrections(&all).len(), 3);
    assert!(corrections(&none).is_empty());
    assert!(
        last_user_message(&none, 1).starts_with("State:"),
        "{}",
        last_user_message(&none, 1)
    );
    assert!(last_user_message(&all, 1).starts_with("Your message had no code"));
    // Off, the value block runs like any code.
    assert_eq!(none.env.executed, ["42"]);
    assert!(all.env.executed.is_empty());
}

#[tokio::test]
async fn a_list_switches_on_only_the_rules_it_names() {
    let h = run_with(
        &["thinking", "```repl\n42\n```", "FINAL(ok)"],
        with(Corrections::from_names("value_block").unwrap()),
        Limits::default(),
    )
    .await;
    let rules: Vec<String> = corrections(&h).into_iter().map(|c| c.0).collect();
    assert_eq!(rules, ["value_block"]);
}

// The rules in the loop.

#[tokio::test]
async fn a_cut_reply_runs_nothing_with_truncated_reply_and_runs_without_it() {
    let cut = format!("{CUT}```repl\nx = 1\nprint(x)\n```\nFINAL(4");
    let h = run_with(&[&cut, "FINAL(1)"], settings(), Limits::default()).await;
    assert!(h.env.executed.is_empty());
    assert!(last_user_message(&h, 1).starts_with("Your last reply was cut off"));
    let h = run_with(
        &[&cut, "FINAL(1)"],
        with(Corrections::none()),
        Limits::default(),
    )
    .await;
    assert_eq!(h.env.executed.len(), 1);
    assert!(last_user_message(&h, 1).starts_with("Code executed:"));
}

#[tokio::test]
async fn misfenced_replies_get_corrections_naming_the_fence() {
    let h = run_with(
        &[
            "```text\nFINAL(no)\n```",
            "<tool_call>{\"name\": \"ctx_grep\"}</tool_call>",
            "```\nprint(1)\n```",
            "FINAL(yes)",
        ],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, "yes");
    assert!(last_user_message(&h, 1).contains("```text blocks do not run here"));
    assert!(last_user_message(&h, 2).contains("no native tool calls"));
    assert!(last_user_message(&h, 3).contains("fence without a tag"));
}

#[tokio::test]
async fn the_same_code_runs_twice_then_is_refused_and_three_refusals_force_an_answer() {
    let search = "```repl\nprint(search)\n```";
    let mut s = settings();
    s.max_iterations = 10;
    let h = run_with(
        &[search, search, search, search, search, "FINAL(none found)"],
        s,
        Limits::default(),
    )
    .await;
    assert_eq!(h.env.executed.len(), 2);
    let third = last_user_message(&h, 3);
    assert!(
        third.contains("Code not run: the same code already ran 2 times.")
            && third.contains("If search is your answer"),
        "{third}"
    );
    assert!(h.outcome.forced);
    assert_eq!(h.outcome.iterations, 5);
    let forced = last_user_message(&h, 5);
    assert!(
        forced.contains("the same correction (repeat_limit) again"),
        "{forced}"
    );
    assert!(!forced.contains("every iteration"), "{forced}");
}

#[tokio::test]
async fn code_that_sets_context_to_a_literal_is_not_run() {
    let copied = "```python\ncontext = \"xxxxx\"\nprint(len(context))\n```";
    let h = run_with(&[copied, "FINAL(5000)"], settings(), Limits::default()).await;
    assert!(h.env.executed.is_empty());
    assert!(last_user_message(&h, 1).contains("replaces `context` with text written into the code"));
}

#[tokio::test]
async fn an_error_message_sent_back_as_code_is_not_run() {
    let h = run_with(
        &[
            "```python\nraise NameError: name 'x' is not defined (cell 1)\n```",
            "```python\nNameError: name 'x' is not defined (cell 2)\n```",
            "FINAL(x)",
        ],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.env.executed.len(), 1, "{:?}", h.env.executed);
    assert!(last_user_message(&h, 2).contains("copied back"));
}

// The forced answer.

#[tokio::test]
async fn iterations_run_out_into_a_forced_answer() {
    let h = run_with(
        // Refusals between code that runs (the same refusal three times in a row would
        // stop the run before the iterations run out).
        &[
            "thinking",
            "```repl\nprint(1)\n```",
            "more",
            "```repl\nprint(2)\n```",
            "FINAL(best guess)",
        ],
        settings(),
        Limits::default(),
    )
    .await;
    assert!(h.outcome.forced);
    assert_eq!(h.outcome.answer, "best guess");
    assert_eq!(h.outcome.iterations, 4);
    assert!(last_user_message(&h, 4).contains("You have used every iteration"));
}

#[tokio::test]
async fn a_forced_answer_in_a_fence_is_read_as_the_final_it_holds() {
    let note = "```repl\nprint(1)\n```";
    for (forced, answer) in [
        ("```repl\nFINAL(33)\n```", "33"),
        ("```python\nFINAL_VAR(x)\n```", "7"),
        ("```python\nFINAL(x)\n```", "7"),
        ("```python\nFINAL(billing)\n```", "billing"),
    ] {
        let h = run_with(
            &["```python\nx = 7\n```", note, note, "still", forced],
            settings(),
            Limits::default(),
        )
        .await;
        assert!(h.outcome.forced);
        assert_eq!(h.outcome.answer, answer, "{forced}");
    }
}

#[tokio::test]
async fn a_forced_reply_in_prose_is_asked_again_only_with_forced_retry() {
    let step = "```repl\nprint(1)\n```";
    let replies = [step, step, "a", "b", "The answer is 12.", "FINAL(12)"];
    let h = run_with(&replies, settings(), Limits::default()).await;
    assert_eq!(h.outcome.answer, "12");
    assert_eq!(h.provider.requests.lock().unwrap().len(), 6);
    let fired = corrections(&h);
    assert_eq!(
        fired.last().map(|f| (f.0.as_str(), f.1)),
        Some(("forced_retry", "on_forced"))
    );
    let h = run_with(&replies, with(Corrections::none()), Limits::default()).await;
    assert_eq!(h.outcome.answer, "The answer is 12.");
    assert_eq!(h.provider.requests.lock().unwrap().len(), 5);
}

#[tokio::test]
async fn a_forced_reply_that_sends_a_block_that_ran_answers_with_its_value_and_runs_nothing() {
    let count = "```python\nn = 46\nprint(n)\n```";
    let other = "```python\nprint(1)\n```";
    let h = run_with(
        &[count, other, "a", other, count],
        settings(),
        Limits::default(),
    )
    .await;
    assert!(h.outcome.forced);
    assert_eq!(h.outcome.answer, "46");
    assert_eq!(h.env.executed.len(), 3, "the forced reply runs nothing");
    assert_eq!(h.provider.requests.lock().unwrap().len(), 5);
}

#[tokio::test]
async fn a_spent_budget_forces_the_answer_early() {
    let limits = Limits {
        max_llm_calls: Some(2),
        ..Limits::default()
    };
    let h = run_with(
        &[
            "```repl\nprint(1)\n```",
            "The answer, I think, is cut short.",
            "FINAL(asked again)",
        ],
        settings(),
        limits,
    )
    .await;
    assert!(h.outcome.forced);
    assert_eq!(h.outcome.iterations, 1);
    assert!(last_user_message(&h, 1).contains("--max-llm-calls 2"));
    // The forced reply in prose is not asked again: no call is left for it.
    assert_eq!(h.provider.requests.lock().unwrap().len(), 2);
    assert_eq!(h.outcome.answer, "The answer, I think, is cut short.");
    assert!(h.events.iter().any(|e| matches!(
        &e.data,
        EventData::Warning { message } if message.contains("was not asked again")
    )));
}

/// A model whose replies come after the run's deadline (`--max-time` 500 ms): each
/// arrives a second after it was asked, past the timeout that would abandon a call
/// still under way.
fn slow_model(replies: &[&str]) -> Arc<Scripted> {
    let provider = Scripted::new(
        replies
            .iter()
            .map(|s| (s.to_string(), Vec::new()))
            .collect(),
    );
    let mut slow = Arc::try_unwrap(provider).ok().unwrap();
    slow.delay = Duration::from_millis(1_000);
    slow.blocking = true;
    Arc::new(slow)
}

#[tokio::test]
async fn a_reply_after_the_deadline_runs_nothing_and_the_run_ends() {
    let limits = Limits {
        max_time: Some(Duration::from_millis(500)),
        ..Limits::default()
    };
    let provider = slow_model(&["```repl\nprint(1)\n```", "FINAL(late)"]);
    let h = run_scripted(provider, settings(), limits).await;
    assert!(h.env.executed.is_empty(), "{:?}", h.env.executed);
    assert!(h.outcome.forced);
    assert_eq!(h.outcome.answer, "late");
    assert_eq!(h.outcome.iterations, 1);
    assert!(last_user_message(&h, 1).contains("--max-time"));
}

#[tokio::test]
async fn an_answer_after_the_deadline_is_still_taken() {
    let limits = Limits {
        max_time: Some(Duration::from_millis(500)),
        ..Limits::default()
    };
    let h = run_scripted(slow_model(&["FINAL(42)"]), settings(), limits).await;
    assert!(!h.outcome.forced);
    assert_eq!(h.outcome.answer, "42");
    assert_eq!(h.provider.requests.lock().unwrap().len(), 1);
}

// The tools medium, with the real `tools` environment over a real store.

mod tools_medium {
    use super::*;
    use crate::env::tools::{ToolsEnv, ToolsOptions};
    use crate::env::{ContextShape, ContextSource, EnvConfig};
    use crate::host::{Host, HostCall, HostError};
    use crate::provider::Role;
    use rlm_context_store::{SetOptions, Store};
    use serde_json::json;

    /// Every host call fails: these tests call no sub-model.
    struct NoHost;

    #[async_trait::async_trait]
    impl Host for NoHost {
        async fn call(&self, call: HostCall) -> Result<Value, HostError> {
            Err(HostError::RespondToModel(format!("no {}", call.method())))
        }
    }

    struct ToolHarness {
        provider: Arc<Scripted>,
        outcome: LoopOutcome,
        events: Vec<Event>,
    }

    impl ToolHarness {
        fn request(&self, n: usize) -> Vec<ChatMessage> {
            self.provider.requests.lock().unwrap()[n].clone()
        }

        fn exec_outputs(&self) -> Vec<(String, bool)> {
            self.events
                .iter()
                .filter_map(|e| match &e.data {
                    EventData::Exec(exec) => Some((exec.output.clone(), exec.error)),
                    _ => None,
                })
                .collect()
        }
    }

    fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.to_string(),
        }
    }

    fn haystack() -> String {
        let mut text = String::new();
        for i in 0..2_000 {
            text.push_str(&format!("line {i}: all quiet\n"));
        }
        text.push_str("line 2000: the vault code is 7291\n");
        text
    }

    async fn run_tools(
        replies: Vec<(String, Vec<ToolCall>)>,
        settings: LoopSettings,
    ) -> ToolHarness {
        let provider = Scripted::new(replies);
        let model = Model {
            provider: provider.clone(),
            price: None,
            window: std::sync::Arc::new(crate::window::ModelWindow::fixed(128_000)),
        };
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .set("ctx", json!(haystack()), SetOptions::default())
            .unwrap();
        let config = EnvConfig {
            data_dir: dir.path().to_owned(),
            context: Some(ContextSource {
                shape: ContextShape::Single,
                files: vec![store.path_of("ctx").unwrap()],
                keys: vec!["ctx".into()],
                chunk_chars: 100_000,
                chars: None,
                max_char: None,
                referenced: Vec::new(),
            }),
            query: "q".into(),
            history: Vec::new(),
            exec_timeout: Duration::from_secs(5),
            depth: 0,
            max_depth: 2,
            sub_context_chars: 10_000,
            lazy_above: None,
        };
        let mut env = ToolsEnv::start(config, Arc::new(NoHost), ToolsOptions::default()).unwrap();
        let identity = RunIdentity {
            run_id: RunId::from("r"),
            depth: 0,
            agent_id: AgentId::parse("a").unwrap(),
            parent_id: None,
        };
        let sink = EventSink::create(dir.path(), identity, vec![]).unwrap();
        let accounting = Accounting::new(Limits::default());
        let context = crate::context::describe_value(&Value::String(haystack()), "t".into());
        let outcome = run_loop(
            "what is the vault code?",
            Some(&context),
            SessionState::default(),
            LoopParts {
                model: &model,
                env: EnvMut::Tools(&mut env),
                sink: &sink,
                accounting: &accounting,
                archive: None,
            },
            &settings,
        )
        .await
        .unwrap();
        let text = std::fs::read_to_string(sink.dir().join("events.jsonl")).unwrap();
        let events = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        ToolHarness {
            provider,
            outcome,
            events,
        }
    }

    #[tokio::test]
    async fn native_calls_run_in_order_and_answer_by_id() {
        let h = run_tools(
            vec![
                (
                    "Searching.".into(),
                    vec![
                        call("a1", "ctx_length", json!({"variable": "context"})),
                        call(
                            "a2",
                            "ctx_grep",
                            json!({"variable": "context", "pattern": "vault"}),
                        ),
                    ],
                ),
                (
                    String::new(),
                    vec![call("b1", "final_answer", json!({"answer": "7291"}))],
                ),
            ],
            settings(),
        )
        .await;
        assert_eq!(h.outcome.answer, "7291");
        assert_eq!(h.outcome.source, AnswerSource::FinalAnswerTool);
        assert_eq!(h.outcome.iterations, 2);
        let sent = h.provider.tools_sent.lock().unwrap().clone();
        assert_eq!(
            sent[0],
            [
                "ctx_length",
                "ctx_grep",
                "ctx_slice",
                "ctx_summarize",
                "ctx_map_reduce",
                "ctx_split",
                "ctx_filter",
                "ctx_map",
                "ctx_reduce",
                "final_answer"
            ]
        );
        let second = h.request(1);
        let tail: Vec<&ChatMessage> = second.iter().skip(2).collect();
        assert_eq!(tail[0].role, Role::Assistant);
        assert_eq!(tail[0].tool_calls.len(), 2);
        assert_eq!(tail[1].role, Role::Tool);
        assert_eq!(tail[1].tool_call_id.as_deref(), Some("a1"));
        assert!(
            tail[1].content.starts_with("context: 40924 characters"),
            "{}",
            tail[1].content
        );
        assert_eq!(tail[2].tool_call_id.as_deref(), Some("a2"));
        assert!(
            tail[2]
                .content
                .contains("offset 40890 (line 2001): line 2000: the vault code is 7291"),
            "{}",
            tail[2].content
        );
        assert_eq!(tail[3].role, Role::User);
        // The grep of "vault", a word of the task, found its line: nothing but the
        // state follows (no note read from the task's words).
        assert!(
            tail[3].content.starts_with("State: iteration 2 of 4"),
            "{}",
            tail[3].content
        );
    }

    #[tokio::test]
    async fn text_calls_are_answered_in_text_and_no_tools_are_sent() {
        let h = run_tools(
            vec![
                (
                    "```tool\n{\"tool\": \"ctx_grep\", \"arguments\": {\"variable\": \"context\", \"pattern\": \"vault code\"}}\n```".into(),
                    Vec::new(),
                ),
                ("The code is in line 2000.\nFINAL(7291)".into(), Vec::new()),
            ],
            LoopSettings {
                tool_protocol: ToolProtocol::Text,
                ..settings()
            },
        )
        .await;
        assert_eq!(h.outcome.answer, "7291");
        assert_eq!(h.outcome.source, AnswerSource::Final);
        assert!(h.provider.tools_sent.lock().unwrap()[0].is_empty());
        let system = &h.request(0)[0].content;
        assert!(system.contains("```tool"), "{system}");
        let fed_back = h.request(1).last().unwrap().content.clone();
        assert!(
            fed_back.starts_with(
                "Result of ctx_grep({\"pattern\":\"vault code\",\"variable\":\"context\"}):\n1 line of context matches"
            ),
            "{fed_back}"
        );
    }

    #[tokio::test]
    async fn calls_written_as_text_on_a_native_endpoint_still_run() {
        let h = run_tools(
            vec![
                ("ctx_slice(\"context\", 40880, 40924)".into(), Vec::new()),
                ("FINAL(7291)".into(), Vec::new()),
            ],
            settings(),
        )
        .await;
        assert_eq!(h.outcome.answer, "7291");
        let outputs = h.exec_outputs();
        assert_eq!(outputs.len(), 1);
        assert!(
            outputs[0].0.contains("the vault code is 7291"),
            "{outputs:?}"
        );
        assert!(h.request(1).iter().all(|m| m.role != Role::Tool));
    }

    #[tokio::test]
    async fn early_answers_are_refused_and_silence_is_corrected() {
        let h = run_tools(
            vec![
                ("I will just answer.".into(), Vec::new()),
                (
                    "{\"name\": \"ctx_slice\", \"arguments\": {\"start\": 5, \"end\": x}}".into(),
                    Vec::new(),
                ),
                (
                    "FINAL(1234)".into(),
                    vec![call(
                        "c1",
                        "ctx_grep",
                        json!({"variable": "context", "pattern": "vault"}),
                    )],
                ),
                (
                    String::new(),
                    vec![
                        call(
                            "d1",
                            "ctx_slice",
                            json!({"variable": "context", "start": 0, "end": 10}),
                        ),
                        call("d2", "final_answer", json!({"answer": "guess"})),
                    ],
                ),
                ("FINAL(7291)".into(), Vec::new()),
            ],
            LoopSettings {
                max_iterations: 6,
                ..settings()
            },
        )
        .await;
        assert_eq!(h.outcome.answer, "7291");
        assert_eq!(h.outcome.iterations, 5);
        let corrected = h.request(1).last().unwrap().content.clone();
        assert!(
            corrected.starts_with("Your message called no tool"),
            "{corrected}"
        );
        let unreadable = h.request(2).last().unwrap().content.clone();
        assert!(
            unreadable.starts_with("Your message names a tool, but no call could be read"),
            "{unreadable}"
        );
        let refused = h.request(3).last().unwrap().content.clone();
        assert!(
            refused.starts_with("Your final answer came in the same message"),
            "{refused}"
        );
        let fifth = h.request(4);
        let refused_call = fifth
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some("d2"))
            .unwrap();
        assert!(refused_call.is_error && refused_call.content.contains("not accepted"));
    }

    #[tokio::test]
    async fn out_of_iterations_a_final_answer_call_is_taken() {
        let grep = || {
            vec![call(
                "g",
                "ctx_grep",
                json!({"variable": "context", "pattern": "quiet"}),
            )]
        };
        let h = run_tools(
            vec![
                (String::new(), grep()),
                (String::new(), grep()),
                (String::new(), grep()),
                (String::new(), grep()),
                (
                    String::new(),
                    vec![call("f", "final_answer", json!({"answer": "not found"}))],
                ),
            ],
            settings(),
        )
        .await;
        assert!(h.outcome.forced);
        assert_eq!(h.outcome.answer, "not found");
        let outputs = h.exec_outputs();
        assert_eq!(outputs.len(), 4);
        assert!(
            outputs[2]
                .0
                .starts_with("Call not run: the same call already ran 2 times."),
            "{outputs:?}"
        );
        // A refused call did not run: the next refusal counts the same two runs and
        // quotes their result, never the refusal before it.
        let again = &outputs[3].0;
        assert!(
            again.starts_with("Call not run: the same call already ran 2 times.")
                && again.matches("Call not run").count() == 1
                && again.contains("quiet"),
            "{again}"
        );
        let last = h.request(4).last().unwrap().content.clone();
        assert!(last.contains("Do not call any more tools"), "{last}");
        let required = h.provider.required.lock().unwrap().clone();
        assert_eq!(required[..4], [None, None, None, None]);
        assert_eq!(required[4].as_deref(), Some("final_answer"));
    }
}
