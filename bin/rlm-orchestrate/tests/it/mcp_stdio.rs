//! `mcp` spoken to raw over stdio (issue 22 item 9): a line that is not JSON and a
//! line over the 16 MiB cap each get a JSON-RPC `-32700` parse error with `id: null`,
//! and the server goes on answering; a failed tool call's text says each cause once.

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
struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Server {
    fn start(sb: &Sandbox, extra: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .current_dir(sb.root())
            .env_remove("OPENAI_API_KEY")
            .env_remove("RLM_DATA_DIR")
            .arg("--data-dir")
            .arg(sb.data_dir())
            .arg("mcp")
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
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

    fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next message the server writes (bounded wait).
    fn reply(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(REPLY_BOUND)
            .unwrap_or_else(|e| panic!("the server did not reply: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// The reply to request `id`, skipping notifications.
    fn reply_to(&self, id: u64) -> Value {
        loop {
            let reply = self.reply();
            if reply["id"] == json!(id) {
                return reply;
            }
        }
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

fn initialize(server: &mut Server, id: u64) {
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
