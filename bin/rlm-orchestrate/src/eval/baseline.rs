//! The baseline arm's prompt: the question over as much of the context as the model
//! can take — the first `--baseline-window` characters, fewer when the model's window
//! (configured, served, known or learned; see `rlm_orchestrator::window`) holds less.
//!
//! A plain model shown more than its window is refused by the server (or, by some,
//! truncated silently), which measures the server, not the model: a long-context
//! benchmark's baseline reads the longest prefix that fits, with room for the answer.
//!
//! A public benchmark's item (RULER, OOLONG) is asked in the benchmark's own framing
//! ([`rlm_eval::Framing`]: RULER's input and answer prefix, OOLONG's system message),
//! the context cut the same way, and no more answer tokens than the benchmark allows.

use std::io::Read;
use std::path::Path;

use rlm_eval::framing::Speaker;
use rlm_eval::Framing;
use rlm_orchestrator::host::Model;
use rlm_orchestrator::provider::window::prompt_tokens_in_refusal;
use rlm_orchestrator::provider::{ChatMessage, ChatRequest, ProviderError};

/// Rounds of shrinking before the prefix is taken as it is (each round cuts to what
/// the estimate says fits, a little under).
const MAX_FIT_ROUNDS: usize = 8;

/// Times a prompt refused as too long is fitted again and asked again before the
/// refusal is the item's answer.
pub const MAX_REFITS: usize = 3;

/// What a refit keeps of the budget the server's count says fits: 2 % under.
const REFIT_MARGIN: f64 = 0.98;

/// The baseline's request for one item, and how many characters of the context it holds.
#[derive(Debug)]
pub struct Fitted {
    /// The request to send.
    pub request: ChatRequest,
    /// Characters of the context in it.
    pub context_chars: u64,
}

/// Reads at most `max_bytes` of the file at `path` as text, ending on a whole
/// character (a cut through a multi-byte character drops its first bytes).
pub fn read_prefix(path: &Path, max_bytes: usize) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max_bytes as u64)
        .read_to_end(&mut bytes)?;
    String::from_utf8(bytes).or_else(|error| {
        // `error_len` is none when the text ends inside a character: the cut, not the
        // file. Invalid text anywhere else is an error, as reading it whole would be.
        if error.utf8_error().error_len().is_some() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the context is not UTF-8 text",
            ));
        }
        let valid = error.utf8_error().valid_up_to();
        let mut bytes = error.into_bytes();
        bytes.truncate(valid);
        String::from_utf8(bytes)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()))
    })
}

/// The baseline request over the longest prefix of `context` — of at most
/// `max_chars` characters when given ([`refit_chars`]) — whose estimated prompt fits
/// `model`'s window with room for the answer, asking for at most that room
/// ([`rlm_orchestrator::window::ModelWindow::answer_limit`]), and at most the
/// benchmark's answer tokens when `framing` bounds them. The estimate is calibrated by
/// the server's tokenizer when it offers one (llama.cpp and llama-cpp-python do).
pub async fn fit(
    model: &Model,
    context: &str,
    question: &str,
    framing: Option<&Framing>,
    max_chars: Option<usize>,
) -> Fitted {
    // The answer's room, asked for as the RLM arm's requests ask for it: the prompt
    // and the answer fit the window together.
    let room = model.window.answer_limit().await;
    let max_tokens = match (room, framing.and_then(Framing::answer_tokens)) {
        (Some(room), Some(bound)) => Some(room.min(bound)),
        (room, bound) => room.or(bound),
    };
    let request_of = |prefix: &str| ChatRequest {
        messages: match framing {
            Some(framing) => framing
                .messages(prefix, question)
                .into_iter()
                .map(|(speaker, text)| match speaker {
                    Speaker::System => ChatMessage::system(text),
                    Speaker::User => ChatMessage::user(text),
                })
                .collect(),
            None => vec![ChatMessage::user(rlm_eval::oracle::baseline_prompt(
                prefix, question,
            ))],
        },
        max_tokens,
        ..ChatRequest::default()
    };
    let budget = model.window.prompt_budget().await;
    let whole = context.chars().count();
    let mut keep = max_chars.map_or(whole, |max| max.min(whole));
    for _ in 0..MAX_FIT_ROUNDS {
        let prefix = char_prefix(context, keep);
        let request = request_of(prefix);
        model.window.calibrate_once(&request).await;
        let estimate = model.window.estimator.request_tokens(&request);
        if estimate <= budget || keep == 0 {
            return Fitted {
                request,
                context_chars: keep as u64,
            };
        }
        // What the estimate says fits, 2 % under, and always fewer than now.
        let fits = (keep as f64 * budget as f64 / estimate as f64 * 0.98) as usize;
        keep = fits.min(keep - 1);
    }
    Fitted {
        request: request_of(char_prefix(context, keep)),
        context_chars: keep as u64,
    }
}

