//! `runs show` as text: a run's story for a terminal, depth by depth.
//!
//! Each run opens with its header (task, status, timing, tokens, answer), then its
//! steps; a sub-agent is listed in the step that started it, and the runs it started
//! follow indented beneath it. Long texts, code and outputs are cut to their first
//! lines unless `--full`. Model and program text can hold anything, so control
//! characters (terminal escapes) are shown escaped, never sent to the terminal.

use std::io::{self, Write};

use rlm_orchestrator::env::{EnvKind, ReplVariable};
use rlm_orchestrator::format;
use rlm_orchestrator::trace::{RunTrace, StepItem, SubAgent};

use super::{cost, duration, plural, preview};
use crate::output;

/// Lines of a text, code or output block shown without `--full`.
const BLOCK_LINES: usize = 12;

/// Characters of a block shown without `--full`.
const BLOCK_CHARS: usize = 2000;

/// Spaces added per level of nesting.
const INDENT: usize = 2;

/// Variable names listed after a step before `…`.
const VARIABLE_NAMES: usize = 12;

/// Writes the trace of `trace` (and the runs beneath it).
pub fn render(trace: &RunTrace, full: bool, out: &mut dyn Write) -> io::Result<()> {
    Renderer { out, full }.run(trace, 0)
}

/// What a step's actions are called: code and its output, or tool calls and results.
#[derive(Debug, Clone, Copy)]
struct Words {
    code: &'static str,
    output: &'static str,
    error: &'static str,
}

impl Words {
    fn of(trace: &RunTrace) -> Self {
        match trace.env {
            Some(EnvKind::Tools | EnvKind::Plan) => Self {
                code: "tool call",
                output: "result",
                error: " · error",
            },
            Some(EnvKind::Python | EnvKind::Js) | None => Self {
                code: "code",
                output: "output",
                error: " · raised",
            },
        }
    }
}

/// One line about the context from its description in the trace: kind, size, where it
/// came from, and whether it was referenced (read whole or lazily) or copied.
fn context_line(context: &serde_json::Value) -> String {
    let text = |key: &str| context.get(key).and_then(serde_json::Value::as_str);
    let number = |key: &str| context.get(key).and_then(serde_json::Value::as_u64);
    let flag = |key: &str| context.get(key).and_then(serde_json::Value::as_bool) == Some(true);
    let about = if flag("estimated") { "about " } else { "" };
    let mut line = text("kind").unwrap_or("?").to_owned();
    if let Some(bytes) = number("total_bytes") {
        line.push_str(&format!(" · {}", format::human_bytes(bytes)));
    }
    if let Some(chars) = number("total_chars") {
        line.push_str(&format!(" · {about}{chars} characters"));
    }
    if let Some(lines) = number("lines") {
        line.push_str(&format!(" · {about}{lines} lines"));
    }
    if let Some(items) = number("items") {
        line.push_str(&format!(" · {items} items"));
    }
    if let Some(origin) = text("origin") {
        line.push_str(&format!(" · {}", output::escape_controls(origin)));
    }
    line.push_str(match (flag("referenced"), flag("lazy")) {
        (true, true) => " · referenced, read lazily",
        (true, false) => " · referenced, read whole",
        (false, _) => " · in the store",
    });
    line
}

struct Renderer<'a> {
    out: &'a mut dyn Write,
    full: bool,
}

