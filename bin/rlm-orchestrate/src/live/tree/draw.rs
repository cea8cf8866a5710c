//! How the live tree looks: a pure function of the state, the time and the terminal
//! size ([`Tree::render`]), so the picture can be tested without a terminal. Each run
//! is a header line, its open step (streamed text, running code) and its sub-agents,
//! with nested runs indented beneath the sub-agent that started them; a footer sums
//! the root run up.

use console::Style;
use rlm_orchestrator::events::RunStatus;
use rlm_orchestrator::trace::{StepItem, SubAgent};

use super::{RunNode, Tree};
use crate::output::escape_controls;

/// Finished sub-agents drawn one by one; older ones are summed up in one line.
const FINISHED_AGENTS_SHOWN: usize = 3;
/// Running sub-agents drawn one by one; more are counted.
const RUNNING_AGENTS_SHOWN: usize = 8;
/// Spinner frames, one per 100 ms.
const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

impl Tree {
    /// The picture at `now_ms`: at most `height` lines, none wider than `width` columns.
    pub fn render(&self, now_ms: u64, width: usize, height: usize, colors: bool) -> Vec<String> {
        let paint = Paint::new(colors);
        let mut lines = Vec::new();
        let Some(root) = self.root.as_ref().and_then(|r| self.runs.get(r)) else {
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
        let (mark, elapsed) = match &run.fold.finished {
            Some(f) if f.status == RunStatus::Answered => (paint.green("✓"), f.duration_ms),
            Some(f) => (paint.red("✗"), f.duration_ms),
            None => (
                spinner(now_ms).to_string(),
                now_ms.saturating_sub(run.started_ms()),
            ),
        };
        let depth = if run.fold.depth > 0 {
            format!("depth {} · ", run.fold.depth)
        } else {
            String::new()
        };
        lines.push(format!(
            "{pad}{mark} {} {} · {depth}{} · {}",
            paint.bold("run"),
            run.run_id(),
            run.model(),
            paint.dim(&format!(
                "{} · {} tok · {}",
                duration(elapsed),
                tokens(run.usage_so_far().total()),
                one_line(run.task(), 60)
            )),
        ));
        let inner = "  ".repeat(level + 1);
        let detail = "  ".repeat(level + 2);
        if let Some(step) = run.open_step() {
            lines.push(format!(
                "{inner}{} step {} {}",
                spinner(now_ms),
                step.iteration,
                paint.dim(&duration(
                    now_ms.saturating_sub(step.started_ms.unwrap_or(now_ms))
                ))
            ));
            let running_code = run.code_started_ms.and_then(|since| {
                let code = step.items.iter().rev().find_map(StepItem::as_code)?;
                Some((first_line(&code.code), since))
            });
            let last_exec = step.items.iter().rev().find_map(StepItem::as_output);
            if let Some((code, since)) = &running_code {
                lines.push(format!(
                    "{detail}{} {} {}",
                    paint.cyan("$"),
                    code,
                    paint.dim(&format!(
                        "(running {})",
                        duration(now_ms.saturating_sub(*since))
                    ))
                ));
            } else if let Some(exec) = last_exec {
                let mark = if exec.error {
                    paint.red("✗")
                } else {
                    paint.green("✓")
                };
                lines.push(format!(
                    "{detail}{mark} {} {}",
                    paint.dim(&duration(exec.duration_ms)),
                    paint.dim(&one_line(&first_line(&exec.output), 200))
                ));
            }
            match last_line(&run.streamed) {
                Some(last) => lines.push(format!("{detail}{} {last}", paint.cyan("▸"))),
                None if running_code.is_none() && last_exec.is_none() => {
                    lines.push(paint.dim(&format!("{detail}… waiting for {}", run.model())));
                }
                None => {}
            }
        } else if run.fold.finished.is_none() && run.fold.steps_done() > 0 {
            let done = run.fold.steps_done();
            lines.push(paint.dim(&format!(
                "{inner}{done} step{} done",
                if done == 1 { "" } else { "s" }
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
        let finished: Vec<&SubAgent> = run
            .fold
            .sub_agents()
            .filter(|a| a.status.is_some())
            .collect();
        let running: Vec<&SubAgent> = run
            .fold
            .sub_agents()
            .filter(|a| a.status.is_none())
            .collect();
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
            let Some(status) = &agent.status else {
                continue;
            };
            let mark = if agent_ok(agent) {
                paint.green("✓")
            } else {
                paint.red("✗")
            };
            let usage = agent.usage.unwrap_or_default();
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
                    duration(agent.duration_ms.unwrap_or(0)),
                    one_line(&agent.task, 60)
                )),
            ));
        }
        for agent in running.iter().take(RUNNING_AGENTS_SHOWN) {
            let child = self.runs.get(&agent.agent_id);
            let nested = child.map_or(String::new(), |c| {
                format!(
                    " · depth {} · {} tok",
                    c.fold.depth,
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
                    duration(now_ms.saturating_sub(agent.spawned_ms)),
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

/// The root run's figures: time, steps, model calls, tokens, sub-agents, cost.
pub(super) fn footer(root: &RunNode, now_ms: u64) -> String {
    let fold = &root.fold;
    let elapsed = match &fold.finished {
        Some(f) => f.duration_ms,
        None => now_ms.saturating_sub(root.started_ms()),
    };
    let usage = root.usage_so_far();
    let steps = fold.steps_done();
    let calls = fold.calls.llm_calls;
    let mut parts = vec![
        duration(elapsed),
        format!("{steps} step{}", if steps == 1 { "" } else { "s" }),
        format!("{calls} model call{}", if calls == 1 { "" } else { "s" }),
        format!(
            "{} tokens ({} in, {} out)",
            tokens(usage.total()),
            tokens(usage.prompt_tokens),
            tokens(usage.completion_tokens)
        ),
    ];
    let agents = fold.sub_agents().count();
    if agents > 0 {
        parts.push(format!(
            "{agents} sub-agent{}",
            if agents == 1 { "" } else { "s" }
        ));
    }
    if fold.cache_hits > 0 {
        parts.push(format!("{} cached", fold.cache_hits));
    }
    // The tree's cost once the run reports it, else its own calls'.
    let cost = match &fold.finished {
        Some(f) => f.cost_usd,
        None => fold.calls.cost_usd,
    };
    if let Some(cost) = cost {
        parts.push(format!("${cost:.4}"));
    }
    if fold.finished.is_none() && root.forcing() {
        parts.push("forcing an answer".to_owned());
    }
    format!("  {}", parts.join(" · "))
}

fn agent_ok(agent: &SubAgent) -> bool {
    agent.status.as_deref() == Some("exited with code 0")
}

/// The first non-blank line of `text`, trimmed.
fn first_line(text: &str) -> String {
    escape_controls(
        text.lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim(),
    )
}

/// [`rlm_orchestrator::format::one_line`] with terminal escapes (from the model, its
/// code or an agent) shown, never obeyed.
fn one_line(text: &str, max: usize) -> String {
    escape_controls(&rlm_orchestrator::format::one_line(text, max))
}

/// `exited with code 0` → `ok`, `exited with code 3` → `exit 3`, the rest as is.
fn short_status(status: &str) -> String {
    match status.strip_prefix("exited with code ") {
        Some("0") => "ok".to_owned(),
        Some(code) => format!("exit {}", escape_controls(code)),
        None => escape_controls(status),
    }
}

/// The last non-empty line of streamed text.
fn last_line(text: &str) -> Option<String> {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(escape_controls)
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
    use super::super::keep_tail;
    use super::*;

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
