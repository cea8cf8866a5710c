//! What the mock model answers: scripted replies, rules, and the JSON script format.
//!
//! A test decides every answer in advance, so a run of the loop is reproducible without
//! a model. Replies are consumed in order; rules answer matching requests without
//! consuming the queue (sub-model calls arrive in an order a test cannot know); when
//! both are silent, a default reply repeats or the server answers 500.
//!
//! A reply may also be the model calling tools ([`MockReply::tool_calls`]), so the
//! orchestrator's tools mode runs offline too.

use std::collections::VecDeque;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::{Api, MockGate, MockToolCall, RecordedRequest};

/// What a reply does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyKind {
    /// Answer with this text (as JSON or as an SSE stream, as the request asked).
    Text(String),
    /// Answer with an HTTP error status; a body that is not JSON is wrapped in the
    /// API's error object.
    Error {
        /// HTTP status, e.g. 429 or 500.
        status: u16,
        /// Response body.
        body: String,
    },
    /// Close the connection without answering.
    Close,
    /// Reset the connection (a TCP RST, as a crashed proxy or a dropped NAT entry
    /// would) without answering.
    Reset,
    /// Answer 200 with this body as is: to play a server that sends what is not JSON,
    /// or a stream whose events are not.
    Raw {
        /// The `content-type` header (`application/json`, `text/event-stream`).
        content_type: String,
        /// The body, sent whole.
        body: String,
    },
    /// Answer with tool calls (and any text before them): OpenAI `tool_calls` with
    /// `finish_reason: "tool_calls"`, Anthropic `tool_use` blocks with `stop_reason:
    /// "tool_use"`, whole or streamed as the request asked.
    ToolCalls {
        /// Text the model says before calling (empty for none).
        text: String,
        /// The calls, in order.
        calls: Vec<MockToolCall>,
    },
    /// A reply that never ends: text in pieces of this many bytes (`x`s), one after
    /// another until the client hangs up — streamed as text deltas of the request's
    /// API, or, to a request for a whole answer, as a JSON body whose text never
    /// closes. A runaway server, to show that a client bounds what it reads; with
    /// [`MockReply::chunked`] the bytes drip (one byte a second: a slow drip). The
    /// mock stops by itself after [`ENDLESS_LIMIT_BYTES`] or [`ENDLESS_LIMIT`].
    Endless {
        /// Bytes of text in each piece.
        piece_bytes: usize,
    },
}

/// The most an [`ReplyKind::Endless`] reply sends before the mock ends it.
pub const ENDLESS_LIMIT_BYTES: u64 = 8 << 30;

/// The longest an [`ReplyKind::Endless`] reply goes on before the mock ends it.
pub const ENDLESS_LIMIT: Duration = Duration::from_secs(120);

/// How a streamed reply is cut short, to play a server or proxy that loses the end of
/// an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamCut {
    /// Send every event but the one that ends the stream (OpenAI's `data: [DONE]`,
    /// Anthropic's `message_stop`), then end the body cleanly.
    WithoutEnd,
    /// Send the first `n` events, then close the connection in the middle of the body
    /// (no terminating chunk).
    DropAfter(usize),
    /// Send the first `n` events, then nothing more, keeping the connection open until
    /// the client gives up (or a minute passes): a stream that never ends.
    Stall(usize),
}

/// Token counts the mock reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MockUsage {
    /// Report an estimate: characters / 4, rounded up, of the messages and the answer.
    #[default]
    Estimate,
    /// Report exactly these counts.
    Exact {
        /// Prompt (input) tokens.
        prompt_tokens: u64,
        /// Completion (output) tokens.
        completion_tokens: u64,
    },
    /// Report no usage at all (as llama.cpp does when streaming).
    Omit,
}

/// One scripted answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockReply {
    /// What to answer.
    pub kind: ReplyKind,
    /// Wait before answering (on top of the script's latency).
    pub delay: Duration,
    /// `Retry-After` header value sent with an error status.
    pub retry_after: Option<String>,
    /// Usage reported with a text answer.
    pub usage: MockUsage,
    /// Streaming only: cut the SSE bytes into writes of this many bytes (to split
    /// multi-byte characters and events across network reads).
    pub chunk_bytes: Option<usize>,
    /// Streaming only: pause between those writes.
    pub chunk_delay: Duration,
    /// Streaming OpenAI tool calls only: repeat `id`, `type` and `function.name` in
    /// every argument chunk, as llama.cpp's server did when it first streamed tool
    /// calls (ggml-org/llama.cpp#12379, changed by #13800). A client must join only the
    /// `arguments` pieces, by `index`.
    pub repeat_tool_names: bool,
    /// Streaming only: cut the stream short (`None`: send it whole).
    pub stream_cut: Option<StreamCut>,
    /// Held at this gate (after `delay`) until the test lets it through.
    pub gate: Option<MockGate>,
}

impl MockReply {
    fn of(kind: ReplyKind) -> Self {
        Self {
            kind,
            delay: Duration::ZERO,
            retry_after: None,
            usage: MockUsage::Estimate,
            chunk_bytes: None,
            chunk_delay: Duration::ZERO,
            repeat_tool_names: false,
            stream_cut: None,
            gate: None,
        }
    }