/// The most characters of the context a request refused as too long should be
/// fitted again within, when the refusal says how many prompt tokens the server
/// counted: the refused request's `context_chars` scaled by the prompt `budget` over
/// that count, [`REFIT_MARGIN`] under, and always fewer than before. `None` when the
/// refusal counted nothing (the window it named is then all there is to learn).
///
/// The count is what makes the refit converge: the estimate that let the refused
/// prompt through may be off for this kind of text (a numbered word list runs near
/// two characters a token where the essays calibrated at five), and a prefix cut by
/// that same estimate would be refused again.
pub fn refit_chars(error: &ProviderError, context_chars: u64, budget: u64) -> Option<usize> {
    let ProviderError::Http { body, .. } = error else {
        return None;
    };
    let counted = prompt_tokens_in_refusal(body)?;
    let scaled = context_chars as f64 * budget as f64 / counted as f64 * REFIT_MARGIN;
    let fewer = usize::try_from(context_chars.saturating_sub(1)).unwrap_or(usize::MAX);
    Some((scaled as usize).min(fewer))
}

/// The first `chars` characters of `text`.
fn char_prefix(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rlm_orchestrator::provider::{OpenAiProvider, ProviderConfig, ProviderKind};
    use rlm_orchestrator::window::ModelWindow;

    use super::*;

    fn model_with_window(tokens: u32) -> Model {
        Model {
            // Never called: a fixed window has no server to ask.
            provider: Arc::new(
                OpenAiProvider::new(
                    &ProviderConfig {
                        base_url: Some("http://127.0.0.1:9/v1".into()),
                        ..ProviderConfig::new(ProviderKind::OpenAi, "m")
                    },
                    None,
                )
                .unwrap(),
            ),
            price: None,
            window: Arc::new(ModelWindow::fixed(tokens)),
        }
    }

    #[tokio::test]
    async fn a_context_within_the_window_is_shown_whole() {
        let model = model_with_window(8_192);
        let context = "word ".repeat(1_000);
        let fitted = fit(&model, &context, "How many words?", None, None).await;
        assert_eq!(fitted.context_chars, 5_000);
        assert!(fitted.request.messages[0].content.contains(&context));
    }

    #[tokio::test]
    async fn a_context_past_the_window_is_cut_to_fit_it() {
        let model = model_with_window(2_048);
        let context = "0123456789".repeat(10_000);
        let fitted = fit(&model, &context, "Which digit comes first?", None, None).await;
        let budget = model.window.prompt_budget().await;
        let estimate = model.window.estimator.request_tokens(&fitted.request);
        assert!(estimate <= budget, "{estimate} > {budget}");
        // Not cut far below what fits: within 10 % of the budget.
        assert!(estimate * 10 >= budget * 9, "{estimate} of {budget}");
        assert!(fitted.context_chars < 100_000);
        assert!(fitted.request.messages[0]
            .content
            .contains("Which digit comes first?"));
    }

    #[test]
    fn a_prefix_cut_through_a_character_ends_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.txt");
        std::fs::write(&path, "abcé").unwrap();
        // 'é' is two bytes: four bytes end in its middle.
        assert_eq!(read_prefix(&path, 4).unwrap(), "abc");
        assert_eq!(read_prefix(&path, 5).unwrap(), "abcé");
        std::fs::write(&path, b"ab\xffcd").unwrap();
        assert!(read_prefix(&path, 5).is_err());
    }
}
