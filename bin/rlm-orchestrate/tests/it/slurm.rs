//! `--runner slurm` against a real one-node Slurm cluster (`scripts/slurm-local.sh
//! start`; `.ci/run` starts it): a fan-out answers as it does locally with every agent
//! a job, nested runs are jobs, Ctrl-C leaves no job behind, a job Slurm kills or
//! cannot place comes back as an error object, and the store's compare-and-set loses
//! nothing when the writers are jobs.
//!
//! Without a cluster the tests say so and pass, except under `CI=true`, where a missing
//! cluster fails them. Each test tags its jobs with a `--comment` of its own, so tests
//! running at once never count each other's jobs. Waits are bounded polls.

use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockRule, MockScript};
use serde_json::Value;

use crate::subagents::run_json;
use crate::support::{Sandbox, BIN};

/// Bound on any wait for the cluster (a working cluster takes well under a second).
const BOUND: Duration = Duration::from_secs(30);

/// True when a cluster answers; under CI its absence fails the test. A node busy with
/// other tests' jobs reports `mix`, `alloc` or `comp` (completing), possibly with a flag
/// character (`mix*`, `comp#`); the question is asked a few times before giving up.
fn cluster() -> bool {
    let answers = || {
        StdCommand::new("sinfo")
            .args(["-h", "-o", "%t"])
            .output()
            .is_ok_and(|out| {
                out.status.success()
                    && String::from_utf8_lossy(&out.stdout).lines().any(|state| {
                        let state = state.trim().trim_end_matches(|c: char| !c.is_alphabetic());
                        matches!(state, "idle" | "mix" | "alloc" | "comp")
                    })
            })
    };
    let start = Instant::now();
    let mut ready = answers();
    while !ready
        && start.elapsed() < Duration::from_secs(5)
        && StdCommand::new("sinfo").output().is_ok()
    {
        std::thread::sleep(Duration::from_millis(200));
        ready = answers();
    }
    if !ready {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no Slurm cluster answers; CI starts one with scripts/slurm-local.sh start"
        );
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: no Slurm cluster (start one with scripts/slurm-local.sh start)"
        );
    }
    ready
}

/// A comment unique to one test, put on its jobs.
fn tag(name: &str) -> String {
    format!("rlmtest-{name}-{}", std::process::id())
}

/// `(job id, job name, state)` of the queued or running jobs carrying `comment`.
fn jobs_tagged(comment: &str) -> Vec<(String, String, String)> {
    let out = StdCommand::new("squeue")
        .args(["-h", "-o", "%i|%j|%T|%k"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let parts: Vec<&str> = line.split('|').collect();
            (parts.len() == 4 && parts[3] == comment).then(|| {
                (
                    parts[0].to_owned(),
                    parts[1].to_owned(),
                    parts[2].to_owned(),
                )
            })
        })
        .collect()
}