    /// A text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Self::of(ReplyKind::Text(text.into()))
    }

    /// An HTTP error status with a body.
    pub fn error(status: u16, body: impl Into<String>) -> Self {
        Self::of(ReplyKind::Error {
            status,
            body: body.into(),
        })
    }

    /// Closing the connection without an answer.
    pub fn close() -> Self {
        Self::of(ReplyKind::Close)
    }

    /// Resetting the connection (TCP RST) without an answer.
    pub fn reset() -> Self {
        Self::of(ReplyKind::Reset)
    }

    /// A 200 answer with `body` as is, sent as `content_type`.
    pub fn raw(content_type: impl Into<String>, body: impl Into<String>) -> Self {
        Self::of(ReplyKind::Raw {
            content_type: content_type.into(),
            body: body.into(),
        })
    }

    /// Tool calls, after `text` (empty for none).
    pub fn tool_calls(
        text: impl Into<String>,
        calls: impl IntoIterator<Item = MockToolCall>,
    ) -> Self {
        Self::of(ReplyKind::ToolCalls {
            text: text.into(),
            calls: calls.into_iter().collect(),
        })
    }

    /// A reply that never ends, in pieces of `piece_bytes` bytes of text (see
    /// [`ReplyKind::Endless`]).
    pub fn endless(piece_bytes: usize) -> Self {
        Self::of(ReplyKind::Endless {
            piece_bytes: piece_bytes.max(1),
        })
    }

    /// The same reply after `delay`.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The same reply, held at `gate` until the test releases it.
    pub fn with_gate(mut self, gate: MockGate) -> Self {
        self.gate = Some(gate);
        self
    }

    /// The same (error) reply with a `Retry-After` header.
    pub fn with_retry_after(mut self, value: impl Into<String>) -> Self {
        self.retry_after = Some(value.into());
        self
    }

    /// The same reply reporting exactly these token counts.
    pub fn with_usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.usage = MockUsage::Exact {
            prompt_tokens,
            completion_tokens,
        };
        self
    }

    /// The same reply without any usage.
    pub fn without_usage(mut self) -> Self {
        self.usage = MockUsage::Omit;
        self
    }

    /// The same reply, streamed in writes of `bytes` bytes with `pause` between them.
    pub fn chunked(mut self, bytes: usize, pause: Duration) -> Self {
        self.chunk_bytes = Some(bytes.max(1));
        self.chunk_delay = pause;
        self
    }

    /// The same reply, its stream cut short as `cut` says (a whole body is not cut).
    pub fn cut(mut self, cut: StreamCut) -> Self {
        self.stream_cut = Some(cut);
        self
    }

    /// The same (tool-call) reply, streamed to OpenAI clients the way llama.cpp's
    /// server once did: see [`MockReply::repeat_tool_names`].
    pub fn repeating_tool_names(mut self) -> Self {
        self.repeat_tool_names = true;
        self
    }
}

impl From<&str> for MockReply {
    fn from(text: &str) -> Self {
        Self::text(text)
    }
}

impl From<String> for MockReply {
    fn from(text: String) -> Self {
        Self::text(text)
    }
}

/// Decides a reply from a request, or passes.
pub type RuleFn = dyn Fn(&RecordedRequest) -> Option<MockReply> + Send + Sync;

/// A rule: "if the request looks like this, answer that".
#[derive(Clone)]
pub struct MockRule {
    description: String,
    decide: Arc<RuleFn>,
}

impl MockRule {
    /// Answers `reply` when the last user message contains `needle`.
    pub fn contains(needle: impl Into<String>, reply: impl Into<MockReply>) -> Self {
        let needle = needle.into();
        let reply = reply.into();
        Self {
            description: format!("last user message contains {needle:?}"),
            decide: Arc::new(move |request| {
                request
                    .last_user_message()
                    .is_some_and(|text| text.contains(&needle))
                    .then(|| reply.clone())
            }),
        }
    }

    /// Answers `reply` when the last user message matches the regular expression.
    pub fn regex(pattern: &str, reply: impl Into<MockReply>) -> Result<Self, regex::Error> {
        let regex = regex::Regex::new(pattern)?;
        let reply = reply.into();
        Ok(Self {
            description: format!("last user message matches /{pattern}/"),
            decide: Arc::new(move |request| {
                request
                    .last_user_message()
                    .is_some_and(|text| regex.is_match(&text))
                    .then(|| reply.clone())
            }),
        })
    }

    /// Answers `reply` when the request meets every condition of `matcher`: to route
    /// an agent CLI's side requests (a session title, a topic check, usually to a
    /// small model and without tools) away from the replies meant for the
    /// conversation.
    pub fn when(matcher: RequestMatch, reply: impl Into<MockReply>) -> Self {
        let reply = reply.into();
        Self {
            description: matcher.describe(),
            decide: Arc::new(move |request| matcher.matches(request).then(|| reply.clone())),
        }
    }

