//! The RLM loop (docs/loop.md): ask the model, run its code, feed real output back,
//! until it gives a final answer or the iterations or budget run out.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::accounting::Accounting;
use crate::context::ContextInfo;
use crate::env::{EnvError, Environment, FinalAnswer};
use crate::events::{
    AnswerSource, CallPurpose, CodeRecord, EventData, EventSink, ExecRecord, FinalRecord,
    TextRecord,
};
use crate::host::{record_call, Model};
use crate::output::shape_output;
use crate::parse::{parse_response, ParsedResponse};
use crate::prompt::{self, Budget, PromptFeatures, SessionState};
use crate::provider::{ChatMessage, ChatRequest, ProviderError};

/// Default `--max-iterations`.
pub const DEFAULT_MAX_ITERATIONS: u32 = 20;

/// Default `--state-vars`: variables shown in the inventory.
pub const DEFAULT_STATE_VARS: usize = 20;

/// Settings of the loop.
#[derive(Clone)]
pub struct LoopSettings {
    /// `--max-iterations`.
    pub max_iterations: u32,
    /// `--max-output-chars`.
    pub max_output_chars: usize,
    /// `--redact-ratio`.
    pub redact_ratio: f64,
    /// `--state-vars`.
    pub state_vars: usize,
    /// This run's depth.
    pub depth: u32,
    /// `--max-depth`.
    pub max_depth: u32,
    /// `--sub-context-chars` (mentioned in the system prompt).
    pub sub_context_chars: usize,
    /// `--output-schema`: SUBMIT payloads must validate.
    pub output_schema: Option<Arc<jsonschema::Validator>>,
    /// `--system-prompt`: replaces the built-in system prompt.
    pub system_prompt: Option<Arc<str>>,
    /// An external agent command is configured (the prompt advertises `spawn_agent`).
    pub agents: bool,
}

impl std::fmt::Debug for LoopSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopSettings")
            .field("max_iterations", &self.max_iterations)
            .field("depth", &self.depth)
            .field("max_depth", &self.max_depth)
            .finish_non_exhaustive()
    }
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopOutcome {
    /// The answer.
    pub answer: String,
    /// Where the answer came from.
    pub source: AnswerSource,
    /// True when the answer was forced (iterations or budget exhausted).
    pub forced: bool,
    /// Iterations that ran.
    pub iterations: u32,
    /// The SUBMIT payload, if the answer came from SUBMIT.
    pub submitted: Option<Value>,
}

/// A failure that ends the run (unlike errors in model code, which the model sees).
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// The root model could not be asked.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The REPL broke for good.
    #[error(transparent)]
    Env(#[from] EnvError),
}

/// Everything the loop works with.
pub struct LoopParts<'a> {
    /// The root model.
    pub model: &'a Model,
    /// The REPL.
    pub env: &'a mut dyn Environment,
    /// The trace.
    pub sink: &'a EventSink,
    /// Usage and budgets (shared with the host).
    pub accounting: &'a Accounting,
}

/// Runs the loop for `query` over a context described by `context` (the latest slot
/// of a session); `session` tells the model what earlier queries left in the REPL.
pub async fn run_loop(
    query: &str,
    context: Option<&ContextInfo>,
    session: SessionState,
    parts: LoopParts<'_>,
    settings: &LoopSettings,
) -> Result<LoopOutcome, LoopError> {
    let LoopParts {
        model,
        env,
        sink,
        accounting,
    } = parts;
    let tags = env.fence_tags();
    let language = tags.first().copied().unwrap_or("repl");
    let mut budget = Budget {
        iteration: 1,
        max_iterations: settings.max_iterations,
        depth: settings.depth,
        max_depth: settings.max_depth,
        tokens_used: 0,
        max_tokens: accounting.limits().max_tokens,
    };
    let mut messages = vec![
        ChatMessage::system(match &settings.system_prompt {
            Some(text) => text.to_string(),
            None => prompt::system_prompt(&env.kind().guide(PromptFeatures {
                agents: settings.agents,
                sub_context_chars: settings.sub_context_chars,
            })),
        }),
        ChatMessage::user(prompt::first_message(query, context, &budget, session)),
    ];
    let context_chars = context.map_or(0, |c| c.total_chars);
    let mut iterations = 0;
    let mut stop_reason = None;
    for iteration in 1..=settings.max_iterations {
        if let Some(reason) = accounting.exhausted() {
            stop_reason = Some(reason);
            break;
        }
        iterations = iteration;
        let step_start = Instant::now();
        sink.emit(EventData::StepStarted { iteration });
        let text = ask(
            model,
            &messages,
            sink,
            accounting,
            CallPurpose::Root,
            iteration,
        )
        .await?;
        let parsed = parse_response(&text, tags);
        if !parsed.transcript_text.is_empty() {
            sink.emit(EventData::Text(TextRecord {
                iteration,
                text: parsed.transcript_text.clone(),
            }));
        }
        messages.push(ChatMessage::assistant(
            if parsed.transcript_text.is_empty() {
                text.trim().to_owned()
            } else {
                parsed.transcript_text.clone()
            },
        ));

        let turn = run_turn(
            iteration,
            &parsed,
            env,
            sink,
            settings,
            context_chars,
            language,
        )
        .await?;
        if let Some(done) = turn.final_answer {
            sink.emit(EventData::Final(FinalRecord {
                answer: done.answer.clone(),
                forced: false,
                source: done.source,
            }));
            sink.emit(EventData::StepCompleted {
                iteration,
                duration_ms: step_start.elapsed().as_millis() as u64,
            });
            return Ok(LoopOutcome {
                iterations,
                forced: false,
                ..done
            });
        }
        let variables = env.variables().await.unwrap_or_default();
        if !parsed.blocks.is_empty() {
            sink.emit(EventData::VariablesUpdated {
                iteration,
                variables: variables.clone(),
            });
        }
        budget.iteration = iteration + 1;
        budget.tokens_used = accounting.totals().usage.total();
        messages.push(ChatMessage::user(prompt::turn_message(
            &turn.reports,
            &turn.notices,
            &budget,
            &variables,
            settings.state_vars,
        )));
        sink.emit(EventData::StepCompleted {
            iteration,
            duration_ms: step_start.elapsed().as_millis() as u64,
        });
    }
    if let Some(reason) = &stop_reason {
        sink.emit(EventData::Warning {
            message: format!("stopping: {reason}"),
        });
    }
    force_final(
        model,
        &mut messages,
        env,
        sink,
        accounting,
        tags,
        iterations,
        stop_reason,
    )
    .await
}

