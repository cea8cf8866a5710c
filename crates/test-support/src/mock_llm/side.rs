//! What the mock answers to requests that ask for no completion: the server's
//! description of itself (`/v1/models`, llama.cpp's `/props`, FastAPI's
//! `/openapi.json`), its tokenizers, health checks, and 404 for the rest.
//!
//! Clients learn a server's window and tokenizer from these; the mock plays the
//! servers rlm meets ([`MockTokenizer`]) so tests can see what a client asks of each,
//! and both tokenizer endpoints answer whatever it plays, so a client that posts a
//! sample to one the server never offered is seen doing it.

use serde_json::{json, Value};

use super::script::{MockScript, MockTokenizer};
use super::RecordedRequest;

/// The `n_ctx` llama.cpp's `/props` gives when the script sets no window.
const LLAMA_CPP_DEFAULT_N_CTX: u32 = 8_192;

/// The status and JSON body answering `request` (`method` and `path` without query).
pub(crate) fn answer(
    script: &MockScript,
    method: &str,
    path: &str,
    request: &RecordedRequest,
) -> (u16, Value) {
    let flavour = script.tokenizer;
    match (method, path) {
        ("POST", p) if p.ends_with("/extras/tokenize/count") => {
            // llama-cpp-python's tokenizer endpoint, counting as the window check
            // does (characters / 4, rounded up, unless digits are tokens).
            let input = text_field(request, "input");
            (200, json!({"count": script.tokens_in(input)}))
        }
        ("POST", p) if p.ends_with("/tokenize") => {
            // llama.cpp's: the tokens themselves (here, as many zeros).
            let content = text_field(request, "content");
            let count = script.tokens_in(content);
            let tokens = vec![0_u8; usize::try_from(count).unwrap_or(usize::MAX)];
            (200, json!({"tokens": tokens}))
        }
        ("GET", "/" | "/health") => (
            200,
            json!({"status": "ok", "note": "mock-llm is a scripted stand-in, not a model"}),
        ),
        ("GET", p) if p.ends_with("/models") => (200, models(script)),
        ("GET", "/props") if flavour == MockTokenizer::LlamaCpp => {
            let n_ctx = script.context_window.unwrap_or(LLAMA_CPP_DEFAULT_N_CTX);
            (
                200,
                json!({
                    "default_generation_settings": {"n_ctx": n_ctx},
                    "total_slots": 1,
                    "build_info": "mock-llm playing llama.cpp's server",
                }),
            )
        }
        ("GET", "/openapi.json") if flavour == MockTokenizer::LlamaCppPython => (
            200,
            json!({
                "openapi": "3.1.0",
                "info": {"title": "🦙 llama.cpp Python API (mock-llm)", "version": "0"},
                "paths": {
                    "/v1/chat/completions": {"post": {"summary": "Chat"}},
                    "/v1/models": {"get": {"summary": "Models"}},
                    "/extras/tokenize": {"post": {"summary": "Tokenize"}},
                    "/extras/tokenize/count": {"post": {"summary": "Tokenize Count"}},
                },
                // The request schema as llama-cpp-python 0.3 lists it (cut to what
                // clients read): it takes a GBNF `grammar`, and `response_format` of
                // type `json_object` with a `schema`.
                "components": {"schemas": {
                    "CreateChatCompletionRequest": {"properties": {
                        "messages": {"type": "array"},
                        "grammar": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                        "response_format": {"anyOf": [
                            {"$ref": "#/components/schemas/ChatCompletionRequestResponseFormat"},
                            {"type": "null"}]},
                    }},
                    "ChatCompletionRequestResponseFormat": {"properties": {
                        "type": {"type": "string", "enum": ["text", "json_object"]},
                        "schema": {"type": "object"},
                    }, "required": ["type"]},
                }},
            }),
        ),
        _ => (
            404,
            json!({"error": {"message": format!("mock-llm serves no {method} {path}"), "type": "not_found"}}),
        ),
    }
}

/// The `/v1/models` listing: the script's model, its window as vLLM gives it when the
/// script says so, owned by `llamacpp` when playing llama.cpp.
fn models(script: &MockScript) -> Value {
    let owner = match script.tokenizer {
        MockTokenizer::LlamaCpp => "llamacpp",
        MockTokenizer::LlamaCppPython | MockTokenizer::Unadvertised => "mock-llm",
    };
    let mut entry = json!({"id": script.model, "object": "model", "owned_by": owner});
    if let Some(window) = script.context_window.filter(|_| script.advertise_window) {
        entry["max_model_len"] = json!(window);
    }
    json!({"object": "list", "data": [entry]})
}

/// A string field of the request's JSON body, empty when absent.
fn text_field<'a>(request: &'a RecordedRequest, field: &str) -> &'a str {
    request
        .body
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
}