    /// Answers `reply` to every model request that offers no tools: the side
    /// requests agent CLIs make beside the conversation (titles, summaries), which
    /// then leave the queue to the conversation. The same as
    /// `MockRule::when(RequestMatch::new().tools(false), reply)`.
    pub fn side_request(reply: impl Into<MockReply>) -> Self {
        Self::when(RequestMatch::new().tools(false), reply)
    }

    /// Answers whatever `decide` returns (`None` passes to the next rule).
    pub fn function(
        description: impl Into<String>,
        decide: impl Fn(&RecordedRequest) -> Option<MockReply> + Send + Sync + 'static,
    ) -> Self {
        Self {
            description: description.into(),
            decide: Arc::new(decide),
        }
    }

    /// The reply for `request`, if this rule matches it.
    pub fn decide(&self, request: &RecordedRequest) -> Option<MockReply> {
        (self.decide)(request)
    }
}

/// Conditions on a request, all of which must hold (an empty match matches every
/// request): for [`MockRule::when`] and the JSON rules of [`MockScript::from_json`].
#[derive(Debug, Clone, Default)]
pub struct RequestMatch {
    /// The API the request was addressed to.
    pub api: Option<Api>,
    /// Text the request target (path and query) contains, e.g. `/v1/messages`.
    pub path: Option<String>,
    /// Text the `model` field contains, e.g. `haiku`.
    pub model: Option<String>,
    /// `true`: the request offers at least one tool; `false`: none.
    pub tools: Option<bool>,
    /// The request offers a tool of this name ([`RecordedRequest::tool_names`]).
    pub tool: Option<String>,
    /// `true`: the request carries tool results; `false`: none (the first request
    /// of a turn, before any tool ran).
    pub tool_results: Option<bool>,
    /// Text the system prompt ([`RecordedRequest::system_prompt`]) contains.
    pub system: Option<String>,
    /// Text the last user message contains.
    pub contains: Option<String>,
    /// A regular expression the last user message matches.
    pub regex: Option<regex::Regex>,
}

impl RequestMatch {
    /// A match of every request; add conditions with the methods below.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only requests to `api`.
    pub fn api(mut self, api: Api) -> Self {
        self.api = Some(api);
        self
    }

    /// Only requests whose target contains `text`.
    pub fn path(mut self, text: impl Into<String>) -> Self {
        self.path = Some(text.into());
        self
    }

    /// Only requests whose `model` contains `text`.
    pub fn model(mut self, text: impl Into<String>) -> Self {
        self.model = Some(text.into());
        self
    }

    /// Only requests that offer tools (`true`) or offer none (`false`).
    pub fn tools(mut self, offered: bool) -> Self {
        self.tools = Some(offered);
        self
    }

    /// Only requests that offer a tool named `name`.
    pub fn tool(mut self, name: impl Into<String>) -> Self {
        self.tool = Some(name.into());
        self
    }

    /// Only requests that carry tool results (`true`) or carry none (`false`).
    pub fn tool_results(mut self, present: bool) -> Self {
        self.tool_results = Some(present);
        self
    }

    /// Only requests whose system prompt contains `text`.
    pub fn system(mut self, text: impl Into<String>) -> Self {
        self.system = Some(text.into());
        self
    }

    /// Only requests whose last user message contains `text`.
    pub fn contains(mut self, text: impl Into<String>) -> Self {
        self.contains = Some(text.into());
        self
    }

    /// Only requests whose last user message matches `pattern`.
    pub fn regex(mut self, pattern: &str) -> Result<Self, regex::Error> {
        self.regex = Some(regex::Regex::new(pattern)?);
        Ok(self)
    }

    /// True when no condition is set.
    pub fn is_empty(&self) -> bool {
        self.describe_parts().is_empty()
    }

    /// True when `request` meets every condition.
    pub fn matches(&self, request: &RecordedRequest) -> bool {
        let has = |text: Option<String>, needle: &Option<String>| match needle {
            None => true,
            Some(needle) => text.is_some_and(|text| text.contains(needle.as_str())),
        };
        self.api.is_none_or(|api| request.api == Some(api))
            && self
                .path
                .as_ref()
                .is_none_or(|path| request.path.contains(path.as_str()))
            && has(request.model().map(str::to_owned), &self.model)
            && self
                .tools
                .is_none_or(|offered| request.tool_names().is_empty() != offered)
            && self
                .tool
                .as_ref()
                .is_none_or(|name| request.tool_names().iter().any(|tool| tool == name))
            && self
                .tool_results
                .is_none_or(|present| request.tool_result_details().is_empty() != present)
            && has(request.system_prompt(), &self.system)
            && has(request.last_user_message(), &self.contains)
            && self.regex.as_ref().is_none_or(|regex| {
                request
                    .last_user_message()
                    .is_some_and(|text| regex.is_match(&text))
            })
    }

    /// The conditions in words, e.g. `api is responses and no tools offered`.
    pub fn describe(&self) -> String {
        let parts = self.describe_parts();
        if parts.is_empty() {
            "every request".to_owned()
        } else {
            parts.join(" and ")
        }
    }

