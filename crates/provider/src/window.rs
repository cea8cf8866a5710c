//! A model's context window — how many tokens one request may hold, prompt and answer
//! together — where that figure comes from, and how many tokens a text is estimated to
//! take.
//!
//! The window is found in this order, the first answer wins (docs/windows.md):
//! 1. configured (`--context-window`, `--sub-context-window`, `rlm.toml`);
//! 2. the server, where it says (asked by the discovery module): `/v1/models` fields (vLLM's
//!    `max_model_len`, `context_length`, `max_context_length`, `context_window`) and
//!    llama.cpp's `/props` (`n_ctx`);
//! 3. a table of well-known models ([`known_window`]);
//! 4. [`DEFAULT_CONTEXT_WINDOW`], stated as the default.
//!
//! A server that refuses a request for being too long usually names its window in the
//! error ("exceed context window of 8192", "maximum context length is 8192 tokens",
//! `"n_ctx": 8192`); [`window_in_refusal`] reads it, so a wrong guess is corrected by the
//! first refusal.
//!
//! Tokens are estimated by [`TokenEstimator`]: characters over a characters-per-token
//! ratio that starts conservative and is calibrated by the usage the server reports.

use std::fmt;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ChatMessage, ChatRequest};

/// The window assumed when nothing configured, served or known says otherwise: small
/// enough for the local models people run (llama.cpp's servers are often started with
/// 8k), and a refusal naming a smaller one corrects it.
pub const DEFAULT_CONTEXT_WINDOW: u32 = 8_192;

/// The smallest window accepted from a flag, a file or a server: below it not even the
/// system prompt fits.
pub const MIN_CONTEXT_WINDOW: u32 = 1_024;

/// Where a window's size came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WindowSource {
    /// `--context-window` / `--sub-context-window` or `rlm.toml`.
    Configured,
    /// The server said so.
    Server {
        /// The URL that said it.
        url: String,
        /// The field that held it.
        field: String,
    },
    /// The table of well-known models.
    KnownModel {
        /// The table entry that matched the model's name.
        family: String,
    },
    /// Nothing said otherwise.
    Default,
    /// The server refused a request for being too long and named its window.
    Refusal,
}

impl fmt::Display for WindowSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Configured => f.write_str("the configuration"),
            Self::Server { url, field } => write!(f, "the server: `{field}` at {url}"),
            Self::KnownModel { family } => write!(f, "the table of known models: {family}"),
            Self::Default => write!(
                f,
                "the default (nothing configured, served or known; set --context-window)"
            ),
            Self::Refusal => f.write_str("the server's refusal of a longer request"),
        }
    }
}

/// A model's context window in tokens, and where that figure comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextWindow {
    /// Tokens one request may hold, prompt and answer together.
    pub tokens: u32,
    /// Where the figure comes from.
    pub source: WindowSource,
}

impl fmt::Display for ContextWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} tokens (from {})", self.tokens, self.source)
    }
}

