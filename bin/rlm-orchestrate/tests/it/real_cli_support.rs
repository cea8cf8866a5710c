//! What the end-to-end tests with the real agent CLIs share: finding a CLI (or
//! skipping, except under `CI=true`), the log the agents count in, each agent's result
//! for a failure message, and the processes a run left behind.

use std::path::{Path, PathBuf};

use crate::support::Sandbox;

/// Marks the lines the agents count.
pub const MARK: &str = "FAILURE-MARK";

/// How every line of the log starts (so a prompt's own mention of the mark is never
/// counted).
pub const LINE_START: &str = "2026-11-25 line ";

/// Lines of the log; line `i` is marked when `i % 7 == 0` or `i % 11 == 0`.
pub const LINES: usize = 400;

/// Where `scripts/agent-clis.sh` installs the npm CLIs (Claude Code, Codex).
pub const NPM_BIN_DIR: &str = "/opt/rlm-agents/node_modules/.bin";

/// `PATH` with the directory of the CLI `exe` first, so a preset that names the CLI by
/// its bare name runs this one.
pub fn path_with_cli_dir(exe: &Path) -> String {
    let dir = exe.parent().unwrap_or_else(|| Path::new("."));
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The CLI `name`: `$variable`, else on `PATH`, else `installed` (where
/// `scripts/agent-clis.sh` puts it); `None`, with the reason printed, when absent —
/// which fails the test under `CI=true`.
pub fn find_cli(name: &str, variable: &str, installed: &Path) -> Option<PathBuf> {
    let found = std::env::var_os(variable)
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join(name))
                    .find(|candidate| candidate.is_file())
            })
        })
        .or_else(|| Some(installed.to_owned()))
        .filter(|path| path.is_file());
    if found.is_none() {
        let reason = format!(
            "skipped: `{name}` is not installed (set {variable}, put it on PATH, or run scripts/agent-clis.sh, which installs it as {})",
            installed.display()
        );
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{reason} — CI=true requires the real CLI"
        );
        #[allow(clippy::print_stderr, reason = "a skipped test says why")]
        {
            eprintln!("{reason}");
        }
    }
    found
}

/// The marked log lines in `text`.
pub fn marked_lines(text: &str) -> usize {
    text.lines()
        .filter(|line| line.starts_with(LINE_START) && line.contains(MARK))
        .count()
}

/// Writes the log `app.log`: its path, its text and how many lines are marked.
pub fn write_log(sb: &Sandbox) -> (PathBuf, String, usize) {
    let mut text = String::new();
    for i in 0..LINES {
        if i % 7 == 0 || i % 11 == 0 {
            text.push_str(&format!("{LINE_START}{i} level=error {MARK} disk full\n"));
        } else {
            text.push_str(&format!("{LINE_START}{i} level=info request served\n"));
        }
    }
    let marked = marked_lines(&text);
    (sb.file("app.log", &text), text, marked)
}

/// Every agent's result (`sub-result-*`), for a failure message.
pub fn agent_results(sb: &Sandbox) -> String {
    let out = sb.vars(&["list", "--json"]).output().unwrap();
    let vars: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    vars.iter()
        .filter_map(|v| v["key"].as_str())
        .filter(|key| key.starts_with("sub-result-"))
        .map(|key| format!("{key}: {}", String::from_utf8_lossy(&sb.get(key))))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Processes still running (zombies count as gone) with this data directory in their
/// environment: what a run left behind.
pub fn survivors(data_dir: &Path) -> Vec<u32> {
    let needle = format!("RLM_DATA_DIR={}", data_dir.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        });
        if !zombie
            && environ
                .split(|&b| b == 0)
                .any(|var| var == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}
