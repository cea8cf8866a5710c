//! From the files of one run directory to a [`RunSummary`] and a [`RunTrace`].
//!
//! A finished run's summary comes from `summary.json` plus the first event (which
//! holds the task). A run without a usable summary — still going, crashed, torn — is
//! added up from its events; its descendants' totals are then rolled up from the other
//! run directories ([`roll_up`]), the way the run itself would have accounted them.

use std::collections::HashMap;
use std::path::Path;

use super::read::{self, SummaryFile};
use super::{
    agent_prompt, RunSummary, RunTrace, Step, StepItem, SubAgent, SummarySource, TraceProblem,
    STATUS_RUNNING, STATUS_UNKNOWN,
};
use crate::events::{CallTally, Event, EventData};
use crate::provider::Usage;

/// Deepest nesting followed when rolling up totals (a guard against cycles).
const MAX_ROLL_UP_DEPTH: usize = 64;

/// A run's header before its descendants are added in.
pub(crate) struct Header {
    summary: RunSummary,
    /// Set when the totals were added up from the events.
    derived: Option<Derived>,
}

/// What a run without a summary did itself, and which sub-agents it started.
struct Derived {
    calls: CallTally,
    /// Child agent ids, with the usage their `sub_agent_finished` reported.
    children: Vec<(String, Option<Usage>)>,
    /// Totals from `run_finished` (which win over sums of events).
    finished: Option<(Usage, Option<f64>)>,
}

/// Reads the header of the run in `dir`, recording what could not be used.
pub(crate) fn read_header(run_id: &str, dir: &Path, problems: &mut Vec<TraceProblem>) -> Header {
    if let Some(file) = read::read_summary(dir, problems) {
        let first = read::read_first_event(dir, problems);
        return Header {
            summary: from_summary(run_id, dir, file, first.as_ref()),
            derived: None,
        };
    }
    let events = read::read_events(dir, problems);
    derive(run_id, dir, &events)
}

fn from_summary(run_id: &str, dir: &Path, file: SummaryFile, first: Option<&Event>) -> RunSummary {
    let started = first.and_then(read::started_fields);
    RunSummary {
        run_id: file.run_id.unwrap_or_else(|| run_id.to_owned()),
        dir: dir.to_owned(),
        agent_id: file.agent_id.or_else(|| first.map(|e| e.agent_id.clone())),
        parent_id: file
            .parent_id
            .or_else(|| first.and_then(|e| e.parent_id.clone())),
        depth: file.depth.or(first.map(|e| e.depth)).unwrap_or(0),
        task: started.map(|(task, _, _)| task.to_owned()),
        model: started.map(|(_, model, _)| model.to_owned()),
        started_ms: first
            .map(|e| e.ts_ms)
            .or_else(|| read::time_from_run_id(run_id)),
        status: file.status.unwrap_or_else(|| STATUS_UNKNOWN.to_owned()),
        answer: file.answer,
        error: file.error,
        iterations: file.iterations.unwrap_or(0),
        llm_calls: file.llm_calls.unwrap_or(0),
        sub_agents: file.sub_agents.unwrap_or(0),
        usage: file.usage.unwrap_or_default(),
        cost_usd: file.cost_usd,
        duration_ms: file.duration_ms,
        source: SummarySource::Summary,
        pid: started.map(|(_, _, pid)| pid),
    }
}

