//! From the files of one run directory to a [`RunSummary`] and a [`RunTrace`].
//!
//! A finished run's summary comes from `summary.json` plus the first event (which
//! holds the task). A run without a usable summary — still going, crashed, torn — is
//! added up from its events with the same fold the live view uses ([`RunFold`]); its
//! descendants' totals are then rolled up from the other run directories
//! ([`roll_up`]), the way the run itself would have accounted them.

use std::collections::HashMap;
use std::path::Path;

use super::fold::RunFold;
use super::read;
use super::{agent_prompt, RunState, RunSummary, RunTrace, StepItem, SummarySource, TraceProblem};
use crate::events::{Event, RunSummaryFile};
use crate::ids::{AgentId, RunId};
use crate::provider::Usage;
use rlm_protocol::RunTotals;

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
    calls: RunTotals,
    /// Child agent ids, with the usage their `sub_agent_finished` reported.
    children: Vec<(AgentId, Option<Usage>)>,
    /// Totals from `run_finished` (which win over sums of events).
    finished: Option<(Usage, Option<f64>)>,
}

/// Reads the header of the run in `dir`, recording what could not be used.
pub(crate) fn read_header(run_id: &str, dir: &Path, problems: &mut Vec<TraceProblem>) -> Header {
    if let Some(file) = read::read_summary(dir, problems) {
        let first = read::read_first_event(dir, problems);
        return Header {
            summary: from_summary(dir, file, first.as_ref()),
            derived: None,
        };
    }
    let events = read::read_events(dir, problems);
    derive(run_id, dir, &events)
}

fn from_summary(dir: &Path, file: RunSummaryFile, first: Option<&Event>) -> RunSummary {
    let started = first.and_then(read::started_fields);
    RunSummary {
        started_ms: first
            .map(|e| e.ts_ms)
            .or_else(|| read::time_from_run_id(file.run_id.as_str())),
        run_id: file.run_id,
        dir: dir.to_owned(),
        agent_id: Some(file.agent_id),
        parent_id: file.parent_id,
        depth: file.depth,
        task: started.map(|s| s.task.clone()),
        model: started.map(|s| s.model.clone()),
        status: state(file.status, file.trace_incomplete.as_deref()),
        answer: crate::events::stored_answer(dir).or(file.answer),
        error: with_gap(file.error, file.trace_incomplete.as_deref()),
        iterations: file.iterations,
        totals: file.totals,
        duration_ms: Some(file.duration_ms),
        source: SummarySource::Summary,
        pid: started.map(|s| s.pid),
    }
}

/// How a run that ended with `status` stands: unknown when its trace is incomplete
/// (events were lost, so what it says cannot be taken as the whole story).
fn state(status: crate::events::RunStatus, trace_incomplete: Option<&str>) -> RunState {
    match trace_incomplete {
        Some(_) => RunState::Unknown,
        None => RunState::Ended(status),
    }
}

/// The error shown for a run, with why its trace is incomplete when it is.
fn with_gap(error: Option<String>, trace_incomplete: Option<&str>) -> Option<String> {
    let Some(gap) = trace_incomplete else {
        return error;
    };
    let gap = format!("the trace is incomplete: {gap}");
    Some(match error {
        Some(error) => format!("{error} ({gap})"),
        None => gap,
    })
}

/// Adds up a run from its events.
fn derive(run_id: &str, dir: &Path, events: &[Event]) -> Header {
    let fold = RunFold::of(events);
    let started = fold.started.as_ref();
    let pid = started.map(|(_, s)| s.pid);
    let gap = fold
        .finished
        .as_ref()
        .and_then(|f| f.trace_incomplete.as_deref());
    let status = match &fold.finished {
        Some(finished) => state(finished.status, gap),
        None if pid.is_some_and(read::orchestrator_alive) => RunState::Running,
        None => RunState::Unknown,
    };
    let summary = RunSummary {
        run_id: fold.run_id.clone().unwrap_or_else(|| RunId::from(run_id)),
        dir: dir.to_owned(),
        agent_id: fold.agent_id.clone(),
        parent_id: fold.parent_id.clone(),
        depth: fold.depth,
        task: started.map(|(_, s)| s.task.clone()),
        model: started.map(|(_, s)| s.model.clone()),
        started_ms: started
            .map(|(ts, _)| *ts)
            .or(fold.first_ms)
            .or_else(|| read::time_from_run_id(run_id)),
        status,
        answer: crate::events::stored_answer(dir).or_else(|| fold.answer.clone()),
        error: with_gap(fold.error.clone(), gap),
        iterations: fold
            .finished
            .as_ref()
            .map_or_else(|| fold.iterations(), |f| f.iterations),
        totals: RunTotals::default(),
        duration_ms: fold.finished.as_ref().map(|f| f.duration_ms),
        source: SummarySource::Events,
        pid,
    };
    let derived = Derived {
        calls: fold.calls,
        children: fold
            .sub_agents()
            .map(|agent| (agent.agent_id.clone(), agent.usage))
            .collect(),
        finished: fold.finished.as_ref().map(|f| (f.usage, f.cost_usd)),
    };
    Header {
        summary,
        derived: Some(derived),
    }
}

/// Completes the totals of runs added up from events with those of their
/// descendants, and sorts the runs newest first.
pub(crate) fn roll_up(headers: Vec<Header>) -> Vec<RunSummary> {
    let by_agent: HashMap<&AgentId, Vec<usize>> =
        headers
            .iter()
            .enumerate()
            .fold(HashMap::new(), |mut map, (i, h)| {
                if let Some(agent) = &h.summary.agent_id {
                    map.entry(agent).or_default().push(i);
                }
                map
            });
    let totals: Vec<Option<RunTotals>> = (0..headers.len())
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
                summary.totals = t;
                if let Some((usage, cost)) = header.derived.and_then(|d| d.finished) {
                    summary.totals.usage = usage;
                    summary.totals.cost_usd = cost.or(summary.totals.cost_usd);
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
    by_agent: &HashMap<&AgentId, Vec<usize>>,
    index: usize,
    depth: usize,
) -> RunTotals {
    let header = &headers[index];
    let Some(derived) = &header.derived else {
        return header.summary.totals;
    };
    let mut totals = RunTotals {
        sub_agents: derived.children.len() as u64,
        ..derived.calls
    };
    for (child_id, finished_usage) in &derived.children {
        let child = by_agent
            .get(child_id)
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
    let mut fold = RunFold::of(&events);
    for agent in fold.sub_agents_mut() {
        (agent.prompt_file, agent.prompt_preview) = agent_prompt(data_dir, &agent.agent_id);
    }
    let started = fold.started.take();
    let mut trace = RunTrace {
        summary: run.clone(),
        env: started.as_ref().map(|(_, s)| s.env),
        context: started.and_then(|(_, s)| s.context),
        steps: fold.steps,
        outside_steps: fold.outside_steps,
        other_children: Vec::new(),
        problems,
    };
    for step in &mut trace.steps {
        let codes: Vec<String> = step
            .items
            .iter()
            .filter_map(StepItem::as_code)
            .map(|record| record.code.trim().to_owned())
            .collect();
        for item in &mut step.items {
            if let StepItem::Text { text, prose } = item {
                *prose = without_code(text, &codes);
            }
        }
    }
    trace
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