impl Renderer<'_> {
    fn run(&mut self, trace: &RunTrace, indent: usize) -> io::Result<()> {
        let s = &trace.summary;
        let pad = " ".repeat(indent);
        let mut title = format!("run {} · {} · depth {}", s.run_id, s.status, s.depth);
        if let Some(agent) = &s.agent_id {
            title.push_str(&format!(
                " · agent {}",
                output::escape_controls(agent.as_str())
            ));
        }
        writeln!(self.out, "{pad}{title}")?;
        let inner = indent + INDENT;
        if let Some(task) = &s.task {
            self.field(inner, "task", task)?;
        }
        if let Some(model) = &s.model {
            let env = trace.env.map_or("?", EnvKind::as_str);
            self.field(inner, "model", &format!("{model} · env {env}"))?;
        }
        if let Some(context) = &trace.context {
            self.field(inner, "context", &context_line(context))?;
        }
        let mut when = s.started_ms.map_or_else(
            || "-".to_owned(),
            |t| format!("{} UTC", format::utc_time(t)),
        );
        if let Some(ms) = s.duration_ms {
            when.push_str(&format!(" · took {}", duration(ms)));
        }
        self.field(inner, "started", &when)?;
        self.field(
            inner,
            "usage",
            &format!(
                "{} · {} · {} + {} = {} tokens · cost {}",
                plural(u64::from(s.iterations), "iteration"),
                plural(s.totals.llm_calls, "model call"),
                s.totals.usage.prompt_tokens,
                s.totals.usage.completion_tokens,
                s.totals.usage.total(),
                cost(s.totals.cost_usd),
            ),
        )?;
        if s.totals.sub_agents > 0 {
            self.field(inner, "sub-agents", &s.totals.sub_agents.to_string())?;
        }
        if let Some(error) = &s.error {
            self.field(inner, "error", error)?;
        }
        match &s.answer {
            Some(answer) => self.field(inner, "answer", answer)?,
            None => self.field(inner, "answer", "(none)")?,
        }
        for step in &trace.steps {
            writeln!(self.out)?;
            let mut head = format!("step {}", step.iteration);
            if let Some(ms) = step.duration_ms {
                head.push_str(&format!(" · {}", duration(ms)));
            }
            writeln!(self.out, "{}{head}", " ".repeat(inner))?;
            for item in &step.items {
                self.item(item, inner + INDENT, Words::of(trace))?;
            }
        }
        if !trace.outside_steps.is_empty() {
            writeln!(self.out)?;
            writeln!(self.out, "{}after the steps", " ".repeat(inner))?;
            for item in &trace.outside_steps {
                self.item(item, inner + INDENT, Words::of(trace))?;
            }
        }
        for child in &trace.other_children {
            writeln!(self.out)?;
            writeln!(
                self.out,
                "{}nested run (its parent's trace does not say which sub-agent started it):",
                " ".repeat(inner)
            )?;
            self.run(child, inner + INDENT)?;
        }
        Ok(())
    }

    fn item(&mut self, item: &StepItem, indent: usize, words: Words) -> io::Result<()> {
        let pad = " ".repeat(indent);
        match item {
            StepItem::LlmCall(call) => {
                let mut line = format!(
                    "model call · {} · {} · {} + {} tokens · {}",
                    call.purpose,
                    output::escape_controls(&call.model),
                    call.prompt_tokens,
                    call.completion_tokens,
                    duration(call.latency_ms)
                );
                if call.cost_usd.is_some() {
                    line.push_str(&format!(" · {}", cost(call.cost_usd)));
                }
                writeln!(self.out, "{pad}{line}")
            }
            StepItem::Text { prose, .. } => {
                if prose.is_empty() {
                    return Ok(());
                }
                writeln!(self.out, "{pad}text:")?;
                self.block(prose, indent + INDENT)
            }
            StepItem::Code(record) => {
                writeln!(self.out, "{pad}{} [{}]:", words.code, record.block)?;
                self.block(&record.code, indent + INDENT)
            }
            StepItem::Output(exec) => {
                let mut head = format!(
                    "{} [{}] · {}",
                    words.output,
                    exec.block,
                    duration(exec.duration_ms)
                );
                if exec.timed_out {
                    head.push_str(" · timed out");
                } else if exec.error {
                    head.push_str(words.error);
                }
                writeln!(self.out, "{pad}{head}:")?;
                if exec.output.is_empty() {
                    writeln!(self.out, "{pad}  (nothing printed)")
                } else {
                    self.block(&exec.output, indent + INDENT)
                }
            }
            StepItem::Variables { variables } => {
                let names = variable_names(variables);
                if names.is_empty() {
                    return Ok(());
                }
                writeln!(self.out, "{pad}variables: {names}")
            }
            StepItem::SubAgent(agent) => self.agent(agent, indent),
            StepItem::CacheHit(hit) => writeln!(
                self.out,
                "{pad}{} answered from the cache ({})",
                hit.call,
                output::escape_controls(&hit.key)
            ),
            StepItem::Compacted(record) => {
                self.field(indent, "compacted", &super::compaction_summary(record))
            }
            StepItem::Plan(record) => writeln!(
                self.out,
                "{pad}{}",
                output::escape_controls(&super::plan_line(record))
            ),
            StepItem::Correction(record) => self.field(
                indent,
                &format!(
                    "correction {} ({}, {})",
                    output::escape_controls(&record.rule),
                    record.hook.as_str(),
                    record.verdict.as_str()
                ),
                &record.text,
            ),
            StepItem::Warning { message } => self.field(indent, "warning", message),
            StepItem::Error { message } => self.field(indent, "error", message),
            StepItem::Final(record) => {
                writeln!(
                    self.out,
                    "{pad}final answer ({}):",
                    super::answer_label(record)
                )?;
                self.block(&record.answer, indent + INDENT)
            }
        }
    }

    fn agent(&mut self, agent: &SubAgent, indent: usize) -> io::Result<()> {
        let pad = " ".repeat(indent);
        let mut head = format!(
            "sub-agent {} · {}",
            output::escape_controls(agent.agent_id.as_str()),
            agent.mode
        );
        match (&agent.status, agent.duration_ms) {
            (Some(status), Some(ms)) => head.push_str(&format!(" · {status} · {}", duration(ms))),
            (Some(status), None) => head.push_str(&format!(" · {status}")),
            (None, _) => head.push_str(" · no end recorded"),
        }
        if let Some(usage) = agent.usage.filter(|u| u.total() > 0) {
            head.push_str(&format!(" · {} tokens", usage.total()));
        }
        writeln!(self.out, "{pad}{head}")?;
        let inner = indent + INDENT;
        self.field(inner, "task", &agent.task)?;
        if let Some(path) = &agent.prompt_file {
            // What the agent was told, whatever its template: the file, then its start.
            let mut shown = path.display().to_string();
            if let Some(prompt) = &agent.prompt_preview {
                shown.push('\n');
                shown.push_str(&preview_lines(prompt, PROMPT_LINES_SHOWN));
            }
            self.field(inner, "prompt", &shown)?;
        }
        if let Some(result) = &agent.result_preview {
            let mut shown = preview(result, 200);
            if agent.result_truncated && !shown.ends_with('…') {
                shown.push('…');
            }
            self.field(inner, "result", &shown)?;
        }
        for run in &agent.runs {
            self.run(run, inner)?;
        }
        Ok(())
    }

    /// `label: value` where a multi-line value continues on indented lines.
    fn field(&mut self, indent: usize, label: &str, value: &str) -> io::Result<()> {
        let pad = " ".repeat(indent);
        let value = clean(value);
        let mut lines = value.lines();
        let first = lines.next().unwrap_or("");
        writeln!(self.out, "{pad}{label}: {first}")?;
        let rest: Vec<&str> = lines.collect();
        if !rest.is_empty() {
            let text = rest.join("\n");
            self.block(&text, indent + label.len() + 2)?;
        }
        Ok(())
    }

    /// A block of text, indented, cut to its first lines unless `--full`.
    fn block(&mut self, text: &str, indent: usize) -> io::Result<()> {
        let pad = " ".repeat(indent);
        let text = clean(text.trim_end_matches('\n'));
        let lines: Vec<&str> = text.lines().collect();
        let mut chars = 0;
        for (i, line) in lines.iter().enumerate() {
            if !self.full && (i == BLOCK_LINES || chars > BLOCK_CHARS) {
                writeln!(
                    self.out,
                    "{pad}… {} more lines (--full shows everything)",
                    lines.len() - i
                )?;
                return Ok(());
            }
            chars += line.chars().count();
            let line: String = if self.full {
                (*line).to_owned()
            } else {
                let mut cut: String = line.chars().take(BLOCK_CHARS).collect();
                if line.chars().count() > BLOCK_CHARS {
                    cut.push('…');
                }
                cut
            };
            if line.is_empty() {
                writeln!(self.out)?;
            } else {
                writeln!(self.out, "{pad}{line}")?;
            }
        }
        Ok(())
    }
}

