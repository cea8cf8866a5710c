//! What the live view knows about a run: the state is folded from events
//! ([`Tree::apply`]) here, and drawn by a pure function of that state, the time and
//! the terminal size ([`Tree::render`], in [`draw`]), so the picture can be tested
//! without a terminal.
//!
//! Each run's state is the library's [`RunFold`] — the same fold `runs show` reads a
//! trace with — plus what only a live view cares about: the streamed tail of the
//! model's text and when the running code started. Runs are keyed by agent id. This
//! process's run is the root; nested runs (other processes, whose events the tailer
//! reads from their `events.jsonl`) hang under the sub-agent that started them,
//! indented one level deeper.

mod draw;

use std::collections::HashMap;

use crate::output::escape_controls;
use rlm_orchestrator::events::{Event, EventData};
use rlm_orchestrator::ids::{AgentId, RunId};
use rlm_orchestrator::provider::Usage;
use rlm_orchestrator::trace::{RunFold, Step, StepItem};

/// Bytes of streamed model text kept per step (only the last line is drawn).
const STREAM_TAIL_BYTES: usize = 1024;

/// The state of every run the live view has heard of.
#[derive(Debug, Default)]
pub struct Tree {
    runs: HashMap<AgentId, RunNode>,
    root: Option<AgentId>,
}

/// One run: its fold, and what only a live view keeps.
#[derive(Debug)]
struct RunNode {
    fold: RunFold,
    /// The tail of the model's text as it streams in, for the open step.
    streamed: String,
    /// When the code block now running started (its `code` came, its `exec` not yet).
    code_started_ms: Option<u64>,
}

impl Tree {
    /// Folds one event into the state.
    pub fn apply(&mut self, event: &Event) {
        if let EventData::RunStarted(_) = &event.data {
            self.root.get_or_insert_with(|| event.agent_id.clone());
            self.runs.insert(
                event.agent_id.clone(),
                RunNode {
                    fold: RunFold::default(),
                    streamed: String::new(),
                    code_started_ms: None,
                },
            );
        }
        let Some(run) = self.runs.get_mut(&event.agent_id) else {
            return; // events of a run whose start we missed
        };
        match &event.data {
            EventData::StepStarted { .. } => {
                run.streamed.clear();
                run.code_started_ms = None;
            }
            EventData::TextDelta { delta, .. } => {
                run.streamed.push_str(delta);
                keep_tail(&mut run.streamed, STREAM_TAIL_BYTES);
            }
            EventData::Code(_) => {
                run.streamed.clear(); // the response is complete; its code now runs
                run.code_started_ms = Some(event.ts_ms);
            }
            EventData::Exec(_) => run.code_started_ms = None,
            EventData::RunStarted(_)
            | EventData::WindowFound(_)
            | EventData::Text(_)
            | EventData::VariablesUpdated { .. }
            | EventData::SubAgentSpawned(_)
            | EventData::SubAgentFinished(_)
            | EventData::LlmCall(_)
            | EventData::CacheHit(_)
            | EventData::Compacted(_)
            | EventData::Plan(_)
            | EventData::Correction(_)
            | EventData::Warning { .. }
            | EventData::Error { .. }
            | EventData::Final(_)
            | EventData::StepCompleted { .. }
            | EventData::RunFinished(_) => {}
        }
        run.fold.apply(event);
    }

    /// Agent ids of every run known, for the tailer to recognise their children.
    pub fn agent_ids(&self) -> impl Iterator<Item = &AgentId> {
        self.runs.keys()
    }

    /// Run id of the root run, once it started.
    pub fn root_run_id(&self) -> Option<&RunId> {
        let root = self.root.as_ref()?;
        self.runs.get(root)?.fold.run_id.as_ref()
    }

    /// Whether a sub-agent of a known run is still running (worth tailing for).
    pub fn has_running_agents(&self) -> bool {
        self.runs
            .values()
            .any(|r| r.fold.sub_agents().any(|a| a.status.is_none()))
    }

    /// One line left on stderr when the view is cleared, once the root run finished:
    /// `answered · 3 steps · 12.4s · 13.2k tokens · run <id>`.
    pub fn summary(&self) -> Option<String> {
        let root = self.runs.get(self.root.as_ref()?)?;
        let finished = root.fold.finished.as_ref()?;
        Some(format!(
            "{} · {} · run {}",
            finished.status,
            draw::footer(root, 0).trim_start(),
            root.run_id()
        ))
    }
}