/// Adds up a run from its events.
fn derive(run_id: &str, dir: &Path, events: &[Event]) -> Header {
    let first = events.first();
    let mut summary = RunSummary {
        run_id: first.map_or_else(|| run_id.to_owned(), |e| e.run_id.clone()),
        dir: dir.to_owned(),
        agent_id: first.map(|e| e.agent_id.clone()),
        parent_id: first.and_then(|e| e.parent_id.clone()),
        depth: first.map_or(0, |e| e.depth),
        task: None,
        model: None,
        started_ms: first
            .map(|e| e.ts_ms)
            .or_else(|| read::time_from_run_id(run_id)),
        status: String::new(),
        answer: None,
        error: None,
        iterations: 0,
        llm_calls: 0,
        sub_agents: 0,
        usage: Usage::default(),
        cost_usd: None,
        duration_ms: None,
        source: SummarySource::Events,
        pid: None,
    };
    let mut derived = Derived {
        calls: CallTally::default(),
        children: Vec::new(),
        finished: None,
    };
    let mut ended: Option<String> = None;
    for event in events {
        match &event.data {
            EventData::RunStarted {
                task, model, pid, ..
            } => {
                summary.task = Some(task.clone());
                summary.model = Some(model.clone());
                summary.pid = Some(*pid);
                summary.started_ms = Some(event.ts_ms);
            }
            EventData::StepStarted { iteration } => {
                summary.iterations = summary.iterations.max(*iteration);
            }
            data @ EventData::LlmCall { .. } => {
                derived.calls.add(data);
            }
            EventData::SubAgentSpawned { child_agent_id, .. } => {
                derived.children.push((child_agent_id.clone(), None));
            }
            EventData::SubAgentFinished {
                child_agent_id,
                usage,
                ..
            } => {
                if let Some(child) = derived
                    .children
                    .iter_mut()
                    .find(|(id, _)| id == child_agent_id)
                {
                    child.1 = Some(*usage);
                }
            }
            EventData::Error { message } => summary.error = Some(message.clone()),
            EventData::Final { answer, .. } => summary.answer = Some(answer.clone()),
            EventData::RunFinished {
                status,
                answer,
                iterations,
                usage,
                cost_usd,
                duration_ms,
            } => {
                ended = Some(status.clone());
                if answer.is_some() {
                    summary.answer.clone_from(answer);
                }
                summary.iterations = *iterations;
                summary.duration_ms = Some(*duration_ms);
                derived.finished = Some((*usage, *cost_usd));
            }
            _ => {}
        }
    }
    summary.status = ended.unwrap_or_else(|| {
        let alive = summary.pid.is_some_and(read::orchestrator_alive);
        if alive {
            STATUS_RUNNING
        } else {
            STATUS_UNKNOWN
        }
        .to_owned()
    });
    Header {
        summary,
        derived: Some(derived),
    }
}

/// Totals of a run, descendants included.
#[derive(Default, Clone, Copy)]
struct Totals {
    usage: Usage,
    llm_calls: u64,
    cost_usd: Option<f64>,
    sub_agents: u64,
}

/// Completes the totals of runs added up from events with those of their
/// descendants, and sorts the runs newest first.
pub(crate) fn roll_up(headers: Vec<Header>) -> Vec<RunSummary> {
    let by_agent: HashMap<&str, Vec<usize>> =
        headers
            .iter()
            .enumerate()
            .fold(HashMap::new(), |mut map, (i, h)| {
                if let Some(agent) = &h.summary.agent_id {
                    map.entry(agent.as_str()).or_default().push(i);
                }
                map
            });
    let totals: Vec<Option<Totals>> = (0..headers.len())
        .map(|i| {
            headers[i]
                .derived
                .as_ref()
                .map(|_| totals_of(&headers, &by_agent, i, 0))
        })
        .collect();
    let mut runs: Vec<RunSummary> = headers
        .into_iter()
        .zip(totals)
        .map(|(header, totals)| {
            let mut summary = header.summary;
            if let Some(t) = totals {
                summary.usage = t.usage;
                summary.llm_calls = t.llm_calls;
                summary.cost_usd = t.cost_usd;
                summary.sub_agents = t.sub_agents;
                if let Some((usage, cost)) = header.derived.and_then(|d| d.finished) {
                    summary.usage = usage;
                    summary.cost_usd = cost.or(summary.cost_usd);
                }
            }
            summary
        })
        .collect();
    runs.sort_by(|a, b| {
        b.started_ms
            .cmp(&a.started_ms)
            .then_with(|| b.run_id.cmp(&a.run_id))
    });
    runs
}