/// Control characters escaped except newlines; tabs become spaces.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push('\n'),
            '\t' => out.push_str("    "),
            '\r' => {}
            c if c.is_control() => out.extend(c.escape_debug()),
            c => out.push(c),
        }
    }
    out
}

/// `a (int), b (str), …` from a `variables_updated` list.
fn variable_names(list: &[ReplVariable]) -> String {
    let mut names: Vec<String> = list
        .iter()
        .take(VARIABLE_NAMES)
        .map(|v| {
            format!(
                "{} ({})",
                output::escape_controls(&v.name),
                output::escape_controls(&v.type_name)
            )
        })
        .collect();
    if list.len() > VARIABLE_NAMES {
        names.push(format!("… {} more", list.len() - VARIABLE_NAMES));
    }
    names.join(", ")
}

/// Lines of an agent's prompt `runs show` prints (the task and its first references).
const PROMPT_LINES_SHOWN: usize = 8;

/// The first `count` lines of `text`, with `…` when there are more.
fn preview_lines(text: &str, count: usize) -> String {
    let mut lines = text.lines();
    let mut shown: Vec<&str> = lines.by_ref().take(count).collect();
    if lines.next().is_some() || text.ends_with('…') {
        shown.push("…");
    }
    shown.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escapes_are_shown_not_obeyed() {
        assert_eq!(clean("a\u{1b}[2Jb\tc\r\n"), "a\\u{1b}[2Jb    c\n");
    }

    #[test]
    fn variables_are_listed_by_name_and_type() {
        let var = |name: &str, type_name: &str| ReplVariable {
            name: name.into(),
            type_name: type_name.into(),
            size: 1,
            preview: String::new(),
        };
        let vars = [var("n", "int"), var("words", "list")];
        assert_eq!(variable_names(&vars), "n (int), words (list)");
        assert_eq!(variable_names(&[]), "");
    }
}