impl RunNode {
    fn run_id(&self) -> String {
        escape_controls(self.fold.run_id.as_ref().map_or("", RunId::as_str))
    }

    fn task(&self) -> &str {
        self.fold
            .started
            .as_ref()
            .map_or("", |(_, s)| s.task.as_str())
    }

    fn model(&self) -> String {
        escape_controls(
            self.fold
                .started
                .as_ref()
                .map_or("", |(_, s)| s.model.as_str()),
        )
    }

    fn started_ms(&self) -> u64 {
        self.fold
            .started
            .as_ref()
            .map(|(ts, _)| *ts)
            .or(self.fold.first_ms)
            .unwrap_or(0)
    }

    /// The step being worked on, until the run ends.
    fn open_step(&self) -> Option<&Step> {
        self.fold
            .open_step()
            .filter(|_| self.fold.finished.is_none())
    }

    /// A forced answer is on its way (the `final` came, the end not yet).
    fn forcing(&self) -> bool {
        self.fold
            .outside_steps
            .iter()
            .any(|item| matches!(item, StepItem::Final(record) if record.forced))
    }

    /// Tokens of the run and the sub-agents that reported theirs.
    fn usage_so_far(&self) -> Usage {
        if let Some(finished) = &self.fold.finished {
            return finished.usage;
        }
        let mut usage = self.fold.calls.usage;
        for agent in self.fold.sub_agents() {
            if let Some(used) = agent.usage {
                usage.add(used);
            }
        }
        usage
    }
}

