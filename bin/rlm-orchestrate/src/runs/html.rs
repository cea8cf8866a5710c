//! `runs show --html`: one self-contained page per run tree.
//!
//! The page is rendered here, on the server side, so it reads with JavaScript off:
//! collapsing is `<details>`, the tree is a list of in-page links. The template
//! (`viewer.html`) carries the CSS and a small script (expand/collapse all, open the
//! target of a link). Everything that comes from a trace — model text, code, output,
//! tasks, ids — is HTML-escaped before it is written, and the page's Content Security
//! Policy allows no network request at all and only the template's own style and
//! script (by hash), so even a missed escape could not load or run anything.

mod template;

use std::fmt::Write as _;

use rlm_orchestrator::env::ReplVariable;
use rlm_orchestrator::format;
use rlm_orchestrator::trace::{RunState, RunSummary, RunTrace, Step, StepItem, SubAgent};

use self::template::esc;
use super::{cost, duration, plural, preview, thousands};

/// Nested runs deeper than this start collapsed.
const OPEN_DEPTH: u32 = 1;

/// Outputs with at most this many lines start expanded.
const OPEN_OUTPUT_LINES: usize = 8;

/// Renders the page of `trace` and the runs beneath it.
pub fn render(trace: &RunTrace) -> String {
    let s = &trace.summary;
    let task = s.task.as_deref().unwrap_or("(no task recorded)");
    let title = format!("rlm run {} · {}", s.run_id, preview(task, 60));
    let mut body = String::new();
    header(&mut body, trace);
    body.push_str("<div class=\"layout\">\n<nav class=\"tree\" aria-label=\"Runs and sub-agents\">\n<h2>Runs and sub-agents</h2>\n<ul>\n");
    tree_run(&mut body, trace);
    body.push_str("</ul>\n</nav>\n<main>\n<div class=\"toolbar\" id=\"toolbar\"></div>\n");
    run_section(&mut body, trace);
    body.push_str("</main>\n</div>\n");
    let _ = writeln!(
        body,
        "<footer>Written by rlm-orchestrate {} from <code>{}</code>. Self-contained: no network requests; every text from the trace is escaped.</footer>",
        esc(env!("CARGO_PKG_VERSION")),
        esc(&s.dir.display().to_string()),
    );
    template::page(&title, &body)
}

// ----- the header -----

fn header(out: &mut String, trace: &RunTrace) {
    let s = &trace.summary;
    out.push_str("<header class=\"top\">\n<div class=\"brand\">rlm · run trace</div>\n");
    let _ = writeln!(
        out,
        "<h1 class=\"task\">{}</h1>",
        esc(s.task.as_deref().unwrap_or("(no task recorded)"))
    );
    let _ = writeln!(
        out,
        "<div class=\"badges\">{} <code class=\"run-id\">{}</code></div>",
        status_badge(&s.status),
        esc(s.run_id.as_str())
    );
    out.push_str("<dl class=\"facts\">\n");
    let started = s.started_ms.map_or_else(
        || "—".to_owned(),
        |t| format!("{} UTC", format::utc_time(t)),
    );
    fact(out, "Started", &esc(&started));
    fact(
        out,
        "Duration",
        &s.duration_ms.map_or_else(|| "—".to_owned(), duration),
    );
    fact(out, "Iterations", &s.iterations.to_string());
    fact(out, "Sub-agents", &s.totals.sub_agents.to_string());
    fact(out, "Model calls", &s.totals.llm_calls.to_string());
    fact(
        out,
        "Tokens",
        &format!(
            "{} <small>{} in · {} out</small>",
            thousands(s.totals.usage.total()),
            thousands(s.totals.usage.prompt_tokens),
            thousands(s.totals.usage.completion_tokens)
        ),
    );
    fact(out, "Cost", &esc(&cost_or_dash(s.totals.cost_usd)));
    if let Some(model) = &s.model {
        fact(out, "Model", &esc(model));
    }
    out.push_str("</dl>\n");
    if let Some(error) = &s.error {
        let _ = writeln!(
            out,
            "<section class=\"error-box\"><h2>Error</h2><pre>{}</pre></section>",
            esc(error)
        );
    }
    let _ = writeln!(
        out,
        "<section class=\"answer\" id=\"answer\"><h2>Answer</h2>{}</section>",
        match &s.answer {
            Some(answer) => format!("<pre class=\"answer-text\">{}</pre>", esc(answer)),
            None => "<p class=\"none\">No answer recorded.</p>".to_owned(),
        }
    );
    out.push_str("</header>\n");
}

