//! The JSON-lines protocol spoken with the Python driver (`python/driver/*.py`).
//!
//! One JSON object per line, `type` first. Orchestrator → kernel: `init`, `exec`,
//! `final_var`, `list_vars`, `push_history`, `next_query` (keyed by `id`),
//! `host_result` (keyed by the `call_id` of the kernel's `host_call`) and `shutdown`. Kernel → orchestrator:
//! `ready` (once, after the context is loaded), `result` (one per request, same `id`)
//! and `host_call`. Replies are parsed from [`Value`]s so a malformed or unexpected
//! message is reported instead of taking the session down.
//!
//! Model code runs in the kernel's process and can write to the protocol fd, so no
//! message is trusted blindly: every kernel message must carry the per-kernel `token`
//! sent in `init` (a line without it did not come from the driver), and the reader
//! bounds a line at `max_message` bytes (see `reader.rs`). Either failure is a
//! protocol error: the kernel is restarted and the model told why.

use super::error::ProtocolError;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use rlm_env::{ContextSource, FinalAnswer, HistoryEntry, ReplVariable};
use rlm_env::{HostError, HostReply};

/// The first request: everything the driver needs to set up its globals.
#[derive(Debug, Serialize)]
pub(super) struct Init<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub query: &'a str,
    pub history: &'a [HistoryEntry],
    pub context: Option<&'a ContextSource>,
    /// Later context slots of a persistent session (a restarted kernel reloads them).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub more_contexts: &'a [ContextSource],
    pub data_dir: &'a Path,
    pub output_cap: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_chunk_bytes: Option<usize>,
    /// The token every message of the driver carries.
    pub token: &'a str,
    /// The longest message (bytes, newline included) the driver may send.
    pub max_message: usize,
    /// Referenced files larger than this are read lazily (`None`: never).
    pub lazy_above: Option<u64>,
    /// What the model's code may allocate: a lazy context is materialised only when
    /// it fits.
    pub memory_bytes: u64,
}

/// A fresh, unguessable token for one kernel's messages.
pub(super) fn new_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A request that expects a `result` with the same id.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Request<'a> {
    Exec {
        id: u64,
        code: &'a str,
    },
    FinalVar {
        id: u64,
        name: &'a str,
    },
    ListVars {
        id: u64,
    },
    PushHistory {
        id: u64,
        query: &'a str,
        answer: &'a str,
    },
    /// The next query of a persistent session: sets `query`, and loads `context` (if
    /// any) into a new slot that `context` then points at.
    NextQuery {
        id: u64,
        query: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        context: Option<&'a ContextSource>,
    },
}

/// The answer to a `host_call`.
#[derive(Debug, Serialize)]
pub(super) struct HostResult {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub call_id: u64,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl HostResult {
    pub fn new(call_id: u64, outcome: &Result<HostReply, HostError>) -> Self {
        let (ok, value, error) = match outcome {
            Ok(value) => (true, Some(value.clone()), None),
            Err(error) => (false, None, Some(error.message_for_model())),
        };
        Self {
            kind: "host_result",
            call_id,
            ok,
            value,
            error,
        }
    }
}

/// `{"type":"shutdown"}`.
pub(super) const SHUTDOWN_LINE: &[u8] = b"{\"type\":\"shutdown\"}\n";

/// Serialises a message as one line.
pub(super) fn line<T: Serialize>(message: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut bytes = serde_json::to_vec(message)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// The driver's `ready` message.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Ready {
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub pid: Option<u32>,
    #[serde(default)]
    pub python: Option<String>,
    #[serde(default)]
    pub load: Option<Load>,
    #[serde(default)]
    pub max_rss_kb: Option<u64>,
    /// The stdout and stderr capture files, for the orchestrator to bound (absent if
    /// the driver could not create them and captures to `/dev/null`).
    #[serde(default)]
    pub capture: Option<Vec<CaptureFile>>,
}

/// A capture file the driver created: its path (removed once opened) and identity.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub(super) struct CaptureFile {
    pub path: std::path::PathBuf,
    pub dev: u64,
    pub ino: u64,
}

/// How the context was loaded.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Load {
    pub method: String,
    pub seconds: f64,
}

/// The `result` of an `exec`.
#[derive(Debug, Deserialize)]
pub(super) struct ExecReply {
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default, rename = "final")]
    pub final_answer: Option<FinalAnswer>,
    #[serde(default)]
    pub interrupted: bool,
    /// Why the kernel cannot go on (the code closed one of the driver's fds): it is
    /// replaced and the model told.
    #[serde(default)]
    pub broken: Option<String>,
}