/// What one turn's code produced.
struct Turn {
    reports: Vec<String>,
    notices: Vec<String>,
    final_answer: Option<LoopOutcome>,
}

async fn run_turn(
    iteration: u32,
    parsed: &ParsedResponse,
    env: &mut dyn Environment,
    sink: &EventSink,
    settings: &LoopSettings,
    context_chars: u64,
    language: &str,
) -> Result<Turn, LoopError> {
    let mut turn = Turn {
        reports: Vec::new(),
        notices: Vec::new(),
        final_answer: None,
    };
    for (block, code) in parsed.blocks.iter().enumerate() {
        sink.emit(EventData::Code(CodeRecord {
            iteration,
            block,
            code: code.code.clone(),
        }));
        let outcome = env.execute(&code.code).await?;
        let shaped = shape_output(
            &outcome.combined_output(),
            settings.max_output_chars,
            context_chars,
            settings.redact_ratio,
        );
        sink.emit(EventData::Exec(ExecRecord {
            iteration,
            block,
            output: shaped.clone(),
            error: outcome.error.is_some(),
            timed_out: outcome.timed_out,
            duration_ms: outcome.duration.as_millis() as u64,
        }));
        turn.reports
            .push(prompt::exec_report(&code.code, language, &shaped));
        if let Some(notice) = prompt::exec_notices(&outcome) {
            turn.notices.push(notice);
        }
        match outcome.final_answer {
            Some(FinalAnswer::Var { value, .. }) => {
                turn.final_answer = Some(outcome_of(value, AnswerSource::FinalVar, None));
                return Ok(turn);
            }
            Some(FinalAnswer::Submit { value }) => match validate_submit(settings, &value) {
                Ok(()) => {
                    let answer = match &value {
                        Value::String(s) => s.clone(),
                        other => serde_json::to_string_pretty(other).unwrap_or_default(),
                    };
                    turn.final_answer = Some(outcome_of(answer, AnswerSource::Submit, Some(value)));
                    return Ok(turn);
                }
                Err(errors) => turn.notices.push(format!(
                    "SUBMIT was rejected: the payload does not match the output schema:\n{errors}\nFix it and call SUBMIT again."
                )),
            },
            None => {}
        }
    }
    if parsed.blocks.is_empty() {
        if let Some(answer) = &parsed.final_literal {
            turn.final_answer = Some(outcome_of(answer.clone(), AnswerSource::Final, None));
            return Ok(turn);
        }
    } else if parsed.final_literal.is_some() {
        turn.notices.push(prompt::PREMATURE_FINAL.to_owned());
    }
    if let Some(name) = &parsed.final_var {
        // Evaluated after the code of the same response ran.
        match env.final_var(name).await? {
            Some(value) => {
                turn.final_answer = Some(outcome_of(value, AnswerSource::FinalVar, None));
                return Ok(turn);
            }
            None => turn.notices.push(format!(
                "FINAL_VAR({name}) names no variable in the REPL. Define it in a ```repl block first, or answer with FINAL(...)."
            )),
        }
    }
    if parsed.blocks.is_empty() && parsed.final_var.is_none() {
        turn.notices
            .push(prompt::correction(parsed.misfence.as_ref(), language));
    }
    Ok(turn)
}

fn outcome_of(answer: String, source: AnswerSource, submitted: Option<Value>) -> LoopOutcome {
    LoopOutcome {
        answer,
        source,
        forced: false,
        iterations: 0,
        submitted,
    }
}