/// Polls until `done` holds or the bound passes; returns whether it held.
fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < BOUND {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// An agent that records the job it ran in (one line per agent in `log`) and then
/// runs the example grep agent.
fn recording_agent(log: &Path) -> String {
    let grep = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts/agents/grep-agent.sh")
        .canonicalize()
        .unwrap();
    format!(
        "sh -c 'echo \"${{SLURM_JOB_NAME:-not-a-job}}\" >> {log}; exec sh {grep} \"$1\"' agent {{prompt_file}}",
        log = log.display(),
        grep = grep.display()
    )
}

#[test]
fn a_fan_out_through_slurm_answers_as_locally_and_every_agent_is_a_job() {
    if !cluster() {
        return;
    }
    let code = "```repl\nstore.set('log', 'a ERROR x\\nb ok\\nc ERROR y\\nd ERROR z\\n')\nanswers = spawn_agents([('count pattern: ERROR', ['log']) for _ in range(4)])\nanswer = '|'.join(a.splitlines()[0] for a in answers)\nprint(answer)\n```";
    let mut answers = Vec::new();
    for runner in ["local", "slurm"] {
        let sb = Sandbox::new();
        let log = sb.root().join("jobs.txt");
        let mock = MockLlm::spawn_blocking_thread(MockScript::replies([
            MockReply::text(code),
            MockReply::text("FINAL_VAR(answer)"),
        ]))
        .unwrap();
        let result = run_json(
            &sb,
            &mock.control().openai_base_url(),
            "count the errors",
            &[
                "--agent-cmd",
                &recording_agent(&log),
                "--runner",
                runner,
                "--slurm-args",
                &format!("--comment={}", tag("fanout")),
            ],
        );
        answers.push(result["answer"].clone());
        let jobs = std::fs::read_to_string(&log).unwrap();
        let names: Vec<&str> = jobs.lines().collect();
        assert_eq!(names.len(), 4, "{runner}: {jobs}");
        if runner == "slurm" {
            assert!(
                names.iter().all(|n| n.starts_with("rlm-") && n.len() > 10),
                "every agent ran as a job named rlm-<agent id>: {jobs}"
            );
        } else {
            assert!(names.iter().all(|n| *n == "not-a-job"), "{jobs}");
        }
    }
    assert_eq!(answers[0], answers[1], "the same answer either way");
    assert_eq!(
        answers[0],
        "3 matching lines for pattern \"ERROR\"|3 matching lines for pattern \"ERROR\"|3 matching lines for pattern \"ERROR\"|3 matching lines for pattern \"ERROR\""
    );
}

#[test]
fn a_nested_run_is_a_job_of_its_own() {
    if !cluster() {
        return;
    }
    let comment = tag("nested");
    let seen = comment.clone();
    let script = MockScript::new()
        // The child's turn: while it waits for this answer its job is running.
        .rule(MockRule::function("the child's request", move |request| {
            (request.model() == Some("sub-model")).then(|| {
                let jobs = jobs_tagged(&seen);
                let running = jobs
                    .iter()
                    .any(|(_, name, state)| name.starts_with("rlm-") && state == "RUNNING");
                MockReply::text(format!("FINAL(child in a job: {running})"))
            })
        }))
        .then(MockReply::text(
            "```repl\nanswer = sub_rlm('say where you run')\nprint(answer)\n```",
        ))
        .then(MockReply::text("FINAL_VAR(answer)"));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let sb = Sandbox::new();
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "delegate",
        &[
            "--runner",
            "slurm",
            "--slurm-args",
            &format!("--comment={comment}"),
            "--max-depth",
            "2",
        ],
    );
    assert_eq!(result["answer"], "child in a job: true", "{result}");
    assert!(wait_until(|| jobs_tagged(&comment).is_empty()));
}

/// Starts `run` with an agent that sleeps, in the background, under `--runner slurm`
/// with `comment`; returns the process once its job is running.
fn start_sleeping_agent(
    sb: &Sandbox,
    url: &str,
    comment: &str,
    extra: &[&str],
) -> std::process::Child {
    let child = StdCommand::new(BIN)
        .env_remove("OPENAI_API_KEY")
        .env("NO_COLOR", "1")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "wait", "--base-url", url, "--model", "m", "--json"])
        .args(["--agent-cmd", "sleep 60", "--runner", "slurm"])
        .args(["--slurm-args", &format!("--comment={comment}")])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(|| jobs_tagged(comment)
            .iter()
            .any(|(_, _, state)| state == "RUNNING")),
        "the agent's job never ran"
    );
    child
}

#[test]
fn ctrl_c_ends_the_run_and_leaves_no_job_in_squeue() {
    if !cluster() {
        return;
    }
    let comment = tag("ctrlc");
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([MockReply::text(
        "```repl\nr = spawn_agent('wait')\n```",
    )]))
    .unwrap();
    let sb = Sandbox::new();
    let child = start_sleeping_agent(&sb, &mock.control().openai_base_url(), &comment, &[]);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        wait_until(|| jobs_tagged(&comment).is_empty()),
        "jobs left in squeue: {:?}",
        jobs_tagged(&comment)
    );
}

#[test]
fn a_job_slurm_kills_or_cannot_place_comes_back_as_an_error_object() {
    if !cluster() {
        return;
    }
    // Killed by Slurm (an administrator's scancel) while it runs.
    let comment = tag("killed");
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([
        MockReply::text("```repl\nr = spawn_agent('wait')\nprint(r)\n```"),
        MockReply::text("FINAL_VAR(r)"),
    ]))
    .unwrap();
    let sb = Sandbox::new();
    let child = start_sleeping_agent(&sb, &mock.control().openai_base_url(), &comment, &[]);
    for (id, _, _) in jobs_tagged(&comment) {
        assert!(StdCommand::new("scancel")
            .arg(&id)
            .status()
            .unwrap()
            .success());
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let answer = result["answer"].as_str().unwrap();
    assert!(
        answer.contains("Slurm:")
            && (answer.contains("CANCELLED") || answer.contains("task 0: Terminated"))
            && answer.contains("the scheduler, not the agent"),
        "{answer}"
    );

    // Not placeable: more memory than the node has.
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([
        MockReply::text("```repl\nr = spawn_agent('wait')\nprint(r)\n```"),
        MockReply::text("FINAL_VAR(r)"),
    ]))
    .unwrap();
    let result = run_json(
        &sb,
        &mock.control().openai_base_url(),
        "wait",
        &[
            "--agent-cmd",
            "true",
            "--runner",
            "slurm",
            "--slurm-args",
            "--mem=999999999",
        ],
    );
    let answer = result["answer"].as_str().unwrap();
    assert!(answer.contains("Unable to allocate resources"), "{answer}");
}

