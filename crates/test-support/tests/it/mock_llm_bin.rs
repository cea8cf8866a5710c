//! The `mock-llm` binary's start-up contract: scripts (the demo, benchmarks) read the
//! first line of its stdout for the URL, and a person reads its stderr banner; and its
//! script files, tool calls included, as a provider sees them over HTTP.

#![expect(
    clippy::unwrap_used,
    reason = "the HTTP helpers fail the test on any surprise, as the tests do"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rlm_test_support::mock_llm::MockScript;
use serde_json::{json, Value};

/// Upper bound of the wait for the server to exit (only reached when a test fails).
const EXIT_LIMIT: Duration = Duration::from_secs(20);

#[test]
fn stdout_starts_with_the_url_and_stderr_is_one_sentence() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mock-llm"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let port = first
        .strip_prefix("listening on http://127.0.0.1:")
        .and_then(|rest| rest.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    assert!(port.parse::<u16>().is_ok_and(|port| port > 0), "{first:?}");

    // Closing stdin (a pipe) ends the server.
    drop(child.stdin.take());
    wait_for_exit(&mut child);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(stderr, format!("{}\n", MockScript::new().describe()));
    assert!(stderr.ends_with(".\n"), "{stderr:?}");
}

/// Waits for `child` to exit (closing its stdin ends it), killing it past the limit.
fn wait_for_exit(child: &mut Child) {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > EXIT_LIMIT {
            child.kill().unwrap();
            panic!("mock-llm did not exit when its stdin closed");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts `mock-llm` with `args` and a piped stdin; returns it and its port.
fn start(args: &[&str]) -> (Child, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mock-llm"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let port = first
        .trim_end()
        .strip_prefix("listening on http://127.0.0.1:")
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    (child, port)
}

/// POSTs `body` and returns the response body, chunked transfer coding undone.
fn post(port: u16, path: &str, body: &Value) -> String {
    let body = body.to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(EXIT_LIMIT)).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, mut rest) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 "), "{answer}");
    if !head.contains("transfer-encoding: chunked") {
        return rest.to_owned();
    }
    let mut body = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").unwrap();
        let size = usize::from_str_radix(size, 16).unwrap();
        if size == 0 {
            return body;
        }
        body.push_str(&after[..size]);
        rest = after[size..].strip_prefix("\r\n").unwrap();
    }
}

/// The JSON of each `data:` line of an SSE body, `[DONE]` left out.
fn sse_data(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[test]
fn a_script_file_scripts_tool_calls() {
    let script = json!({"replies": [
        {"tool_calls": [{"name": "ctx_grep", "arguments": {"variable": "context", "pattern": "ERROR"}}]},
        {"text": "Looking.", "tool_calls": [
            {"id": "toolu_given", "name": "ctx_grep", "raw_arguments": "{\"pattern\": "}
        ]},
        {"repeat_tool_names": true, "tool_calls": [{"name": "ctx_len"}]},
        "done"
    ]});
    let path = std::env::temp_dir().join(format!("mock-llm-tools-{}.json", std::process::id()));
    std::fs::write(&path, script.to_string()).unwrap();
    let (mut child, port) = start(&["--script", path.to_str().unwrap()]);
    let messages = json!([{"role": "user", "content": "find errors"}]);

    // 1. OpenAI, streamed: argument pieces joined by index give the arguments back.
    let chunks = sse_data(&post(
        port,
        "/v1/chat/completions",
        &json!({"stream": true, "messages": messages}),
    ));
    let arguments: String = chunks
        .iter()
        .filter_map(|chunk| chunk.pointer("/choices/0/delta/tool_calls/0/function/arguments"))
        .map(|piece| piece.as_str().unwrap())
        .collect();
    assert_eq!(arguments, r#"{"pattern":"ERROR","variable":"context"}"#);
    assert_eq!(
        chunks[1]["choices"][0]["delta"]["tool_calls"][0]["id"],
        "call_0_0"
    );
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );

    // 2. Anthropic, whole: text, then the call whose arguments are not JSON.
    let body: Value =
        serde_json::from_str(&post(port, "/v1/messages", &json!({"messages": messages}))).unwrap();
    assert_eq!(
        body["content"],
        json!([
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_given", "name": "ctx_grep", "input": "{\"pattern\": "}
        ])
    );
    assert_eq!(body["stop_reason"], "tool_use");

    // 3. OpenAI, streamed as llama.cpp once did: the name in every tool-call chunk.
    let chunks = sse_data(&post(
        port,
        "/chat/completions",
        &json!({"stream": true, "messages": messages}),
    ));
    let names: Vec<&Value> = chunks
        .iter()
        .filter_map(|chunk| chunk.pointer("/choices/0/delta/tool_calls/0/function/name"))
        .collect();
    assert_eq!(names, ["ctx_len", "ctx_len", "ctx_len"]);

    // 4. Text as before.
    assert!(post(port, "/v1/messages", &json!({"messages": messages})).contains("\"done\""));

    drop(child.stdin.take());
    let _ = std::fs::remove_file(&path);
    wait_for_exit(&mut child);
}
