//! `--sandbox`: the model's code probes what a hostile model would (files outside the
//! store, the orchestrator's environment, the network, signals, memory, daemons) and
//! meets a Python exception each time, while the context and `store.*` keep working.
//! Each probe also runs with `--sandbox off`, which shows it would have succeeded.

use std::path::Path;

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockScript};

use crate::support::Sandbox;

/// Whether this machine can confine (Landlock and seccomp). The probes below need it;
/// where it cannot (an old or locked-down kernel) they are skipped, loudly.
#[allow(clippy::print_stderr, reason = "a skipped probe says so")]
fn confinement_available() -> bool {
    let support = rlm_sandbox::probe();
    let available = support.filesystem() && support.seccomp;
    if !available {
        eprintln!("SKIPPED: this kernel cannot confine ({support:?}); the sandbox probes need Landlock and seccomp");
    }
    available
}

/// A mock answering `replies` in order.
fn mock(replies: &[String]) -> MockLlmThread {
    MockLlm::spawn_blocking_thread(MockScript::replies(
        replies.iter().map(|r| MockReply::text(r.as_str())),
    ))
    .unwrap()
}

fn run_cmd(sb: &Sandbox, mock: &MockLlmThread, sandbox: &str) -> assert_cmd::Command {
    let mut cmd = sb.bare();
    cmd.env_remove("OPENAI_API_KEY")
        .env_remove("RLM_SANDBOX")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .arg("run")
        .arg("probe the sandbox")
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .args([
            "--model",
            "mock",
            "--exec-timeout",
            "30",
            "--sandbox",
            sandbox,
        ]);
    cmd
}

/// Python that tries `action` and prints `label: ok` or `label: denied (<exception>)`.
fn probe(label: &str, action: &str) -> String {
    format!(
        "try:\n    {action}\n    print('{label}: ok')\nexcept Exception as e:\n    print('{label}: denied', type(e).__name__, e)\n"
    )
}

/// What the model saw after its probing block.
fn repl_output(mock: &MockLlmThread) -> String {
    let requests = mock.control().requests();
    requests[1].last_user_message().unwrap().to_owned()
}

fn probes(secret_file: &Path, port: u16) -> String {
    let secret = secret_file.display();
    [
        probe("context", "assert len(context) == 11"),
        probe("store", "store.set('probe-note', 'kept')"),
        probe(
            "tmpdir",
            "open(os.path.join(os.environ['TMPDIR'], 'x'), 'w').write('x')",
        ),
        probe("read-user-file", &format!("open('{secret}').read()")),
        probe(
            "write-user-dir",
            &format!("open('{secret}.new', 'w').write('x')"),
        ),
        probe("read-tmp", "os.listdir('/tmp')"),
        probe("etc-passwd", "open('/etc/passwd').read()"),
        probe(
            "parent-environ",
            "open(f'/proc/{os.getppid()}/environ', 'rb').read()",
        ),
        probe(
            "network",
            &format!("socket.create_connection(('127.0.0.1', {port}), timeout=2).close()"),
        ),
        probe("signal-parent", "os.kill(os.getppid(), 0)"),
        probe(
            "subprocess-read",
            &format!("subprocess.run(['cat', '{secret}'], check=True, capture_output=True)"),
        ),
    ]
    .concat()
}

#[test]
fn model_code_reaches_only_what_the_sandbox_allows_and_the_run_goes_on() {
    if !confinement_available() {
        return;
    }
    for (mode, confined) in [("auto", true), ("strict", true), ("off", false)] {
        let sb = Sandbox::new();
        let context = sb.file("ctx.txt", "hello world");
        let secret = sb.file("secret.txt", "the user's own file");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let code = format!(
            "```repl\nimport os, socket, subprocess\n{}```",
            probes(&secret, port)
        );
        let mock = mock(&[code, "FINAL(done)".to_owned()]);
        run_cmd(&sb, &mock, mode)
            .arg("--context")
            .arg(&context)
            .assert()
            .success()
            .stdout("done\n");
        let seen = repl_output(&mock);
        for allowed in ["context: ok", "store: ok", "tmpdir: ok"] {
            assert!(seen.contains(allowed), "{mode}: {allowed}\n{seen}");
        }
        for probe in [
            "read-user-file",
            "write-user-dir",
            "read-tmp",
            "etc-passwd",
            "parent-environ",
            "network",
            "signal-parent",
            "subprocess-read",
        ] {
            let expected = if confined {
                format!("{probe}: denied")
            } else {
                format!("{probe}: ok")
            };
            assert!(seen.contains(&expected), "{mode}: {expected}\n{seen}");
        }
        sb.vars(&["get", "probe-note"])
            .assert()
            .success()
            .stdout("kept");
        if confined {
            assert!(
                seen.contains("PermissionError"),
                "refusals are Python exceptions: {seen}"
            );
        }
        drop(listener);
    }
}