fn validate_submit(settings: &LoopSettings, value: &Value) -> Result<(), String> {
    let Some(schema) = &settings.output_schema else {
        return Ok(());
    };
    let errors: Vec<String> = schema
        .iter_errors(value)
        .map(|e| format!("- at {}: {e}", e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// One root-model call, accounted and traced; the text streams to the listeners as
/// transient `text_delta` events while it arrives.
async fn ask(
    model: &Model,
    messages: &[ChatMessage],
    sink: &EventSink,
    accounting: &Accounting,
    purpose: CallPurpose,
    iteration: u32,
) -> Result<String, ProviderError> {
    let request = ChatRequest {
        messages: messages.to_vec(),
        ..ChatRequest::default()
    };
    let on_delta = |delta: &str| {
        sink.emit_transient(EventData::TextDelta {
            iteration,
            delta: delta.to_owned(),
        })
    };
    let completion = model.provider.complete(&request, Some(&on_delta)).await?;
    record_call(model, &request, &completion, purpose, accounting, sink);
    Ok(completion.text)
}

#[expect(
    clippy::too_many_arguments,
    reason = "the loop's parts, passed once at the end"
)]
async fn force_final(
    model: &Model,
    messages: &mut Vec<ChatMessage>,
    env: &mut dyn Environment,
    sink: &EventSink,
    accounting: &Accounting,
    tags: &[&str],
    iterations: u32,
    stop_reason: Option<String>,
) -> Result<LoopOutcome, LoopError> {
    let mut instruction = prompt::FORCE_FINAL.to_owned();
    if let Some(reason) = &stop_reason {
        instruction = format!("Stop: {reason}. {instruction}");
    }
    messages.push(ChatMessage::user(instruction));
    let text = ask(
        model,
        messages,
        sink,
        accounting,
        CallPurpose::ForcedFinal,
        iterations + 1,
    )
    .await?;
    let parsed = parse_response(&text, tags);
    let answer = match (&parsed.final_literal, &parsed.final_var) {
        (Some(answer), _) => answer.clone(),
        (None, Some(name)) => match env.final_var(name).await? {
            Some(value) => value,
            None => parsed.transcript_text.clone(),
        },
        (None, None) => parsed.transcript_text.trim().to_owned(),
    };
    sink.emit(EventData::Final(FinalRecord {
        answer: answer.clone(),
        forced: true,
        source: AnswerSource::Forced,
    }));
    Ok(LoopOutcome {
        answer,
        source: AnswerSource::Forced,
        forced: true,
        iterations,
        submitted: None,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, VecDeque};
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::accounting::Limits;
    use crate::env::{ExecOutcome, HistoryEntry, ReplVariable};
    use crate::events::{Event, RunIdentity};
    use crate::ids::{AgentId, RunId};
    use crate::provider::{Completion, DeltaSink, Provider, Usage};

    /// Replies in order; records every request.
    struct Scripted {
        replies: Mutex<VecDeque<String>>,
        requests: Mutex<Vec<Vec<ChatMessage>>>,
    }

    #[async_trait::async_trait]
    impl Provider for Scripted {
        async fn complete(
            &self,
            request: &ChatRequest,
            _: Option<DeltaSink<'_>>,
        ) -> Result<Completion, ProviderError> {
            self.requests.lock().unwrap().push(request.messages.clone());
            let text = self
                .replies
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| "FINAL(script exhausted)".into());
            Ok(Completion {
                text,
                usage: Usage {
                    prompt_tokens: 10,
                    completion_tokens: 5,
                },
                usage_reported: true,
                model: "scripted".into(),
                latency: Duration::ZERO,
                attempts: 1,
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
    /// `final_var name` calls FINAL_VAR from code, `boom` raises.
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
        async fn push_history(&mut self, _: HistoryEntry) -> Result<(), EnvError> {
            Ok(())
        }
        async fn shutdown(&mut self) {}
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
        }
    }

    async fn run_with(replies: &[&str], settings: LoopSettings, limits: Limits) -> Harness {
        let provider = Arc::new(Scripted {
            replies: Mutex::new(replies.iter().map(|s| s.to_string()).collect()),
            requests: Mutex::new(Vec::new()),
        });
        let model = Model {
            provider: provider.clone(),
            price: None,
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
            env: &mut env,
            sink: &sink,
            accounting: &accounting,
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
            fed_back
                .contains("Code executed:\n```python\nx = 42\nprint(x)\n```\n\nREPL output:\n42\n"),
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
                "FINAL(done)",
            ],
            settings(),
            Limits::default(),
        )
        .await;
        assert_eq!(h.outcome.answer, "done");
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
            &[
                "thinking",
                "still thinking",
                "more",
                "and more",
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
    async fn a_spent_budget_forces_the_answer_early() {
        let limits = Limits {
            max_llm_calls: Some(2),
            ..Limits::default()
        };
        let h = run_with(
            &[
                "```repl\nprint(1)\n```",
                "```repl\nprint(2)\n```",
                "FINAL(cut short)",
            ],
            settings(),
            limits,
        )
        .await;
        assert!(h.outcome.forced);
        assert_eq!(h.outcome.iterations, 2);
        assert!(last_user_message(&h, 2).contains("--max-llm-calls 2"));
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
}
