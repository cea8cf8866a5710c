//! `mcp` spoken to raw over stdio (issue 22 item 9, issue 49 item 9): a line that is
//! not JSON, not UTF-8 inside a string, nested past serde_json's limit or over the
//! 16 MiB cap each get one JSON-RPC `-32700` parse error with `id: null`, and the server
//! goes on answering; a client that reads none of its replies is not read either, so
//! the server stays small; at most `--mcp-max-runs` runs are in flight; a failed tool
//! call's text says each cause once. [`Server`] is shared with `mcp_policy`.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript};
use serde_json::{json, Value};

use crate::support::{Sandbox, BIN};

/// How long to wait for one reply before the test fails (a bound, not a timing).
const REPLY_BOUND: Duration = Duration::from_secs(60);

/// The cap on one message, as `mcp` documents it.
const MAX_LINE_BYTES: usize = 16 << 20;

/// A running `rlm-orchestrate mcp`, its stdin, and its stdout's lines.
pub struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

/// `rlm-orchestrate --data-dir <sandbox>/data mcp EXTRA…` in the sandbox, without an
/// API key unless `env` gives one, stdin and stdout piped.
fn spawn(sb: &Sandbox, extra: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new(BIN)
        .current_dir(sb.root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("RLM_DATA_DIR")
        .envs(env.iter().copied())
        .arg("--data-dir")
        .arg(sb.data_dir())
        .arg("mcp")
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

impl Server {
    pub fn start(sb: &Sandbox, extra: &[&str]) -> Self {
        Self::start_with_env(sb, extra, &[])
    }

    /// [`Server::start`] with these environment variables set.
    pub fn start_with_env(sb: &Sandbox, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = spawn(sb, extra, env);
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    pub fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next message the server writes (bounded wait).
    pub fn reply(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(REPLY_BOUND)
            .unwrap_or_else(|e| panic!("the server did not reply: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// The reply to request `id`, skipping notifications.
    pub fn reply_to(&self, id: u64) -> Value {
        loop {
            let reply = self.reply();
            if reply["id"] == json!(id) {
                return reply;
            }
        }
    }
}

impl Server {
    /// Sends a `tools/call` of `tool` with `arguments` as request `id`.
    pub fn call(&mut self, id: u64, tool: &str, arguments: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
    }

    /// Calls `tool` and waits for its result: (is_error, first text).
    pub fn call_result(&mut self, id: u64, tool: &str, arguments: Value) -> (bool, String) {
        self.call(id, tool, arguments);
        let reply = self.reply_to(id);
        let result = &reply["result"];
        assert!(result.is_object(), "no result: {reply}");
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        (result["isError"] == true, text.to_owned())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Our own child, by its handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn assert_parse_error(reply: &Value) {
    assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
    assert_eq!(reply["id"], Value::Null, "{reply}");
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Parse error")),
        "{reply}"
    );
}

pub fn initialize(server: &mut Server, id: u64) {
    server.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"}}}),
    );
    let reply = server.reply_to(id);
    assert!(reply["result"]["serverInfo"].is_object(), "{reply}");
    server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
}

#[test]
fn garbage_and_over_long_lines_get_a_parse_error_and_the_server_goes_on() {
    let sb = Sandbox::new();
    let mut server = Server::start(&sb, &[]);
    server.send_raw(b"this is not json {\n");
    assert_parse_error(&server.reply());
    initialize(&mut server, 1);
    // An over-long line: answered, discarded, and the next request still served.
    let mut long = vec![b'x'; MAX_LINE_BYTES + 1];
    long.push(b'\n');
    server.send_raw(&long);
    assert_parse_error(&server.reply());
    server.send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \n");
    assert_parse_error(&server.reply());
    server.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    let reply = server.reply_to(3);
    let tools = reply["result"]["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "rlm_run"), "{reply}");
}

#[test]
fn a_failed_run_says_each_cause_once() {
    let sb = Sandbox::new();
    let mock = MockLlm::spawn_blocking_thread(MockScript::always(MockReply::error(
        400,
        "the model refuses",
    )))
    .unwrap();
    let url = mock.control().openai_base_url();
    let mut server = Server::start(&sb, &["--base-url", &url, "--retries", "1"]);
    initialize(&mut server, 1);
    server.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "rlm_run", "arguments": {"task": "anything"}}}));
    let reply = server.reply_to(2);
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text.matches("the model refuses").count(),
        1,
        "the cause is repeated: {text}"
    );
}

/// Issue 49, item 9: each kind of malformed line gets exactly one parse error, before
/// the reply to the ping sent after it (rmcp dropped the first two without a word).
#[test]
fn bad_utf8_in_a_string_and_deep_nesting_each_get_one_parse_error() {
    let sb = Sandbox::new();
    let mut server = Server::start(&sb, &[]);
    initialize(&mut server, 1);
    let mut bad_utf8 =
        br#"{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": ""#.to_vec();
    bad_utf8.extend_from_slice(b"\xff\xfe\x80");
    bad_utf8.extend_from_slice(b"\", \"arguments\": {}}}\n");
    let deep_closed = format!("{}{}\n", "[".repeat(200_000), "]".repeat(200_000));
    let deep_open = format!("{}\n", "[".repeat(200_000));
    let deep_request = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{{\"name\":\"vars_list\",\"arguments\":{{\"x\":{}{}}}}}}}\n",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let lines: [&[u8]; 4] = [
        &bad_utf8,
        deep_closed.as_bytes(),
        deep_open.as_bytes(),
        deep_request.as_bytes(),
    ];
    for (n, line) in lines.into_iter().enumerate() {
        server.send_raw(line);
        let ping = 100 + n as u64;
        server.send(&json!({"jsonrpc": "2.0", "id": ping, "method": "ping"}));
        let first = server.reply();
        assert_parse_error(&first);
        let next = server.reply();
        assert_eq!(next["id"], ping, "more than one reply to line {n}: {next}");
    }
    // JSON that is not a message is an invalid request, answered with its id.
    server.send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 9}\n");
    let reply = server.reply();
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    assert_eq!(reply["id"], 9, "{reply}");
    server.send(&json!({"jsonrpc": "2.0", "id": 10, "method": "tools/list"}));
    assert!(server.reply_to(10)["result"]["tools"].is_array());
}

/// The most the server may grow to while its client sends 8 MB of requests and reads
/// no reply (it grew to 0.8 GB with `tools/list`, 1.23 GB in the review).
const MAX_RSS_KB: u64 = 200 << 10;

/// How long the client's writes may make no progress before they count as held back
/// (a bound on a stall, not a timing of the server: the assertions are on memory and
/// on bytes written).
const STALL: Duration = Duration::from_secs(5);

/// A field of `/proc/<pid>/status` in kB.
fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Issue 49, item 9: a client that writes requests and reads no reply. Before, every
/// reply queued in memory while stdin was read to the end; now the server stops
/// reading stdin once 64 requests wait for their replies to be written, so the
/// client's writes are held back and the server's peak memory stays small.
#[test]
fn a_client_that_reads_no_replies_is_held_back_and_the_server_stays_small() {
    let sb = Sandbox::new();
    let mut child = spawn(&sb, &[], &[]);
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"}}});
    writeln!(stdin, "{initialize}").unwrap();
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.contains("serverInfo"), "{first}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    // 8 MB of tools/list requests (each reply is several kB).
    let mut input = Vec::with_capacity(8 << 20);
    let mut id = 1u64;
    while input.len() < 8 << 20 {
        writeln!(
            input,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#
        )
        .unwrap();
        id += 1;
    }
    let total = input.len();
    let (progress, written) = mpsc::channel::<usize>();
    let writer = std::thread::spawn(move || {
        let mut sent = 0;
        for chunk in input.chunks(1 << 16) {
            if stdin.write_all(chunk).is_err() {
                break;
            }
            sent += chunk.len();
            if progress.send(sent).is_err() {
                break;
            }
        }
        stdin
    });
    // Until the writes stall (or end, or the server has grown past the bound).
    let mut sent = 0;
    while let Ok(now) = written.recv_timeout(STALL) {
        sent = now;
        if sent == total || status_kb(pid, "VmHWM:") >= MAX_RSS_KB {
            break;
        }
    }
    let peak = status_kb(pid, "VmHWM:");
    assert!(
        peak < MAX_RSS_KB,
        "the server grew to {peak} kB while its replies were not read"
    );
    assert!(
        sent < total,
        "all {total} bytes were read although no reply was: nothing held the client back"
    );
    // Reading again, the client gets its replies (in any order: requests are served
    // concurrently), and its writes go on.
    let mut resumed = false;
    for _ in 0..20_000 {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let reply: Value = serde_json::from_str(&line).unwrap();
        assert!(reply["result"]["tools"].is_array(), "{reply}");
        if written.try_recv().is_ok() {
            resumed = true;
            break;
        }
    }
    assert!(resumed, "the client's writes did not go on once it read");
    let _ = child.kill();
    let _ = child.wait();
    drop(writer.join());
}

/// Issue 49, item 9: `--mcp-max-runs 2` with five `rlm_run` calls: the mock model holds
/// each run's request at a gate until the test lets one through, so the runs in flight
/// are counted where they arrive. At most two are ever held; all five answer.
#[test]
fn at_most_mcp_max_runs_runs_are_in_flight() {
    use rlm_test_support::mock_llm::{GateCounts, MockGate};
    let sb = Sandbox::new();
    let gate = MockGate::new();
    let mock = MockLlm::spawn_blocking_thread(MockScript::always(
        MockReply::text("FINAL(done)").with_gate(gate.clone()),
    ))
    .unwrap();
    let url = mock.control().openai_base_url();
    let mut server = Server::start(
        &sb,
        &[
            "--base-url",
            &url,
            "--model",
            "mock",
            "--env",
            "js",
            "--mcp-max-runs",
            "2",
        ],
    );
    initialize(&mut server, 1);
    const CALLS: usize = 5;
    for n in 0..CALLS {
        server.call(
            10 + n as u64,
            "rlm_run",
            json!({"task": format!("task {n}")}),
        );
    }
    for released in 0..CALLS {
        let expect_held = 2.min(CALLS - released);
        let counts = gate
            .wait_for(REPLY_BOUND, |c: &GateCounts| {
                c.most_held > 2 || (c.held == expect_held && c.arrived == released + expect_held)
            })
            .unwrap_or_else(|c| {
                panic!("after {released} released, expected {expect_held} held: {c:?}")
            });
        assert!(counts.most_held <= 2, "{counts:?}");
        gate.release(1);
    }
    // The runs end in whatever order the gate let them through.
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < CALLS {
        let reply = server.reply();
        let Some(id) = reply["id"].as_u64() else {
            continue;
        };
        assert_ne!(reply["result"]["isError"], true, "{reply}");
        assert_eq!(reply["result"]["content"][0]["text"], "done", "{reply}");
        answered.insert(id);
    }
    assert_eq!(answered, (10..10 + CALLS as u64).collect());
    assert_eq!(gate.counts().most_held, 2);
}