fn totals_of(
    headers: &[Header],
    by_agent: &HashMap<&str, Vec<usize>>,
    index: usize,
    depth: usize,
) -> Totals {
    let header = &headers[index];
    let Some(derived) = &header.derived else {
        let s = &header.summary;
        return Totals {
            usage: s.usage,
            llm_calls: s.llm_calls,
            cost_usd: s.cost_usd,
            sub_agents: s.sub_agents,
        };
    };
    let mut totals = Totals {
        usage: derived.calls.usage,
        llm_calls: derived.calls.llm_calls,
        cost_usd: derived.calls.cost_usd,
        sub_agents: derived.children.len() as u64,
    };
    for (child_id, finished_usage) in &derived.children {
        let child = by_agent
            .get(child_id.as_str())
            .into_iter()
            .flatten()
            .copied()
            .find(|&j| {
                j != index
                    && (headers[j].summary.parent_id.is_none()
                        || headers[j].summary.parent_id == header.summary.agent_id)
            });
        let child_totals = match child {
            Some(j) if depth < MAX_ROLL_UP_DEPTH => {
                Some(totals_of(headers, by_agent, j, depth + 1))
            }
            _ => None,
        };
        match (finished_usage, &child_totals) {
            (Some(usage), _) => totals.usage.add(*usage),
            (None, Some(t)) => totals.usage.add(t.usage),
            (None, None) => {}
        }
        if let Some(t) = child_totals {
            totals.llm_calls += t.llm_calls;
            totals.sub_agents += t.sub_agents;
            if let Some(cost) = t.cost_usd {
                *totals.cost_usd.get_or_insert(0.0) += cost;
            }
        }
    }
    totals
}

/// Reads a run's events into steps; `data_dir` is where agents' prompt files are.
pub(crate) fn read_trace(run: &RunSummary, data_dir: &Path) -> RunTrace {
    let mut problems = Vec::new();
    let events = read::read_events(&run.dir, &mut problems);
    let mut trace = RunTrace {
        summary: run.clone(),
        env: None,
        context: None,
        steps: Vec::new(),
        outside_steps: Vec::new(),
        other_children: Vec::new(),
        problems,
    };
    // Where each sub-agent's item is: (step index or None for outside, item index).
    let mut agents: HashMap<String, (Option<usize>, usize)> = HashMap::new();
    let mut current: Option<usize> = None;
    for event in events {
        let iteration = match &event.data {
            EventData::Text { iteration, .. }
            | EventData::Code { iteration, .. }
            | EventData::Exec { iteration, .. }
            | EventData::VariablesUpdated { iteration, .. } => Some(*iteration),
            _ => None,
        };
        if let Some(iteration) = iteration {
            if current.is_none_or(|i| trace.steps[i].iteration != iteration) {
                current = Some(step_index(&mut trace.steps, iteration, event.ts_ms));
            }
        }
        let item = match event.data {
            EventData::RunStarted { env, context, .. } => {
                trace.env = Some(env);
                trace.context = context;
                None
            }
            EventData::StepStarted { iteration } => {
                trace.steps.push(Step {
                    iteration,
                    started_ms: Some(event.ts_ms),
                    duration_ms: None,
                    items: Vec::new(),
                });
                current = Some(trace.steps.len() - 1);
                None
            }
            EventData::StepCompleted {
                iteration,
                duration_ms,
            } => {
                let i = match current {
                    Some(i) if trace.steps[i].iteration == iteration => i,
                    _ => step_index(&mut trace.steps, iteration, event.ts_ms),
                };
                trace.steps[i].duration_ms = Some(duration_ms);
                current = None;
                None
            }
            EventData::Text { text, .. } => Some(StepItem::Text {
                prose: text.clone(),
                text,
            }),
            EventData::Code { block, code, .. } => Some(StepItem::Code { block, code }),
            EventData::Exec {
                block,
                output,
                error,
                timed_out,
                duration_ms,
                ..
            } => Some(StepItem::Output {
                block,
                output,
                error,
                timed_out,
                duration_ms,
            }),
            EventData::VariablesUpdated { variables, .. } => {
                Some(StepItem::Variables { variables })
            }
            EventData::LlmCall {
                model,
                purpose,
                prompt_tokens,
                completion_tokens,
                latency_ms,
                cost_usd,
                ..
            } => Some(StepItem::LlmCall {
                model,
                purpose,
                prompt_tokens,
                completion_tokens,
                latency_ms,
                cost_usd,
            }),
            EventData::SubAgentSpawned {
                child_agent_id,
                mode,
                task,
                ..
            } => {
                let (prompt_file, prompt_preview) = agent_prompt(data_dir, &child_agent_id);
                let items = match current {
                    Some(i) => &trace.steps[i].items,
                    None => &trace.outside_steps,
                };
                agents.insert(child_agent_id.clone(), (current, items.len()));
                Some(StepItem::SubAgent(SubAgent {
                    agent_id: child_agent_id,
                    mode,
                    task,
                    spawned_ms: event.ts_ms,
                    status: None,
                    duration_ms: None,
                    usage: None,
                    prompt_file,
                    prompt_preview,
                    result_preview: None,
                    result_truncated: false,
                    runs: Vec::new(),
                }))
            }
            EventData::SubAgentFinished {
                child_agent_id,
                status,
                duration_ms,
                usage,
            } => {
                let slot = agents
                    .get(&child_agent_id)
                    .and_then(|&(step, i)| match step {
                        Some(s) => trace.steps[s].items.get_mut(i),
                        None => trace.outside_steps.get_mut(i),
                    });
                if let Some(StepItem::SubAgent(agent)) = slot {
                    agent.status = Some(status);
                    agent.duration_ms = Some(duration_ms);
                    agent.usage = Some(usage);
                }
                None
            }
            EventData::CacheHit { call, key } => Some(StepItem::CacheHit { call, key }),
            EventData::Warning { message } => Some(StepItem::Warning { message }),
            EventData::Error { message } => Some(StepItem::Error { message }),
            EventData::Final {
                answer,
                forced,
                source,
            } => Some(StepItem::Final {
                answer,
                forced,
                source,
            }),
            EventData::RunFinished { .. } => None,
            #[allow(
                unreachable_patterns,
                reason = "EventData grows; kinds a trace does not keep (transient ones) are ignored"
            )]
            _ => None,
        };
        if let Some(item) = item {
            match current {
                Some(i) => trace.steps[i].items.push(item),
                None => trace.outside_steps.push(item),
            }
        }
    }
    for step in &mut trace.steps {
        let codes: Vec<String> = step
            .items
            .iter()
            .filter_map(|item| match item {
                StepItem::Code { code, .. } => Some(code.trim().to_owned()),
                _ => None,
            })
            .collect();
        for item in &mut step.items {
            if let StepItem::Text { text, prose } = item {
                *prose = without_code(text, &codes);
            }
        }
    }
    trace
}

