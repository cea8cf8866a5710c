//! The `llm` preset end to end with the real `llm` CLI (Simon Willison's, from PyPI),
//! its model played by `mock-llm` on OpenAI chat completions.
//!
//! The root run (the mock's chat completions as `root-model`) splits a log into four
//! chunks and fans them out with `spawn_agents`. Each agent is `llm --no-log
//! --database=<its own> --fragment=<chunk's text view>` with the prompt on stdin. llm's
//! configuration directory (named by `LLM_USER_PATH`, or `~/.config/io.datasette.llm`
//! in a `HOME` of the test's) is set up as docs/agents.md says: an
//! `extra-openai-models.yaml` registering a model whose `api_base` is the mock, made the
//! default with `llm models default`. The mock answers each
//! agent with the number of marked lines it counts in the *fragment text inside that
//! request* (llm puts a fragment's text before the prompt in the user message): the
//! total is right only if llm really attached each file. Nothing is answered from the
//! prompt, which names the file but holds none of its lines.
//!
//! llm creates and migrates a logs database even with `--no-log`: agents starting
//! together on one fresh `$LLM_USER_PATH/logs.db` race to create its tables (`table
//! "tools" already exists`, `database is locked`), which is why the preset gives each
//! agent its own (`--database={agent_tmp}/llm-logs.db`); the tests start from a fresh
//! directory, where the race showed every time.
//!
//! `llm` is found through `RLM_LLM_BIN`, `PATH`, or `/opt/rlm-agents/llm-venv/bin/llm`
//! (where `scripts/agent-clis.sh` installs it); when it is absent the tests say so and
//! pass, except under `CI=true`, where they fail.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockRule, MockScript};
use serde_json::Value;

use crate::real_cli_support::{
    agent_results, find_cli, marked_lines, path_with_cli_dir, survivors, write_log, LINES,
};
use crate::support::{Sandbox, BIN};

/// Where `scripts/agent-clis.sh` installs `llm`.
const LLM_VENV_BIN: &str = "/opt/rlm-agents/llm-venv/bin/llm";

/// The model name llm sends for the agents (the root's is `root-model`).
const AGENT_MODEL: &str = "agent-model";

/// The task each agent gets; the agent's prompt starts with it, after the fragment.
const TASK: &str = "Count the lines marked FAILURE-MARK in your chunk.";

/// Longest a whole run may take before the test ends it and fails.
const RUN_BOUND: Duration = Duration::from_secs(300);

/// The part of an agent's user message before its prompt: the fragments llm attached.
fn fragment_text(message: &str) -> Option<&str> {
    message.find(TASK).map(|end| &message[..end])
}

/// The mock: the root on `root-model`, each agent (on [`AGENT_MODEL`], or llm's own
/// default model when nothing configures one) answered with the
/// count of marked lines in the fragment text of its request.
fn start_mock() -> MockLlmThread {
    let script = MockScript::new()
        .rule(MockRule::function("the root run", |request| {
            (request.body["model"] == "root-model").then(|| {
                let last = request.last_user_message().unwrap_or_default();
                let answered = request.messages().iter().any(|m| m["role"] == "assistant");
                MockReply::text(if last.contains("TOTAL=") {
                    "FINAL_VAR(total)"
                } else if answered {
                    // The fan-out failed: end the run rather than spawn more agents.
                    "FINAL(the agents failed)"
                } else {
                    ROOT_CODE
                })
            })
        }))
        .rule(MockRule::function("an llm agent", |request| {
            (request.body["model"] != "root-model").then(|| {
                let message = request.last_user_message().unwrap_or_default();
                MockReply::text(match fragment_text(&message) {
                    Some(fragment) => marked_lines(fragment).to_string(),
                    None => "no prompt".to_owned(),
                })
            })
        }));
    MockLlm::spawn_blocking_thread(script).unwrap()
}

