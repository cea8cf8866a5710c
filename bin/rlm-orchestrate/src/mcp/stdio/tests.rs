use futures::FutureExt as _;
use rmcp::model::{EmptyResult, ServerResult};
use tokio::io::AsyncWriteExt;

use super::*;

async fn lines_of(input: &[u8]) -> Vec<(String, usize)> {
    let mut reader = BufReader::new(input);
    let mut out = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut reader, &mut line).await.unwrap() {
            Line::End => break,
            Line::Whole => out.push((String::from_utf8_lossy(&line).into_owned(), 0)),
            Line::TooLong(n) => out.push((String::new(), n as usize)),
        }
    }
    out
}

/// The reply `classify` gives to `line`, as JSON.
fn refusal(line: &[u8]) -> Value {
    match classify(line) {
        Incoming::Refuse(reply) => serde_json::from_slice(&reply).unwrap(),
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test]
async fn lines_are_bounded_and_the_next_one_is_read_whole() {
    let mut input = vec![b'x'; MAX_LINE_BYTES + 10];
    input.extend_from_slice(b"\n{\"a\":1}\nlast");
    let lines = lines_of(&input).await;
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0].1, MAX_LINE_BYTES + 10);
    assert_eq!(lines[1].0, "{\"a\":1}");
    assert_eq!(lines[2].0, "last");
}

#[test]
fn an_error_reply_has_the_json_rpc_shape() {
    let line = error_line(Value::Null, PARSE_ERROR, "Parse error: x".into());
    let value: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(
        value,
        serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error: x"}})
    );
}

#[test]
fn bytes_that_are_not_utf8_inside_a_string_are_a_parse_error() {
    let mut line = br#"{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": ""#.to_vec();
    line.extend_from_slice(b"\xff\xfe");
    line.extend_from_slice(br#""}}"#);
    let reply = refusal(&line);
    assert_eq!(reply["id"], Value::Null, "{reply}");
    assert_eq!(reply["error"]["code"], PARSE_ERROR, "{reply}");
}

#[test]
fn nesting_past_the_recursion_limit_is_a_parse_error() {
    for closed in [true, false] {
        let mut line = vec![b'['; 200_000];
        if closed {
            line.extend(std::iter::repeat_n(b']', 200_000));
        }
        let reply = refusal(&line);
        assert_eq!(reply["error"]["code"], PARSE_ERROR, "{reply}");
        assert_eq!(reply["id"], Value::Null, "{reply}");
    }
    // The same deep value inside a request's arguments.
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"x","arguments":{{"a":{}{}}}}}}}"#,
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    assert_eq!(refusal(deep.as_bytes())["error"]["code"], PARSE_ERROR);
}

#[test]
fn json_that_is_not_a_message_is_an_invalid_request_with_its_id() {
    let reply = refusal(br#"{"jsonrpc": "2.0", "id": 7}"#);
    assert_eq!(reply["error"]["code"], INVALID_REQUEST, "{reply}");
    assert_eq!(reply["id"], 7, "{reply}");
    let reply = refusal(b"[1, 2]");
    assert_eq!(reply["error"]["code"], INVALID_REQUEST, "{reply}");
    assert_eq!(reply["id"], Value::Null, "{reply}");
}

#[test]
fn messages_pass_and_blank_lines_are_skipped() {
    let ping = br#"{"jsonrpc": "2.0", "id": 1, "method": "ping"}"#;
    assert!(matches!(classify(ping), Incoming::Message(_)));
    let mut with_bom = UTF8_BOM.to_vec();
    with_bom.extend_from_slice(ping);
    with_bom.push(b'\r');
    assert!(matches!(classify(&with_bom), Incoming::Message(_)));
    assert!(matches!(classify(b"  \t"), Incoming::Ignore));
}

/// With stdout never read, the reader stops after [`MAX_REQUESTS_IN_FLIGHT`] requests.
/// Everything runs on this one thread over in-memory pipes, so once every task has had
/// many turns, a message that is still not there will not come.
#[tokio::test(flavor = "current_thread")]
async fn a_client_that_reads_no_replies_stops_being_read() {
    let (mut client_in, server_in) = tokio::io::duplex(1 << 16);
    // One byte of room: no reply is ever written whole, so no slot comes back.
    let (server_out, _client_out_never_read) = tokio::io::duplex(1);
    let Framed { mut transport, .. } = frame(server_in, server_out);
    let feeder = tokio::spawn(async move {
        for id in 0..5000 {
            let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n");
            if client_in.write_all(line.as_bytes()).await.is_err() {
                return;
            }
        }
    });
    let mut received = 0;
    let mut sends = Vec::new();
    loop {
        for _ in 0..1000 {
            tokio::task::yield_now().await;
        }
        let Some(message) = transport.receive().now_or_never() else {
            break;
        };
        let Some(JsonRpcMessage::Request(request)) = message else {
            panic!("not a request: {message:?}");
        };
        received += 1;
        let reply =
            ServerJsonRpcMessage::response(ServerResult::EmptyResult(EmptyResult {}), request.id);
        sends.push(tokio::spawn(transport.send(reply)));
    }
    assert_eq!(received, MAX_REQUESTS_IN_FLIGHT);
    assert!(
        !feeder.is_finished(),
        "the client's writes were not held back"
    );
}