/// Cuts `text` to its last `max` bytes or so, at a character boundary.
fn keep_tail(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut cut = text.len() - max;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.drain(..cut);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlm_orchestrator::env::EnvKind;
    use rlm_orchestrator::events::{
        AgentMode, CallPurpose, CodeRecord, LlmCall, RunStarted, SubAgentFinished, SubAgentSpawned,
    };

    fn id(agent: &str) -> AgentId {
        AgentId::parse(agent).unwrap()
    }

    fn ev(agent: &str, depth: u32, ts_ms: u64, data: EventData) -> Event {
        Event {
            run_id: RunId::from(format!("run-{agent}")),
            depth,
            agent_id: id(agent),
            parent_id: None,
            ts_ms,
            data,
        }
    }

    fn spawned(agent: &str, mode: AgentMode, task: &str) -> EventData {
        EventData::SubAgentSpawned(SubAgentSpawned {
            child_agent_id: id(agent),
            mode,
            pid: None,
            task: task.into(),
        })
    }

    fn finished(agent: &str, status: &str) -> EventData {
        EventData::SubAgentFinished(SubAgentFinished {
            child_agent_id: id(agent),
            status: status.into(),
            duration_ms: if status == "timed out" { 1 } else { 2000 },
            usage: Usage::default(),
        })
    }

    fn started(agent: &str, depth: u32, ts: u64, task: &str) -> Event {
        ev(
            agent,
            depth,
            ts,
            EventData::RunStarted(RunStarted {
                task: task.into(),
                model: "gpt-x".into(),
                env: EnvKind::Python,
                context: None,
                pid: 1,
                context_window: None,
                sub_context_window: None,
            }),
        )
    }

    fn scripted_tree() -> Tree {
        let mut tree = Tree::default();
        let root = |ts, data| ev("root", 0, ts, data);
        for event in [
            started("root", 0, 0, "Which service logged the most errors?"),
            root(10, EventData::StepStarted { iteration: 1 }),
            root(
                20,
                EventData::TextDelta {
                    iteration: 1,
                    delta: "Let me look.\n```repl\nerrors = [l for l".into(),
                },
            ),
            root(
                900,
                EventData::LlmCall(LlmCall {
                    model: "gpt-x".into(),
                    purpose: CallPurpose::Root,
                    prompt_tokens: 1200,
                    completion_tokens: 80,
                    usage_reported: true,
                    latency_ms: 880,
                    attempts: 1,
                    request_bytes: 4000,
                    cost_usd: None,
                    estimated_prompt_tokens: None,
                }),
            ),
            root(
                1000,
                EventData::Code(CodeRecord {
                    iteration: 1,
                    block: 0,
                    code: "\nanswers = spawn_agents(tasks)\nprint(answers)".into(),
                }),
            ),
            root(
                1100,
                spawned("a1", AgentMode::SubRlm, "count errors in chunk 1"),
            ),
            root(
                1100,
                spawned("a2", AgentMode::SpawnAgent, "count errors in chunk 2"),
            ),
            root(3100, finished("a2", "exited with code 0")),
            started("a1", 1, 1200, "count errors in chunk 1"),
            ev("a1", 1, 1300, EventData::StepStarted { iteration: 2 }),
        ] {
            tree.apply(&event);
        }
        tree
    }

    #[test]
    fn a_running_tree_shows_step_code_agents_and_nested_runs() {
        let tree = scripted_tree();
        let picture = tree.render(4_000, 120, 40, false).join("\n");
        insta::assert_snapshot!(picture, @r"
        ⠋ run run-root · gpt-x · 4.0s · 1.3k tok · Which service logged the most errors?
          ⠋ step 1 4.0s
            $ answers = spawn_agents(tasks) (running 3.0s)
          ✓ spawn_agent a2 ok 2.0s · count errors in chunk 2
          ⠋ sub_rlm a1 running 2.9s · depth 1 · 0 tok · count errors in chunk 1
            ⠋ step 2 2.7s
              … waiting for gpt-x
          4.0s · 0 steps · 1 model call · 1.3k tokens (1.2k in, 80 out) · 2 sub-agents
        ");
    }

    #[test]
    fn streamed_text_shows_its_last_line_until_the_code_runs() {
        let mut tree = Tree::default();
        tree.apply(&started("root", 0, 0, "t"));
        tree.apply(&ev("root", 0, 10, EventData::StepStarted { iteration: 1 }));
        let waiting = tree.render(500, 80, 20, false);
        assert_eq!(waiting[2], "    … waiting for gpt-x");
        for delta in ["Let me look.\n```re", "pl\nerrors = [l for l"] {
            tree.apply(&ev(
                "root",
                0,
                20,
                EventData::TextDelta {
                    iteration: 1,
                    delta: delta.into(),
                },
            ));
        }
        assert_eq!(
            tree.render(500, 80, 20, false)[2],
            "    ▸ errors = [l for l"
        );
        tree.apply(&ev(
            "root",
            0,
            30,
            EventData::Code(CodeRecord {
                iteration: 1,
                block: 0,
                code: "errors = [l for l in context]".into(),
            }),
        ));
        let running = tree.render(500, 80, 20, false).join("\n");
        assert!(
            running.contains("$ errors = [l for l in context] (running 470ms)"),
            "{running}"
        );
        assert!(!running.contains('▸'), "{running}");
    }

    /// Seen failing before the fix: the streamed ESC sequence was drawn raw.
    #[test]
    fn streamed_escapes_are_shown_not_obeyed() {
        let mut tree = Tree::default();
        tree.apply(&started("root", 0, 0, "t"));
        tree.apply(&ev("root", 0, 10, EventData::StepStarted { iteration: 1 }));
        tree.apply(&ev(
            "root",
            0,
            20,
            EventData::TextDelta {
                iteration: 1,
                delta: "Let me \u{1b}[2J\u{1b}]0;pwned\u{7}look".into(),
            },
        ));
        let picture = tree.render(500, 120, 20, false).join("\n");
        assert!(!picture.contains('\u{1b}'), "{picture:?}");
        assert!(picture.contains(r"Let me \u{1b}[2J"), "{picture:?}");
    }

    #[test]
    fn lines_fit_the_terminal() {
        let tree = scripted_tree();
        let picture = tree.render(4_000, 30, 5, false);
        assert_eq!(picture.len(), 5, "{picture:#?}");
        assert!(picture.iter().all(|l| console::measure_text_width(l) <= 30));
        assert!(picture[3].contains("more lines"), "{picture:#?}");
        assert!(picture[4].contains("4.0s"), "{picture:#?}");
    }

    #[test]
    fn many_agents_are_summed_up() {
        let mut tree = Tree::default();
        tree.apply(&started("root", 0, 0, "t"));
        for i in 0..20 {
            let id = format!("a{i}");
            tree.apply(&ev("root", 0, 1, spawned(&id, AgentMode::SpawnAgent, "x")));
            if i < 10 {
                let status = if i == 0 {
                    "timed out"
                } else {
                    "exited with code 0"
                };
                tree.apply(&ev("root", 0, 2, finished(&id, status)));
            }
        }
        let picture = tree.render(100, 100, 50, false).join("\n");
        assert!(
            picture.contains("7 earlier sub-agents finished (1 failed)"),
            "{picture}"
        );
        assert!(picture.contains("… 2 more running"), "{picture}");
        assert!(tree.has_running_agents());
    }
}
