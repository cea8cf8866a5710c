//! The loop against a scripted model and a fake REPL.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use super::*;
use crate::accounting::Limits;
use crate::env::{ExecOutcome, FinalAnswer, HistoryEntry, ReplVariable};
use crate::events::ExecRecord;
use crate::events::{Event, RunIdentity};
use crate::ids::{AgentId, RunId};
use crate::provider::{Completion, DeltaSink, Provider, ToolCall, Usage};

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
            truncated: false,
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
/// with `<text>` as the error.
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
            "```repl\nboom\n```",
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

#[tokio::test]
async fn final_after_code_output_is_accepted() {
    let h = run_with(
        &["```repl\nx = 42\nprint(x)\n```", "FINAL(42)"],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, "42");
    assert_eq!(h.outcome.iterations, 2);
    assert!(!h.outcome.forced);
    let fed_back = last_user_message(&h, 1);
    assert!(
        fed_back.contains("Code executed:\n```python\nx = 42\nprint(x)\n```\n\nREPL output:\n42\n"),
        "{fed_back}"
    );
    assert!(
        fed_back.contains("x (str, size 2): 42"),
        "inventory missing: {fed_back}"
    );
}

#[tokio::test]
async fn final_written_with_code_is_refused_and_the_code_runs() {
    let h = run_with(
        &["```repl\nx = 7\nprint(x)\n```\nFINAL(1000)", "FINAL(7)"],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, "7");
    assert_eq!(h.env.executed.len(), 1);
    assert!(last_user_message(&h, 1).contains("was not accepted"));
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
async fn final_in_a_fence_is_not_an_answer() {
    let h = run_with(
        &["```text\nFINAL(no)\n```", "FINAL(yes)"],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, "yes");
    assert!(last_user_message(&h, 1).contains("```text blocks do not run here"));
}

#[tokio::test]
async fn tool_call_blobs_and_bare_fences_get_corrections() {
    let h = run_with(
        &[
            "<tool_call>{\"name\": \"ctx_grep\"}</tool_call>",
            "```\nprint(1)\n```",
            "FINAL(ok)",
        ],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, "ok");
    assert!(last_user_message(&h, 1).contains("no native tool calls"));
    assert!(last_user_message(&h, 2).contains("fence without a tag"));
}

#[tokio::test]
async fn submit_is_validated_against_the_schema() {
    let schema = serde_json::json!({"type": "object", "required": ["count"], "properties": {"count": {"type": "integer"}}});
    let mut s = settings();
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
async fn iterations_run_out_into_a_forced_answer() {
    let h = run_with(
        // Four replies that run nothing, in changing forms (the same form three times
        // in a row would stop the run before the iterations run out).
        &[
            "thinking",
            "```\nprint(1)\n```",
            "more",
            "```text\nnotes\n```",
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
    assert!(h
        .events
        .iter()
        .any(|e| matches!(&e.data, EventData::Final(FinalRecord { forced: true, .. }))));
}

#[tokio::test]
async fn a_forced_answer_written_in_a_fence_is_read_as_the_final_it_holds() {
    // after-echo-seed6, js `aggregate` item 0: forced, the model answered
    // "```repl\nFINAL(33)\n```", which was taken whole, fence and all.
    let value = "```python\n[1]\n```";
    let h = run_with(
        &[value, value, value, "```repl\nFINAL(33)\n```"],
        settings(),
        Limits::default(),
    )
    .await;
    assert!(h.outcome.forced);
    assert_eq!(h.outcome.answer, "33");
    let h = run_with(
        &[
            "```python\nx = 7\n```",
            value,
            value,
            value,
            "```python\nFINAL_VAR(x)\n```",
        ],
        settings(),
        Limits::default(),
    )
    .await;
    assert!(h.outcome.forced);
    assert_eq!(h.outcome.answer, "7");
    // `FINAL(x)` in a fence passes the variable, as it would have run; a word that
    // names no variable is the answer as written.
    for (forced, answer) in [
        ("```python\nFINAL(x)\n```", "7"),
        ("```python\nFINAL(billing)\n```", "billing"),
    ] {
        let h = run_with(
            &["```python\nx = 7\n```", value, value, value, forced],
            settings(),
            Limits::default(),
        )
        .await;
        assert!(h.outcome.forced);
        assert_eq!(h.outcome.answer, answer);
    }
}

#[tokio::test]
async fn a_forced_answer_in_a_sentence_is_asked_once_for_the_answer_alone() {
    // head-seed13 js `aggregate` item 4: forced, the model answered "The label that
    // appears in the most records of the context is \"billing\"." — the right label,
    // taken whole as the answer. Asked once more, it writes the FINAL line.
    let value = "```python\n[1]\n```";
    let sentence = "The label that appears in the most records of the context is \"billing\".";
    let h = run_with(
        &[value, value, value, sentence, "FINAL(billing)"],
        settings(),
        Limits::default(),
    )
    .await;
    assert!(h.outcome.forced);
    assert_eq!(h.outcome.answer, "billing");
    assert_eq!(h.provider.requests.lock().unwrap().len(), 5);
    assert_eq!(last_user_message(&h, 4), prompt::FORCED_PROSE);
    // Prose again: the first sentence is the answer, with a warning.
    let h = run_with(
        &[value, value, value, sentence, "It is billing, as I said."],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, sentence);
    assert!(h.events.iter().any(|e| matches!(
        &e.data,
        EventData::Warning { message } if message.contains("came twice with no FINAL")
    )));
    // A bare value is the answer as written, with no request more.
    let h = run_with(
        &[value, value, value, "billing", "FINAL(never asked)"],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, "billing");
    assert_eq!(h.provider.requests.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn a_forced_reply_that_sends_a_block_that_ran_again_answers_with_its_value() {
    // s18b-seed15 js `aggregate` item 3: the count printed 46 twice, the same block was
    // sent until forced, and then as the forced answer, taken whole, fence and all.
    let count = "```python\nn = 46\nprint(n)\n```";
    let h = run_with(
        &[count, count, count, count, count],
        settings(),
        Limits::default(),
    )
    .await;
    assert!(h.outcome.forced);
    assert_eq!(h.outcome.answer, "46");
    assert_eq!(
        h.provider.requests.lock().unwrap().len(),
        5,
        "no request more"
    );
    assert!(h.events.iter().any(|e| matches!(
        &e.data,
        EventData::Warning { message } if message.contains("code that ran before and printed 46")
    )));
    // A block that never ran is no answer: asked once for the FINAL line.
    let h = run_with(
        &[
            count,
            count,
            count,
            count,
            "```python\nprint(m)\n```",
            "FINAL(46)",
        ],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.outcome.answer, "46");
    assert_eq!(h.provider.requests.lock().unwrap().len(), 6);
}

#[tokio::test]
async fn the_same_code_runs_twice_then_is_shown_again_and_a_loop_is_forced_to_answer() {
    let search = "```repl\nprint(search(context, 'vault code'))\n```";
    let mut s = settings();
    s.max_iterations = 10;
    let h = run_with(
        &[search, search, search, search, search, "FINAL(none found)"],
        s,
        Limits::default(),
    )
    .await;
    // Run twice; the third to fifth are not run (the model sees the output it had),
    // and three such replies in a row end the loop before the iterations run out.
    assert_eq!(h.env.executed.len(), 2);
    let third = last_user_message(&h, 3);
    assert!(
        third.contains("Code not run: the same code already ran 2 times.")
            && third.contains("Its output was:"),
        "{third}"
    );
    assert!(h.outcome.forced);
    assert_eq!(h.outcome.iterations, 5);
    assert_eq!(h.outcome.answer, "none found");
    let forced = last_user_message(&h, 5);
    assert!(
        forced.contains("again code that already ran twice, after 2 corrections"),
        "{forced}"
    );
    // The loop stopped with iterations left: the request does not say they ran out.
    assert!(!forced.contains("every iteration"), "{forced}");
}

#[tokio::test]
async fn the_same_code_sent_after_it_printed_a_value_is_shown_the_line_that_answers() {
    let count = "```python\nprint(51)\n```";
    let h = run_with(
        &[count, count, count, "FINAL(51)"],
        settings(),
        Limits::default(),
    )
    .await;
    assert_eq!(h.env.executed.len(), 2);
    let third = last_user_message(&h, 3);
    assert!(
        third.contains("Code not run: the same code already ran 2 times.")
            && third.contains(
                "If 51 is your answer, reply with exactly this line and nothing else:\nFINAL(51)"
            ),
        "{third}"
    );
    assert!(!h.outcome.forced);
    assert_eq!(h.outcome.answer, "51");
}

#[tokio::test]
async fn the_same_code_printing_the_same_value_again_is_followed_by_the_final_line() {
    // The head-seed9 reading: code that printed the answer, sent again. The second run
    // printed the same and says so with the FINAL line; the first run says nothing.
    let count = "```python\nprint(51)\n```";
    let h = run_with(&[count, count, "FINAL(51)"], settings(), Limits::default()).await;
    assert_eq!(h.env.executed.len(), 2);
    let first = last_user_message(&h, 1);
    assert!(!first.contains("FINAL("), "{first}");
    let second = last_user_message(&h, 2);
    assert!(
        second.contains("The same code printed 51 before")
            && second
                .contains("reply with exactly this line and nothing else:\nFINAL(51)\n\nState:"),
        "{second}"
    );
    assert!(!h.outcome.forced);
    assert_eq!(h.outcome.answer, "51");
}

#[tokio::test]
async fn code_that_sets_context_to_a_literal_is_not_run_and_the_rest_of_it_runs_after() {
    let copied = "```python\ncontext = \"xxxxx\"\nprint(len(context))\n```";
    let fixed = "```python\nprint(len(context))\n```";
    let h = run_with(
        &[copied, fixed, "FINAL(5000)"],
        settings(),
        Limits::default(),
    )
    .await;
    // Only the block without the assignment ran; the model was told why and what
    // `context` holds.
    assert_eq!(h.env.executed, vec!["print(len(context))".to_owned()]);
    let second = last_user_message(&h, 1);
    assert!(
        second.contains("Code not run: its line\ncontext = \"xxxxx\"\nreplaces `context`")
            && second.contains("the whole context (5000 characters)")
            && second.contains("Remove that line"),
        "{second}"
    );
    assert!(!h.outcome.forced);
    assert_eq!(h.outcome.answer, "5000");
}

#[tokio::test]
async fn a_block_of_only_a_value_is_not_run_and_offered_as_the_answer_line() {
    let value = "```python\n172\n```";
    let h = run_with(&[value, "FINAL(172)"], settings(), Limits::default()).await;
    assert!(h.env.executed.is_empty(), "{:?}", h.env.executed);
    let second = last_user_message(&h, 1);
    assert!(
        second.contains("Code not run: it is only a value written into the code")
            && second.contains(
                "If 172 is your answer, reply with exactly this line and nothing else:\nFINAL(172)"
            ),
        "{second}"
    );
    assert!(!h.outcome.forced);
    assert_eq!(h.outcome.answer, "172");
}

#[tokio::test]
async fn three_replies_of_only_a_value_end_in_a_forced_answer() {
    let array = "```python\n[['Lima', 'Accra']]\n```";
    let h = run_with(
        &[array, array, array, "FINAL(2)"],
        settings(),
        Limits::default(),
    )
    .await;
    assert!(h.env.executed.is_empty(), "{:?}", h.env.executed);
    assert!(h.outcome.forced);
    assert!(
        last_user_message(&h, 3).contains("again code that is only a value, after 2 corrections"),
        "{}",
        last_user_message(&h, 3)
    );
}

#[tokio::test]
async fn an_error_message_sent_back_as_code_is_not_run_and_three_end_in_a_forced_answer() {
    let raises = "```python\nraise NameError: name 'x' is not defined (cell 1)\n```";
    let echo =
        |cell: u32| format!("```python\nNameError: name 'x' is not defined (cell {cell})\n```");
    let (first, second, third) = (echo(2), echo(3), echo(4));
    let h = run_with(
        &[raises, &first, &second, &third, "FINAL(0)"],
        settings(),
        Limits::default(),
    )
    .await;
    // Only the block that raised ran; each echo, with its changed number, was refused.
    assert_eq!(h.env.executed.len(), 1, "{:?}", h.env.executed);
    let refused = last_user_message(&h, 2);
    assert!(
        refused.contains("Code not run: it is the REPL's error message (`NameError: name 'x' is not defined (cell 2)`) copied back"),
        "{refused}"
    );
    assert!(h.outcome.forced);
    assert!(
        last_user_message(&h, 4)
            .contains("again an error message sent as code, after 2 corrections"),
        "{}",
        last_user_message(&h, 4)
    );
}

#[tokio::test]
async fn a_spent_budget_forces_the_answer_early() {
    let limits = Limits {
        max_llm_calls: Some(2),
        ..Limits::default()
    };
    // One step, then the forced answer: the budget holds the forced answer's call.
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
    // Issue 49, item 4: --max-time must end a run while a reply is handled, too.
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
        settings(),
        Limits::default(),
    )
    .await;
    assert!(last_user_message(&h, 1).contains("[redacted: output too large]"));
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
        // The grep of "vault", a word of the task, found its line: the notice to
        // answer, then the state.
        assert!(
            tail[3].content.starts_with(
                "Your grep of \"vault\", which the task names, found the lines above."
            ) && tail[3].content.contains("\n\nState: iteration 2 of 4"),
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
                .starts_with("This call repeats an earlier call"),
            "{outputs:?}"
        );
        let last = h.request(4).last().unwrap().content.clone();
        assert!(last.contains("Do not call any more tools"), "{last}");
        let required = h.provider.required.lock().unwrap().clone();
        assert_eq!(required[..4], [None, None, None, None]);
        assert_eq!(required[4].as_deref(), Some("final_answer"));
    }
}
