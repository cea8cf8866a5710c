//! Code carried by a tool call the model wrote as text in a code environment: a JSON
//! object (`{"code": …}`, `{"name": "python", "arguments": {"code": …}}`) that is the
//! whole reply, follows a tag (`<tool_call>`) or opens a ```json fence, or an XML call
//! (`<parameter name="code">…`). A call the reply only quotes — in a blockquote, inside
//! a sentence, as an example — carries nothing ([`Reply::taken`]).

use std::ops::Range;

use rlm_protocol::reply::{Action, Reply};

use super::Quoted;

/// Keys under which a tool call carries code.
const CODE_KEYS: [&str; 4] = ["code", "source", "script", "command"];

/// The code a tool call the reply takes carries, if it carries any: a JSON object with
/// a code key at its top or under `arguments` / `parameters` / `input` (an object or a
/// JSON string), or, when `xml_call`, an XML call with `<parameter name="code">`,
/// `<parameter=code>` or `<code>`. Calls refused on the way are added to `quoted`.
pub(super) fn code(reply: &Reply<'_>, xml_call: bool, quoted: &mut Vec<Quoted>) -> Option<String> {
    let mut judged =
        |span: Range<usize>| match reply.taken(Action::CallObject, reply.call_span(span)) {
            Ok(()) => true,
            Err(why) => {
                quoted.push(Quoted {
                    action: "a tool call".to_owned(),
                    why,
                });
                false
            }
        };
    json_objects(reply.text())
        .into_iter()
        .find_map(|(span, value)| code_in_json(&value).filter(|_| judged(span)))
        .or_else(|| {
            xml_call
                .then(|| xml_code(reply.text()))
                .flatten()
                .filter(|(span, _)| judged(span.clone()))
                .map(|(_, code)| code)
        })
        .map(|code| code.trim_matches('\n').to_owned())
        .filter(|code| !code.trim().is_empty())
}

/// Every JSON object that parses, with its span, found from each `{` that starts the
/// reply, follows a tag (`<tool_call>`) or opens a ```json fence — but not from a `{`
/// inside an object already found. Each parse stops at the first byte that is not JSON.
fn json_objects(text: &str) -> Vec<(Range<usize>, serde_json::Value)> {
    let mut found = Vec::new();
    let mut after = 0;
    for (start, _) in text.match_indices('{') {
        if start < after {
            continue;
        }
        let before = text[..start].trim_end();
        if !(before.is_empty() || before.ends_with('>') || before.ends_with("```json")) {
            continue;
        }
        let mut stream =
            serde_json::Deserializer::from_str(&text[start..]).into_iter::<serde_json::Value>();
        if let Some(Ok(value)) = stream.next() {
            if value.is_object() {
                let end = start + stream.byte_offset();
                found.push((start..end, value));
                after = end;
            }
        }
    }
    found
}

/// The code under a code key of `value`, or of its arguments.
fn code_in_json(value: &serde_json::Value) -> Option<String> {
    let direct = |object: &serde_json::Value| {
        CODE_KEYS
            .iter()
            .find_map(|key| object.get(*key).and_then(serde_json::Value::as_str))
            .map(str::to_owned)
    };
    if let Some(code) = direct(value) {
        return Some(code);
    }
    let function = value.get("function").unwrap_or(value);
    ["arguments", "parameters", "input", "args"]
        .iter()
        .filter_map(|key| function.get(*key))
        .find_map(|arguments| match arguments {
            serde_json::Value::String(text) => {
                serde_json::from_str(text).ok().as_ref().and_then(direct)
            }
            other => direct(other),
        })
}

/// Tags that open an XML-style call.
const CALL_OPENERS: [&str; 4] = ["<tool_call", "<function_calls", "<invoke", "<function="];

/// The code of an XML-style call — `<parameter name="code">…</parameter>`,
/// `<parameter=code>…</parameter>` (Qwen's form) or `<code>…</code>` — and the span of
/// the call: from the nearest tag that opens a call before it (or the parameter's own)
/// to the parameter's end.
fn xml_code(text: &str) -> Option<(Range<usize>, String)> {
    let lower = text.to_ascii_lowercase();
    for key in CODE_KEYS {
        for open in [
            format!("<parameter name=\"{key}\">"),
            format!("<parameter name='{key}'>"),
            format!("<parameter={key}>"),
            format!("<{key}>"),
        ] {
            let Some(at) = lower.find(&open) else {
                continue;
            };
            let body = &text[at + open.len()..];
            let close = if open.starts_with("<parameter") {
                "</parameter>".to_owned()
            } else {
                format!("</{key}>")
            };
            let (end, code_end) = match body.to_ascii_lowercase().find(&close) {
                Some(end) => (end + close.len(), end),
                None => (body.len(), body.len()),
            };
            let call_start = CALL_OPENERS
                .iter()
                .filter_map(|opener| lower[..at].rfind(opener))
                .max()
                .unwrap_or(at);
            let span = call_start..at + open.len() + end;
            return Some((span, body[..code_end].to_owned()));
        }
    }
    None
}

/// True when `text` holds something shaped like a native tool call (XML tags or JSON
/// with a name and arguments).
pub(super) fn looks_like_tool_call(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        "<tool_call",
        "<function_call",
        "<invoke",
        "<function=",
        "\"tool_calls\"",
        "\"function_call\"",
    ]
    .iter()
    .any(|m| lower.contains(m))
        || (lower.contains("\"name\"")
            && (lower.contains("\"arguments\"") || lower.contains("\"parameters\"")))
}