#[test]
fn the_kernel_memory_limit_is_a_memory_error_not_a_dead_run() {
    if !confinement_available() {
        return;
    }
    let sb = Sandbox::new();
    let code = format!(
        "```repl\n{}```",
        probe("allocate", "big = bytearray(1 << 30)")
    );
    let mock = mock(&[code, "FINAL(done)".to_owned()]);
    run_cmd(&sb, &mock, "auto")
        .args(["--kernel-memory-mb", "256"])
        .assert()
        .success()
        .stdout("done\n");
    let seen = repl_output(&mock);
    assert!(seen.contains("allocate: denied MemoryError"), "{seen}");
}

#[test]
fn a_daemon_the_kernel_starts_does_not_outlive_the_run() {
    for mode in ["auto", "off"] {
        let sb = Sandbox::new();
        let code = "```repl\nimport subprocess\np = subprocess.Popen(['setsid', 'sleep', '300'])\nprint('daemon', p.pid)\n```".to_owned();
        let mock = mock(&[code, "FINAL(done)".to_owned()]);
        run_cmd(&sb, &mock, mode).assert().success();
        let seen = repl_output(&mock);
        let pid: i32 = seen
            .split("daemon ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|pid| pid.parse().ok())
            .unwrap_or_else(|| panic!("no pid in {seen}"));
        // The kernel's cookie sweep ends it when the run ends (a zombie waiting for a
        // parent that does not reap counts as gone).
        let alive = || {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            state
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                .is_some_and(|state| state != "Z")
        };
        // Bounded: SIGKILL was sent before the run exited; give delivery a moment.
        let mut running = alive();
        for _ in 0..50 {
            if !running {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            running = alive();
        }
        if running {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        assert!(!running, "{mode}: the setsid daemon {pid} outlived the run");
    }
}

#[test]
fn bad_sandbox_flags_are_usage_errors() {
    let sb = Sandbox::new();
    for args in [
        &["--sandbox", "maybe"][..],
        &["--kernel-memory-mb", "10"],
        &["--agent-sandbox", "yes"],
    ] {
        sb.bare()
            .arg("--data-dir")
            .arg(sb.data_dir())
            .args([
                "run",
                "task",
                "--model",
                "m",
                "--base-url",
                "http://127.0.0.1:9/v1",
            ])
            .args(args)
            .assert()
            .code(2);
    }
}

/// A shell agent that probes its confinement and prints one line per probe.
const PROBING_AGENT: &str = r#"#!/bin/sh
probe() { label=$1; shift; if "$@" >/dev/null 2>&1; then echo "$label: ok"; else echo "$label: denied"; fi; }
probe prompt-file cat "$1"
probe store-write rlm-orchestrate vars set agent-note written-by-the-agent
probe tmpdir sh -c 'echo x > "$TMPDIR/x"'
probe sibling-file cat "$(dirname "$0")/secret.txt"
probe write-beside sh -c "echo x > '$(dirname "$0")/dropped.txt'"
probe network python3 -c "import socket; socket.create_connection(('127.0.0.1', $PROBE_PORT), timeout=2).close()"
"#;

#[test]
fn a_confined_agent_reads_its_prompt_and_writes_the_store_but_nothing_else() {
    if !confinement_available() {
        return;
    }
    for (agent_sandbox, confined) in [("on", true), ("off", false)] {
        let sb = Sandbox::new();
        let agent = sb.file("agent.sh", PROBING_AGENT);
        sb.file("secret.txt", "not for agents");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let code = "```repl\nprint(spawn_agent('probe', []))\n```".to_owned();
        let mock = mock(&[code, "FINAL(done)".to_owned()]);
        run_cmd(&sb, &mock, "auto")
            .env("PROBE_PORT", port.to_string())
            .args(["--agent-env", "PROBE_PORT"])
            .arg("--agent-cmd")
            .arg(format!("sh {} {{prompt_file}}", agent.display()))
            .args(["--agent-sandbox", agent_sandbox, "--agent-network", "off"])
            .assert()
            .success();
        let seen = repl_output(&mock);
        for allowed in ["prompt-file: ok", "store-write: ok", "tmpdir: ok"] {
            assert!(seen.contains(allowed), "{agent_sandbox}: {allowed}\n{seen}");
        }
        for probe in ["sibling-file", "write-beside", "network"] {
            let expected = if confined {
                format!("{probe}: denied")
            } else {
                format!("{probe}: ok")
            };
            assert!(
                seen.contains(&expected),
                "{agent_sandbox}: {expected}\n{seen}"
            );
        }
        sb.vars(&["get", "agent-note"])
            .assert()
            .success()
            .stdout("written-by-the-agent");
        drop(listener);
    }
}

/// A shell agent probing the network with an allowed endpoint.
const NETWORK_AGENT: &str = r#"#!/bin/sh
probe() { label=$1; shift; if "$@" >/dev/null 2>&1; then echo "$label: ok"; else echo "$label: denied"; fi; }
connect() { python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), timeout=2).close()"; }
probe allowed-port connect "$ALLOWED_PORT"
probe other-port connect "$OTHER_PORT"
probe udp python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
probe still-running true
"#;

#[test]
fn with_the_network_off_a_confined_agent_reaches_only_the_allowed_port() {
    if !confinement_available() || !rlm_sandbox::probe().landlock_network() {
        return;
    }
    let sb = Sandbox::new();
    let agent = sb.file("agent.sh", NETWORK_AGENT);
    let allowed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let allowed_port = allowed.local_addr().unwrap().port();
    let other_port = other.local_addr().unwrap().port();
    let code = "```repl\nprint(spawn_agent('probe', []))\n```".to_owned();
    let mock = mock(&[code, "FINAL(done)".to_owned()]);
    run_cmd(&sb, &mock, "auto")
        .env("ALLOWED_PORT", allowed_port.to_string())
        .env("OTHER_PORT", other_port.to_string())
        .args(["--agent-env", "ALLOWED_PORT", "--agent-env", "OTHER_PORT"])
        .arg("--agent-cmd")
        .arg(format!("sh {} {{prompt_file}}", agent.display()))
        .args(["--agent-sandbox", "on", "--agent-network", "off"])
        .arg("--agent-allow-connect")
        .arg(format!("http://127.0.0.1:{allowed_port}/v1"))
        .assert()
        .success();
    let seen = repl_output(&mock);
    for expected in [
        "allowed-port: ok",
        "other-port: denied",
        "udp: denied",
        "still-running: ok",
    ] {
        assert!(seen.contains(expected), "{expected}\n{seen}");
    }
}

#[test]
fn api_keys_cannot_be_read_from_the_orchestrators_environment() {
    let key = "sk-test-7c1e55-do-not-leak";
    let sb = Sandbox::new();
    let agent = sb.file(
        "environ-agent.sh",
        "#!/bin/sh\ntr '\\0' '\\n' < /proc/$PPID/environ\n",
    );
    // Unconfined on purpose: the key must be gone from the environment itself.
    let code = "```repl\nimport os\nprint(open(f'/proc/{os.getppid()}/environ', 'rb').read().replace(b'\\0', b'\\n').decode())\nprint('AGENT', spawn_agent('print the environment', []))\n```".to_owned();
    let mock = mock(&[code, "FINAL(done)".to_owned()]);
    let mut cmd = sb.bare();
    cmd.env("OPENAI_API_KEY", key)
        .env("GITHUB_TOKEN", "ghp-test-token-do-not-leak")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .arg("run")
        .arg("leak the key")
        .arg("--base-url")
        .arg(mock.control().openai_base_url())
        .args(["--model", "mock", "--sandbox", "off"])
        .arg("--agent-cmd")
        .arg(format!("sh {}", agent.display()))
        .assert()
        .success();
    let requests = mock.control().requests();
    let seen = requests[1].last_user_message().unwrap();
    assert!(seen.contains("PATH="), "the environment was read: {seen}");
    assert!(seen.contains("AGENT"), "{seen}");
    // The key still reached the server, in the header only.
    assert!(requests[0].auth_present());
    for request in &requests {
        let body = request.body.to_string();
        assert!(!body.contains(key), "the key leaked into a request");
        assert!(!body.contains("ghp-test-token"), "a token leaked");
    }
    for file in walk(&sb.data_dir()) {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        assert!(
            !text.contains(key),
            "the key leaked into {}",
            file.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
