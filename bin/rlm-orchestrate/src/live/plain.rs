//! Plain progress: one line per interesting event, for a stderr that is not a terminal
//! (a log file, a pipe, CI).
//!
//! Nothing is redrawn, so the lines read well in a file, and their shape is kept stable:
//! tests snapshot them. Model text that streams in (`text_delta`) is not shown here.

use std::io::{self, Write};

use rlm_orchestrator::events::{Event, EventData};
use rlm_orchestrator::format::one_line;

use crate::output::escape_controls;

/// Writes the progress line of `event` (if it has one) to stderr.
pub fn print(event: &Event) {
    if let Some(line) = line(event) {
        let _ = writeln!(io::stderr().lock(), "{line}");
    }
}

/// The progress line of `event`, indented by the run's depth; `None` for events that
/// do not get one. Terminal escapes in it (from the model, its code or its output) are
/// shown escaped. A run's `error` event gets no line: the failure is reported once,
/// when the command ends (`error: …` with its causes and hint).
pub fn line(event: &Event) -> Option<String> {
    raw_line(event).map(|line| escape_controls(&line))
}

fn raw_line(event: &Event) -> Option<String> {
    let indent = "  ".repeat(event.depth as usize);
    let line = match &event.data {
        EventData::RunStarted(started) => {
            format!(
                "run {} · {} · {}",
                event.run_id,
                started.model,
                one_line(&started.task, 80)
            )
        }
        EventData::StepStarted { iteration } => format!("step {iteration}"),
        EventData::Code(record) => format!("  code: {}", one_line(&record.code, 100)),
        EventData::Exec(exec) => {
            format!(
                "  {} ({} ms): {}",
                if exec.error { "error" } else { "output" },
                exec.duration_ms,
                one_line(&exec.output, 100)
            )
        }
        EventData::LlmCall(call) => {
            format!(
                "  {}: {}+{} tokens, {} ms",
                call.purpose, call.prompt_tokens, call.completion_tokens, call.latency_ms
            )
        }
        EventData::SubAgentSpawned(spawned) => {
            format!(
                "  {} {} started: {}",
                spawned.mode,
                spawned.child_agent_id,
                one_line(&spawned.task, 80)
            )
        }
        EventData::SubAgentFinished(finished) => {
            format!(
                "  sub-agent {} {} after {} ms",
                finished.child_agent_id, finished.status, finished.duration_ms
            )
        }
        EventData::CacheHit(hit) => format!("  {}: answered from the cache", hit.call),
        EventData::Plan(record) => match &record.stage {
            rlm_orchestrator::events::PlanStage::Priced {
                pieces,
                kept,
                calls,
                ..
            } => format!(
                "  plan {}: {pieces} pieces, {kept} kept, {calls} calls",
                record.plan_id
            ),
            rlm_orchestrator::events::PlanStage::Refused { reason } => {
                format!("  plan {} refused: {reason}", record.plan_id)
            }
            rlm_orchestrator::events::PlanStage::Leaf {
                index, duration_ms, ..
            } => {
                format!("    leaf {index} done in {duration_ms} ms")
            }
            rlm_orchestrator::events::PlanStage::Done { duration_ms, .. } => {
                format!("  plan {} done in {duration_ms} ms", record.plan_id)
            }
        },
        EventData::Compacted(record) => {
            let cut = if record.cut_steps.is_empty() {
                String::new()
            } else {
                format!(", cut steps {:?}", record.cut_steps)
            };
            format!(
                "  compacted steps {:?}{cut} to fit the window (~{} → ~{} tokens)",
                record.steps, record.tokens_before, record.tokens_after
            )
        }
        EventData::Correction(record) => format!(
            "  correction {} ({}, {}): {}",
            record.rule,
            record.hook.as_str(),
            record.verdict.as_str(),
            one_line(&record.text, 100)
        ),
        EventData::Warning { message } => format!("warning: {message}"),
        EventData::Final(record) => {
            if record.forced {
                "answer (forced)".to_owned()
            } else {
                "answer".to_owned()
            }
        }
        EventData::Text(_)
        | EventData::WindowFound(_)
        | EventData::Error { .. }
        | EventData::TextDelta { .. }
        | EventData::VariablesUpdated { .. }
        | EventData::StepCompleted { .. }
        | EventData::RunFinished(_) => return None,
    };
    Some(format!("{indent}{line}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlm_orchestrator::events::CodeRecord;
    use rlm_orchestrator::ids::{AgentId, RunId};

    fn event(depth: u32, data: EventData) -> Event {
        Event {
            run_id: RunId::from("r1"),
            depth,
            agent_id: AgentId::parse("a").unwrap(),
            parent_id: None,
            ts_ms: 0,
            data,
        }
    }

    #[test]
    fn lines_are_indented_by_depth_and_flattened() {
        let code = EventData::Code(CodeRecord {
            iteration: 1,
            block: 0,
            code: "x = 1\n\n   print(x)".into(),
        });
        assert_eq!(
            line(&event(1, code)).as_deref(),
            Some("    code: x = 1 print(x)")
        );
        let delta = EventData::TextDelta {
            iteration: 1,
            delta: "Let".into(),
        };
        assert_eq!(line(&event(0, delta)), None);
    }

    /// Seen failing before the fix: the escape reached stderr raw, and the run's error
    /// was printed here and again when the command ended.
    #[test]
    fn escapes_are_shown_and_errors_left_to_the_end() {
        let exec = EventData::Exec(rlm_orchestrator::events::ExecRecord {
            iteration: 1,
            block: 0,
            output: "\u{1b}]0;pwned\u{7}\u{1b}[2J".into(),
            error: false,
            timed_out: false,
            duration_ms: 3,
        });
        assert_eq!(
            line(&event(0, exec)).as_deref(),
            Some("  output (3 ms): \\u{1b}]0;pwned\\u{7}\\u{1b}[2J")
        );
        let error = EventData::Error {
            message: "cannot reach the model".into(),
        };
        assert_eq!(line(&event(0, error)), None);
    }

    #[test]
    fn long_text_is_cut() {
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line(" a \n b ", 3), "a b");
    }
}
