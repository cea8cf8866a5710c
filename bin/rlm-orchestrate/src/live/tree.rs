//! What the live view knows about a run, and how it looks: the state is folded from
//! events ([`Tree::apply`]) and drawn by a pure function of that state, the time and the
//! terminal size ([`Tree::render`]), so the picture can be tested without a terminal.
//!
//! Runs are keyed by agent id. This process's run is the root; nested runs (other
//! processes, whose events the tailer reads from their `events.jsonl`) hang under the
//! sub-agent that started them, indented one level deeper.

use std::collections::HashMap;

use console::Style;
use rlm_orchestrator::events::{CallTally, Event, EventData};
use rlm_orchestrator::format::one_line;
use rlm_orchestrator::provider::Usage;

/// Bytes of streamed model text kept per step (only the last line is drawn).
const STREAM_TAIL_BYTES: usize = 1024;
/// Finished sub-agents drawn one by one; older ones are summed up in one line.
const FINISHED_AGENTS_SHOWN: usize = 3;
/// Running sub-agents drawn one by one; more are counted.
const RUNNING_AGENTS_SHOWN: usize = 8;
/// Spinner frames, one per 100 ms.
const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// The state of every run the live view has heard of.
#[derive(Debug, Default)]
pub struct Tree {
    runs: HashMap<String, RunNode>,
    root: Option<String>,
}

#[derive(Debug)]
struct RunNode {
    run_id: String,
    depth: u32,
    task: String,
    model: String,
    started_ms: u64,
    /// `(status, duration_ms)` once `run_finished` arrived.
    finished: Option<(String, u64)>,
    step: Option<Step>,
    steps_done: u32,
    /// This process's own model calls (cost replaced by the tree's at `run_finished`).
    calls: CallTally,
    cache_hits: u64,
    /// Tokens of the whole tree, as `run_finished` reports them.
    total: Option<Usage>,
    answered: Option<bool>,
    agents: Vec<Agent>,
}

#[derive(Debug)]
struct Step {
    iteration: u32,
    started_ms: u64,
    /// The tail of the model's text as it streams in.
    streamed: String,
    /// First line of the code block being run, and when it started.
    code: Option<(String, u64)>,
    /// How the last block went: `(error, duration_ms, first line of output)`.
    last_exec: Option<(bool, u64, String)>,
}

#[derive(Debug)]
struct Agent {
    agent_id: String,
    mode: String,
    task: String,
    started_ms: u64,
    /// `(status, duration_ms, usage)` once it ended.
    finished: Option<(String, u64, Usage)>,
}