#[test]
fn compare_and_set_loses_nothing_when_the_writers_are_jobs() {
    if !cluster() {
        return;
    }
    let sb = Sandbox::new();
    let comment = tag("cas");
    let script = sb.file(
        "increment.py",
        format!(
            r#"import json, subprocess, sys
bin, data = sys.argv[1], sys.argv[2]
for _ in range(10):
    while True:
        shown = json.loads(subprocess.run([bin, "--data-dir", data, "vars", "show", "counter", "--json"], capture_output=True, check=True).stdout)
        value = int(shown["preview"])
        done = subprocess.run([bin, "--data-dir", data, "vars", "set", "counter", str(value + 1), "--json", "--if-sha256", shown["ref"]["sha256"]], capture_output=True)
        if done.returncode == 0:
            break
        assert done.returncode == 3, done.stderr
print("ok {comment}")
"#
        ),
    );
    sb.set(&["counter", "0", "--json"]);
    let writers: Vec<std::process::Child> = (0..6)
        .map(|_| {
            StdCommand::new("srun")
                .args(["--ntasks=1", "--quiet", &format!("--comment={comment}")])
                .arg("python3")
                .arg(&script)
                .arg(BIN)
                .arg(sb.data_dir())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for writer in writers {
        let out = writer.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "a writer job failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(String::from_utf8(sb.get("counter")).unwrap().trim(), "60");
}

#[test]
fn without_srun_the_slurm_runner_is_refused_before_anything_is_asked() {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(MockScript::always("FINAL(no)")).unwrap();
    let out = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .env("PATH", sb.root())
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "q", "--base-url", &mock.control().openai_base_url()])
        .args(["--model", "m", "--runner", "slurm"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(
        stderr.contains("`srun` is not on PATH") && stderr.contains("slurm-local.sh"),
        "{stderr}"
    );
    assert!(mock.control().requests().is_empty());
    // --slurm-args that would rename the job: refused by the flag's parser.
    let out = sb
        .bare()
        .args(["run", "q", "--runner", "slurm", "--slurm-args", "-J mine"])
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("must not set -J"));
}

#[test]
fn a_node_local_data_directory_is_warned_about() {
    if !cluster() || !Path::new("/dev/shm").is_dir() {
        return;
    }
    let data = tempfile::Builder::new()
        .prefix("rlm-slurm-")
        .tempdir_in("/dev/shm")
        .unwrap();
    let mock = MockLlm::spawn_blocking_thread(MockScript::always("FINAL(ok)")).unwrap();
    let sb = Sandbox::new();
    let out = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(data.path())
        .args(["run", "q", "--base-url", &mock.control().openai_base_url()])
        .args(["--model", "m", "--runner", "slurm"])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(
        stderr.contains("is on tmpfs, a file system only this node sees"),
        "{stderr}"
    );
}

/// After `kill -9` of the orchestrator nothing in it runs: its watchdog kills what is
/// left of the tree and then cancels the jobs the run registered with it (Slurm would
/// keep an allocation whose `srun` died until its `--time`).
#[test]
fn kill_9_of_the_orchestrator_leaves_no_job_in_squeue() {
    if !cluster() {
        return;
    }
    let comment = tag("kill9");
    let mock = MockLlm::spawn_blocking_thread(MockScript::replies([MockReply::text(
        "```repl\nr = spawn_agent('wait')\n```",
    )]))
    .unwrap();
    let sb = Sandbox::new();
    let mut child = start_sleeping_agent(&sb, &mock.control().openai_base_url(), &comment, &[]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        wait_until(|| jobs_tagged(&comment).is_empty()),
        "jobs left in squeue: {:?}",
        jobs_tagged(&comment)
    );
}
