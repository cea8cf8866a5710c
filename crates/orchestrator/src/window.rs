//! What a model can take: its context window (configured, served, known or the
//! default — see [`rlm_provider::window`]), the calibrated token estimate, and the room
//! each request keeps for the answer.
//!
//! One [`ModelWindow`] belongs to each model a run asks. What its server says comes from
//! [`Discovery`]: a record kept in the data directory, else one round of questions
//! started when the run starts and awaited only where its answer decides something —
//! not by a first request that is small beside any window (it goes out while discovery
//! runs). A server's refusal of a too-long request that names a smaller window replaces
//! it for the rest of the run (and in the record). The server's tokenizer is asked only
//! when a request is tight (its estimate near the window) and only when the server said
//! it has one.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::discovery::{Discovery, DiscoveryCache};
use crate::provider::constrain::{documented, resolve, ConstrainMode, Constraint};
use crate::provider::discovery::count_tokens;
use crate::provider::window::{
    is_overflow_refusal, offline_window, prompt_tokens_in_refusal, sample_key, window_in_refusal,
    DEFAULT_CONTEXT_WINDOW,
};
pub use crate::provider::window::{sample_of, SAMPLE_SLICE_CHARS};
use crate::provider::{
    ChatRequest, Completion, ContextWindow, ProviderConfig, ProviderError, TokenEstimator, Usage,
    WindowSource,
};

/// Characters of a request's text the server's tokenizer is asked to count, once.
const CALIBRATION_SAMPLE_CHARS: usize = 32_000;

/// The longest a constrained request waits for a round of discovery not yet answered
/// (its questions have 3 s each, asked together; a key's second ask of `/props` may
/// add as much again): past it, the request goes unconstrained.
pub const CONSTRAINT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// Distinct samples counted by [`ModelWindow::calibrate_on_sample`] in one run, at most (each
/// is one call to the server's tokenizer).
const MAX_SAMPLES: usize = 64;

/// Tokens kept free for the answer: an eighth of the window, between 512 and 4096.
pub fn answer_reserve(window_tokens: u32) -> u64 {
    u64::from(window_tokens / 8).clamp(512, 4096)
}

/// Tokens a window of `tokens` leaves for the prompt: less [`answer_reserve`].
fn budget_of(tokens: u32) -> u64 {
    u64::from(tokens).saturating_sub(answer_reserve(tokens))
}

/// True when a request of `tokens` is tight in a prompt budget of `budget`: past half
/// of it. Only then is the server's tokenizer worth asking (the estimate errs high, so
/// a request under half cannot overflow at any density a tokenizer reaches), and only
/// then does a first request wait for discovery.
pub fn is_tight(tokens: u64, budget: u64) -> bool {
    tokens.saturating_mul(2) > budget
}

/// The window of one model, found on first use, and its token estimate.
#[derive(Debug)]
pub struct ModelWindow {
    /// How to ask the server (and the configured window, if any).
    config: Option<ProviderConfig>,
    /// What the server says (`None` for a fixed window).
    discovery: Option<Arc<Discovery>>,
    /// A smaller window a refusal named (or implied), which wins over what was found.
    learned: Mutex<Option<ContextWindow>>,
    /// Set once the server's tokenizer was asked (whatever it answered).
    tokenizer_asked: OnceCell<()>,
    /// Keys of the samples [`ModelWindow::calibrate_on_sample`] had counted.
    sampled: Mutex<HashSet<u64>>,
    /// Characters to tokens, calibrated by reported usage.
    pub estimator: TokenEstimator,
}

impl ModelWindow {
    /// The window of the model `config` describes, found on first use, asking its
    /// server without keeping the answer.
    pub fn new(config: &ProviderConfig) -> Self {
        Self::with_cache(config, None)
    }

    /// The window of the model `config` describes, with what `cache` keeps of its
    /// server (and keeping what it learns there).
    pub fn with_cache(config: &ProviderConfig, cache: Option<DiscoveryCache>) -> Self {
        Self {
            config: Some(config.clone()),
            discovery: Some(Discovery::new(config, cache)),
            learned: Mutex::new(None),
            tokenizer_asked: OnceCell::new(),
            sampled: Mutex::new(HashSet::new()),
            estimator: TokenEstimator::default(),
        }
    }