impl Tree {
    /// Folds one event into the state.
    pub fn apply(&mut self, event: &Event) {
        let ts = event.ts_ms;
        if let EventData::RunStarted { task, model, .. } = &event.data {
            self.root.get_or_insert_with(|| event.agent_id.clone());
            self.runs.insert(
                event.agent_id.clone(),
                RunNode {
                    run_id: event.run_id.clone(),
                    depth: event.depth,
                    task: task.clone(),
                    model: model.clone(),
                    started_ms: ts,
                    finished: None,
                    step: None,
                    steps_done: 0,
                    calls: CallTally::default(),
                    cache_hits: 0,
                    total: None,
                    answered: None,
                    agents: Vec::new(),
                },
            );
            return;
        }
        let Some(run) = self.runs.get_mut(&event.agent_id) else {
            return; // events of a run whose start we missed
        };
        match &event.data {
            EventData::StepStarted { iteration } => {
                run.step = Some(Step {
                    iteration: *iteration,
                    started_ms: ts,
                    streamed: String::new(),
                    code: None,
                    last_exec: None,
                });
            }
            EventData::TextDelta { delta, .. } => {
                if let Some(step) = &mut run.step {
                    step.streamed.push_str(delta);
                    keep_tail(&mut step.streamed, STREAM_TAIL_BYTES);
                }
            }
            EventData::Code { code, .. } => {
                if let Some(step) = &mut run.step {
                    let first = code.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                    step.code = Some((first.trim().to_owned(), ts));
                    step.streamed.clear(); // the response is complete; its code now runs
                }
            }
            EventData::Exec {
                output,
                error,
                duration_ms,
                ..
            } => {
                if let Some(step) = &mut run.step {
                    step.code = None;
                    let first = output.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                    step.last_exec = Some((*error, *duration_ms, first.trim().to_owned()));
                }
            }
            data @ EventData::LlmCall { .. } => {
                run.calls.add(data);
            }
            EventData::CacheHit { .. } => run.cache_hits += 1,
            EventData::SubAgentSpawned {
                child_agent_id,
                mode,
                task,
                ..
            } => run.agents.push(Agent {
                agent_id: child_agent_id.clone(),
                mode: mode.clone(),
                task: task.clone(),
                started_ms: ts,
                finished: None,
            }),
            EventData::SubAgentFinished {
                child_agent_id,
                status,
                duration_ms,
                usage,
            } => {
                if let Some(agent) = run
                    .agents
                    .iter_mut()
                    .find(|a| &a.agent_id == child_agent_id)
                {
                    agent.finished = Some((status.clone(), *duration_ms, *usage));
                }
            }
            EventData::Final { forced, .. } => run.answered = Some(*forced),
            EventData::StepCompleted { .. } => {
                run.steps_done += 1;
                run.step = None;
            }
            EventData::RunFinished {
                status,
                duration_ms,
                usage,
                cost_usd,
                ..
            } => {
                run.finished = Some((status.clone(), *duration_ms));
                run.step = None;
                run.total = Some(*usage);
                run.calls.cost_usd = *cost_usd;
            }
            _ => {}
        }
    }

    /// Agent ids of every run known, for the tailer to recognise their children.
    pub fn agent_ids(&self) -> impl Iterator<Item = &str> {
        self.runs.keys().map(String::as_str)
    }

    /// Run id of the root run, once it started.
    pub fn root_run_id(&self) -> Option<&str> {
        let root = self.root.as_deref()?;
        self.runs.get(root).map(|r| r.run_id.as_str())
    }

    /// Whether a sub-agent of a known run is still running (worth tailing for).
    pub fn has_running_agents(&self) -> bool {
        self.runs
            .values()
            .any(|r| r.agents.iter().any(|a| a.finished.is_none()))
    }

    /// One line left on stderr when the view is cleared, once the root run finished:
    /// `answered · 3 steps · 12.4s · 13.2k tokens · run <id>`.
    pub fn summary(&self) -> Option<String> {
        let root = self.runs.get(self.root.as_deref()?)?;
        let (status, _) = root.finished.as_ref()?;
        Some(format!(
            "{status} · {} · run {}",
            footer(root, 0).trim_start(),
            root.run_id
        ))
    }

    /// The picture at `now_ms`: at most `height` lines, none wider than `width` columns.
    pub fn render(&self, now_ms: u64, width: usize, height: usize, colors: bool) -> Vec<String> {
        let paint = Paint::new(colors);
        let mut lines = Vec::new();
        let Some(root) = self.root.as_deref().and_then(|r| self.runs.get(r)) else {
            lines.push(format!("{} starting…", spinner(now_ms)));
            return lines;
        };
        self.render_run(root, 0, now_ms, &paint, &mut lines);
        lines.push(paint.dim(&footer(root, now_ms)));
        if lines.len() > height.max(2) {
            let keep = height.max(2) - 1;
            let hidden = lines.len() - keep;
            let footer = lines.pop().unwrap_or_default();
            lines.truncate(keep - 1);
            lines.push(paint.dim(&format!("  … {hidden} more lines")));
            lines.push(footer);
        }
        lines
            .into_iter()
            .map(|l| console::truncate_str(&l, width.max(10), "…").into_owned())
            .collect()
    }