/// The index of the step of `iteration`, created if the trace lacks its start.
fn step_index(steps: &mut Vec<Step>, iteration: u32, ts_ms: u64) -> usize {
    if let Some(i) = steps.iter().rposition(|s| s.iteration == iteration) {
        return i;
    }
    steps.push(Step {
        iteration,
        started_ms: Some(ts_ms),
        duration_ms: None,
        items: Vec::new(),
    });
    steps.len() - 1
}

/// `text` without the fenced blocks whose code is one of `codes` (those are shown as
/// code on their own), and without the blank lines that leaves behind.
pub(crate) fn without_code(text: &str, codes: &[String]) -> String {
    if codes.is_empty() {
        return text.trim().to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split_inclusive('\n');
    while let Some(line) = lines.next() {
        let Some(ticks) = fence_ticks(line) else {
            out.push_str(line);
            continue;
        };
        let mut raw = line.to_owned();
        let mut body = String::new();
        for inner in lines.by_ref() {
            raw.push_str(inner);
            let trimmed = inner.trim();
            if trimmed.len() >= ticks && trimmed.bytes().all(|b| b == b'`') {
                break;
            }
            body.push_str(inner);
        }
        if !codes.iter().any(|c| c == body.trim()) {
            out.push_str(&raw);
        }
    }
    let mut tidy = String::with_capacity(out.len());
    let mut blank = 0;
    for line in out.trim().lines() {
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        tidy.push_str(line);
        tidy.push('\n');
    }
    tidy.trim_end().to_owned()
}

/// The number of backticks when `line` opens a fence.
fn fence_ticks(line: &str) -> Option<usize> {
    let trimmed = line.trim_start();
    let ticks = trimmed.bytes().take_while(|b| *b == b'`').count();
    (ticks >= 3 && line.len() - trimmed.len() <= 3 && !trimmed[ticks..].contains('`'))
        .then_some(ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_that_ran_is_cut_from_the_prose() {
        let text = "Let me look.\n```repl\nprint(1)\n```\n\n\nThen this:\n```\nnot run\n```\n";
        assert_eq!(
            without_code(text, &["print(1)".to_owned()]),
            "Let me look.\n\nThen this:\n```\nnot run\n```"
        );
        assert_eq!(without_code("  just text \n", &[]), "just text");
    }
}