/// The `result` of a `final_var`.
#[derive(Debug, Deserialize)]
pub(super) struct FinalVarReply {
    #[serde(default)]
    pub found: bool,
    #[serde(default)]
    pub value: Option<String>,
}

/// The `result` of a `next_query`.
#[derive(Debug, Deserialize)]
pub(super) struct NextQueryReply {
    /// Why the driver failed (a context it could not load).
    #[serde(default)]
    pub error: Option<String>,
}

/// The `result` of a `list_vars`.
#[derive(Debug, Deserialize)]
pub(super) struct ListVarsReply {
    #[serde(default)]
    pub vars: Vec<ReplVariable>,
}

/// A message from the kernel, sorted by `type`.
#[derive(Debug)]
pub(super) enum Incoming {
    Ready(Ready),
    Result {
        id: u64,
        body: Value,
    },
    HostCall {
        call_id: u64,
        method: String,
        args: Value,
    },
}

impl Incoming {
    /// Parses one line that must carry `token`; `Err` names what was wrong.
    pub fn parse(line: &[u8], token: &str) -> Result<Self, ProtocolError> {
        let value: Value =
            serde_json::from_slice(line).map_err(|source| ProtocolError::NotJson {
                source,
                start: preview(line),
            })?;
        if value.get("token").and_then(Value::as_str) != Some(token) {
            return Err(ProtocolError::NoToken {
                start: preview(line),
            });
        }
        let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "ready" => serde_json::from_value(value)
                .map(Incoming::Ready)
                .map_err(|source| ProtocolError::BadReady { source }),
            "result" => {
                let id = value
                    .get("id")
                    .and_then(Value::as_u64)
                    .ok_or(ProtocolError::ResultWithoutId)?;
                Ok(Incoming::Result { id, body: value })
            }
            "host_call" => {
                let call_id = value
                    .get("call_id")
                    .and_then(Value::as_u64)
                    .ok_or(ProtocolError::HostCallWithoutId)?;
                let method = value
                    .get("method")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let args = value.get("args").cloned().unwrap_or(Value::Null);
                Ok(Incoming::HostCall {
                    call_id,
                    method,
                    args,
                })
            }
            other => Err(ProtocolError::UnknownType {
                kind: other.to_owned(),
            }),
        }
    }
}