    fn render_run(
        &self,
        run: &RunNode,
        level: usize,
        now_ms: u64,
        paint: &Paint,
        lines: &mut Vec<String>,
    ) {
        let pad = "  ".repeat(level);
        let (mark, elapsed) = match &run.finished {
            Some((status, ms)) if status == "answered" => (paint.green("✓"), *ms),
            Some((_, ms)) => (paint.red("✗"), *ms),
            None => (
                spinner(now_ms).to_string(),
                now_ms.saturating_sub(run.started_ms),
            ),
        };
        let depth = if run.depth > 0 {
            format!("depth {} · ", run.depth)
        } else {
            String::new()
        };
        lines.push(format!(
            "{pad}{mark} {} {} · {depth}{} · {}",
            paint.bold("run"),
            run.run_id,
            run.model,
            paint.dim(&format!(
                "{} · {} tok · {}",
                duration(elapsed),
                tokens(run.usage_so_far().total()),
                one_line(&run.task, 60)
            )),
        ));
        let inner = "  ".repeat(level + 1);
        let detail = "  ".repeat(level + 2);
        if let Some(step) = &run.step {
            lines.push(format!(
                "{inner}{} step {} {}",
                spinner(now_ms),
                step.iteration,
                paint.dim(&duration(now_ms.saturating_sub(step.started_ms)))
            ));
            if let Some((code, since)) = &step.code {
                lines.push(format!(
                    "{detail}{} {} {}",
                    paint.cyan("$"),
                    code,
                    paint.dim(&format!(
                        "(running {})",
                        duration(now_ms.saturating_sub(*since))
                    ))
                ));
            } else if let Some((error, ms, output)) = &step.last_exec {
                let mark = if *error {
                    paint.red("✗")
                } else {
                    paint.green("✓")
                };
                lines.push(format!(
                    "{detail}{mark} {} {}",
                    paint.dim(&duration(*ms)),
                    paint.dim(&one_line(output, 200))
                ));
            }
            match last_line(&step.streamed) {
                Some(last) => lines.push(format!("{detail}{} {last}", paint.cyan("▸"))),
                None if step.code.is_none() && step.last_exec.is_none() => {
                    lines.push(paint.dim(&format!("{detail}… waiting for {}", run.model)));
                }
                None => {}
            }
        } else if run.finished.is_none() && run.steps_done > 0 {
            lines.push(paint.dim(&format!(
                "{inner}{} step{} done",
                run.steps_done,
                if run.steps_done == 1 { "" } else { "s" }
            )));
        }
        self.render_agents(run, level + 1, now_ms, paint, lines);
    }

    fn render_agents(
        &self,
        run: &RunNode,
        level: usize,
        now_ms: u64,
        paint: &Paint,
        lines: &mut Vec<String>,
    ) {
        let pad = "  ".repeat(level);
        let finished: Vec<&Agent> = run.agents.iter().filter(|a| a.finished.is_some()).collect();
        let running: Vec<&Agent> = run.agents.iter().filter(|a| a.finished.is_none()).collect();
        let older = finished.len().saturating_sub(FINISHED_AGENTS_SHOWN);
        if older > 0 {
            let failed = finished[..older].iter().filter(|a| !agent_ok(a)).count();
            lines.push(paint.dim(&format!(
                "{pad}✓ {older} earlier sub-agent{} finished{}",
                if older == 1 { "" } else { "s" },
                if failed > 0 {
                    format!(" ({failed} failed)")
                } else {
                    String::new()
                }
            )));
        }
        for agent in &finished[older..] {
            let Some((status, ms, usage)) = &agent.finished else {
                continue;
            };
            let mark = if agent_ok(agent) {
                paint.green("✓")
            } else {
                paint.red("✗")
            };
            let used = if usage.total() > 0 {
                format!(" · {} tok", tokens(usage.total()))
            } else {
                String::new()
            };
            lines.push(format!(
                "{pad}{mark} {} {} {}",
                agent.mode,
                agent.agent_id,
                paint.dim(&format!(
                    "{} {}{used} · {}",
                    short_status(status),
                    duration(*ms),
                    one_line(&agent.task, 60)
                )),
            ));
        }
        for agent in running.iter().take(RUNNING_AGENTS_SHOWN) {
            let child = self.runs.get(&agent.agent_id);
            let nested = child.map_or(String::new(), |c| {
                format!(
                    " · depth {} · {} tok",
                    c.depth,
                    tokens(c.usage_so_far().total())
                )
            });
            lines.push(format!(
                "{pad}{} {} {} {}",
                spinner(now_ms),
                agent.mode,
                agent.agent_id,
                paint.dim(&format!(
                    "running {}{nested} · {}",
                    duration(now_ms.saturating_sub(agent.started_ms)),
                    one_line(&agent.task, 60)
                )),
            ));
            if let Some(child) = child {
                let mut nested = Vec::new();
                self.render_run(child, level, now_ms, paint, &mut nested);
                lines.extend(nested.into_iter().skip(1)); // its header is this line
            }
        }
        if running.len() > RUNNING_AGENTS_SHOWN {
            lines.push(paint.dim(&format!(
                "{pad}… {} more running",
                running.len() - RUNNING_AGENTS_SHOWN
            )));
        }
    }
}