    fn describe_parts(&self) -> Vec<String> {
        let mut parts = Vec::new();
        if let Some(api) = self.api {
            parts.push(format!("api is {}", api.name()));
        }
        if let Some(path) = &self.path {
            parts.push(format!("path contains {path:?}"));
        }
        if let Some(model) = &self.model {
            parts.push(format!("model contains {model:?}"));
        }
        match self.tools {
            Some(true) => parts.push("tools offered".to_owned()),
            Some(false) => parts.push("no tools offered".to_owned()),
            None => {}
        }
        if let Some(tool) = &self.tool {
            parts.push(format!("tool {tool:?} offered"));
        }
        match self.tool_results {
            Some(true) => parts.push("tool results present".to_owned()),
            Some(false) => parts.push("no tool results".to_owned()),
            None => {}
        }
        if let Some(system) = &self.system {
            parts.push(format!("system prompt contains {system:?}"));
        }
        if let Some(needle) = &self.contains {
            parts.push(format!("last user message contains {needle:?}"));
        }
        if let Some(regex) = &self.regex {
            parts.push(format!("last user message matches /{}/", regex.as_str()));
        }
        parts
    }
}

impl fmt::Debug for MockRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("MockRule").field(&self.description).finish()
    }
}

/// What to answer when no rule matched and the queue is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum WhenEmpty {
    /// HTTP 500 "script exhausted" (a test sent more requests than it scripted).
    #[default]
    Error,
    /// This reply, every time.
    Repeat(MockReply),
}

/// A whole script. Order of precedence for each request: rules (first match), then the
/// queue of replies, then [`WhenEmpty`].
#[derive(Debug, Clone)]
pub struct MockScript {
    /// Replies consumed in order.
    pub replies: VecDeque<MockReply>,
    /// Rules tried, in order, before the queue.
    pub rules: Vec<MockRule>,
    /// The answer once the queue is empty.
    pub when_empty: WhenEmpty,
    /// Added before every answer, side requests (`/v1/models`, `/props`, tokenizers)
    /// included: a server that far away.
    pub latency: Duration,
    /// The model name reported in answers.
    pub model: String,
    /// Keep at most this many recorded requests (the oldest are dropped).
    pub record_limit: usize,
    /// The served model's context window, in the tokens the mock counts (characters
    /// / 4 of the prompt, plus `max_tokens` when the request sets it): a longer request
    /// is refused as llama-cpp-python's server refuses it — streamed, an event stream
    /// without data; whole, HTTP 400 naming the window.
    pub context_window: Option<u32>,
    /// Give `context_window` in `/v1/models` as `max_model_len`, as vLLM does (false:
    /// say nothing, as llama-cpp-python's server does).
    pub advertise_window: bool,
    /// Count every ASCII digit as a token of its own when the tokenizer endpoint counts
    /// and when `context_window` is checked, as Qwen's tokenizer does (false: a token
    /// per four characters of any text). See [`super::mock_tokens`].
    pub digits_are_tokens: bool,
    /// Characters a token of the text that is not digits, as the tokenizer endpoints
    /// and the `context_window` check count it (default four; two plays a tokenizer
    /// that splits a numbered word list far finer than English prose).
    pub chars_per_token: u64,
    /// Which server's way of offering its tokenizer the mock plays (both tokenizer
    /// endpoints answer whatever it plays, so a client that posts to one the server
    /// never offered is seen doing it in [`super::MockControl::side_requests`]).
    pub tokenizer: MockTokenizer,
    /// The latency of side requests alone (`/v1/models`, `/props`, tokenizers), when
    /// it differs from `latency`.
    pub side_latency: Option<Duration>,
}

/// How the mock says it has a tokenizer, as the servers it stands in for do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MockTokenizer {
    /// As llama-cpp-python's server: `GET /openapi.json` lists
    /// `/extras/tokenize/count` (FastAPI's listing of the routes); `/props` is 404.
    #[default]
    LlamaCppPython,
    /// As llama.cpp's server: `GET /props` says it is llama.cpp
    /// (`default_generation_settings` with `n_ctx`, `total_slots`, `build_info`),
    /// `/v1/models` entries are `owned_by: "llamacpp"`, and `POST /tokenize` counts.
    LlamaCpp,
    /// As a server that offers none (OpenAI, a proxy): no listing, `/props` 404.
    Unadvertised,
}

/// Characters a token the mock counts unless the script says otherwise
/// ([`MockScript::chars_per_token`]).
pub const DEFAULT_MOCK_CHARS_PER_TOKEN: u64 = 4;

/// The model name reported unless the script names another.
pub const DEFAULT_MOCK_MODEL: &str = "mock-llm";

impl Default for MockScript {
    fn default() -> Self {
        Self {
            replies: VecDeque::new(),
            rules: Vec::new(),
            when_empty: WhenEmpty::Error,
            latency: Duration::ZERO,
            model: DEFAULT_MOCK_MODEL.to_owned(),
            record_limit: usize::MAX,
            context_window: None,
            advertise_window: true,
            digits_are_tokens: false,
            chars_per_token: DEFAULT_MOCK_CHARS_PER_TOKEN,
            tokenizer: MockTokenizer::default(),
            side_latency: None,
        }
    }
}