/// The first bytes of a line, for error messages.
pub(super) fn preview(line: &[u8]) -> String {
    const PREVIEW_BYTES: usize = 80;
    let end = line.len().min(PREVIEW_BYTES);
    String::from_utf8_lossy(&line[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_tagged_lines() {
        let bytes = line(&Request::Exec {
            id: 7,
            code: "x = 1",
        })
        .unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\"type\":\"exec\",\"id\":7,\"code\":\"x = 1\"}\n"
        );
        let bytes = line(&HostResult::new(
            3,
            &Err(HostError::RespondToModel("no".into())),
        ))
        .unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\"type\":\"host_result\",\"call_id\":3,\"ok\":false,\"error\":\"no\"}\n"
        );
    }

    #[test]
    fn next_query_carries_the_query_and_an_optional_context() {
        let bytes = line(&Request::NextQuery {
            id: 4,
            query: "why?",
            context: None,
        })
        .unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\"type\":\"next_query\",\"id\":4,\"query\":\"why?\"}\n"
        );
        let source = ContextSource {
            shape: rlm_env::ContextShape::Single,
            files: vec!["/d/variables/c.json".into()],
            keys: Vec::new(),
            chunk_chars: 10,
            chars: None,
            max_char: None,
            referenced: Vec::new(),
        };
        let bytes = line(&Request::NextQuery {
            id: 5,
            query: "q",
            context: Some(&source),
        })
        .unwrap();
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["context"]["files"][0], "/d/variables/c.json");
        let reply: NextQueryReply =
            serde_json::from_value(serde_json::json!({"type": "result", "id": 5, "slot": 1}))
                .unwrap();
        assert_eq!(reply.error, None);
    }

    /// Every message the orchestrator sends, as the driver reads it.
    #[test]
    fn outgoing_messages_keep_their_shape() {
        let source = ContextSource {
            shape: rlm_env::ContextShape::Single,
            files: vec!["/d/variables/c.json".into()],
            keys: Vec::new(),
            chunk_chars: 100_000,
            chars: Some(12),
            max_char: Some(127),
            referenced: Vec::new(),
        };
        let history = [HistoryEntry {
            query: "q0".into(),
            answer: "a0".into(),
        }];
        let init = Init {
            kind: "init",
            query: "what?",
            history: &history,
            context: Some(&source),
            more_contexts: &[],
            data_dir: Path::new("/d"),
            output_cap: 1 << 20,
            load_chunk_bytes: None,
            token: "0123abcd",
            max_message: 1 << 27,
            lazy_above: Some(1 << 30),
            memory_bytes: 4 << 30,
        };
        let messages = [
            line(&init).unwrap(),
            line(&Request::Exec {
                id: 1,
                code: "x = 1",
            })
            .unwrap(),
            line(&Request::FinalVar { id: 2, name: "x" }).unwrap(),
            line(&Request::ListVars { id: 3 }).unwrap(),
            line(&Request::PushHistory {
                id: 4,
                query: "q",
                answer: "a",
            })
            .unwrap(),
            line(&Request::NextQuery {
                id: 5,
                query: "q2",
                context: None,
            })
            .unwrap(),
            line(&HostResult::new(
                6,
                &Ok(serde_json::json!(["a", {"error": "e"}])),
            ))
            .unwrap(),
            line(&HostResult::new(
                7,
                &Err(HostError::Fatal("the store is gone".into())),
            ))
            .unwrap(),
            SHUTDOWN_LINE.to_vec(),
        ];
        let text: String = messages
            .iter()
            .map(|m| String::from_utf8(m.clone()).unwrap())
            .collect();
        insta::assert_snapshot!(text);
    }

    /// Every message the driver sends, read back.
    #[test]
    fn incoming_messages_parse() {
        let ready = br#"{"token":"t","type":"ready","ok":true,"pid":7,"python":"3.11.7","load":{"method":"fast","seconds":0.5},"max_rss_kb":9000}"#;
        assert!(matches!(
            Incoming::parse(ready, "t"),
            Ok(Incoming::Ready(Ready {
                ok: true,
                pid: Some(7),
                ..
            }))
        ));
        let result = br#"{"token":"t","type":"result","id":3,"vars":[{"name":"x","type_name":"int","size":1,"preview":"1"}]}"#;
        let Ok(Incoming::Result { id: 3, body }) = Incoming::parse(result, "t") else {
            panic!("not a result");
        };
        let vars: ListVarsReply = serde_json::from_value(body).unwrap();
        assert_eq!(vars.vars[0].name, "x");
        let call =
            br#"{"token":"t","type":"host_call","call_id":9,"method":"llm_query","args":{"prompt":"p"}}"#;
        let Ok(Incoming::HostCall {
            call_id: 9,
            method,
            args,
        }) = Incoming::parse(call, "t")
        else {
            panic!("not a host call");
        };
        assert!(rlm_env::HostCall::parse(&method, args).is_ok());
        assert!(
            Incoming::parse(br#"{"token":"t","type":"result"}"#, "t").is_err(),
            "no id"
        );
        assert!(
            Incoming::parse(br#"{"token":"t","type":"host_call","method":"x"}"#, "t").is_err(),
            "no call id"
        );
    }

    #[test]
    fn exec_replies_carry_final_answers() {
        let body = serde_json::json!({"type": "result", "id": 1, "stdout": "hi\n",
            "final": {"kind": "var", "name": "x", "value": "42"}, "interrupted": false});
        let reply: ExecReply = serde_json::from_value(body).unwrap();
        assert_eq!(
            reply.final_answer,
            Some(FinalAnswer::Var {
                name: "x".into(),
                value: "42".into()
            })
        );
        assert!(Incoming::parse(b"{\"token\":\"t\",\"type\":\"nope\"}", "t").is_err());
        assert!(Incoming::parse(b"garbage", "t").is_err());
    }

    /// A line written to the protocol fd by model code lacks the token (or has
    /// another): it is refused, whatever it claims to be.
    #[test]
    fn messages_without_the_kernel_token_are_refused() {
        let forged = br#"{"type":"result","id":1,"final":{"kind":"value","value":"x"}}"#;
        let error = Incoming::parse(forged, "t").err().unwrap();
        assert!(
            error
                .to_string()
                .contains("did not come from the REPL's driver"),
            "{error}"
        );
        let wrong = br#"{"token":"u","type":"result","id":1}"#;
        assert!(Incoming::parse(wrong, "t").is_err());
        assert!(Incoming::parse(br#"{"token":"t","type":"result","id":1}"#, "t").is_ok());
    }
}