    /// A window of `tokens`, as if configured, of no server (nothing is asked, no
    /// answer length sent, no constraint resolved).
    pub fn fixed(tokens: u32) -> Self {
        let config = ProviderConfig {
            context_window: Some(tokens),
            constrain: ConstrainMode::Off,
            ..ProviderConfig::default()
        };
        Self {
            config: Some(config),
            discovery: None,
            learned: Mutex::new(None),
            tokenizer_asked: OnceCell::new(),
            sampled: Mutex::new(HashSet::new()),
            estimator: TokenEstimator::default(),
        }
    }

    /// Starts asking the server in the background (when nothing configured or kept
    /// answers already), so the answer is there, or on its way, when needed.
    pub fn start_discovery(&self) {
        if let Some(discovery) = &self.discovery {
            if self.configured().is_none() {
                discovery.start();
            }
        }
    }

    /// The window: learned from a refusal, else configured, else what the server says
    /// (waiting for discovery), else the table or the default.
    pub async fn window(&self) -> ContextWindow {
        if let Some(known) = self.learned().or_else(|| self.configured()) {
            return known;
        }
        let served = match &self.discovery {
            Some(discovery) => discovery.facts().await.and_then(|f| f.window.clone()),
            None => None,
        };
        served.unwrap_or_else(|| self.offline())
    }

    /// The window the server gave, else the table's or the default, once discovery
    /// has answered (waiting for it): what the server said, whatever a refusal has
    /// taught since — the trace's `window_found`. A configured window is returned as
    /// it is.
    pub async fn discovered(&self) -> ContextWindow {
        if let Some(configured) = self.configured() {
            return configured;
        }
        let served = match &self.discovery {
            Some(discovery) => discovery.facts().await.and_then(|f| f.window.clone()),
            None => None,
        };
        served.unwrap_or_else(|| self.offline())
    }

    /// The constraint fields this model's requests carry (`--constrain`, against
    /// what its server said or its API documents; [`crate::provider::constrain`]).
    /// Waits for discovery when nothing is known yet and the mode needs it: the
    /// first constrained request of a first run waits for the one round (at most
    /// [`CONSTRAINT_WAIT`]: a round that fails or takes longer sends the request as
    /// from a server that said nothing), later runs read the record.
    pub async fn constraint(&self) -> Constraint {
        let Some(config) = &self.config else {
            return Constraint::default();
        };
        if config.constrain == ConstrainMode::Off {
            return Constraint::default();
        }
        let support = match documented(config) {
            Some(support) => Some(support),
            None => match &self.discovery {
                Some(discovery) => {
                    match tokio::time::timeout(CONSTRAINT_WAIT, discovery.facts()).await {
                        Ok(facts) => facts.and_then(|f| f.constrain),
                        Err(_elapsed) => {
                            tracing::warn!(
                                wait_secs = CONSTRAINT_WAIT.as_secs(),
                                "the server did not say what it takes in time; this request goes without a constraint"
                            );
                            None
                        }
                    }
                }
                None => None,
            },
        };
        resolve(config.constrain, support.as_ref())
    }

    /// The window when it is known without waiting: learned, configured, or what
    /// discovery found (or a record kept); `None` while discovery is under way.
    pub fn known(&self) -> Option<ContextWindow> {
        if let Some(known) = self.learned().or_else(|| self.configured()) {
            return Some(known);
        }
        let served = match &self.discovery {
            Some(discovery) => discovery.known()?.and_then(|f| f.window.clone()),
            None => None,
        };
        Some(served.unwrap_or_else(|| self.offline()))
    }

    /// The prompt budget to fit a request of about `tokens` with. While discovery is
    /// under way, a request small beside the smaller of the table's (or default)
    /// window and the default is fitted to that and goes at once — the first prompt
    /// of a run is small, and a server with a smaller window says so by refusing it;
    /// a tight one waits for the server's answer.
    pub async fn budget_for(&self, tokens: u64) -> u64 {
        if let Some(known) = self.known() {
            return budget_of(known.tokens);
        }
        let provisional = budget_of(self.offline().tokens.min(DEFAULT_CONTEXT_WINDOW));
        if !is_tight(tokens, provisional) {
            return provisional;
        }
        self.prompt_budget().await
    }

    fn configured(&self) -> Option<ContextWindow> {
        let tokens = self.config.as_ref()?.context_window?;
        Some(ContextWindow {
            tokens,
            source: WindowSource::Configured,
        })
    }

