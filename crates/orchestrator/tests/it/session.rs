//! A persistent [`Session`] against the scripted mock model and a real Python kernel:
//! several queries, each its own run, over one REPL whose variables, `history` and
//! context slots carry from one query to the next — and survive a cancelled query.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::Store;
use rlm_orchestrator::accounting::Limits;
use rlm_orchestrator::context::{ContextSpec, DirAs};
use rlm_orchestrator::env::python::{PythonFactory, PythonOptions};
use rlm_orchestrator::events::{Event, EventData, EventListener, RunStatus};
use rlm_orchestrator::host::{Delegation, Model};
use rlm_orchestrator::provider::{OpenAiProvider, ProviderConfig, ProviderKind};
use rlm_orchestrator::rlm::LoopSettings;
use rlm_orchestrator::run::{QueryCanceller, RunConfig, RunError, Session};
use rlm_process::CancellationToken;
use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript};
use serde_json::Value;
use tempfile::TempDir;

fn model(base_url: &str) -> Model {
    let mut config = ProviderConfig::new(ProviderKind::OpenAi, "mock");
    config.base_url = Some(base_url.to_owned());
    config.retry_base_delay = Duration::from_millis(2);
    Model {
        provider: Arc::new(OpenAiProvider::new(&config, None).unwrap()),
        price: None,
        window: Arc::new(rlm_orchestrator::window::ModelWindow::new(&config)),
    }
}

fn context_of(files: &[&Path]) -> ContextSpec {
    ContextSpec {
        files: files.iter().map(|f| f.to_path_buf()).collect(),
        dir: None,
        dir_as: DirAs::List,
        follow_symlinks: false,
        var: None,
        max_bytes: 1 << 20,
        copy: false,
        lazy: Default::default(),
    }
}