fn footer(root: &RunNode, now_ms: u64) -> String {
    let elapsed = match &root.finished {
        Some((_, ms)) => *ms,
        None => now_ms.saturating_sub(root.started_ms),
    };
    let usage = root.usage_so_far();
    let mut parts = vec![
        duration(elapsed),
        format!(
            "{} step{}",
            root.steps_done,
            if root.steps_done == 1 { "" } else { "s" }
        ),
        format!(
            "{} model call{}",
            root.calls.llm_calls,
            if root.calls.llm_calls == 1 { "" } else { "s" }
        ),
        format!(
            "{} tokens ({} in, {} out)",
            tokens(usage.total()),
            tokens(usage.prompt_tokens),
            tokens(usage.completion_tokens)
        ),
    ];
    if !root.agents.is_empty() {
        parts.push(format!(
            "{} sub-agent{}",
            root.agents.len(),
            if root.agents.len() == 1 { "" } else { "s" }
        ));
    }
    if root.cache_hits > 0 {
        parts.push(format!("{} cached", root.cache_hits));
    }
    if let Some(cost) = root.calls.cost_usd {
        parts.push(format!("${cost:.4}"));
    }
    if root.finished.is_none() && root.answered == Some(true) {
        parts.push("forcing an answer".to_owned());
    }
    format!("  {}", parts.join(" · "))
}

impl RunNode {
    /// Tokens of the run and the sub-agents that reported theirs.
    fn usage_so_far(&self) -> Usage {
        if let Some(total) = self.total {
            return total;
        }
        let mut usage = self.calls.usage;
        for agent in &self.agents {
            if let Some((_, _, used)) = &agent.finished {
                usage.add(*used);
            }
        }
        usage
    }
}

fn agent_ok(agent: &Agent) -> bool {
    matches!(&agent.finished, Some((status, _, _)) if status == "exited with code 0")
}

/// `exited with code 0` → `ok`, `exited with code 3` → `exit 3`, the rest as is.
fn short_status(status: &str) -> String {
    match status.strip_prefix("exited with code ") {
        Some("0") => "ok".to_owned(),
        Some(code) => format!("exit {code}"),
        None => status.to_owned(),
    }
}

/// The last non-empty line of streamed text.
fn last_line(text: &str) -> Option<String> {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned)
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

fn spinner(now_ms: u64) -> char {
    SPINNER[(now_ms / 100 % SPINNER.len() as u64) as usize]
}