fn fact(out: &mut String, label: &str, value_html: &str) {
    let _ = writeln!(out, "<div><dt>{label}</dt><dd>{value_html}</dd></div>");
}

// ----- the tree of runs and sub-agents -----

fn tree_run(out: &mut String, trace: &RunTrace) {
    let s = &trace.summary;
    let _ = write!(
        out,
        "<li class=\"tree-run\"><a href=\"#{}\">{} run <code>{}</code></a> <span class=\"meta\">{} · {}</span>",
        run_anchor(s),
        status_dot(&s.status),
        esc(s.run_id.as_str()),
        esc(s.status.as_str()),
        plural(trace.steps.len() as u64, "step")
    );
    let agents: Vec<&SubAgent> = trace.sub_agents().collect();
    if !agents.is_empty() || !trace.other_children.is_empty() {
        out.push_str("\n<ul>\n");
        for agent in agents {
            let _ = write!(
                out,
                "<li class=\"tree-agent\"><a href=\"#{}\">{} <code>{}</code></a> <span class=\"meta\">{}</span>",
                agent_anchor(agent.agent_id.as_str()),
                esc(agent.mode.as_str()),
                esc(agent.agent_id.as_str()),
                esc(agent.status.as_deref().unwrap_or("no end recorded"))
            );
            if !agent.runs.is_empty() {
                out.push_str("\n<ul>\n");
                for run in &agent.runs {
                    tree_run(out, run);
                }
                out.push_str("</ul>\n");
            }
            out.push_str("</li>\n");
        }
        for run in &trace.other_children {
            tree_run(out, run);
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</li>\n");
}

// ----- runs and steps -----

fn run_section(out: &mut String, trace: &RunTrace) {
    let s = &trace.summary;
    let _ = writeln!(
        out,
        "<section class=\"run depth-{depth}\" id=\"{}\" data-run-id=\"{}\" data-depth=\"{depth}\">",
        run_anchor(s),
        esc(s.run_id.as_str()),
        depth = s.depth
    );
    let _ = writeln!(
        out,
        "<details class=\"run-details\"{}>",
        open_if(s.depth <= OPEN_DEPTH)
    );
    let _ = write!(
        out,
        "<summary class=\"run-head\"><span class=\"depth\">depth {}</span> run <code>{}</code> {} <span class=\"meta\">{} · {} tokens{}</span>",
        s.depth,
        esc(s.run_id.as_str()),
        status_badge(&s.status),
        plural(trace.steps.len() as u64, "step"),
        thousands(s.totals.usage.total()),
        s.duration_ms
            .map_or_else(String::new, |ms| format!(" · {}", duration(ms)))
    );
    if s.depth > 0 {
        if let Some(task) = &s.task {
            let _ = write!(
                out,
                "<span class=\"run-task\">{}</span>",
                esc(&preview(task, 160))
            );
        }
    }
    out.push_str("</summary>\n<div class=\"run-body\">\n");
    if s.depth > 0 {
        run_facts(out, trace);
    }
    out.push_str("<ol class=\"steps\">\n");
    for step in &trace.steps {
        step_html(out, trace, step);
    }
    out.push_str("</ol>\n");
    if !trace.outside_steps.is_empty() {
        out.push_str("<div class=\"after-steps\"><h3>After the steps</h3>\n");
        for item in &trace.outside_steps {
            item_html(out, item);
        }
        out.push_str("</div>\n");
    }
    for child in &trace.other_children {
        out.push_str("<p class=\"note\">A nested run whose parent's trace does not say which sub-agent started it:</p>\n");
        run_section(out, child);
    }
    out.push_str("</div>\n</details>\n</section>\n");
}

/// The facts of a nested run (the root's are in the page header).
fn run_facts(out: &mut String, trace: &RunTrace) {
    let s = &trace.summary;
    out.push_str("<dl class=\"run-facts\">\n");
    if let Some(task) = s.task.as_ref().filter(|t| preview(t, 160) != **t) {
        // The summary line shows only the start of it.
        let _ = writeln!(out, "<dt>Task</dt><dd class=\"pre\">{}</dd>", esc(task));
    }
    if let Some(model) = &s.model {
        let _ = writeln!(out, "<dt>Model</dt><dd>{}</dd>", esc(model));
    }
    if let Some(agent) = &s.agent_id {
        let _ = writeln!(
            out,
            "<dt>Agent</dt><dd><code>{}</code></dd>",
            esc(agent.as_str())
        );
    }
    let _ = writeln!(
        out,
        "<dt>Usage</dt><dd>{} · {} · {} in · {} out · cost {}</dd>",
        plural(u64::from(s.iterations), "iteration"),
        plural(s.totals.llm_calls, "model call"),
        thousands(s.totals.usage.prompt_tokens),
        thousands(s.totals.usage.completion_tokens),
        esc(&cost_or_dash(s.totals.cost_usd))
    );
    if let Some(error) = &s.error {
        let _ = writeln!(
            out,
            "<dt>Error</dt><dd class=\"pre err\">{}</dd>",
            esc(error)
        );
    }
    let _ = writeln!(
        out,
        "<dt>Answer</dt><dd class=\"pre answer-text\">{}</dd>",
        esc(s.answer.as_deref().unwrap_or("—"))
    );
    out.push_str("</dl>\n");
}

fn step_html(out: &mut String, trace: &RunTrace, step: &Step) {
    let s = &trace.summary;
    let mut meta = Vec::new();
    if let (Some(start), Some(run_start)) = (step.started_ms, s.started_ms) {
        meta.push(format!("+{}", duration(start.saturating_sub(run_start))));
    }
    if let Some(ms) = step.duration_ms {
        meta.push(duration(ms));
    }
    let usage = step.usage();
    if usage.total() > 0 {
        meta.push(format!(
            "{} → {} tokens",
            thousands(usage.prompt_tokens),
            thousands(usage.completion_tokens)
        ));
    }
    let agents = step
        .items
        .iter()
        .filter(|i| matches!(i, StepItem::SubAgent(_)))
        .count();
    if agents > 0 {
        meta.push(format!(
            "{agents} sub-agent{}",
            if agents == 1 { "" } else { "s" }
        ));
    }
    let _ = writeln!(
        out,
        "<li><details class=\"step\" id=\"{}-step-{}\" open><summary><span class=\"step-no\">Step {}</span> <span class=\"meta\">{}</span></summary>\n<div class=\"step-body\">",
        run_anchor(s),
        step.iteration,
        step.iteration,
        esc(&meta.join(" · "))
    );
    for item in &step.items {
        item_html(out, item);
    }
    out.push_str("</div>\n</details></li>\n");
}

fn item_html(out: &mut String, item: &StepItem) {
    match item {
        StepItem::LlmCall(call) => {
            let mut line = format!(
                "<span class=\"tag\">model call</span> {} · {} · {} → {} tokens · {}",
                esc(call.purpose.as_str()),
                esc(&call.model),
                thousands(call.prompt_tokens),
                thousands(call.completion_tokens),
                duration(call.latency_ms)
            );
            if call.cost_usd.is_some() {
                let _ = write!(line, " · {}", esc(&cost_or_dash(call.cost_usd)));
            }
            let _ = writeln!(out, "<div class=\"call\">{line}</div>");
        }
        StepItem::Text { prose, .. } => {
            if !prose.is_empty() {
                let _ = writeln!(
                    out,
                    "<div class=\"prose\"><div class=\"label\">Model</div><div class=\"pre\">{}</div></div>",
                    esc(prose)
                );
            }
        }
        StepItem::Code(record) => {
            let _ = writeln!(
                out,
                "<details class=\"code\" open><summary>Code [{}] <span class=\"meta\">{}</span></summary><pre><code>{}</code></pre></details>",
                record.block,
                plural(record.code.lines().count() as u64, "line"),
                esc(&record.code)
            );
        }
        StepItem::Output(exec) => {
            let lines = exec.output.lines().count();
            let mut flags = String::new();
            if exec.timed_out {
                flags.push_str(" <span class=\"flag err\">timed out</span>");
            } else if exec.error {
                flags.push_str(" <span class=\"flag err\">raised</span>");
            }
            let _ = writeln!(
                out,
                "<details class=\"output{}\"{}><summary>Output [{}]{flags} <span class=\"meta\">{} · {}</span></summary><pre>{}</pre></details>",
                if exec.error || exec.timed_out { " failed" } else { "" },
                open_if(lines <= OPEN_OUTPUT_LINES),
                exec.block,
                duration(exec.duration_ms),
                plural(lines as u64, "line"),
                if exec.output.is_empty() {
                    "<span class=\"none\">(nothing printed)</span>".to_owned()
                } else {
                    esc(&exec.output)
                }
            );
        }
        StepItem::Variables { variables } => variables_html(out, variables),
        StepItem::SubAgent(agent) => agent_html(out, agent),
        StepItem::CacheHit(hit) => {
            let _ = writeln!(
                out,
                "<div class=\"call\"><span class=\"tag\">cache</span> {} answered from the cache (<code>{}</code>)</div>",
                esc(hit.call.as_str()),
                esc(&hit.key)
            );
        }
        StepItem::Plan(record) => {
            let _ = writeln!(
                out,
                "<div class=\"call\"><span class=\"tag\">plan</span> {}</div>",
                esc(&super::plan_line(record))
            );
        }
        StepItem::Compacted(record) => {
            let _ = writeln!(
                out,
                "<div class=\"notice\"><strong>Compacted</strong> <span class=\"pre\">{}</span></div>",
                esc(&super::compaction_summary(record))
            );
        }
        StepItem::Correction(record) => {
            let _ = writeln!(
                out,
                "<div class=\"notice\"><strong>Correction {} ({}, {})</strong> <span class=\"pre\">{}</span></div>",
                esc(&record.rule),
                record.hook.as_str(),
                record.verdict.as_str(),
                esc(&record.text)
            );
        }
        StepItem::Warning { message } => {
            let _ = writeln!(
                out,
                "<div class=\"notice warn\"><strong>Warning</strong> <span class=\"pre\">{}</span></div>",
                esc(message)
            );
        }
        StepItem::Error { message } => {
            let _ = writeln!(
                out,
                "<div class=\"notice err\"><strong>Error</strong> <span class=\"pre\">{}</span></div>",
                esc(message)
            );
        }
        StepItem::Final(record) => {
            let _ = writeln!(
                out,
                "<div class=\"final{}\"><div class=\"label\">Final answer <span class=\"meta\">· {}</span></div><pre>{}</pre></div>",
                if record.forced { " forced" } else { "" },
                esc(&super::answer_label(record).replace(", ", " · ")),
                esc(&record.answer)
            );
        }
    }
}

fn agent_html(out: &mut String, agent: &SubAgent) {
    let mut meta = Vec::new();
    if let Some(ms) = agent.duration_ms {
        meta.push(duration(ms));
    }
    if let Some(usage) = agent.usage.filter(|u| u.total() > 0) {
        meta.push(format!("{} tokens", thousands(usage.total())));
    }
    let status = agent.status.as_deref().unwrap_or("no end recorded");
    let ok = status.contains("code 0");
    let _ = writeln!(
        out,
        "<details class=\"agent\" id=\"{}\" data-agent-id=\"{}\" data-mode=\"{}\" open><summary><span class=\"mode\">{}</span> <code>{}</code> <span class=\"agent-status {}\">{}</span> <span class=\"meta\">{}</span><span class=\"agent-task\">{}</span></summary>\n<div class=\"agent-body\">",
        agent_anchor(agent.agent_id.as_str()),
        esc(agent.agent_id.as_str()),
        esc(agent.mode.as_str()),
        esc(agent.mode.as_str()),
        esc(agent.agent_id.as_str()),
        if ok { "ok" } else { "bad" },
        esc(status),
        esc(&meta.join(" · ")),
        esc(&preview(&agent.task, 160))
    );
    out.push_str("<dl class=\"agent-facts\">\n");
    if preview(&agent.task, 160) != agent.task {
        // The summary line shows only the start of it.
        let _ = writeln!(
            out,
            "<dt>Task</dt><dd class=\"pre\">{}</dd>",
            esc(&agent.task)
        );
    }
    if let Some(prompt) = &agent.prompt_preview {
        let path = agent
            .prompt_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<dt>Prompt</dt><dd><details class=\"prompt\"><summary><code>{}</code></summary><pre>{}</pre></details></dd>",
            esc(&path),
            esc(prompt)
        );
    }
    if let Some(result) = &agent.result_preview {
        let _ = writeln!(
            out,
            "<dt>Result</dt><dd><details class=\"result\"{}><summary>{}{}</summary><pre>{}</pre></details></dd>",
            open_if(result.lines().count() <= OPEN_OUTPUT_LINES),
            plural(result.lines().count() as u64, "line"),
            if agent.result_truncated { ", first part" } else { "" },
            esc(result)
        );
    }
    out.push_str("</dl>\n");
    for run in &agent.runs {
        run_section(out, run);
    }
    out.push_str("</div>\n</details>\n");
}

fn variables_html(out: &mut String, list: &[ReplVariable]) {
    if list.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<details class=\"vars\"><summary>Variables <span class=\"meta\">{}</span></summary><table><thead><tr><th>name</th><th>type</th><th>size</th><th>preview</th></tr></thead><tbody>",
        list.len()
    );
    for var in list {
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"pre\">{}</td></tr>",
            esc(&var.name),
            esc(&var.type_name),
            var.size,
            esc(&preview(&var.preview, 120))
        );
    }
    out.push_str("</tbody></table></details>\n");
}

// ----- small pieces -----

fn status_badge(status: &RunState) -> String {
    let status = status.as_str();
    format!(
        "<span class=\"status s-{}\">{}</span>",
        class_name(status),
        esc(status)
    )
}

fn status_dot(status: &RunState) -> String {
    let status = status.as_str();
    format!(
        "<span class=\"dot s-{}\" title=\"{}\"></span>",
        class_name(status),
        esc(status)
    )
}

fn cost_or_dash(cost_usd: Option<f64>) -> String {
    match cost_usd {
        Some(_) => cost(cost_usd),
        None => "—".to_owned(),
    }
}

fn open_if(open: bool) -> &'static str {
    if open {
        " open"
    } else {
        ""
    }
}

fn run_anchor(s: &RunSummary) -> String {
    format!("run-{}", class_name(s.run_id.as_str()))
}

fn agent_anchor(agent_id: &str) -> String {
    format!("agent-{}", class_name(agent_id))
}

/// `text` reduced to `[A-Za-z0-9_-]`, for ids and class names.
fn class_name(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