    fn offline(&self) -> ContextWindow {
        offline_window(self.config.as_ref().map_or("", |c| c.model.as_str()))
    }

    fn learned(&self) -> Option<ContextWindow> {
        self.learned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The tokenizer to count with: the server's, when it said it has one.
    async fn tokenizer(&self) -> Option<(&ProviderConfig, crate::provider::Tokenizer)> {
        let config = self.config.as_ref()?;
        let tokenizer = self.discovery.as_ref()?.tokenizer().await?;
        Some((config, tokenizer))
    }

    /// Before a tight request: when no usage has calibrated the estimate yet and the
    /// server offers its tokenizer, calibrates it with the tokens the server counts in
    /// `request`'s text. Asked once per model; servers that report usage calibrate it
    /// after each call anyway, but llama.cpp's servers report none when streaming.
    /// Callers ask only for a tight request ([`is_tight`]).
    pub async fn calibrate_once(&self, request: &ChatRequest) {
        if self.estimator.is_calibrated() {
            return;
        }
        self.tokenizer_asked
            .get_or_init(|| async {
                let Some((config, tokenizer)) = self.tokenizer().await else {
                    return;
                };
                let text: String = request
                    .messages
                    .iter()
                    .map(|m| m.content.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                // A sample is enough for a ratio: at most the first 32 000 characters.
                let sample: String = text.chars().take(CALIBRATION_SAMPLE_CHARS).collect();
                if let Some(count) = count_tokens(config, tokenizer, &sample).await {
                    let sampled = ChatRequest {
                        messages: vec![crate::provider::ChatMessage::user(sample)],
                        ..ChatRequest::default()
                    };
                    // The template's few tokens around the one message.
                    self.estimator.observe(&sampled, count + 4);
                    tracing::debug!(
                        count,
                        "the token estimate was calibrated by the server's tokenizer"
                    );
                }
            })
            .await;
    }

    /// The characters per token of `text`, counted by the server's tokenizer on a
    /// sample of it ([`sample_of`]): text the model is about to be sent in bulk (a REPL
    /// output, a sub-call's content) may be far denser than the prompts calibrated so
    /// far — records of digits run 1.6 characters a token on Qwen's tokenizer where
    /// English runs 4. The estimate then counts `text` at that ratio
    /// ([`TokenEstimator::ratio_of`]). `None` when the server has no tokenizer.
    pub async fn calibrate_on_text(&self, text: &str) -> Option<f64> {
        self.calibrate_on_sample(&sample_of(text)).await
    }

    /// The characters per token the server's tokenizer counts in `sample` (of a file
    /// a plan cuts, say). Each distinct sample is counted once, and at most
    /// `MAX_SAMPLES` a run; `None` when the server has no tokenizer (or did not say it
    /// has one: nothing is sent to a tokenizer path a server did not name).
    pub async fn calibrate_on_sample(&self, sample: &str) -> Option<f64> {
        if let Some(ratio) = self.estimator.sample_ratio(sample) {
            return Some(ratio);
        }
        if sample.trim().is_empty() {
            return None;
        }
        {
            let mut sampled = self.sampled.lock().unwrap_or_else(|p| p.into_inner());
            if sampled.len() >= MAX_SAMPLES || !sampled.insert(sample_key(sample)) {
                return None;
            }
        }
        let (config, tokenizer) = self.tokenizer().await?;
        let count = count_tokens(config, tokenizer, sample).await?;
        let ratio = self.estimator.observe_sample(sample, count);
        tracing::debug!(
            count,
            chars = sample.chars().count(),
            ?ratio,
            "a sample of text to send was counted by the server's tokenizer"
        );
        ratio
    }

    /// The tokens `completion` of `request` used: as the server reported them, else
    /// this window's estimate. A server that reports none (llama-cpp-python on a
    /// streamed answer) leaves the provider's rough count — four characters a token
    /// over the messages alone — which misses the tool specifications and the chat
    /// template and runs 2.5× low on text of digits; the window's estimate counts the
    /// whole request, each text at the ratio the server's tokenizer counted for it.
    pub fn usage_of(&self, request: &ChatRequest, completion: &Completion) -> Usage {
        if completion.usage_reported {
            return completion.usage;
        }
        let calls: u64 = completion
            .tool_calls
            .iter()
            .map(|call| {
                self.estimator.tokens_of(&call.name) + self.estimator.tokens_of(&call.arguments)
            })
            .sum();
        Usage {
            prompt_tokens: self.estimator.request_tokens(request),
            completion_tokens: self.estimator.tokens_of(&completion.text) + calls,
        }
    }

    /// Tokens a request may hold before the answer's room: the window less
    /// [`answer_reserve`].
    pub async fn prompt_budget(&self) -> u64 {
        let window = self.window().await.tokens;
        u64::from(window).saturating_sub(answer_reserve(window))
    }

    /// The answer's length to ask for: [`answer_reserve`] of the window, the room every
    /// prompt leaves — so a request's prompt and answer fit the window together, and a
    /// small model that reasons at length past a leaf's "answer with a number" stops
    /// there instead of filling the window (on a slow machine one such leaf can
    /// generate for many minutes while the leaves queued behind it time out). `None`
    /// when the configuration sets its own
    /// `max_tokens` (the provider sends that), names no server, or the window is only
    /// the stated default: a server with a smaller window would refuse a prompt and an
    /// answer that it does not know to fit (vLLM counts both), where it takes the
    /// prompt alone and teaches its window by refusing the first that does not fit.
    pub async fn answer_limit(&self) -> Option<u32> {
        let window = self.window().await;
        self.limit_within(&window)
    }

    /// [`ModelWindow::answer_limit`] without waiting: `None` as well while discovery is
    /// under way (a run's first request, which goes out beside it).
    pub fn answer_limit_now(&self) -> Option<u32> {
        let window = self.known()?;
        self.limit_within(&window)
    }

    fn limit_within(&self, window: &ContextWindow) -> Option<u32> {
        let config = self.config.as_ref()?;
        if config.max_tokens.is_some() || self.discovery.is_none() {
            return None;
        }
        if window.source == WindowSource::Default {
            return None;
        }
        let reserve = answer_reserve(window.tokens);
        Some(u32::try_from(reserve).unwrap_or(u32::MAX))
    }

    /// When `error` is a server's refusal of `request` for being too long: shrinks the
    /// window to what the refusal names (or, when it names none, to three quarters of
    /// the request's estimate) and returns the new window. `None` for any other error.
    pub async fn learn_from_refusal(
        &self,
        error: &ProviderError,
        request: &ChatRequest,
    ) -> Option<ContextWindow> {
        let ProviderError::Http { status, body, .. } = error else {
            return None;
        };
        if !(400..500).contains(status) || !is_overflow_refusal(body) {
            return None;
        }
        let current = self.window().await.tokens;
        // The server counted the prompt it refused: the estimate that let it through
        // learns from that count (text denser than any calibrated so far).
        if let Some(counted) = prompt_tokens_in_refusal(body) {
            self.estimator.observe(request, counted);
        }
        let estimate = self.estimator.request_tokens(request);
        let named = window_in_refusal(body);
        let tokens = named
            .unwrap_or_else(|| u32::try_from(estimate * 3 / 4).unwrap_or(u32::MAX))
            .min(current.saturating_sub(1))
            .max(crate::provider::window::MIN_CONTEXT_WINDOW);
        let window = ContextWindow {
            tokens,
            source: WindowSource::Refusal,
        };
        *self.learned.lock().unwrap_or_else(|p| p.into_inner()) = Some(window.clone());
        if let Some(discovery) = &self.discovery {
            discovery.remember_window(&window);
        }
        Some(window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ChatMessage;

    #[test]
    fn a_sample_is_the_whole_of_a_short_text_and_three_slices_of_a_long_one() {
        assert_eq!(sample_of("short"), "short");
        let long: String = (0..100_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let sample = sample_of(&long);
        assert_eq!(sample.chars().count(), 3 * SAMPLE_SLICE_CHARS + 2);
        assert!(sample.starts_with(&long[..100]));
        assert!(sample.ends_with(&long[long.len() - 100..]));
        // Multi-byte text is cut on characters.
        let accents = "é".repeat(20_000);
        assert!(sample_of(&accents).chars().all(|c| c == 'é' || c == '\n'));
    }

    #[tokio::test]
    async fn a_small_request_does_not_wait_for_discovery_and_a_tight_one_does() {
        use futures::FutureExt as _;
        let mut config = ProviderConfig::new(crate::provider::ProviderKind::OpenAi, "m");
        config.base_url = Some("http://127.0.0.1:9/v1".into());
        let window = ModelWindow::new(&config);
        assert_eq!(window.known(), None, "its server is not asked yet");
        // The default window's budget, 8 192 less 1 024, at once.
        assert_eq!(window.budget_for(1_000).now_or_never(), Some(7_168));
        assert_eq!(window.answer_limit_now(), None);
        assert!(
            window.budget_for(5_000).now_or_never().is_none(),
            "it waits"
        );
        // Nothing listens there: discovery ends with nothing said, the default stays.
        assert_eq!(window.budget_for(5_000).await, 7_168);
        assert_eq!(
            window.known().map(|w| w.source),
            Some(WindowSource::Default)
        );
        assert!(is_tight(3_585, 7_168) && !is_tight(3_584, 7_168));
    }

    #[test]
    fn the_answer_keeps_an_eighth_within_bounds() {
        assert_eq!(answer_reserve(2_048), 512);
        assert_eq!(answer_reserve(8_192), 1_024);
        assert_eq!(answer_reserve(200_000), 4_096);
    }

    #[tokio::test]
    async fn an_answer_is_limited_to_the_room_a_known_window_leaves() {
        let mut config = ProviderConfig::new(crate::provider::ProviderKind::OpenAi, "m");
        config.context_window = Some(8_192);
        assert_eq!(ModelWindow::new(&config).answer_limit().await, Some(1_024));
        // The user's own limit is the provider's to send.
        config.max_tokens = Some(100);
        assert_eq!(ModelWindow::new(&config).answer_limit().await, None);
        // No server: nothing to send.
        assert_eq!(ModelWindow::fixed(8_192).answer_limit().await, None);
    }

    #[tokio::test]
    async fn a_refusal_that_counts_the_prompt_calibrates_the_estimate() {
        let window = ModelWindow::fixed(8_192);
        let request = ChatRequest {
            messages: vec![ChatMessage::user("7".repeat(24_000))],
            ..ChatRequest::default()
        };
        let refusal = ProviderError::Http {
            endpoint: "http://127.0.0.1:1/v1/chat/completions".into(),
            status: 400,
            body: "Requested tokens (14553) exceed context window of 8192".into(),
            attempts: 1,
        };
        window.learn_from_refusal(&refusal, &request).await;
        // Digits: the text keeps its ratio to itself, English prompts are not made to
        // look longer by it.
        let (_, samples) = window.estimator.calibration();
        assert_eq!(samples, 0);
        let ratio = window.estimator.ratio_of(&"7".repeat(24_000));
        assert!((1.6..1.7).contains(&ratio), "{ratio}");
        // The refused request is now estimated at what the server counted.
        let estimate = window.estimator.request_tokens(&request);
        assert!((14_500..14_700).contains(&estimate), "{estimate}");
    }

    #[tokio::test]
    async fn a_refusal_shrinks_the_window_once_named() {
        let window = ModelWindow::fixed(32_768);
        let request = ChatRequest {
            messages: vec![ChatMessage::user("x".repeat(40_000))],
            ..ChatRequest::default()
        };
        let refusal = |body: &str| ProviderError::Http {
            endpoint: "http://127.0.0.1:1/v1/chat/completions".into(),
            status: 400,
            body: body.into(),
            attempts: 1,
        };
        let other = refusal("bad request: unknown field");
        assert_eq!(window.learn_from_refusal(&other, &request).await, None);
        let named = refusal("Requested tokens (13339) exceed context window of 8192");
        let learned = window.learn_from_refusal(&named, &request).await;
        assert_eq!(learned.map(|w| w.tokens), Some(8_192));
        assert_eq!(window.window().await.source, WindowSource::Refusal);
        assert_eq!(window.prompt_budget().await, 8_192 - 1_024);
        // A refusal that names no window: three quarters of what was sent.
        let unnamed = refusal("context_length_exceeded");
        let small = ChatRequest {
            messages: vec![ChatMessage::user("x".repeat(8_000))],
            ..ChatRequest::default()
        };
        let learned = window.learn_from_refusal(&unnamed, &small).await;
        assert_eq!(learned.map(|w| w.tokens), Some(2_004));
    }
}
