//! Integration tests of external sub-agents: real processes (`fake-agent` from
//! `rlm-test-support`, the example scripts in `scripts/agents/`) run through
//! `run_external_agent` against a real store.
//!
//! No sleep is used for synchronisation and nothing asserts on durations: agents
//! signal readiness through files the tests poll for (bounded), and "no survivors" is
//! checked in `/proc` (zombies ignored) with a bounded poll.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Once, OnceLock};
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use rlm_context_store::{Durability, SetOptions, Store, StoreOptions};
use rlm_orchestrator::agents::{
    agent_prompt, result_key, run_external_agent, AgentCommand, AgentOutcome, AgentRef,
    AnswerChannel, ExternalAgentSpec, Lineage, OUTPUT_TRUNCATED_MARKER,
};
use rlm_orchestrator::ids::AgentId;
use rlm_process::{CancellationToken, Termination};
use rlm_test_support::procs::running;
use serde_json::{json, Value};
use tempfile::TempDir;

/// Upper bound of every poll (only reached when a test fails).
const POLL_LIMIT: Duration = Duration::from_secs(30);
const POLL_STEP: Duration = Duration::from_millis(10);
/// Agent timeout for agents meant to finish (never reached when the test passes).
const GENEROUS_TIMEOUT: Duration = Duration::from_secs(120);
const FAKE_KEYS: [(&str, &str); 2] = [
    ("OPENAI_API_KEY", "sk-test-must-not-leak"),
    ("ANTHROPIC_API_KEY", "sk-ant-test-must-not-leak"),
];

/// Sets fake API keys in this process (once, before any agent starts) and returns
/// the path of the `fake-agent` binary, building it if it is missing or older than its
/// source (`cargo test -p rlm-orchestrator` does not build other packages' bins).
fn fake_agent() -> &'static Path {
    static KEYS: Once = Once::new();
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    KEYS.call_once(|| {
        for (name, value) in FAKE_KEYS {
            std::env::set_var(name, value);
        }
        // An agent must get its own id even when `--agent-env` names this variable.
        std::env::set_var("RLM_AGENT_ID", "intruder");
    });
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().unwrap().parent().unwrap().to_owned();
        let bin = profile_dir.join("fake-agent");
        let source =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../test-support/src/bin/fake-agent.rs");
        let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let fresh = match (modified(&bin), modified(&source)) {
            (Some(bin), Some(source)) => bin >= source,
            _ => false,
        };
        if !fresh {
            let mut build = Command::new(env!("CARGO"));
            build
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "rlm-test-support",
                    "--bin",
                    "fake-agent",
                ])
                .arg("--target-dir")
                .arg(profile_dir.parent().unwrap());
            match profile_dir.file_name().and_then(|n| n.to_str()) {
                Some("debug") => {}
                Some("release") => {
                    build.arg("--release");
                }
                Some(other) => {
                    build.args(["--profile", other]);
                }
                None => {}
            }
            let status = build.status().unwrap();
            assert!(status.success(), "building fake-agent failed");
        }
        assert!(bin.exists(), "{} is missing", bin.display());
        bin
    })
}

fn repo_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

/// `fake-agent` followed by `args` (shell words) as an agent command.
fn fake(args: &str) -> AgentCommand {
    let program = shell_words::quote(fake_agent().to_str().unwrap()).into_owned();
    AgentCommand::parse(&format!("{program} {args}")).unwrap()
}

struct Fixture {
    dir: TempDir,
    store: Arc<Store>,
}

impl Fixture {
    fn new() -> Self {
        fake_agent();
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            durability: Durability::Bulk,
            ..StoreOptions::default()
        };
        let store = Arc::new(Store::open_with(dir.path().join("data"), options).unwrap());
        Self { dir, store }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn spec(&self, task: &str, refs: Vec<AgentRef>) -> ExternalAgentSpec {
        ExternalAgentSpec {
            lineage: Lineage::root(AgentId::parse("run-parent").unwrap())
                .child(AgentId::generate()),
            data_dir: self.dir.path().join("data"),
            task: task.to_owned(),
            refs,
            timeout: GENEROUS_TIMEOUT,
            stdout_cap: 1024 * 1024,
            sandbox: None,
            runner: rlm_orchestrator::runner::Runner::Local,
            pass_env: Vec::new(),
            set_env: Vec::new(),
            rlm_bin: None,
            confined_read: Vec::new(),
            cancel: None,
            abandoned: None,
        }
    }