fn config(data_dir: &Path, context: ContextSpec, model: Model) -> RunConfig {
    let python = std::env::var_os("RLM_TEST_PYTHON").unwrap_or_else(|| "python3".into());
    RunConfig {
        root: model.clone(),
        sub: model,
        env: Arc::new(PythonFactory::new(PythonOptions::from(
            std::path::PathBuf::from(python),
        ))),
        context,
        data_dir: data_dir.to_owned(),
        memory_ceiling_bytes: 64 << 20,
        loop_settings: LoopSettings {
            max_iterations: 5,
            max_output_chars: 10_000,
            redact_ratio: 0.25,
            state_vars: 20,
            depth: 0,
            max_depth: 2,
            sub_context_chars: 100_000,
            output_schema: None,
            system_prompt: None,
            agents: false,
            tool_protocol: Default::default(),
            corrections: Default::default(),
        },
        delegation: Delegation {
            max_parallel: 2,
            sub_context_chars: 100_000,
            max_depth: 2,
            cache: false,
            sub_rlm: None,
            agent: None,
            rlm_bin: None,
            agent_timeout: Duration::from_secs(60),
            cell_timeout: Duration::from_secs(60),
            agent_sandbox: None,
            agent_slots: None,
            runner: rlm_orchestrator::runner::Runner::Local,
        },
        limits: Limits::default(),
        exec_timeout: Duration::from_secs(60),
        lineage: None,
        budget_ledger: None,
        cancel: CancellationToken::new(),
        history: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_share_the_repl_history_and_context_slots() {
    let dir = TempDir::new().unwrap();
    let alpha = dir.path().join("alpha.txt");
    std::fs::write(&alpha, "alpha context").unwrap();
    let beta = dir.path().join("beta.txt");
    std::fs::write(&beta, "beta context").unwrap();
    let data_dir = dir.path().join("data");
    let mock = MockLlm::start(MockScript::replies([
        // 1: defines a variable.
        MockReply::text("```repl\nfound = context.upper()\nprint(found)\n```"),
        MockReply::text("FINAL(first answer)"),
        // 2: brings a second context; reads the variable, `history` and the slots.
        MockReply::text(
            "```repl\nprint(history)\nprint(query, '|', found, '|', context, '|', context_0, '|', len(contexts))\n```",
        ),
        MockReply::text("FINAL_VAR(found)"),
        // 3: cancelled while its code runs.
        MockReply::text("```repl\nimport time\nwhile True:\n    time.sleep(0.01)\n```"),
        // 4: the REPL survived the cancelled query.
        MockReply::text("```repl\nprint(found, len(history))\n```"),
        MockReply::text("FINAL(still here)"),
    ]))
    .await
    .unwrap();

    // Cancel the third query as soon as its code is about to run.
    let canceller: Arc<std::sync::Mutex<Option<QueryCanceller>>> = Arc::default();
    let listener: EventListener = {
        let canceller = Arc::clone(&canceller);
        Arc::new(move |event: &Event| {
            if let EventData::Code(record) = &event.data {
                if record.code.contains("while True") {
                    if let Some(c) = canceller.lock().unwrap().as_ref() {
                        assert!(c.cancel());
                    }
                }
            }
        })
    };
    let root = model(&mock.openai_base_url());
    let mut session = Session::start(
        config(&data_dir, context_of(&[&alpha]), root),
        vec![listener],
    )
    .await
    .unwrap();
    *canceller.lock().unwrap() = Some(session.canceller());

    let first = session.query("first q", None).await.unwrap();
    assert_eq!(first.answer, "first answer");
    let second = session
        .query("second q", Some(context_of(&[&beta])))
        .await
        .unwrap();
    assert_eq!(second.answer, "ALPHA CONTEXT");
    assert_ne!(first.run_id, second.run_id);

    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let opening = requests[0].last_user_message().unwrap();
    assert!(
        !opening.contains("- history:") && !opening.contains("- contexts:"),
        "{opening}"
    );
    let opening = requests[2].last_user_message().unwrap();
    assert!(opening.starts_with("Task: second q"), "{opening}");
    assert!(
        opening.contains("- history: 1 earlier queries and answers are in `history`"),
        "{opening}"
    );
    assert!(opening.contains("- contexts: 2 slots"), "{opening}");
    assert!(
        opening.contains("beta context"),
        "the preview is the new slot's: {opening}"
    );
    let output = requests[3].last_user_message().unwrap();
    assert!(
        output.contains("[{'query': 'first q', 'answer': 'first answer'}]"),
        "{output}"
    );
    assert!(
        output.contains("second q | ALPHA CONTEXT | beta context | alpha context | 2"),
        "{output}"
    );

    let third = session.query("endless", None).await;
    assert!(
        matches!(third, Err(RunError::Cancelled { .. })),
        "{third:?}"
    );
    let fourth = session.query("fourth q", None).await.unwrap();
    assert_eq!(fourth.answer, "still here");
    let output = mock.requests()[6].last_user_message().unwrap();
    assert!(output.contains("ALPHA CONTEXT 2"), "{output}");
    assert!(!output.contains("restarted"), "{output}");

    let statuses: Vec<RunStatus> = session.runs().iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [
            RunStatus::Answered,
            RunStatus::Answered,
            RunStatus::Cancelled,
            RunStatus::Answered
        ]
    );
    let history: Vec<&str> = session.history().iter().map(|h| h.query.as_str()).collect();
    assert_eq!(history, ["first q", "second q", "fourth q"]);
    assert_eq!(session.contexts().len(), 2);
    assert_eq!(session.totals().llm_calls, 7);
    for run in session.runs() {
        let summary = data_dir
            .join("runs")
            .join(run.run_id.as_str())
            .join("summary.json");
        let summary: Value =
            serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
        assert_eq!(summary["status"], run.status.as_str());
    }
    // Each context is a variable of the session's scope.
    let store = Store::open(&data_dir).unwrap();
    let scope = format!("session:{}", session.id());
    let keys: Vec<String> = store
        .list(&rlm_context_store::ListFilter {
            scope: Some(scope),
            var_type: None,
        })
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(
        keys.contains(&format!("run-{}-context", first.run_id)),
        "{keys:?}"
    );
    assert!(
        keys.contains(&format!("run-{}-slot-1", second.run_id)),
        "{keys:?}"
    );
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_extra_context_fails_before_anything_is_asked() {
    let dir = TempDir::new().unwrap();
    let data_dir = dir.path().join("data");
    let mock = MockLlm::start(MockScript::replies([MockReply::text("FINAL(ok)")]))
        .await
        .unwrap();
    let root = model(&mock.openai_base_url());
    let mut session = Session::start(config(&data_dir, ContextSpec::default(), root), Vec::new())
        .await
        .unwrap();
    let missing = dir.path().join("missing.txt");
    let error = session
        .query("q", Some(context_of(&[&missing])))
        .await
        .unwrap_err();
    assert!(matches!(error, RunError::BadInput(_)), "{error}");
    assert_eq!(mock.requests().len(), 0);
    assert!(session.runs().is_empty());
    // The session goes on.
    assert_eq!(session.query("q", None).await.unwrap().answer, "ok");
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_auto_without_a_launcher_says_once_that_the_kernel_is_unconfined() {
    use rlm_orchestrator::env::python::KernelSandbox;
    let dir = TempDir::new().unwrap();
    let data_dir = dir.path().join("data");
    let mock = MockLlm::start(MockScript::replies([
        MockReply::text("```repl\nprint(1)\n```"),
        MockReply::text("FINAL(one)"),
        MockReply::text("FINAL(two)"),
    ]))
    .await
    .unwrap();
    let warnings: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let listener: EventListener = {
        let warnings = Arc::clone(&warnings);
        Arc::new(move |event: &Event| {
            if let EventData::Warning { message } = &event.data {
                warnings.lock().unwrap().push(message.clone());
            }
        })
    };
    let mut config = config(&data_dir, context_of(&[]), model(&mock.openai_base_url()));
    let python = std::env::var_os("RLM_TEST_PYTHON").unwrap_or_else(|| "python3".into());
    config.env = Arc::new(PythonFactory::new(PythonOptions {
        sandbox: KernelSandbox {
            launcher: None,
            ..KernelSandbox::default()
        },
        ..PythonOptions::from(std::path::PathBuf::from(python))
    }));
    let mut session = Session::start(config, vec![listener]).await.unwrap();
    assert_eq!(session.query("q1", None).await.unwrap().answer, "one");
    assert_eq!(session.query("q2", None).await.unwrap().answer, "two");
    let warnings = warnings.lock().unwrap().clone();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("--sandbox auto") && warnings[0].contains("unconfined"),
        "{warnings:?}"
    );
    let events = std::fs::read_to_string(
        data_dir
            .join("runs")
            .join(session.runs()[0].run_id.as_str())
            .join("events.jsonl"),
    )
    .unwrap();
    assert!(
        events.contains("unconfined"),
        "the trace keeps it: {events}"
    );
    session.close().await;
}

/// A query answered before the kernel is ready does not wait for it (its history entry
/// is delivered once the kernel is), and the next query's code still sees it.
#[tokio::test]
async fn an_answer_before_the_kernel_is_ready_still_reaches_history() {
    let dir = TempDir::new().unwrap();
    let alpha = dir.path().join("alpha.txt");
    std::fs::write(&alpha, "alpha context").unwrap();
    let data_dir = dir.path().join("data");
    let mock = MockLlm::start(MockScript::replies([
        MockReply::text("FINAL(answered at once)"),
        MockReply::text("```repl\nprint(history)\n```"),
        MockReply::text("FINAL(done)"),
    ]))
    .await
    .unwrap();
    let root = model(&mock.openai_base_url());
    let mut session = Session::start(config(&data_dir, context_of(&[&alpha]), root), vec![])
        .await
        .unwrap();
    assert_eq!(
        session.query("first q", None).await.unwrap().answer,
        "answered at once"
    );
    assert_eq!(
        session.query("second q", None).await.unwrap().answer,
        "done"
    );
    let output = mock.requests()[2].last_user_message().unwrap();
    assert!(
        output.contains("[{'query': 'first q', 'answer': 'answered at once'}]"),
        "{output}"
    );
    session.close().await;
}