/// `850ms`, `4.2s`, `2m05s`, `1h02m`.
fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// `950`, `12.4k`, `3.1M` tokens.
fn tokens(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// Colours, or none (for tests and `NO_COLOR`).
struct Paint {
    colors: bool,
}

impl Paint {
    fn new(colors: bool) -> Self {
        Self { colors }
    }
    fn with(&self, style: Style, text: &str) -> String {
        style.force_styling(self.colors).apply_to(text).to_string()
    }
    fn dim(&self, text: &str) -> String {
        self.with(Style::new().dim(), text)
    }
    fn bold(&self, text: &str) -> String {
        self.with(Style::new().bold(), text)
    }
    fn green(&self, text: &str) -> String {
        self.with(Style::new().green(), text)
    }
    fn red(&self, text: &str) -> String {
        self.with(Style::new().red(), text)
    }
    fn cyan(&self, text: &str) -> String {
        self.with(Style::new().cyan(), text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(agent: &str, depth: u32, ts_ms: u64, data: EventData) -> Event {
        Event {
            run_id: format!("run-{agent}"),
            depth,
            agent_id: agent.into(),
            parent_id: None,
            ts_ms,
            data,
        }
    }

    fn started(agent: &str, depth: u32, ts: u64, task: &str) -> Event {
        ev(
            agent,
            depth,
            ts,
            EventData::RunStarted {
                task: task.into(),
                model: "gpt-x".into(),
                env: "python".into(),
                context: None,
                pid: 1,
            },
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
                EventData::LlmCall {
                    model: "gpt-x".into(),
                    purpose: "root".into(),
                    prompt_tokens: 1200,
                    completion_tokens: 80,
                    usage_reported: true,
                    latency_ms: 880,
                    attempts: 1,
                    request_bytes: 4000,
                    cost_usd: None,
                },
            ),
            root(
                1000,
                EventData::Code {
                    iteration: 1,
                    block: 0,
                    code: "\nanswers = spawn_agents(tasks)\nprint(answers)".into(),
                },
            ),
            root(
                1100,
                EventData::SubAgentSpawned {
                    child_agent_id: "a1".into(),
                    mode: "sub_rlm".into(),
                    pid: None,
                    task: "count errors in chunk 1".into(),
                },
            ),
            root(
                1100,
                EventData::SubAgentSpawned {
                    child_agent_id: "a2".into(),
                    mode: "spawn_agent".into(),
                    pid: None,
                    task: "count errors in chunk 2".into(),
                },
            ),
            root(
                3100,
                EventData::SubAgentFinished {
                    child_agent_id: "a2".into(),
                    status: "exited with code 0".into(),
                    duration_ms: 2000,
                    usage: Usage::default(),
                },
            ),
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
            EventData::Code {
                iteration: 1,
                block: 0,
                code: "errors = [l for l in context]".into(),
            },
        ));
        let running = tree.render(500, 80, 20, false).join("\n");
        assert!(
            running.contains("$ errors = [l for l in context] (running 470ms)"),
            "{running}"
        );
        assert!(!running.contains('▸'), "{running}");
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
            tree.apply(&ev(
                "root",
                0,
                1,
                EventData::SubAgentSpawned {
                    child_agent_id: id.clone(),
                    mode: "spawn_agent".into(),
                    pid: None,
                    task: "x".into(),
                },
            ));
            if i < 10 {
                tree.apply(&ev(
                    "root",
                    0,
                    2,
                    EventData::SubAgentFinished {
                        child_agent_id: id,
                        status: if i == 0 {
                            "timed out".into()
                        } else {
                            "exited with code 0".into()
                        },
                        duration_ms: 1,
                        usage: Usage::default(),
                    },
                ));
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

    #[test]
    fn streamed_text_keeps_a_bounded_tail() {
        let mut text = "é".repeat(1000);
        keep_tail(&mut text, 5);
        assert_eq!(text, "éé");
        assert_eq!(last_line("a\nb\n\n"), Some("b".into()));
    }

    #[test]
    fn durations_and_tokens_read_short() {
        assert_eq!(duration(850), "850ms");
        assert_eq!(duration(4_250), "4.2s");
        assert_eq!(duration(125_000), "2m05s");
        assert_eq!(duration(3_720_000), "1h02m");
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(12_400), "12.4k");
        assert_eq!(short_status("exited with code 3"), "exit 3");
    }
}