    /// The prompt `spec` gives its agent.
    fn expected_prompt(&self, spec: &ExternalAgentSpec, refs: &[AgentRef]) -> String {
        let key = result_key(&spec.lineage.agent_id);
        let answer = AnswerChannel {
            result_file: self.store.path_of(&key).unwrap(),
            result_key: key,
            rlm_bin: None,
        };
        agent_prompt(&spec.task, refs, &answer)
    }

    fn text_var(&self, key: &str, text: &str) -> AgentRef {
        self.store
            .set(key, json!(text), SetOptions::default())
            .unwrap();
        AgentRef::from_store(&self.store, key).unwrap()
    }

    async fn run(&self, command: &AgentCommand, spec: ExternalAgentSpec) -> AgentOutcome {
        run_external_agent(command, spec, Arc::clone(&self.store)).await
    }

    /// The stored result, read back through a fresh store (as another process would).
    fn stored(&self, key: &str) -> (Value, String) {
        let store = Store::open(self.dir.path().join("data")).unwrap();
        let value = store.get(key).unwrap();
        (Value::clone(&value), store.reference(key).unwrap().scope)
    }
}

/// Running processes started for `agent_id` (found by `RLM_AGENT_ID` in their
/// environment, which every descendant inherits).
fn processes_of(agent_id: &str) -> Vec<u32> {
    let needle = format!("RLM_AGENT_ID={agent_id}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| running(pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|e| e == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// Polls until none of `pids` and no process of `agent_id` runs.
async fn assert_no_survivors(agent_id: &str, pids: &[u32]) {
    let start = Instant::now();
    loop {
        let mut alive: Vec<u32> = pids.iter().copied().filter(|&p| running(p)).collect();
        alive.extend(processes_of(agent_id));
        if alive.is_empty() {
            return;
        }
        assert!(start.elapsed() < POLL_LIMIT, "survivors: {alive:?}");
        tokio::time::sleep(POLL_STEP).await;
    }
}

/// Waits until `path` exists, then returns the pids in it.
async fn wait_for_file(path: &Path) -> Vec<u32> {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        }
        assert!(
            start.elapsed() < POLL_LIMIT,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(POLL_STEP).await;
    }
}

#[tokio::test]
async fn stdout_is_the_answer_and_is_stored_in_the_parent_scope() {
    let fx = Fixture::new();
    let spec = fx.spec("What is six times seven?", vec![]);
    let outcome = fx.run(&fake("answer 'forty two'"), spec).await;
    assert!(outcome.ok, "{:?}", outcome.value);
    assert_eq!(outcome.value, json!("forty two"));
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert!(!outcome.stored_by_agent);
    assert_eq!(outcome.result_key, result_key(&outcome.agent_id));
    assert!(outcome.pid > 0);
    let (stored, scope) = fx.stored(&outcome.result_key);
    assert_eq!(stored, json!("forty two"));
    assert_eq!(scope, "agent:run-parent");
}

#[tokio::test]
async fn a_result_stored_by_the_agent_wins_over_its_stdout() {
    let fx = Fixture::new();
    let text = fx
        .run(&fake("write-result 'from the store'"), fx.spec("t", vec![]))
        .await;
    assert!(text.ok);
    assert!(text.stored_by_agent);
    assert_eq!(text.value, json!("from the store"));
    assert_eq!(fx.stored(&text.result_key).0, json!("from the store"));

    let structured = fx
        .run(
            &fake(r#"write-result-json '{"count": 3, "lines": [1, 2]}'"#),
            fx.spec("t", vec![]),
        )
        .await;
    assert!(structured.stored_by_agent);
    assert_eq!(structured.value, json!({"count": 3, "lines": [1, 2]}));
}

/// A result stored the way the agent prompt describes (the file written by hand with
/// the header the prompt gives, which claims 0 bytes, time 0 and scope "agent") becomes
/// a sound variable: its real size and time, scope `agent:<parent>`, text trimmed like
/// an answer on stdout (issue 23, item 3).
#[tokio::test]
async fn a_result_written_as_the_prompt_says_becomes_a_sound_variable_of_the_parent() {
    let fx = Fixture::new();
    let script = r#"printf '{"ref":{"id":"1","key":"%s","scope":"agent","type":"text","sizeBytes":0,"createdAt":0},"value":"the answer from the file   "}' "$RLM_RESULT_KEY" > "$RLM_RESULT_FILE.tmp" && mv "$RLM_RESULT_FILE.tmp" "$RLM_RESULT_FILE"; echo noise"#;
    let command = AgentCommand::parse(&format!("sh -c {}", shell_words::quote(script))).unwrap();
    let spec = fx.spec("t", vec![]);
    let parent = spec.lineage.parent_id.clone().unwrap();
    let outcome = fx.run(&command, spec).await;
    assert!(outcome.ok, "{}", outcome.value);
    assert!(outcome.stored_by_agent, "{}", outcome.value);
    assert_eq!(outcome.value, json!("the answer from the file"));
    let store = Store::open(fx.dir.path().join("data")).unwrap();
    let reference = store.reference(&outcome.result_key).unwrap();
    assert_eq!(reference.scope, parent.scope());
    assert_eq!(
        reference.size_bytes,
        serde_json::to_vec(&json!("the answer from the file"))
            .unwrap()
            .len() as u64
    );
    assert!(
        reference.created_at > 0,
        "created at {}",
        reference.created_at
    );
    assert_eq!(
        *store.get(&outcome.result_key).unwrap(),
        json!("the answer from the file")
    );
}

/// A result the agent stored under the wrong scope (what `vars set` does by default)
/// is moved to `agent:<parent>`, where the parent's results live.
#[tokio::test]
async fn a_result_stored_in_the_global_scope_is_moved_to_the_parents() {
    let fx = Fixture::new();
    let spec = fx.spec("t", vec![]);
    let parent = spec.lineage.parent_id.clone().unwrap();
    let key = rlm_orchestrator::agents::result_key(&spec.lineage.agent_id);
    // As `rlm-orchestrate vars set "$RLM_RESULT_KEY"` stores it: a sound file, scope global.
    let store = Store::open(fx.dir.path().join("data")).unwrap();
    store
        .set(&key, json!("stored globally\n"), SetOptions::default())
        .unwrap();
    let outcome = fx.run(&fake("slow 0 ignored"), spec).await;
    assert!(outcome.stored_by_agent);
    assert_eq!(outcome.value, json!("stored globally"));
    let (value, scope) = fx.stored(&key);
    assert_eq!(value, json!("stored globally"));
    assert_eq!(scope, parent.scope());
}

/// How an agent answers, for a prompt built outside a run.
fn answer_channel(key: &str) -> AnswerChannel {
    AnswerChannel {
        result_key: key.to_owned(),
        result_file: PathBuf::from(format!("/data/variables/{key}.json")),
        rlm_bin: None,
    }
}

#[tokio::test]
async fn without_prompt_placeholders_the_prompt_goes_to_stdin() {
    let fx = Fixture::new();
    let refs = vec![fx.text_var("chunk-0", "some text")];
    let spec = fx.spec("Summarise chunk-0.", refs.clone());
    let expected = fx.expected_prompt(&spec, &refs);
    let command = fake("echo-prompt");
    assert!(command.reads_stdin());
    let outcome = fx.run(&command, spec).await;
    assert_eq!(outcome.value, json!(expected.trim()));
}

#[tokio::test]
async fn the_prompt_as_an_argument_or_a_private_file() {
    let fx = Fixture::new();
    let refs = vec![fx.text_var("chunk-0", "some text")];

    let spec = fx.spec("Task as one argument.", refs.clone());
    let expected = fx.expected_prompt(&spec, &refs);
    let outcome = fx.run(&fake("echo-prompt --prompt {prompt}"), spec).await;
    assert_eq!(outcome.value, json!(expected.trim()));

    let spec = fx.spec("Task in a file.", refs.clone());
    let id = spec.lineage.agent_id.clone();
    let expected = fx.expected_prompt(&spec, &refs);
    let outcome = fx
        .run(&fake("echo-prompt --prompt-file {prompt_file}"), spec)
        .await;
    assert_eq!(outcome.value, json!(expected.trim()));
    let file = fx
        .file("data")
        .join("agents")
        .join(id.as_str())
        .join("prompt.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), expected);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
}

#[tokio::test]
async fn result_file_and_agent_id_placeholders() {
    let fx = Fixture::new();
    let spec = fx.spec("t", vec![]);
    let id = spec.lineage.agent_id.clone();
    let outcome = fx
        .run(&fake("echo-args {agent_id} 'x {result_file}'"), spec)
        .await;
    let path = fx.store.path_of(&result_key(&id)).unwrap();
    let args: Value = serde_json::from_str(outcome.value.as_str().unwrap()).unwrap();
    assert_eq!(args, json!([id, format!("x {}", path.display())]));
    assert!(path.is_absolute());
}

#[tokio::test]
async fn the_environment_has_the_rlm_variables_and_no_api_key_unless_passed() {
    let fx = Fixture::new();
    let spec = fx.spec("t", vec![]);
    let id = spec.lineage.agent_id.clone();
    let outcome = fx.run(&fake("echo-env"), spec).await;
    let env: Value = serde_json::from_str(outcome.value.as_str().unwrap()).unwrap();
    let data_dir = std::path::absolute(fx.file("data")).unwrap();
    assert_eq!(env["RLM_DATA_DIR"], json!(data_dir.to_str().unwrap()));
    assert_eq!(env["RLM_AGENT_ID"], json!(id.as_str()));
    assert_eq!(env["RLM_PARENT_ID"], json!("run-parent"));
    assert_eq!(env["RLM_DEPTH"], json!("1"));
    assert_eq!(env["RLM_RESULT_KEY"], json!(format!("sub-result-{id}")));
    let result_file = fx.store.path_of(&result_key(&id)).unwrap();
    assert_eq!(env["RLM_RESULT_FILE"], json!(result_file.to_str().unwrap()));
    assert_eq!(env["api_keys"], json!([]), "no API key unless passed");
    for (_, secret) in FAKE_KEYS {
        assert!(!outcome.value.as_str().unwrap().contains(secret));
    }

    let mut spec = fx.spec("t", vec![]);
    spec.pass_env = vec!["OPENAI_API_KEY".to_owned(), "RLM_AGENT_ID".to_owned()];
    let id = spec.lineage.agent_id.clone();
    let outcome = fx.run(&fake("echo-env"), spec).await;
    let env: Value = serde_json::from_str(outcome.value.as_str().unwrap()).unwrap();
    assert_eq!(env["api_keys"], json!(["OPENAI_API_KEY"]));
    assert_eq!(
        env["RLM_AGENT_ID"],
        json!(id.as_str()),
        "RLM_* cannot be overridden"
    );
}

#[tokio::test]
async fn the_prompt_grows_by_about_200_bytes_per_reference_whatever_the_size() {
    let fx = Fixture::new();
    let small = fx.text_var("small-var", &"a".repeat(1024));
    let mut huge_text = std::io::Read::take(std::io::repeat(b'a'), 100 * 1024 * 1024);
    fx.store
        .set_text_from_reader("large-var", &mut huge_text, "test", SetOptions::default())
        .unwrap();
    let large = AgentRef::from_store(&fx.store, "large-var").unwrap();
    assert!(large.size_bytes > 100 * 1024 * 1024);

    let none = agent_prompt("Find the needle.", &[], &answer_channel("sub-result-x")).len();
    let with_small = agent_prompt(
        "Find the needle.",
        std::slice::from_ref(&small),
        &answer_channel("sub-result-x"),
    )
    .len();
    let with_large = agent_prompt(
        "Find the needle.",
        std::slice::from_ref(&large),
        &answer_channel("sub-result-x"),
    )
    .len();
    // Only the size's digits differ (1026 vs 104857602).
    assert!(with_large - with_small < 10, "{with_small} vs {with_large}");
    let ten: Vec<AgentRef> = (0..10).map(|_| large.clone()).collect();
    let with_ten = agent_prompt("Find the needle.", &ten, &answer_channel("sub-result-x")).len();
    let per_ref = (with_ten - with_large) / 9;
    assert!(
        (100..=250).contains(&per_ref),
        "{per_ref} bytes per reference"
    );
    assert!(with_small - none < 400);

    // What the agent actually receives is that prompt, not the data.
    let spec = fx.spec("Find the needle.", vec![large]);
    let outcome = fx.run(&fake("echo-prompt"), spec).await;
    assert!(outcome.value.as_str().unwrap().len() < 2_000);
}

#[tokio::test]
async fn a_non_zero_exit_is_an_error_object_the_model_can_read() {
    let fx = Fixture::new();
    let outcome = fx.run(&fake("exit-code 3"), fx.spec("t", vec![])).await;
    assert!(!outcome.ok);
    assert_eq!(outcome.termination, Termination::Exited(3));
    assert_eq!(outcome.value["exit_code"], 3);
    assert!(outcome.value["error"]
        .as_str()
        .unwrap()
        .contains("exited with code 3"));
    assert!(outcome.value["stderr_tail"]
        .as_str()
        .unwrap()
        .contains("failing on purpose"));
    let (stored, scope) = fx.stored(&outcome.result_key);
    assert_eq!(stored, outcome.value);
    assert_eq!(scope, "agent:run-parent");
}

#[tokio::test]
async fn a_long_answer_is_cut_at_the_cap_with_a_marker() {
    let fx = Fixture::new();
    let mut spec = fx.spec("t", vec![]);
    spec.stdout_cap = 65_536;
    let outcome = fx.run(&fake("print-bytes 5000000"), spec).await;
    assert!(outcome.ok);
    let text = outcome.value.as_str().unwrap();
    assert!(text.starts_with(&"x".repeat(65_536)));
    assert!(text.contains(OUTPUT_TRUNCATED_MARKER));
    assert!(text.ends_with("the first 65536 of 5000000 bytes are kept]"));
    assert!(text.len() < 65_536 + 200);
}

#[tokio::test]
async fn endless_output_is_bounded_and_the_agent_is_killed_at_the_timeout() {
    let fx = Fixture::new();
    let pids_file = fx.file("pids");
    let mut spec = fx.spec("t", vec![]);
    spec.stdout_cap = 65_536;
    spec.timeout = Duration::from_secs(2);
    let id = spec.lineage.agent_id.clone();
    let command = fake(&format!(
        "--pids-file {} print-gigabytes",
        pids_file.display()
    ));
    let outcome = fx.run(&command, spec).await;
    assert_eq!(outcome.termination, Termination::TimedOut);
    assert!(!outcome.ok);
    assert_eq!(outcome.value["timed_out"], true);
    assert!(outcome.value["stdout"]
        .as_str()
        .unwrap()
        .contains(OUTPUT_TRUNCATED_MARKER));
    let pids = wait_for_file(&pids_file).await;
    assert_no_survivors(id.as_str(), &pids).await;
}

#[tokio::test]
async fn a_hanging_agent_and_its_grandchildren_are_killed_at_the_timeout() {
    let fx = Fixture::new();
    let pids_file = fx.file("pids");
    let mut spec = fx.spec("t", vec![]);
    spec.timeout = Duration::from_secs(3);
    let id = spec.lineage.agent_id.clone();
    // 4 children (two of which setsid out of the group) and a double-forked daemon.
    let command = fake(&format!(
        "--pids-file {} fork-grandchildren 4",
        pids_file.display()
    ));
    let outcome = fx.run(&command, spec).await;
    assert_eq!(outcome.termination, Termination::TimedOut);
    assert_eq!(outcome.value["timed_out"], true);
    let pids = wait_for_file(&pids_file).await;
    assert_eq!(pids.len(), 6, "the agent, 4 children and the daemon");
    assert_no_survivors(id.as_str(), &pids).await;
    assert_eq!(fx.stored(&outcome.result_key).0, outcome.value);
}

#[tokio::test]
async fn cancellation_ends_the_agent_and_everything_it_started() {
    let fx = Fixture::new();
    let pids_file = fx.file("pids");
    let token = CancellationToken::new();
    let mut spec = fx.spec("t", vec![]);
    spec.cancel = Some(token.clone());
    let id = spec.lineage.agent_id.clone();
    let command = fake(&format!(
        "--pids-file {} fork-grandchildren 2",
        pids_file.display()
    ));
    let store = Arc::clone(&fx.store);
    let run = tokio::spawn(async move { run_external_agent(&command, spec, store).await });
    let pids = wait_for_file(&pids_file).await;
    assert!(pids.iter().all(|&p| running(p)));
    token.cancel();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.termination, Termination::Cancelled);
    assert_eq!(outcome.value["cancelled"], true);
    assert_no_survivors(id.as_str(), &pids).await;
}

#[tokio::test]
async fn an_agent_ignoring_sigterm_is_sigkilled_after_the_grace() {
    let fx = Fixture::new();
    let ready = fx.file("ready");
    let token = CancellationToken::new();
    let mut spec = fx.spec("t", vec![]);
    spec.cancel = Some(token.clone());
    let id = spec.lineage.agent_id.clone();
    let command = fake(&format!(
        "--ready-file {} --linger 1 ignore-sigterm",
        ready.display()
    ));
    let store = Arc::clone(&fx.store);
    let run = tokio::spawn(async move { run_external_agent(&command, spec, store).await });
    wait_for_file(&ready).await;
    token.cancel();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.termination, Termination::Cancelled);
    assert!(
        outcome.value["error"]
            .as_str()
            .unwrap()
            .contains("SIGKILLed"),
        "{}",
        outcome.value
    );
    assert_no_survivors(id.as_str(), &[outcome.pid]).await;
}

#[tokio::test]
async fn children_holding_stdout_open_do_not_hold_the_answer_hostage() {
    let fx = Fixture::new();
    let pids_file = fx.file("pids");
    let spec = fx.spec("t", vec![]);
    let id = spec.lineage.agent_id.clone();
    let command = fake(&format!(
        "--linger 2 --pids-file {} answer done",
        pids_file.display()
    ));
    let outcome = fx.run(&command, spec).await;
    assert!(outcome.ok);
    assert_eq!(outcome.value, json!("done"));
    assert_no_survivors(id.as_str(), &wait_for_file(&pids_file).await).await;
}

#[tokio::test]
async fn sixteen_agents_four_at_a_time() {
    let fx = Fixture::new();
    let command = fake("slow 20 {agent_id}");
    let specs: Vec<ExternalAgentSpec> = (0..16)
        .map(|i| fx.spec(&format!("job {i}"), vec![]))
        .collect();
    let outcomes: Vec<AgentOutcome> = stream::iter(specs)
        .map(|spec| run_external_agent(&command, spec, Arc::clone(&fx.store)))
        .buffer_unordered(4)
        .collect()
        .await;
    assert_eq!(outcomes.len(), 16);
    for outcome in &outcomes {
        assert!(outcome.ok, "{:?}", outcome.value);
        assert_eq!(outcome.value, json!(outcome.agent_id.as_str()));
        assert_eq!(
            fx.stored(&outcome.result_key).0,
            json!(outcome.agent_id.as_str())
        );
    }
    let mut ids: Vec<&str> = outcomes.iter().map(|o| o.agent_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 16);
}

#[tokio::test]
async fn a_missing_program_is_an_error_object_too() {
    let fx = Fixture::new();
    let command = AgentCommand::parse("/nonexistent/rlm-agent {prompt}").unwrap();
    let outcome = fx.run(&command, fx.spec("t", vec![])).await;
    assert!(!outcome.ok);
    assert_eq!(outcome.termination, Termination::Exited(127));
    assert_eq!(outcome.pid, 0);
    let error = outcome.value["error"].as_str().unwrap();
    assert!(error.contains("/nonexistent/rlm-agent"), "{error}");
    assert!(error.contains("--agent-cmd"), "{error}");
    assert_eq!(fx.stored(&outcome.result_key).0, outcome.value);
}

#[tokio::test]
async fn a_prompt_too_long_for_one_argument_fails_fast_with_a_hint() {
    let fx = Fixture::new();
    let task = "y".repeat(200 * 1024);
    let outcome = fx
        .run(
            &fake("echo-prompt --prompt {prompt}"),
            fx.spec(&task, vec![]),
        )
        .await;
    assert!(!outcome.ok);
    assert_eq!(outcome.pid, 0);
    assert!(outcome.value["error"]
        .as_str()
        .unwrap()
        .contains("{prompt_file}"));
    // The same task through a file works.
    let outcome = fx
        .run(
            &fake("echo-prompt --prompt-file {prompt_file}"),
            fx.spec(&task, vec![]),
        )
        .await;
    assert!(outcome.ok);
    assert!(outcome.value.as_str().unwrap().starts_with(&task));
}

/// The model and the trace are told the same exit code for an agent that never ran:
/// 127 for a program that is not there, 126 for one that could not be started (the
/// model was told 127 for both while the trace said 126).
#[tokio::test]
async fn an_agent_that_never_ran_reports_one_exit_code_to_the_model_and_the_trace() {
    let fx = Fixture::new();
    let missing = AgentCommand::parse("/nonexistent/rlm-agent {prompt}").unwrap();
    let outcome = fx.run(&missing, fx.spec("t", vec![])).await;
    assert_eq!(outcome.termination, Termination::Exited(127));
    assert_eq!(outcome.value["exit_code"], 127);
    assert_eq!(outcome.value["status"], "error");

    let too_long = fx
        .run(
            &fake("echo-prompt --prompt {prompt}"),
            fx.spec(&"y".repeat(200 * 1024), vec![]),
        )
        .await;
    assert_eq!(too_long.termination, Termination::Exited(126));
    assert_eq!(too_long.value["exit_code"], 126, "{}", too_long.value);
    assert_eq!(fx.stored(&too_long.result_key).0, too_long.value);
}

#[tokio::test]
async fn an_unreadable_stored_result_is_replaced_by_the_stdout_answer() {
    let fx = Fixture::new();
    let command =
        AgentCommand::parse(r#"sh -c 'echo "not json" > "$RLM_RESULT_FILE"; echo fallback'"#)
            .unwrap();
    let outcome = fx.run(&command, fx.spec("t", vec![])).await;
    assert!(outcome.ok);
    assert!(!outcome.stored_by_agent);
    assert_eq!(outcome.value, json!("fallback"));
    assert_eq!(fx.stored(&outcome.result_key).0, json!("fallback"));
}

#[tokio::test]
async fn the_grep_agent_script_counts_matching_lines() {
    let fx = Fixture::new();
    let logs =
        "ok login alice\nlogin failed bob\nok login carol\nlogin failed dave\nlogin failed erin\n";
    // One variable copied into the store, one referencing a file where it is: the
    // agent reads the variable file of the first and the log itself for the second.
    let log = fx.dir.path().join("more.log");
    std::fs::write(
        &log,
        "login failed frank
ok login gina
",
    )
    .unwrap();
    fx.store
        .set_file_reference("more", &log, SetOptions::default())
        .unwrap();
    let more = AgentRef::from_store(&fx.store, "more").unwrap();
    assert_eq!(
        more.file.as_deref(),
        Some(std::fs::canonicalize(&log).unwrap().as_path())
    );
    let refs = vec![fx.text_var("logs", logs), more];
    let script = repo_file("scripts/agents/grep-agent.sh");
    for template in [
        format!("sh {} {{prompt_file}}", script.display()),
        format!("sh {}", script.display()),
    ] {
        let command = AgentCommand::parse(&template).unwrap();
        let spec = fx.spec(
            "How many failed logins? pattern: login failed",
            refs.clone(),
        );
        let outcome = fx.run(&command, spec).await;
        assert!(outcome.ok, "{template}: {:?}", outcome.value);
        let answer = outcome.value.as_str().unwrap();
        assert!(
            answer.starts_with("4 matching lines for pattern \"login failed\""),
            "{answer}"
        );
        assert!(answer.contains("login failed dave") && answer.contains("login failed frank"));
        assert!(!answer.contains("alice"));
    }
}

#[tokio::test]
async fn the_echo_agent_script_answers_with_its_task() {
    let fx = Fixture::new();
    let refs = vec![fx.text_var("notes", "irrelevant")];
    let task = "Say hello.\n\nThen say goodbye.";
    let script = repo_file("scripts/agents/echo-agent.sh");
    for template in [
        format!("sh {}", script.display()),
        format!("sh {} {{prompt_file}}", script.display()),
    ] {
        let command = AgentCommand::parse(&template).unwrap();
        let outcome = fx.run(&command, fx.spec(task, refs.clone())).await;
        assert_eq!(outcome.value, json!(task), "{template}");
    }
}
