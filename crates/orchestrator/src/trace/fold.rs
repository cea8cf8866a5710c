//! The one fold from a run's events to its story: steps holding what happened in them,
//! sub-agents, model calls added up, and how the run ended.
//!
//! The trace reader folds a whole `events.jsonl` at once; the live view folds events
//! one by one as they arrive and draws the state after each. Both see the same steps,
//! the same totals and the same sub-agents because both use [`RunFold::apply`].
//! Nothing here reads files: what only the disk knows (an agent's prompt file, its
//! result variable) is added by the trace reader afterwards.

use std::collections::HashMap;

use super::{Step, StepItem, SubAgent};
use crate::events::{Event, EventData, RunFinished, RunStarted};
use crate::ids::{AgentId, RunId};
use rlm_protocol::RunTotals;

/// Where a sub-agent's item is: the step index (`None`: outside every step) and the
/// item index.
type Slot = (Option<usize>, usize);

/// The state of one run after the events folded into it so far.
#[derive(Debug, Clone, Default)]
pub struct RunFold {
    /// The run, from its first event.
    pub run_id: Option<RunId>,
    /// Its process, from its first event.
    pub agent_id: Option<AgentId>,
    /// The process that started it, from its first event.
    pub parent_id: Option<AgentId>,
    /// Its depth, from its first event.
    pub depth: u32,
    /// Time of its first event, in ms since the epoch.
    pub first_ms: Option<u64>,
    /// `run_started`, with its time.
    pub started: Option<(u64, RunStarted)>,
    /// The iterations, in order.
    pub steps: Vec<Step>,
    /// Events outside every step: the forced final answer, stop warnings, errors
    /// before the first step.
    pub outside_steps: Vec<StepItem>,
    /// The run's own model calls (not those of its nested runs).
    pub calls: RunTotals,
    /// Sub-calls answered from the cache.
    pub cache_hits: u64,
    /// The final answer, once given.
    pub answer: Option<String>,
    /// The last error reported.
    pub error: Option<String>,
    /// `run_finished`, once the run ended.
    pub finished: Option<RunFinished>,
    /// The step events go to, while one is open.
    current: Option<usize>,
    /// Where each sub-agent's item is.
    agents: HashMap<AgentId, Slot>,
}