/// Well-known model families and their windows, most specific first: the first entry
/// whose name the model's (lower-cased) name contains wins. Windows are the families'
/// published ones; a server started with a smaller one says so, or refuses and names it.
const KNOWN_WINDOWS: &[(&str, u32)] = &[
    ("gpt-4.1", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o4-mini", 200_000),
    ("o3", 200_000),
    ("o1", 200_000),
    ("claude", 200_000),
    ("gemini", 1_048_576),
    ("qwen3", 32_768),
    ("qwen2.5", 32_768),
    ("qwen2", 32_768),
    ("llama-3.3", 131_072),
    ("llama-3.2", 131_072),
    ("llama-3.1", 131_072),
    ("llama3.3", 131_072),
    ("llama3.2", 131_072),
    ("llama3.1", 131_072),
    ("llama-3", 8_192),
    ("llama3", 8_192),
    ("mixtral", 32_768),
    ("mistral", 32_768),
    ("gemma-3", 131_072),
    ("gemma3", 131_072),
    ("gemma-2", 8_192),
    ("gemma2", 8_192),
    ("phi-4", 16_384),
    ("smollm2", 8_192),
    ("deepseek", 65_536),
];

/// The window of a well-known model family, with the table entry that matched.
pub fn known_window(model: &str) -> Option<(u32, &'static str)> {
    let name = model.to_ascii_lowercase();
    KNOWN_WINDOWS
        .iter()
        .find(|(family, _)| name.contains(family))
        .map(|(family, tokens)| (*tokens, *family))
}

/// The window from the table, else the default (no network).
pub fn offline_window(model: &str) -> ContextWindow {
    match known_window(model) {
        Some((tokens, family)) => ContextWindow {
            tokens,
            source: WindowSource::KnownModel {
                family: family.to_owned(),
            },
        },
        None => ContextWindow {
            tokens: DEFAULT_CONTEXT_WINDOW,
            source: WindowSource::Default,
        },
    }
}

/// Fields of a `/v1/models` entry that hold the window, most specific first.
const MODEL_WINDOW_FIELDS: [&str; 5] = [
    "max_model_len",
    "context_length",
    "max_context_length",
    "context_window",
    "n_ctx",
];

/// The window a `/v1/models` listing gives for `model` (its entry, or the only entry),
/// with the field that held it.
pub fn window_in_models(listing: &Value, model: &str) -> Option<(u32, String)> {
    let entries = listing.get("data")?.as_array()?;
    let entry = entries
        .iter()
        .find(|e| e.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| (entries.len() == 1).then(|| &entries[0]))?;
    let places = [entry, entry.get("meta").unwrap_or(&Value::Null)];
    for place in places {
        for field in MODEL_WINDOW_FIELDS {
            if let Some(tokens) = window_number(place.get(field)) {
                return Some((tokens, field.to_owned()));
            }
        }
    }
    None
}

/// The window llama.cpp's `/props` gives (`default_generation_settings.n_ctx`, or
/// `n_ctx`), with the field that held it.
pub fn window_in_props(props: &Value) -> Option<(u32, String)> {
    let nested = props
        .get("default_generation_settings")
        .and_then(|s| s.get("n_ctx"));
    if let Some(tokens) = window_number(nested) {
        return Some((tokens, "default_generation_settings.n_ctx".to_owned()));
    }
    window_number(props.get("n_ctx")).map(|tokens| (tokens, "n_ctx".to_owned()))
}

/// A plausible window from a JSON number.
fn window_number(value: Option<&Value>) -> Option<u32> {
    let tokens = u32::try_from(value?.as_u64()?).ok()?;
    (tokens >= MIN_CONTEXT_WINDOW).then_some(tokens)
}

/// The window a server's refusal of a too-long request names, if it names one:
/// llama-cpp-python ("Requested tokens (9000) exceed context window of 8192"),
/// llama.cpp (`"n_ctx": 8192`), vLLM and OpenAI ("maximum context length is 8192
/// tokens"), Anthropic ("prompt is too long: 210000 tokens > 200000 maximum").
pub fn window_in_refusal(body: &str) -> Option<u32> {
    let lower = body.to_ascii_lowercase();
    let after = |marker: &str| -> Option<u32> {
        let at = lower.find(marker)? + marker.len();
        leading_number(&lower[at..])
    };
    let tokens = after("exceed context window of")
        .or_else(|| after("maximum context length is"))
        .or_else(|| after("\"n_ctx\":"))
        .or_else(|| after("context window of"))
        .or_else(|| {
            // Anthropic: "prompt is too long: 210000 tokens > 200000 maximum".
            let at = lower.find("prompt is too long")?;
            let rest = &lower[at..];
            let gt = rest.find('>')?;
            leading_number(&rest[gt + 1..])
        })?;
    (tokens >= MIN_CONTEXT_WINDOW).then_some(tokens)
}

/// The prompt's tokens a server's refusal of a too-long request counted, if it says:
/// llama-cpp-python ("Requested tokens (9000) exceed …"), OpenAI and vLLM ("(9030 in
/// the messages, 5 in the completion)"; else "you requested 9035 tokens"), llama.cpp
/// (`"n_prompt_tokens": 9000`), Anthropic ("prompt is too long: 210000 tokens"). Counted
/// by the server's tokenizer: what calibrates the estimate when a request was refused.
pub fn prompt_tokens_in_refusal(body: &str) -> Option<u64> {
    let lower = body.to_ascii_lowercase();
    let after = |marker: &str| -> Option<u32> {
        let at = lower.find(marker)? + marker.len();
        leading_number(&lower[at..])
    };
    let in_messages = || {
        // "(9030 in the messages": the number before the marker.
        let at = lower.find(" in the messages")?;
        let open = lower[..at].rfind('(')?;
        leading_number(&lower[open + 1..at])
    };
    let tokens = after("requested tokens")
        .or_else(in_messages)
        .or_else(|| after("\"n_prompt_tokens\":"))
        .or_else(|| after("prompt is too long:"))
        .or_else(|| after("you requested"))?;
    (tokens > 0).then_some(u64::from(tokens))
}

/// True when an error body says the request was too long for the model.
pub fn is_overflow_refusal(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    [
        "exceed context window",
        "exceeds the available context size",
        "maximum context length",
        "context_length_exceeded",
        "exceed_context_size",
        "prompt is too long",
        "too many tokens",
    ]
    .iter()
    .any(|marker| lower.contains(marker))
}

/// The number at the start of `text` (after spaces, quotes and `(`), digits only.
fn leading_number(text: &str) -> Option<u32> {
    let text = text.trim_start_matches([' ', '"', '(', ':']);
    let digits: String = text
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Characters per token assumed before any usage is reported: below English prose's
/// ~4, because code, JSON and numbers take more tokens per character.
pub const DEFAULT_CHARS_PER_TOKEN: f64 = 3.0;

/// Characters counted for each message besides its text: the chat template's role
/// markers and separators.
const MESSAGE_OVERHEAD_CHARS: usize = 16;

/// Counted texts a [`TokenEstimator`] keeps the ratio of (16 bytes each, plus the
/// map's own).
pub const MAX_COUNTED_TEXTS: usize = 16_384;

/// Characters of each of the three slices (start, middle, end) of a text sampled by
/// [`sample_of`].
pub const SAMPLE_SLICE_CHARS: usize = 4_096;

/// A sample of `text` to count with a server's tokenizer: all of it when short, else
/// [`SAMPLE_SLICE_CHARS`] characters from its start, its middle and its end.
pub fn sample_of(text: &str) -> String {
    let chars = text.chars().count();
    if chars <= 3 * SAMPLE_SLICE_CHARS {
        return text.to_owned();
    }
    let slice =
        |from: usize| -> String { text.chars().skip(from).take(SAMPLE_SLICE_CHARS).collect() };
    [
        slice(0),
        slice(chars / 2 - SAMPLE_SLICE_CHARS / 2),
        slice(chars - SAMPLE_SLICE_CHARS),
    ]
    .join("\n")
}

/// Estimates how many tokens a request takes: its characters over a ratio that starts
/// at [`DEFAULT_CHARS_PER_TOKEN`] and is calibrated by the prompt tokens the server
/// reports — the lowest ratio seen, so the estimate errs towards more tokens. A text
/// whose sample the server counted (`TokenEstimator::observe_text`: a REPL output of
/// records, a sub-call's content) is estimated at its own ratio, when that is lower:
/// digits run a token each on some tokenizers, where English runs four characters.
#[derive(Debug)]
pub struct TokenEstimator {
    state: Mutex<Calibration>,
    /// Characters per token of each counted text, by the hash of its sample.
    texts: Mutex<std::collections::HashMap<u64, f64>>,
}

#[derive(Debug, Clone, Copy)]
struct Calibration {
    chars_per_token: f64,
    samples: u32,
    /// Tokens a digit costs, learned from counted texts with digits in them (the most
    /// any count showed); `None` until one was counted: then a token each.
    tokens_per_digit: Option<f64>,
}

impl Default for TokenEstimator {
    fn default() -> Self {
        Self {
            state: Mutex::new(Calibration {
                chars_per_token: DEFAULT_CHARS_PER_TOKEN,
                samples: 0,
                tokens_per_digit: None,
            }),
            texts: Mutex::new(std::collections::HashMap::new()),
        }
    }
}

impl TokenEstimator {
    /// The current ratio, and how many reported usages calibrated it.
    pub fn calibration(&self) -> (f64, u32) {
        let state = *self.state.lock().unwrap_or_else(|p| p.into_inner());
        (state.chars_per_token, state.samples)
    }

    /// Estimated tokens of `chars` characters.
    pub fn tokens_of_chars(&self, chars: usize) -> u64 {
        let (ratio, _) = self.calibration();
        (chars as f64 / ratio).ceil() as u64
    }

    /// Estimated tokens of `text`: at its own counted ratio when lower than the
    /// general one.
    pub fn tokens_of(&self, text: &str) -> u64 {
        (text.chars().count() as f64 / self.ratio_of(text)).ceil() as u64
    }

    /// Characters per token to estimate `text` with: the ratio the server counted in
    /// `text`'s sample, else its digits at what a digit costs (a token each until a
    /// count says otherwise) and the rest at the general ratio; never more than the
    /// general ratio.
    pub fn ratio_of(&self, text: &str) -> f64 {
        let (general, _) = self.calibration();
        let counted = {
            let texts = self.texts.lock().unwrap_or_else(|p| p.into_inner());
            if texts.is_empty() {
                None
            } else {
                texts.get(&sample_key(&sample_of(text))).copied()
            }
        };
        match counted {
            Some(ratio) => ratio.min(general),
            None => uncounted_ratio(text, general, self.tokens_per_digit()),
        }
    }

    /// Tokens a digit costs in text nothing counted: what counted texts showed, else
    /// one.
    fn tokens_per_digit(&self) -> f64 {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.tokens_per_digit.unwrap_or(1.0)
    }

    /// Learns what a digit costs from `counted` tokens of `text`: what the count leaves
    /// after the other characters at the general ratio, over the digits — when digits
    /// are a tenth of the text or more (fewer say nothing about them). Between a third
    /// (three-digit groups) and one; the most any count showed is kept.
    fn learn_digit_cost(&self, text: &str, counted: u64) {
        if !is_dense(text) {
            return;
        }
        let (chars, digits) = chars_and_digits(text);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let others = (chars - digits) as f64 / state.chars_per_token;
        let cost = ((counted as f64 - others) / digits as f64).clamp(1.0 / 3.0, 1.0);
        state.tokens_per_digit = Some(state.tokens_per_digit.map_or(cost, |seen| seen.max(cost)));
    }

    /// The ratio counted for `sample` ([`TokenEstimator::observe_sample`]), if it was.
    pub fn sample_ratio(&self, sample: &str) -> Option<f64> {
        let texts = self.texts.lock().unwrap_or_else(|p| p.into_inner());
        texts.get(&sample_key(sample)).copied()
    }

    /// Estimated prompt tokens of `request`: its messages (each at its own ratio, see
    /// [`TokenEstimator::ratio_of`]), tool calls and tool specs.
    pub fn request_tokens(&self, request: &ChatRequest) -> u64 {
        let (general, _) = self.calibration();
        let tools = request_chars(request) - messages_chars(&request.messages);
        (self.messages_estimate(&request.messages) + tools as f64 / general).ceil() as u64
    }

    /// Estimated prompt tokens of `messages` alone (no tool specs): what a call is
    /// reserved against the budgets before it is sent.
    pub fn messages_tokens(&self, messages: &[ChatMessage]) -> u64 {
        self.messages_estimate(messages).ceil() as u64
    }

    /// The messages' tokens: each text at its own ratio, the rest (template, tool
    /// calls) at the general one.
    fn messages_estimate(&self, messages: &[ChatMessage]) -> f64 {
        let (general, _) = self.calibration();
        let contents: usize = messages.iter().map(|m| m.content.chars().count()).sum();
        let rest = messages_chars(messages) - contents;
        let texts: f64 = messages
            .iter()
            .map(|m| m.content.chars().count() as f64 / self.ratio_of(&m.content))
            .sum();
        texts + rest as f64 / general
    }

    /// Records the tokens the server's tokenizer counted in `sample` (a sample of a
    /// text, [`sample_of`], or of a file): that text is then estimated at its own
    /// ratio. Returns the ratio; `None` for an implausible count (fewer than one token
    /// per eight characters, or more than two per character). The general ratio is
    /// left as it is: one dense text does not make English prompts look twice as long.
    pub fn observe_sample(&self, sample: &str, counted: u64) -> Option<f64> {
        if counted == 0 {
            return None;
        }
        let ratio = sample.chars().count() as f64 / counted as f64;
        if !(0.5..=8.0).contains(&ratio) {
            return None;
        }
        self.remember_ratio(sample, ratio);
        self.learn_digit_cost(sample, counted);
        Some(ratio)
    }

    /// Keeps `ratio` as the counted ratio of the text `sample` was taken from — at most
    /// [`MAX_COUNTED_TEXTS`] of them: every reported sub-call adds one, and a run of
    /// many plans must not grow the map without end (a text past the bound is estimated
    /// by the rule of thumb, as before it was counted).
    fn remember_ratio(&self, sample: &str, ratio: f64) {
        let mut texts = self.texts.lock().unwrap_or_else(|p| p.into_inner());
        let key = sample_key(sample);
        if texts.len() < MAX_COUNTED_TEXTS || texts.contains_key(&key) {
            texts.insert(key, ratio);
        }
    }

    /// True once a count calibrated the estimate.
    pub fn is_calibrated(&self) -> bool {
        self.calibration().1 > 0
    }

    /// Calibrates with the prompt tokens the server reported for `request`. The first
    /// report replaces the default; later ones only lower the ratio; a one-message
    /// request's text is estimated at its own counted ratio from then on. A one-message
    /// request of dense text (digits a tenth of it or more: a sub-call on records)
    /// leaves the general ratio as it is, as a counted sample does: a leaf of records
    /// at 1.7 characters a token made the root's English system prompt look 2.3 times
    /// its size, and a run failed with "the system prompt and the task take about 8206
    /// tokens" of an 8 192 window it had used 5 111 of.
    /// Implausible reports (fewer than one token per eight characters, or more than one
    /// per character) are ignored.
    pub fn observe(&self, request: &ChatRequest, reported_prompt_tokens: u64) {
        if reported_prompt_tokens == 0 {
            return;
        }
        let ratio = request_chars(request) as f64 / reported_prompt_tokens as f64;
        if !(1.0..=8.0).contains(&ratio) {
            return;
        }
        let one_text = match request.messages.as_slice() {
            [message] if request.tools.is_empty() && message.tool_calls.is_empty() => {
                Some(message.content.as_str())
            }
            _ => None,
        };
        if !one_text.is_some_and(is_dense) {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.chars_per_token = if state.samples == 0 {
                ratio
            } else {
                state.chars_per_token.min(ratio)
            };
            state.samples = state.samples.saturating_add(1);
        }
        // A request of one message (a sub-call, a refused prompt) is its text: the
        // server's count is that text's own ratio, over any rule of thumb for it.
        if let Some(text) = one_text {
            self.remember_ratio(&sample_of(text), ratio);
            self.learn_digit_cost(text, reported_prompt_tokens);
        }
    }
}

/// Characters per token of `text` that no tokenizer counted: its digits at
/// `per_digit` tokens each, the rest at the `general` ratio. Qwen's and Llama 2's
/// tokenizers cut numbers into single digits, so records of ids, dates and amounts run
/// 1.6–1.7 characters a token where English runs four (a leaf prompt of such records
/// is estimated at half its tokens by the English ratio); until a count says otherwise a
/// digit is a token, which errs high for tokenizers that group three (GPT-4's, Llama
/// 3's), as the estimate should.
fn uncounted_ratio(text: &str, general: f64, per_digit: f64) -> f64 {
    let (chars, digits) = chars_and_digits(text);
    if digits == 0 {
        return general;
    }
    let tokens = (chars - digits) as f64 / general + digits as f64 * per_digit;
    (chars as f64 / tokens).min(general)
}

/// True when digits are a tenth of `text` or more (records of ids, dates and amounts):
/// its count says what a digit costs, and nothing about English.
fn is_dense(text: &str) -> bool {
    let (chars, digits) = chars_and_digits(text);
    digits > 0 && digits * 10 >= chars
}

/// The characters of `text`, and how many are ASCII digits.
fn chars_and_digits(text: &str) -> (usize, usize) {
    text.chars().fold((0, 0), |(chars, digits), c| {
        (chars + 1, digits + usize::from(c.is_ascii_digit()))
    })
}

/// The key a sample's counted ratio is kept under.
pub fn sample_key(sample: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    sample.hash(&mut hasher);
    hasher.finish()
}

/// Characters of `request` as [`TokenEstimator`] counts them.
pub fn request_chars(request: &ChatRequest) -> usize {
    let messages = messages_chars(&request.messages);
    let tools: usize = request
        .tools
        .iter()
        .map(|t| {
            t.name.len() + t.description.chars().count() + t.parameters.to_string().chars().count()
        })
        .sum();
    messages + tools
}

/// Characters of `messages` as [`TokenEstimator`] counts them: texts, tool calls and
/// each message's template overhead.
fn messages_chars(messages: &[ChatMessage]) -> usize {
    messages
        .iter()
        .map(|m| {
            MESSAGE_OVERHEAD_CHARS
                + m.content.chars().count()
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.chars().count())
                    .sum::<usize>()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table_matches_families_most_specific_first() {
        assert_eq!(known_window("gpt-4o-mini"), Some((128_000, "gpt-4o")));
        assert_eq!(known_window("gpt-4-0613"), Some((8_192, "gpt-4")));
        assert_eq!(
            known_window("Qwen2.5-Coder-1.5B-Instruct"),
            Some((32_768, "qwen2.5"))
        );
        assert_eq!(known_window("claude-sonnet-4-5"), Some((200_000, "claude")));
        assert_eq!(known_window("my-own-model"), None);
        assert_eq!(offline_window("my-own-model").source, WindowSource::Default);
    }

    #[test]
    fn servers_say_it_in_their_own_fields() {
        let vllm = json!({"data": [{"id": "m", "max_model_len": 32768}]});
        assert_eq!(
            window_in_models(&vllm, "m"),
            Some((32_768, "max_model_len".into()))
        );
        let two = json!({"data": [
            {"id": "a", "context_length": 4096},
            {"id": "b", "context_length": 16384}
        ]});
        assert_eq!(
            window_in_models(&two, "b"),
            Some((16_384, "context_length".into()))
        );
        assert_eq!(window_in_models(&two, "c"), None, "two entries, none named");
        let silent = json!({"data": [{"id": "x", "object": "model"}]});
        assert_eq!(window_in_models(&silent, "x"), None);
        let llama = json!({"default_generation_settings": {"n_ctx": 8192}});
        assert_eq!(
            window_in_props(&llama),
            Some((8_192, "default_generation_settings.n_ctx".into()))
        );
        assert_eq!(
            window_in_props(&json!({"n_ctx": 2048})),
            Some((2_048, "n_ctx".into()))
        );
        assert_eq!(window_in_props(&json!({"n_ctx": 12})), None, "implausible");
    }

    #[test]
    fn refusals_name_the_window() {
        let cases = [
            ("Requested tokens (9123) exceed context window of 8192", 8_192),
            (
                "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",
                4_096,
            ),
            (
                r#"{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}"#,
                8_192,
            ),
            ("prompt is too long: 210000 tokens > 200000 maximum", 200_000),
            // llama-cpp-python 0.3.36's own answer to a whole (unstreamed) request.
            (
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9035 tokens (9030 in the messages, 5 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                8_192,
            ),
        ];
        for (body, tokens) in cases {
            assert!(is_overflow_refusal(body), "{body}");
            assert_eq!(window_in_refusal(body), Some(tokens), "{body}");
        }
        let prompts = [9_123, 5_000, 9_000, 210_000, 9_030];
        for ((body, _), prompt) in cases.iter().zip(prompts) {
            assert_eq!(prompt_tokens_in_refusal(body), Some(prompt), "{body}");
        }
        assert_eq!(prompt_tokens_in_refusal("context_length_exceeded"), None);
        assert!(!is_overflow_refusal("rate limited"));
        assert_eq!(window_in_refusal("internal error"), None);
    }

    #[test]
    fn a_counted_text_is_estimated_at_its_own_ratio_and_nothing_else_is() {
        let estimator = TokenEstimator::default();
        let records = "order=000001 amount=608\n".repeat(2_000);
        let prose = "the quick brown fox jumps over the lazy dog ".repeat(100);
        // Uncounted, its digits are a token each: 15 other characters at 3, 9 digits.
        let uncounted = estimator.ratio_of(&records);
        assert!((uncounted - 24.0 / 14.0).abs() < 0.01, "{uncounted}");
        // The server counted 1.6 characters a token in the records' sample.
        let sample = sample_of(&records);
        let counted = (sample.chars().count() as f64 / 1.6) as u64;
        let ratio = estimator.observe_sample(&sample, counted).unwrap();
        assert!((1.59..1.61).contains(&ratio), "{ratio}");
        assert!((1.59..1.61).contains(&estimator.ratio_of(&records)));
        assert_eq!(estimator.ratio_of(&prose), DEFAULT_CHARS_PER_TOKEN);
        assert_eq!(estimator.calibration(), (DEFAULT_CHARS_PER_TOKEN, 0));
        // A request holding both counts each at its own ratio.
        let request = ChatRequest {
            messages: vec![
                ChatMessage::user(prose.clone()),
                ChatMessage::user(records.clone()),
            ],
            ..ChatRequest::default()
        };
        let expected = prose.len() as f64 / 3.0 + records.len() as f64 / 1.6;
        let estimate = estimator.request_tokens(&request) as f64;
        assert!(
            (estimate - expected).abs() < 40.0,
            "{estimate} vs {expected}"
        );
        // The messages alone (what a call reserves before it is sent): the same texts,
        // no tool specs here, so the same figure.
        assert_eq!(
            estimator.messages_tokens(&request.messages),
            estimator.request_tokens(&request)
        );
        // A text counted lighter than the general ratio keeps the general one.
        let light = "abcdefghij".repeat(50);
        estimator.observe_sample(&light, 50);
        assert_eq!(estimator.ratio_of(&light), DEFAULT_CHARS_PER_TOKEN);
        assert_eq!(estimator.observe_sample("x", 0), None);
        assert_eq!(
            estimator.observe_sample(&"x".repeat(100), 1_000),
            None,
            "implausible"
        );
    }

    #[test]
    fn uncounted_digits_are_a_token_each_and_prose_keeps_the_general_ratio() {
        assert_eq!(uncounted_ratio("the quick brown fox", 4.0, 1.0), 4.0);
        assert_eq!(uncounted_ratio("", 4.0, 1.0), 4.0);
        // A record as the eval's generator writes it (21 digits of 55 characters):
        // Qwen's tokenizer counted 1.67 characters a token, not English's 4.
        let record = "2026-03-23 07:51 order=000001 label=loyalty amount=608\n";
        let ratio = uncounted_ratio(record, 4.0, 1.0);
        assert!((1.8..1.9).contains(&ratio), "{ratio}");
        // All digits: one a token, never above the general ratio.
        assert_eq!(uncounted_ratio("0123456789", 4.0, 1.0), 1.0);
        assert_eq!(uncounted_ratio("7", 0.9, 1.0), 0.9);
        // Three-digit groups.
        assert_eq!(uncounted_ratio("012345678", 4.0, 1.0 / 3.0), 3.0);
    }

    #[test]
    fn counted_texts_are_kept_up_to_the_bound() {
        let estimator = TokenEstimator::default();
        for i in 0..MAX_COUNTED_TEXTS + 10 {
            estimator.observe_sample(&format!("text number {i} "), 4);
        }
        assert_eq!(estimator.texts.lock().unwrap().len(), MAX_COUNTED_TEXTS);
        // A text already kept is still updated.
        let first = "text number 0 ";
        estimator.observe_sample(first, 7);
        assert_eq!(estimator.sample_ratio(first), Some(2.0));
    }

    #[test]
    fn a_counted_text_teaches_what_a_digit_costs() {
        let records = |n: usize| -> String {
            (0..n)
                .map(|i| format!("order={i:06} amount={}\n", i * 7 % 1000))
                .collect()
        };
        // A tokenizer that groups digits by three: the count of one text of records
        // makes every other such text cheaper than a token a digit.
        let estimator = TokenEstimator::default();
        let counted = records(100);
        let (chars, digits) = chars_and_digits(&counted);
        let grouped = ((chars - digits) as f64 / 3.0 + digits as f64 / 3.0).round() as u64;
        estimator.observe_sample(&counted, grouped);
        assert!((estimator.tokens_per_digit() - 1.0 / 3.0).abs() < 0.05);
        let other = records(200);
        let other_ratio = estimator.ratio_of(&other);
        assert!((2.9..=3.0).contains(&other_ratio), "{other_ratio}");
        // A later count showing digits dearer raises the cost (the estimate errs high).
        let fifty = records(50);
        let (chars, digits) = chars_and_digits(&fifty);
        let dear = (chars - digits) as u64 / 3 + digits as u64;
        assert!(estimator.observe_sample(&fifty, dear).is_some());
        assert!(estimator.tokens_per_digit() > 0.9);
        // Prose says nothing about digits.
        let prose = TokenEstimator::default();
        prose.observe_sample(
            &"the year 2026 was long and the summer hot ".repeat(50),
            500,
        );
        assert_eq!(prose.tokens_per_digit(), 1.0);
    }

    #[test]
    fn the_estimate_starts_conservative_and_calibrates_down_only() {
        let estimator = TokenEstimator::default();
        let request = ChatRequest {
            messages: vec![ChatMessage::user("x".repeat(284))],
            ..ChatRequest::default()
        };
        assert_eq!(estimator.request_tokens(&request), 100, "(284 + 16) / 3");
        estimator.observe(&request, 75); // 4 characters a token
        assert_eq!(estimator.calibration(), (4.0, 1));
        estimator.observe(&request, 60); // 5: higher, ignored
        assert_eq!(estimator.calibration().0, 4.0);
        estimator.observe(&request, 100); // 3: lower, kept
        assert_eq!(estimator.calibration(), (3.0, 3));
        estimator.observe(&request, 1); // 300 characters a token: implausible
        assert_eq!(estimator.calibration().0, 3.0);
    }

    #[test]
    fn a_sub_call_on_dense_records_keeps_its_ratio_to_itself() {
        let estimator = TokenEstimator::default();
        let prose = ChatRequest {
            messages: vec![
                ChatMessage::system("You answer questions about a log. ".repeat(40)),
                ChatMessage::user("Which label is the most frequent?"),
            ],
            ..ChatRequest::default()
        };
        estimator.observe(&prose, (request_chars(&prose) / 4) as u64);
        let general = estimator.calibration().0;
        let before = estimator.request_tokens(&prose);
        // A leaf of records: 1.7 characters a token on Qwen's tokenizer.
        let records = "2026-03-06 23:40 order=000003 label=payments amount=56\n".repeat(100);
        let leaf = ChatRequest {
            messages: vec![ChatMessage::user(records.clone())],
            ..ChatRequest::default()
        };
        estimator.observe(&leaf, (request_chars(&leaf) as f64 / 1.7) as u64);
        assert_eq!(
            estimator.calibration().0,
            general,
            "the general ratio stays"
        );
        assert_eq!(estimator.request_tokens(&prose), before);
        let own = estimator.ratio_of(&records);
        assert!((1.6..1.8).contains(&own), "{own}");
        // A one-message request of prose still calibrates the general ratio.
        let question = ChatRequest {
            messages: vec![ChatMessage::user("x".repeat(3_000))],
            ..ChatRequest::default()
        };
        estimator.observe(&question, 1_000);
        assert!(estimator.calibration().0 < general);
    }
}
