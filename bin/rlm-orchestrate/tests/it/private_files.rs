//! Everything a run writes under the data directory is private to the user — files
//! 0600, directories 0700 — even when started with a umask of 0: variables, locks,
//! traces, summaries, answers, agents' prompt files, budgets and slots.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript};

use crate::support::Sandbox;

fn modes(dir: &Path, found: &mut Vec<(String, u32)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
        found.push((path.display().to_string(), mode));
        if path.is_dir() {
            modes(&path, found);
        }
    }
}

#[test]
fn every_file_a_run_writes_is_private_even_under_umask_0() {
    let sb = Sandbox::new();
    let code = "```repl\nstore.set('k', 'v')\nr = sub_rlm('child', context='abc')\na = spawn_agent('t', refs=['k'])\nbig = 'y' * 100000\nprint(r, a)\n```";
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([
        MockReply::text(code),
        MockReply::text("FINAL(child answer)"),
        MockReply::text("FINAL_VAR(big)"),
    ]))
    .unwrap();
    let context = sb.file("context.txt", "the context\n");
    let mut command = std::process::Command::new(crate::support::BIN);
    command
        .current_dir(sb.root())
        .env_remove("RLM_DATA_DIR")
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "a task", "--model", "mock", "--base-url"])
        .arg(mock.control().openai_base_url())
        .arg("--context")
        .arg(&context)
        .args([
            "--agent-cmd",
            "sh -c 'cat {prompt_file} > /dev/null; echo ok'",
        ])
        .args([
            "--max-requests",
            "2",
            "--max-agents",
            "2",
            "--max-llm-calls",
            "10",
        ]);
    // SAFETY: umask(2) is async-signal-safe and touches nothing else.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(|| {
            nix::sys::stat::umask(nix::sys::stat::Mode::empty());
            Ok(())
        });
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut found = Vec::new();
    modes(&sb.data_dir(), &mut found);
    let names: String = found.iter().map(|(p, _)| format!("{p}\n")).collect();
    for expected in [
        "answer.txt",
        "summary.json",
        "budgets",
        "slots",
        "locks",
        "prompt",
    ] {
        assert!(
            names.contains(expected),
            "nothing like {expected} was written:\n{names}"
        );
    }
    let public: Vec<_> = found
        .iter()
        .filter(|(path, mode)| {
            let dir = Path::new(path).is_dir();
            (dir && *mode != 0o700) || (!dir && *mode != 0o600)
        })
        .collect();
    assert!(public.is_empty(), "not private: {public:?}");
}