impl RunFold {
    /// Folds a whole trace.
    pub fn of<'a>(events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut fold = Self::default();
        for event in events {
            fold.apply(event);
        }
        fold
    }

    /// Folds one more event in.
    pub fn apply(&mut self, event: &Event) {
        if self.first_ms.is_none() {
            self.first_ms = Some(event.ts_ms);
            self.run_id = Some(event.run_id.clone());
            self.agent_id = Some(event.agent_id.clone());
            self.parent_id = event.parent_id.clone();
            self.depth = event.depth;
        }
        let ts = event.ts_ms;
        if let Some(iteration) = step_of(&event.data) {
            if self
                .current
                .is_none_or(|i| self.steps[i].iteration != iteration)
            {
                self.current = Some(self.step_index(iteration, ts));
            }
        }
        let item = match &event.data {
            EventData::RunStarted(started) => {
                self.started = Some((ts, started.clone()));
                None
            }
            EventData::StepStarted { iteration } => {
                self.steps.push(Step {
                    iteration: *iteration,
                    started_ms: Some(ts),
                    duration_ms: None,
                    items: Vec::new(),
                });
                self.current = Some(self.steps.len() - 1);
                None
            }
            EventData::StepCompleted {
                iteration,
                duration_ms,
            } => {
                let i = match self.current {
                    Some(i) if self.steps[i].iteration == *iteration => i,
                    _ => self.step_index(*iteration, ts),
                };
                self.steps[i].duration_ms = Some(*duration_ms);
                self.current = None;
                None
            }
            EventData::Text(record) => Some(StepItem::Text {
                text: record.text.clone(),
                prose: record.text.clone(),
            }),
            EventData::TextDelta { .. } => None,
            EventData::Code(record) => Some(StepItem::Code(record.clone())),
            EventData::Exec(record) => Some(StepItem::Output(record.clone())),
            EventData::VariablesUpdated { variables, .. } => Some(StepItem::Variables {
                variables: variables.clone(),
            }),
            EventData::LlmCall(call) => {
                self.calls.add(&call.as_totals());
                Some(StepItem::LlmCall(call.clone()))
            }
            EventData::SubAgentSpawned(spawned) => {
                let index = self.items().len();
                self.agents
                    .insert(spawned.child_agent_id.clone(), (self.current, index));
                Some(StepItem::SubAgent(SubAgent::spawned(spawned, ts)))
            }
            EventData::SubAgentFinished(finished) => {
                if let Some(agent) = self.agent_mut(&finished.child_agent_id) {
                    agent.status = Some(finished.status.clone());
                    agent.duration_ms = Some(finished.duration_ms);
                    agent.usage = Some(finished.usage);
                }
                None
            }
            EventData::CacheHit(hit) => {
                self.cache_hits += 1;
                Some(StepItem::CacheHit(hit.clone()))
            }
            EventData::WindowFound(found) => {
                if let Some((_, started)) = self.started.as_mut() {
                    if found.context_window.is_some() {
                        started.context_window.clone_from(&found.context_window);
                    }
                    if found.sub_context_window.is_some() {
                        started
                            .sub_context_window
                            .clone_from(&found.sub_context_window);
                    }
                }
                None
            }
            EventData::Compacted(record) => Some(StepItem::Compacted(record.clone())),
            EventData::Plan(record) => Some(StepItem::Plan(record.clone())),
            EventData::Correction(record) => Some(StepItem::Correction(record.clone())),
            EventData::Warning { message } => Some(StepItem::Warning {
                message: message.clone(),
            }),
            EventData::Error { message } => {
                self.error = Some(message.clone());
                Some(StepItem::Error {
                    message: message.clone(),
                })
            }
            EventData::Final(record) => {
                self.answer = Some(record.answer.clone());
                Some(StepItem::Final(record.clone()))
            }
            EventData::RunFinished(finished) => {
                if finished.answer.is_some() {
                    self.answer.clone_from(&finished.answer);
                }
                self.finished = Some(finished.clone());
                None
            }
        };
        if let Some(item) = item {
            match self.current {
                Some(i) => self.steps[i].items.push(item),
                None => self.outside_steps.push(item),
            }
        }
    }

    /// The deepest iteration seen.
    pub fn iterations(&self) -> u32 {
        self.steps.iter().map(|s| s.iteration).max().unwrap_or(0)
    }

    /// The step still running, if any (started, not completed).
    pub fn open_step(&self) -> Option<&Step> {
        self.current.map(|i| &self.steps[i])
    }

    /// Steps that completed.
    pub fn steps_done(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.duration_ms.is_some())
            .count()
    }

    /// Sub-agents, in the order they started.
    pub fn sub_agents(&self) -> impl Iterator<Item = &SubAgent> {
        self.steps
            .iter()
            .flat_map(|s| s.items.iter())
            .chain(self.outside_steps.iter())
            .filter_map(StepItem::as_sub_agent)
    }

    /// Sub-agents, mutably.
    pub fn sub_agents_mut(&mut self) -> impl Iterator<Item = &mut SubAgent> {
        self.steps
            .iter_mut()
            .flat_map(|s| s.items.iter_mut())
            .chain(self.outside_steps.iter_mut())
            .filter_map(StepItem::as_sub_agent_mut)
    }

    fn items(&self) -> &[StepItem] {
        match self.current {
            Some(i) => &self.steps[i].items,
            None => &self.outside_steps,
        }
    }

    fn agent_mut(&mut self, id: &AgentId) -> Option<&mut SubAgent> {
        let &(step, index) = self.agents.get(id)?;
        let item = match step {
            Some(s) => self.steps.get_mut(s)?.items.get_mut(index),
            None => self.outside_steps.get_mut(index),
        };
        item.and_then(StepItem::as_sub_agent_mut)
    }

    /// The index of the step of `iteration`, created if the trace lacks its start.
    fn step_index(&mut self, iteration: u32, ts_ms: u64) -> usize {
        if let Some(i) = self.steps.iter().rposition(|s| s.iteration == iteration) {
            return i;
        }
        self.steps.push(Step {
            iteration,
            started_ms: Some(ts_ms),
            duration_ms: None,
            items: Vec::new(),
        });
        self.steps.len() - 1
    }
}

/// The iteration an event belongs to, for events that say so.
fn step_of(data: &EventData) -> Option<u32> {
    match data {
        EventData::Text(record) => Some(record.iteration),
        EventData::Code(record) => Some(record.iteration),
        EventData::Exec(record) => Some(record.iteration),
        EventData::VariablesUpdated { iteration, .. } => Some(*iteration),
        EventData::Compacted(record) => Some(record.iteration),
        EventData::Correction(record) => Some(record.iteration),
        EventData::RunStarted(_)
        | EventData::WindowFound(_)
        | EventData::StepStarted { .. }
        | EventData::TextDelta { .. }
        | EventData::SubAgentSpawned(_)
        | EventData::SubAgentFinished(_)
        | EventData::LlmCall(_)
        | EventData::Plan(_)
        | EventData::CacheHit(_)
        | EventData::Warning { .. }
        | EventData::Error { .. }
        | EventData::Final(_)
        | EventData::StepCompleted { .. }
        | EventData::RunFinished(_) => None,
    }
}
