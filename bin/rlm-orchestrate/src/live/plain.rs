//! Plain progress: one line per interesting event, for a stderr that is not a terminal
//! (a log file, a pipe, CI).
//!
//! Nothing is redrawn, so the lines read well in a file, and their shape is kept stable:
//! tests snapshot them. Model text that streams in (`text_delta`) is not shown here.

use std::io::{self, Write};

use rlm_orchestrator::events::{Event, EventData};
use rlm_orchestrator::format::one_line;

/// Writes the progress line of `event` (if it has one) to stderr.
pub fn print(event: &Event) {
    if let Some(line) = line(event) {
        let _ = writeln!(io::stderr().lock(), "{line}");
    }
}

/// The progress line of `event`, indented by the run's depth; `None` for events that
/// do not get one.
pub fn line(event: &Event) -> Option<String> {
    let indent = "  ".repeat(event.depth as usize);
    let line = match &event.data {
        EventData::RunStarted { task, model, .. } => {
            format!("run {} · {model} · {}", event.run_id, one_line(task, 80))
        }
        EventData::StepStarted { iteration } => format!("step {iteration}"),
        EventData::Code { code, .. } => format!("  code: {}", one_line(code, 100)),
        EventData::Exec {
            output,
            duration_ms,
            error,
            ..
        } => {
            format!(
                "  {} ({duration_ms} ms): {}",
                if *error { "error" } else { "output" },
                one_line(output, 100)
            )
        }
        EventData::LlmCall {
            purpose,
            prompt_tokens,
            completion_tokens,
            latency_ms,
            ..
        } => {
            format!("  {purpose}: {prompt_tokens}+{completion_tokens} tokens, {latency_ms} ms")
        }
        EventData::SubAgentSpawned {
            child_agent_id,
            mode,
            task,
            ..
        } => {
            format!("  {mode} {child_agent_id} started: {}", one_line(task, 80))
        }
        EventData::SubAgentFinished {
            child_agent_id,
            status,
            duration_ms,
            ..
        } => {
            format!("  sub-agent {child_agent_id} {status} after {duration_ms} ms")
        }
        EventData::CacheHit { call, .. } => format!("  {call}: answered from the cache"),
        EventData::Warning { message } => format!("warning: {message}"),
        EventData::Error { message } => format!("error: {message}"),
        EventData::Final { forced, .. } => {
            if *forced {
                "answer (forced)".to_owned()
            } else {
                "answer".to_owned()
            }
        }
        _ => return None,
    };
    Some(format!("{indent}{line}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(depth: u32, data: EventData) -> Event {
        Event {
            run_id: "r1".into(),
            depth,
            agent_id: "a".into(),
            parent_id: None,
            ts_ms: 0,
            data,
        }
    }

    #[test]
    fn lines_are_indented_by_depth_and_flattened() {
        let code = EventData::Code {
            iteration: 1,
            block: 0,
            code: "x = 1\n\n   print(x)".into(),
        };
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

    #[test]
    fn long_text_is_cut() {
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line(" a \n b ", 3), "a b");
    }
}