impl MockScript {
    /// Tokens the mock counts in `text`, as this script's tokenizer would
    /// ([`Self::digits_are_tokens`], [`Self::chars_per_token`]; [`super::mock_tokens_at`]).
    pub fn tokens_in(&self, text: &str) -> u64 {
        super::mock_tokens_at(text, self.digits_are_tokens, self.chars_per_token)
    }

    /// An empty script: every request gets 500 "script exhausted".
    pub fn new() -> Self {
        Self::default()
    }

    /// A script answering these replies in order.
    pub fn replies<R: Into<MockReply>>(replies: impl IntoIterator<Item = R>) -> Self {
        Self {
            replies: replies.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// A script answering `reply` to every request.
    pub fn always(reply: impl Into<MockReply>) -> Self {
        Self {
            when_empty: WhenEmpty::Repeat(reply.into()),
            ..Self::default()
        }
    }

    /// Appends a reply to the queue.
    pub fn then(mut self, reply: impl Into<MockReply>) -> Self {
        self.replies.push_back(reply.into());
        self
    }

    /// Adds a rule.
    pub fn rule(mut self, rule: MockRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Repeats `reply` once the queue is empty.
    pub fn or_else(mut self, reply: impl Into<MockReply>) -> Self {
        self.when_empty = WhenEmpty::Repeat(reply.into());
        self
    }

    /// Adds `latency` before every answer (model calls and side requests alike:
    /// `/v1/models`, `/props`, tokenizers), as a server that far away would.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Reports `model` as the answering model.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// What this script answers, as one sentence for a server's start-up banner, e.g.
    /// `mock-llm (a scripted stand-in for a model server, not a model) has 5 scripted
    /// replies and 0 rules; when no rule matches and the replies are used up, it
    /// answers HTTP 500 "script exhausted".`
    pub fn describe(&self) -> String {
        let replies = count(self.replies.len(), "scripted reply", "scripted replies");
        let rules = count(self.rules.len(), "rule", "rules");
        let fallback = match &self.when_empty {
            WhenEmpty::Error => "answers HTTP 500 \"script exhausted\"",
            WhenEmpty::Repeat(_) => "repeats its default reply",
        };
        format!(
            "mock-llm (a scripted stand-in for a model server, not a model) has {replies} \
             and {rules}; when no rule matches and the replies are used up, it {fallback}."
        )
    }

    /// Reads a script file (format in [`MockScript::from_json`]).
    pub fn from_file(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json(&text).map_err(|error| match error {
            ScriptError::Invalid { message, .. } => ScriptError::Invalid {
                path: Some(path.to_owned()),
                message,
            },
            other => other,
        })
    }

    /// Parses a script: either a JSON array of replies, or an object
    /// `{"replies": [...], "rules": [{CONDITIONS, "reply": ...}], "default": reply,
    /// "latency_ms": N, "model": "name"}`.
    ///
    /// A rule's conditions (at least one; all must hold, see [`RequestMatch`]):
    /// `"contains": TEXT` / `"regex": RE` (the last user message), `"api": "openai" |
    /// "anthropic" | "responses"`, `"path": TEXT` (the target contains it), `"model":
    /// TEXT` (contains), `"tools": true | false` (tools offered or not), `"tool":
    /// NAME` (offered), `"tool_results": true | false` (present or not), `"system":
    /// TEXT` (the system prompt contains it). For example `{"tools": false, "reply":
    /// "A title"}` answers side requests that offer no tools, and `{"contains": "go",
    /// "tool_results": false, "reply": {...}}` only the first request of a turn (in
    /// Chat Completions and Responses the user's text stays the last user message
    /// after tool results, so `contains` alone would match every request of the
    /// turn and loop).
    ///
    /// A reply is a string
    /// (text) or an object with one of `text`, `tool_calls` (with an optional `text`
    /// said first), `status` (+ `body`, `retry_after`) or `"close": true`, and
    /// optionally `delay_ms`, `usage` (`{"prompt_tokens", "completion_tokens"}` or
    /// `"omit"`), `chunk_bytes`, `chunk_delay_ms`, `repeat_tool_names` (`true`: see
    /// [`MockReply::repeat_tool_names`]).
    ///
    /// `tool_calls` is a non-empty array of `{"name": "ctx_grep", "arguments":
    /// {"variable": "context", "pattern": "ERROR"}}`, each with an optional `"id"`;
    /// `"raw_arguments": "TEXT"` instead of `arguments` sends TEXT verbatim (e.g. text
    /// that is not JSON); with neither, the arguments are `{}`.
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        let invalid = |message: String| ScriptError::Invalid {
            path: None,
            message,
        };
        let file: ScriptFile =
            serde_json::from_str(text).map_err(|error| invalid(error.to_string()))?;
        let spec = match file {
            ScriptFile::Replies(replies) => ScriptSpec {
                replies,
                ..ScriptSpec::default()
            },
            ScriptFile::Full(spec) => *spec,
        };
        let mut script = MockScript::new();
        for (index, reply) in spec.replies.into_iter().enumerate() {
            script.replies.push_back(
                reply
                    .into_reply()
                    .map_err(|m| invalid(format!("replies[{index}]: {m}")))?,
            );
        }
        for (index, rule) in spec.rules.into_iter().enumerate() {
            let reply = rule
                .reply
                .clone()
                .into_reply()
                .map_err(|m| invalid(format!("rules[{index}].reply: {m}")))?;
            let rule = rule
                .into_match()
                .map_err(|m| invalid(format!("rules[{index}]: {m}")))?;
            let rule = MockRule::when(rule, reply);
            script.rules.push(rule);
        }
        if let Some(default) = spec.default {
            script.when_empty = WhenEmpty::Repeat(
                default
                    .into_reply()
                    .map_err(|m| invalid(format!("default: {m}")))?,
            );
        }
        script.latency = Duration::from_millis(spec.latency_ms);
        if let Some(model) = spec.model {
            script.model = model;
        }
        Ok(script)
    }
}

/// A script file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("failed to read the mock script {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The JSON does not describe a script.
    #[error("invalid mock script{}: {message}; see MockScript::from_json for the format", in_file(.path))]
    Invalid {
        /// The file, when read from one.
        path: Option<PathBuf>,
        /// What is wrong.
        message: String,
    },
}

fn in_file(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|path| format!(" {}", path.display()))
        .unwrap_or_default()
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ScriptFile {
    Replies(Vec<ReplySpec>),
    Full(Box<ScriptSpec>),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ScriptSpec {
    #[serde(default)]
    replies: Vec<ReplySpec>,
    #[serde(default)]
    rules: Vec<RuleSpec>,
    #[serde(default)]
    default: Option<ReplySpec>,
    #[serde(default)]
    latency_ms: u64,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    #[serde(default)]
    contains: Option<String>,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    api: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    tools: Option<bool>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    tool_results: Option<bool>,
    #[serde(default)]
    system: Option<String>,
    reply: ReplySpec,
}

impl RuleSpec {
    /// The rule's conditions; at least one is needed.
    fn into_match(self) -> Result<RequestMatch, String> {
        let api = match self.api.as_deref() {
            None => None,
            Some(name) => Some(Api::from_name(name).ok_or_else(|| {
                format!("`api` is \"openai\", \"anthropic\" or \"responses\", not {name:?}")
            })?),
        };
        let mut matcher = RequestMatch {
            api,
            path: self.path,
            model: self.model,
            tools: self.tools,
            tool: self.tool,
            tool_results: self.tool_results,
            system: self.system,
            contains: self.contains,
            regex: None,
        };
        if let Some(pattern) = self.regex {
            matcher = matcher
                .regex(&pattern)
                .map_err(|error| format!("regex: {error}"))?;
        }
        if matcher.is_empty() {
            return Err(
                "needs at least one condition: `contains`, `regex`, `api`, `path`, \
                        `model`, `tools`, `tool`, `tool_results` or `system`"
                    .into(),
            );
        }
        Ok(matcher)
    }
}

#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum ReplySpec {
    Text(String),
    Full(FullReplySpec),
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct FullReplySpec {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    retry_after: Option<serde_json::Value>,
    #[serde(default)]
    close: bool,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    usage: Option<serde_json::Value>,
    #[serde(default)]
    chunk_bytes: Option<usize>,
    #[serde(default)]
    chunk_delay_ms: u64,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallSpec>>,
    #[serde(default)]
    repeat_tool_names: bool,
    /// A reply that never ends, in pieces of this many bytes ([`ReplyKind::Endless`]).
    #[serde(default)]
    endless: Option<usize>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct ToolCallSpec {
    #[serde(default)]
    id: Option<String>,
    name: String,
    #[serde(default)]
    arguments: Option<serde_json::Value>,
    #[serde(default)]
    raw_arguments: Option<String>,
}

impl ToolCallSpec {
    fn into_call(self) -> Result<MockToolCall, String> {
        let mut call = match (self.arguments, self.raw_arguments) {
            (Some(arguments), None) => MockToolCall::new(self.name, arguments),
            (None, Some(raw)) => MockToolCall::raw(self.name, raw),
            (None, None) => MockToolCall::new(self.name, serde_json::json!({})),
            (Some(_), Some(_)) => {
                return Err("give `arguments` or `raw_arguments`, not both".into())
            }
        };
        call.id = self.id;
        Ok(call)
    }
}

/// `n` followed by the singular or plural noun: "1 rule", "0 rules".
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl ReplySpec {
    fn into_reply(self) -> Result<MockReply, String> {
        let spec = match self {
            ReplySpec::Text(text) => return Ok(MockReply::text(text)),
            ReplySpec::Full(spec) => spec,
        };
        let kinds = (spec.tool_calls, spec.text, spec.status, spec.close);
        let mut reply = match (kinds, spec.endless) {
            ((None, None, None, false), Some(piece_bytes)) => MockReply::endless(piece_bytes),
            (_, Some(_)) => {
                return Err(
                    "`endless` is a reply of its own: give no `text`, `tool_calls`, \
                            `status` or `close` with it"
                        .into(),
                )
            }
            ((Some(calls), text, None, false), None) => {
                if calls.is_empty() {
                    return Err("`tool_calls` needs at least one call".into());
                }
                let calls = calls
                    .into_iter()
                    .enumerate()
                    .map(|(index, call)| {
                        call.into_call()
                            .map_err(|m| format!("tool_calls[{index}]: {m}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                MockReply::tool_calls(text.unwrap_or_default(), calls)
            }
            ((None, Some(text), None, false), None) => MockReply::text(text),
            ((None, None, Some(status), false), None) => MockReply::error(
                status,
                spec.body.unwrap_or_else(|| format!("mock error {status}")),
            ),
            ((None, None, None, true), None) => MockReply::close(),
            _ => {
                return Err("give exactly one of `text`, `tool_calls` (optionally with \
                            `text`), `status`, `\"close\": true` or `endless`"
                    .into())
            }
        };
        reply.repeat_tool_names = spec.repeat_tool_names;
        reply.delay = Duration::from_millis(spec.delay_ms);
        reply.retry_after = match spec.retry_after {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(text)) => Some(text),
            Some(other) => Some(other.to_string()),
        };
        reply.usage = match spec.usage {
            None | Some(serde_json::Value::Null) => MockUsage::Estimate,
            Some(serde_json::Value::String(word)) if word == "omit" => MockUsage::Omit,
            Some(value) => {
                let field = |name: &str| value.get(name).and_then(serde_json::Value::as_u64);
                match (field("prompt_tokens"), field("completion_tokens")) {
                    (Some(prompt_tokens), Some(completion_tokens)) => MockUsage::Exact {
                        prompt_tokens,
                        completion_tokens,
                    },
                    _ => return Err(
                        "`usage` is `\"omit\"` or {\"prompt_tokens\": N, \"completion_tokens\": N}"
                            .into(),
                    ),
                }
            }
        };
        if let Some(bytes) = spec.chunk_bytes {
            reply = reply.chunked(bytes, Duration::from_millis(spec.chunk_delay_ms));
        }
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_array_is_a_queue() {
        let script = MockScript::from_json(r#"["one", {"text": "two", "delay_ms": 5}]"#).unwrap();
        assert_eq!(script.replies.len(), 2);
        assert_eq!(script.replies[1].delay, Duration::from_millis(5));
        assert_eq!(script.when_empty, WhenEmpty::Error);
    }

    #[test]
    fn a_full_script_parses() {
        let script = MockScript::from_json(
            r#"{
                "model": "scripted",
                "latency_ms": 3,
                "replies": [
                    {"status": 429, "body": "slow down", "retry_after": 1},
                    {"close": true},
                    {"text": "done", "usage": {"prompt_tokens": 4, "completion_tokens": 2}},
                    {"text": "quiet", "usage": "omit", "chunk_bytes": 3, "chunk_delay_ms": 1}
                ],
                "rules": [{"contains": "chunk", "reply": "summary"}, {"regex": "^x+$", "reply": "xs"}],
                "default": "fallback"
            }"#,
        )
        .unwrap();
        assert_eq!(script.model, "scripted");
        assert_eq!(script.latency, Duration::from_millis(3));
        assert_eq!(
            script.replies[0].kind,
            ReplyKind::Error {
                status: 429,
                body: "slow down".into()
            }
        );
        assert_eq!(script.replies[0].retry_after.as_deref(), Some("1"));
        assert_eq!(script.replies[1].kind, ReplyKind::Close);
        assert_eq!(
            script.replies[2].usage,
            MockUsage::Exact {
                prompt_tokens: 4,
                completion_tokens: 2
            }
        );
        assert_eq!(script.replies[3].usage, MockUsage::Omit);
        assert_eq!(script.replies[3].chunk_bytes, Some(3));
        assert_eq!(script.rules.len(), 2);
        assert_eq!(
            script.when_empty,
            WhenEmpty::Repeat(MockReply::text("fallback"))
        );
    }

    #[test]
    fn the_description_is_one_sentence_on_one_line() {
        let exhausting = MockScript::replies(["a", "b"]);
        assert_eq!(
            exhausting.describe(),
            "mock-llm (a scripted stand-in for a model server, not a model) has 2 scripted \
             replies and 0 rules; when no rule matches and the replies are used up, it answers \
             HTTP 500 \"script exhausted\"."
        );
        let repeating = MockScript::replies(["a"])
            .rule(MockRule::contains("x", "y"))
            .or_else("again");
        let text = repeating.describe();
        assert!(
            text.contains(" has 1 scripted reply and 1 rule; "),
            "{text}"
        );
        assert!(text.ends_with(", it repeats its default reply."), "{text}");
        for text in [exhausting.describe(), text] {
            assert!(!text.contains('\n'), "{text}");
            assert!(text.starts_with("mock-llm "), "{text}");
        }
    }

    #[test]
    fn tool_calls_parse_with_optional_text_ids_and_raw_arguments() {
        let script = MockScript::from_json(
            r#"[
                {"tool_calls": [{"name": "ctx_grep", "arguments": {"variable": "context", "pattern": "ERROR"}}]},
                {"text": "Let me look.", "repeat_tool_names": true, "tool_calls": [
                    {"id": "call_x", "name": "ctx_grep", "arguments": {"pattern": "a"}},
                    {"name": "ctx_len"},
                    {"name": "ctx_grep", "raw_arguments": "{\"pattern\": "}
                ]}
            ]"#,
        )
        .unwrap();
        let grep = serde_json::json!({"variable": "context", "pattern": "ERROR"});
        assert_eq!(
            script.replies[0],
            MockReply::tool_calls("", [MockToolCall::new("ctx_grep", grep)])
        );
        assert_eq!(
            script.replies[1],
            MockReply::tool_calls(
                "Let me look.",
                [
                    MockToolCall::new("ctx_grep", serde_json::json!({"pattern": "a"}))
                        .with_id("call_x"),
                    MockToolCall::new("ctx_len", serde_json::json!({})),
                    MockToolCall::raw("ctx_grep", "{\"pattern\": "),
                ]
            )
            .repeating_tool_names()
        );
    }

    #[test]
    fn bad_tool_calls_say_where() {
        for (script, expected) in [
            (r#"[{"tool_calls": []}]"#, "replies[0]: `tool_calls` needs"),
            (
                r#"[{"tool_calls": [{"name": "a", "arguments": {}, "raw_arguments": "x"}]}]"#,
                "replies[0]: tool_calls[0]: give `arguments` or `raw_arguments`",
            ),
            (
                r#"[{"tool_calls": [{"name": "a"}], "status": 500}]"#,
                "replies[0]: give exactly one of",
            ),
        ] {
            let error = MockScript::from_json(script).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn rules_route_by_api_tools_model_and_tool_results() {
        let script = MockScript::from_json(
            r#"{"rules": [
                {"tools": false, "model": "haiku", "reply": "A title"},
                {"api": "responses", "contains": "go", "tool_results": false, "reply": "first"},
                {"path": "/v1/messages", "system": "agent", "tool": "Bash", "reply": "claude"}
            ]}"#,
        )
        .unwrap();
        let request = |api, path: &str, body: serde_json::Value| RecordedRequest {
            index: 0,
            connection: 0,
            method: "POST".into(),
            path: path.into(),
            api: Some(api),
            headers: Vec::new(),
            auth_headers: Vec::new(),
            body,
            body_bytes: 0,
            received_unix_us: 0,
            side_in_flight: 0,
            side_answered: 0,
        };
        let answer = |request: &RecordedRequest| {
            script
                .rules
                .iter()
                .find_map(|rule| rule.decide(request))
                .map(|reply| reply.kind)
        };
        let title = request(
            Api::Anthropic,
            "/v1/messages",
            serde_json::json!({"model": "claude-haiku-9", "messages": [{"role": "user", "content": "x"}]}),
        );
        assert_eq!(answer(&title), Some(ReplyKind::Text("A title".into())));
        let first = request(
            Api::Responses,
            "/v1/responses",
            serde_json::json!({"model": "m", "tools": [{"type": "function", "name": "f"}],
                "input": "go on"}),
        );
        assert_eq!(answer(&first), Some(ReplyKind::Text("first".into())));
        let after_tools = request(
            Api::Responses,
            "/v1/responses",
            serde_json::json!({"model": "m", "tools": [{"type": "function", "name": "f"}],
                "input": [{"role": "user", "content": "go on"},
                    {"type": "function_call_output", "call_id": "c", "output": "ok"}]}),
        );
        assert_eq!(answer(&after_tools), None);
        let claude = request(
            Api::Anthropic,
            "/v1/messages?beta=true",
            serde_json::json!({"model": "opus", "system": [{"type": "text", "text": "an agent"}],
                "tools": [{"name": "Bash"}], "messages": []}),
        );
        assert_eq!(answer(&claude), Some(ReplyKind::Text("claude".into())));
        assert_eq!(
            format!("{:?}", script.rules[0]),
            r#"MockRule("model contains \"haiku\" and no tools offered")"#
        );
        assert_eq!(
            format!("{:?}", MockRule::side_request("t")),
            r#"MockRule("no tools offered")"#
        );
    }

    #[test]
    fn bad_rules_say_why() {
        for (script, expected) in [
            (
                r#"{"rules": [{"reply": "a"}]}"#,
                "rules[0]: needs at least one condition",
            ),
            (
                r#"{"rules": [{"api": "grpc", "reply": "a"}]}"#,
                "rules[0]: `api` is",
            ),
            (
                r#"{"rules": [{"regex": "(", "reply": "a"}]}"#,
                "rules[0]: regex",
            ),
            (
                r#"{"rules": [{"tools": "no", "reply": "a"}]}"#,
                "invalid mock script",
            ),
        ] {
            let error = MockScript::from_json(script).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn bad_scripts_say_where() {
        let error =
            MockScript::from_json(r#"{"replies": [{"text": "a", "status": 500}]}"#).unwrap_err();
        assert!(error.to_string().contains("replies[0]"), "{error}");
        let error = MockScript::from_json(r#"{"rules": [{"reply": "a"}]}"#).unwrap_err();
        assert!(error.to_string().contains("rules[0]"), "{error}");
        assert!(MockScript::from_json(r#"{"rules": [{"regex": "(", "reply": "a"}]}"#).is_err());
        assert!(MockScript::from_json("not json").is_err());
    }
}