/// The root's code: four chunks in the store, one agent each, the counts added up.
const ROOT_CODE: &str = r#"```repl
lines = context.splitlines()
n = len(lines)
for i in range(4):
    store.set(f'chunk-{i}', '\n'.join(lines[i * n // 4:(i + 1) * n // 4]) + '\n')
answers = spawn_agents([('Count the lines marked FAILURE-MARK in your chunk.', [f'chunk-{i}']) for i in range(4)])
print('ANSWERS=', answers)
total = sum(int(str(a).strip()) for a in answers)
print('TOTAL=', total)
```"#;

/// Writes llm's configuration directory `dir` as docs/agents.md says: the mock as a
/// model of `extra-openai-models.yaml`, made the default with `llm models default`
/// (run with `env`, which points llm at `dir`).
fn configure_llm(exe: &Path, dir: &Path, env: &[(&str, &Path)], mock: &MockLlmThread) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("extra-openai-models.yaml"),
        format!(
            "- model_id: rlm-mock\n  model_name: {AGENT_MODEL}\n  api_base: \"{}\"\n",
            mock.control().openai_base_url()
        ),
    )
    .unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["models", "default", "rlm-mock"])
        .env_remove("LLM_USER_PATH")
        .env_remove("XDG_CONFIG_HOME");
    for (name, value) in env {
        cmd.env(name, value);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "llm models default: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("default_model.txt"))
            .unwrap()
            .trim(),
        "rlm-mock"
    );
}

/// Runs `cmd` with its output captured, ending it (and failing) after `bound`.
fn output_within(cmd: &mut Command, bound: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        stdout.read_to_end(&mut buf).map(|_| buf)
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        stderr.read_to_end(&mut buf).map(|_| buf)
    });
    let deadline = Instant::now() + bound;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the run did not end within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out_reader.join().unwrap().unwrap(),
        stderr: err_reader.join().unwrap().unwrap(),
    }
}

/// How a fan-out runs `llm`.
struct Setup {
    /// `--agent-sandbox`.
    sandbox: &'static str,
    /// Where llm's configuration is.
    config: Config,
}

/// Where a test puts llm's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Config {
    /// In a directory `LLM_USER_PATH` names.
    UserPath,
    /// Where llm looks without `LLM_USER_PATH`: `~/.config/io.datasette.llm`.
    Home,
    /// Nowhere: llm's default model, reached through `OPENAI_BASE_URL` and
    /// `OPENAI_API_KEY` (passed with `--agent-env OPENAI_BASE_URL`).
    None,
}

/// Runs a four-agent fan-out through the `llm` preset and checks the answer, each
/// agent's request, the results' scope, the prompts in `runs show`, and that nothing
/// is left running.
fn fan_out(setup: &Setup) {
    let Some(exe) = find_cli("llm", "RLM_LLM_BIN", Path::new(LLM_VENV_BIN)) else {
        return;
    };
    let sb = Sandbox::new();
    let mock = start_mock();
    let (log, log_text, marked) = write_log(&sb);
    let home = sb.root().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut config: Vec<(&str, PathBuf)> = vec![("HOME", home.clone())];
    let mut extra: Vec<&str> = Vec::new();
    match setup.config {
        Config::Home => {
            let dir = home.join(".config/io.datasette.llm");
            configure_llm(&exe, &dir, &[("HOME", &home)], &mock);
        }
        Config::UserPath => {
            let dir = sb.root().join("llm-user");
            configure_llm(&exe, &dir, &[("LLM_USER_PATH", &dir)], &mock);
            config.push(("LLM_USER_PATH", dir));
        }
        Config::None => {
            config.push(("OPENAI_API_KEY", PathBuf::from("sk-test")));
            config.push((
                "OPENAI_BASE_URL",
                PathBuf::from(mock.control().openai_base_url()),
            ));
            extra.extend(["--agent-env", "OPENAI_BASE_URL"]);
        }
    }
    let agent = "llm";
    let path = path_with_cli_dir(&exe);
    let mut cmd = Command::new(BIN);
    cmd.current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .env("PATH", path)
        .env_remove("LLM_USER_PATH")
        .env_remove("XDG_CONFIG_HOME")
        .envs(config)
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "How many lines are marked?", "--context"])
        .arg(&log)
        .args(["--base-url", &mock.control().openai_base_url()])
        .args(["--model", "root-model", "--agent", agent])
        .args(["--agent-timeout", "120", "--max-parallel", "4"])
        .args(["--agent-sandbox", setup.sandbox])
        .args(["--retry-base-delay-ms", "5", "--json"])
        .args(extra);
    let out = output_within(&mut cmd, RUN_BOUND);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let vars: Vec<Value> = serde_json::from_slice(
        &sb.vars(&["list", "--json"])
            .assert()
            .success()
            .get_output()
            .stdout,
    )
    .unwrap();
    assert_eq!(
        result["answer"],
        marked.to_string(),
        "the agents answered:\n{}\n{stderr}",
        agent_results(&sb)
    );
    assert_eq!(result["sub_agents"], 4, "{result:#}");

    // Four agent requests, each carrying exactly its chunk as a fragment before the
    // prompt (llm joins the fragment and the prompt with a newline).
    let lines: Vec<&str> = log_text.lines().collect();
    let mut expected: Vec<String> = (0..4)
        .map(|i| lines[i * LINES / 4..(i + 1) * LINES / 4].join("\n") + "\n\n")
        .collect();
    let mut fragments: Vec<String> = mock
        .control()
        .requests()
        .iter()
        .filter(|r| r.body["model"] != "root-model")
        .filter_map(|r| Some(fragment_text(&r.last_user_message()?)?.to_owned()))
        .collect();
    expected.sort();
    fragments.sort();
    assert_eq!(fragments, expected, "each agent's request holds its chunk");

    // Each result (llm's stdout) is a variable scoped to the root.
    let results: Vec<&Value> = vars
        .iter()
        .filter(|v| v["key"].as_str().unwrap().starts_with("sub-result-"))
        .collect();
    assert_eq!(results.len(), 4, "{vars:#?}");
    for var in &results {
        assert!(
            var["scope"].as_str().unwrap().starts_with("agent:"),
            "{var}"
        );
    }

    // The trace shows each agent's prompt.
    let run_id = result["run_id"].as_str().unwrap();
    let shown = sb
        .bare()
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["runs", "show", run_id])
        .assert()
        .success();
    let shown = String::from_utf8_lossy(&shown.get_output().stdout).into_owned();
    assert_eq!(
        shown.matches("prompt: ").count(),
        4,
        "one prompt per agent:\n{shown}"
    );
    assert!(
        shown.contains(TASK) && shown.contains("--- Context variables"),
        "{shown}"
    );

    assert!(
        survivors(&sb.data_dir()).is_empty(),
        "processes left behind"
    );
}

/// The built-in preset on a fresh `LLM_USER_PATH`.
#[test]
fn llm_fans_out_four_agents_that_answer_from_their_fragments() {
    fan_out(&Setup {
        sandbox: "off",
        config: Config::UserPath,
    });
}

/// Confined, llm (a Python script in a virtual environment) may read its environment,
/// the Python it was made from and `$LLM_USER_PATH` (the preset's `confined_read`).
#[test]
fn llm_fans_out_under_the_agent_sandbox() {
    fan_out(&Setup {
        sandbox: "on",
        config: Config::UserPath,
    });
}

/// Without `LLM_USER_PATH`, llm's configuration is in `~/.config/io.datasette.llm`;
/// confined, the agent's `HOME` is its temporary directory, and the preset still points
/// llm at that configuration (docs/agents.md).
#[test]
fn llm_under_the_agent_sandbox_keeps_the_config_in_its_home() {
    fan_out(&Setup {
        sandbox: "on",
        config: Config::Home,
    });
}

/// With no configuration at all, a confined llm still starts (its configuration
/// directory, which it cannot create outside its temporary directory, is not named
/// for it) and reaches its default model with the key and base URL passed.
#[test]
fn llm_under_the_agent_sandbox_runs_without_any_config() {
    fan_out(&Setup {
        sandbox: "on",
        config: Config::None,
    });
}

#[test]
fn llm_keeps_the_config_in_its_home() {
    fan_out(&Setup {
        sandbox: "off",
        config: Config::Home,
    });
}
