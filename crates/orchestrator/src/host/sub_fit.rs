//! Sub-calls within the sub-model's window: the check a prompt must pass, the error
//! that names the sizes when it does not, and the pieces and combining prompts of a
//! call asked to split (`split=True`): the context cut on line ends into pieces that
//! fit, one call per piece, then the answers combined in rounds until one is left.

use std::fmt::Write as _;
use std::future::Future;

use crate::provider::{ChatMessage, ChatRequest, ContextWindow, TokenEstimator};
use crate::window::ModelWindow;

/// Tokens a chat template adds around a sub-call's one message.
const SUB_TEMPLATE_TOKENS: u64 = 16;

/// Tokens kept beside a piece for the prompt's own text and the template.
const PIECE_MARGIN_TOKENS: u64 = 64;
/// Pieces are made this much smaller than the estimate allows, against a tokenizer
/// that counts the piece denser than the calibrated average.
const PIECE_SAFETY: f64 = 0.9;
/// The smallest piece worth a call.
const MIN_PIECE_CHARS: usize = 200;

/// How a prompt compares with the sub-model's window.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SubFit {
    /// Estimated prompt tokens.
    pub tokens: u64,
    /// Its characters.
    pub chars: usize,
    /// Tokens the window leaves for the prompt.
    pub budget: u64,
    /// The window.
    pub window: ContextWindow,
}

/// How `content`, sent as one message, compares with `window`. A prompt the estimate
/// puts past a third of the budget could overflow if its text is denser than what
/// calibrated the estimate (records, code, digits): the estimate is calibrated by the
/// server's tokenizer first, where it has one (once per model, and on a sample of
/// `content`). Smaller ones cannot, at any density a tokenizer reaches.
pub(crate) async fn measure(window: &ModelWindow, content: &str) -> SubFit {
    let budget = window.prompt_budget().await;
    if window.estimator.tokens_of(content) * 3 > budget {
        window
            .calibrate_once(&ChatRequest {
                messages: vec![ChatMessage::user(content)],
                ..ChatRequest::default()
            })
            .await;
        window.calibrate_on_text(content).await;
    }
    SubFit {
        tokens: window.estimator.tokens_of(content) + SUB_TEMPLATE_TOKENS,
        chars: content.chars().count(),
        budget,
        window: window.window().await,
    }
}

impl SubFit {
    /// True when the prompt fits.
    pub(crate) fn fits(&self) -> bool {
        self.tokens <= self.budget
    }

    /// The error for a prompt that does not fit: the sizes, and what to do.
    pub(crate) fn refusal(&self, helper: &str, piece_chars: Option<usize>) -> String {
        let mut text = format!(
            "{helper}: this prompt is about {} tokens ({} characters), over the sub-model's window of {} (from {}), which leaves {} tokens for the prompt after the answer's room; nothing was sent.",
            self.tokens, self.chars, self.window.tokens, self.window.source, self.budget
        );
        match piece_chars {
            Some(chars) => {
                let _ = write!(
                    text,
                    " Split the context into pieces of at most about {chars} characters (llm_query_parallel over the pieces, then combine the answers), or pass split=True to have it split, asked piece by piece and the answers combined."
                );
            }
            None => {
                text.push_str(" The prompt itself, without its context, does not fit: shorten it.")
            }
        }
        text
    }
}

/// What one sub-call may send, checked on its content as it is.
pub(crate) struct SendLimits {
    /// `--sub-context-chars`.
    pub max_chars: usize,
    /// Tokens the sub-model's window leaves for a prompt.
    pub budget: u64,
    /// The estimate's general characters per token (no check before this one counts a
    /// text at more).
    pub chars_per_token: f64,
    /// Tokens `--max-tokens` leaves, in the run and its tree.
    pub tokens_left: Option<u64>,
}

/// Why `content` may not be sent as one sub-call — more characters than
/// `--sub-context-chars`, more tokens than the window leaves or than `--max-tokens`
/// leaves — measured on the text itself, whatever a plan's pieces claimed about it;
/// `None` when it may be sent. Tokens are counted at the general ratio, which every
/// check before this one (a plan's price, [`measure`], the combining groups) counts at
/// least as many of: this refuses only what slipped past them.
pub(crate) fn unsendable(content: &str, limits: &SendLimits) -> Option<String> {
    let chars = content.chars().count();
    if chars > limits.max_chars {
        return Some(format!(
            "this prompt is {chars} characters, over the sub-model's limit of {} (--sub-context-chars)",
            limits.max_chars
        ));
    }
    let tokens = (chars as f64 / limits.chars_per_token.max(f64::MIN_POSITIVE)).ceil() as u64;
    if tokens > limits.budget {
        return Some(format!(
            "this prompt is about {tokens} tokens ({chars} characters), over the {} tokens the sub-model's window leaves for a prompt",
            limits.budget
        ));
    }
    limits.tokens_left.filter(|left| tokens > *left).map(|left| {
        format!(
            "this prompt is about {tokens} tokens, over the {left} the token budget (--max-tokens) leaves"
        )
    })
}

/// A sub-call's prompt: `prompt`, then its context, if any.
pub(crate) fn with_context(prompt: &str, context: Option<&str>) -> String {
    match context {
        Some(context) => format!("{prompt}\n\nContext:\n{context}"),
        None => prompt.to_owned(),
    }
}

/// A call to split: the prompt, its context, the piece size and what a combining
/// prompt must fit.
pub(crate) struct Split<'a> {
    pub prompt: &'a str,
    pub context: &'a str,
    /// Characters of context per piece.
    pub piece: usize,
    pub fit: CombineFit<'a>,
}

/// What each combining prompt must fit: the window's budget and `--sub-context-chars`,
/// by the estimate.
pub(crate) struct CombineFit<'a> {
    /// Tokens a call's prompt may take.
    pub budget: u64,
    /// Characters a call's prompt may hold (`--sub-context-chars`).
    pub max_chars: usize,
    pub estimator: &'a TokenEstimator,
}

impl CombineFit<'_> {
    /// True when `prompt` fits.
    fn fits(&self, prompt: &str) -> bool {
        self.estimator.tokens_of(prompt) <= self.budget && prompt.chars().count() <= self.max_chars
    }
}

/// Why a split call has no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SplitError<E> {
    /// A piece's or a combining call failed.
    #[error("{0}")]
    Call(E),
    /// One piece's answer alone is too long to be combined within the window.
    #[error("the answers of the {pieces} pieces are too long to combine within the window; ask for shorter answers")]
    TooLong {
        /// How many pieces there were.
        pieces: usize,
    },
}

/// Asks `split.prompt` about each piece of `split.context`, then combines the answers
/// — as many as one combining prompt holds per call, in rounds — until one is left.
/// `ask` asks a batch of prompts (in parallel, as it likes) and returns the answers in
/// order. Returns the answer and the number of pieces.
pub(crate) async fn split_and_combine<E, F, Fut>(
    split: Split<'_>,
    ask: F,
) -> Result<(String, usize), SplitError<E>>
where
    F: Fn(Vec<String>) -> Fut,
    Fut: Future<Output = Result<Vec<String>, E>>,
{
    let pieces = split_text(split.context, split.piece);
    let count = pieces.len();
    let jobs = pieces
        .iter()
        .enumerate()
        .map(|(i, text)| with_context(&piece_prompt(split.prompt, i, count), Some(text)))
        .collect();
    let answers = ask(jobs).await.map_err(SplitError::Call)?;
    let answer = combine_rounds(split.prompt, answers, &split.fit, ask).await?;
    Ok((answer, count))
}

/// Combines `answers` (each about a part, in order) into one for `prompt`: as many per
/// call as `fit` takes, asked through `ask`, in rounds until one is left.
pub(crate) async fn combine_rounds<E, F, Fut>(
    prompt: &str,
    mut answers: Vec<String>,
    fit: &CombineFit<'_>,
    ask: F,
) -> Result<String, SplitError<E>>
where
    F: Fn(Vec<String>) -> Fut,
    Fut: Future<Output = Result<Vec<String>, E>>,
{
    let parts = answers.len();
    while answers.len() > 1 {
        let groups =
            combine_groups(prompt, &answers, fit).ok_or(SplitError::TooLong { pieces: parts })?;
        let jobs = groups
            .into_iter()
            .map(|range| {
                let first = range.start;
                combine_prompt(prompt, &answers[range], first)
            })
            .collect();
        answers = ask(jobs).await.map_err(SplitError::Call)?;
    }
    Ok(answers.pop().unwrap_or_default())
}

/// Characters of context a piece may hold beside a prompt of `prompt_tokens` within
/// `budget` tokens, for text of `chars_per_token`; `None` when the prompt leaves no
/// useful room.
pub(crate) fn piece_chars_beside(
    prompt_tokens: u64,
    budget: u64,
    chars_per_token: f64,
) -> Option<usize> {
    let prompt_tokens = prompt_tokens + PIECE_MARGIN_TOKENS;
    let room = budget.checked_sub(prompt_tokens)?;
    let chars = (room as f64 * chars_per_token * PIECE_SAFETY) as usize;
    (chars >= MIN_PIECE_CHARS).then_some(chars)
}

/// `text` cut into pieces of at most `max_chars` characters, each ending at a line end
/// when one falls in its last fifth, else at a character boundary. Nothing is lost:
/// the pieces joined are `text`.
pub(crate) fn split_text(text: &str, max_chars: usize) -> Vec<&str> {
    let max_chars = max_chars.max(1);
    let mut pieces = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let Some((limit, _)) = rest.char_indices().nth(max_chars) else {
            pieces.push(rest);
            break;
        };
        let floor = rest
            .char_indices()
            .nth(max_chars * 4 / 5)
            .map_or(0, |(i, _)| i);
        let cut = rest[..limit]
            .rfind('\n')
            .map(|i| i + 1)
            .filter(|&i| i > floor)
            .unwrap_or(limit);
        pieces.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    pieces
}

/// The prompt of the call on piece `index` (0-based) of `count`.
pub(crate) fn piece_prompt(prompt: &str, index: usize, count: usize) -> String {
    format!(
        "{prompt}\n\n(The context below is part {} of {count} of a longer text, cut to fit; answer from this part only, and say so when it holds nothing relevant.)",
        index + 1
    )
}

/// The prompt combining `answers` (each from a part of the context, in order) into one.
pub(crate) fn combine_prompt(prompt: &str, answers: &[String], first_part: usize) -> String {
    let mut text = format!(
        "A question was asked about a long text, one part at a time. The question:\n{prompt}\n\nThe answers from the parts, in order:\n"
    );
    for (i, answer) in answers.iter().enumerate() {
        let _ = writeln!(text, "[part {}] {}", first_part + i + 1, answer.trim());
    }
    text.push_str("\nCombine them into one answer to the question: add up counts, merge lists, keep every relevant finding, and ignore parts that found nothing.");
    text
}

/// `answers` grouped so that each group's combining prompt fits; `None` when one
/// answer alone does not.
pub(crate) fn combine_groups(
    prompt: &str,
    answers: &[String],
    fit: &CombineFit<'_>,
) -> Option<Vec<std::ops::Range<usize>>> {
    let mut groups = Vec::new();
    let mut start = 0;
    while start < answers.len() {
        let mut end = start + 1;
        if !fit.fits(&combine_prompt(prompt, &answers[start..end], start)) {
            return None;
        }
        while end < answers.len() && fit.fits(&combine_prompt(prompt, &answers[start..=end], start))
        {
            end += 1;
        }
        groups.push(start..end);
        start = end;
    }
    Some(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_end_on_lines_and_lose_nothing() {
        let text = "alpha\nbravo\ncharlie\ndelta\necho\n".repeat(40);
        let pieces = split_text(&text, 100);
        assert_eq!(pieces.concat(), text);
        assert!(pieces.iter().all(|p| p.chars().count() <= 100));
        assert!(pieces[..pieces.len() - 1].iter().all(|p| p.ends_with('\n')));
        // No line end in reach: cut at the limit, on a character boundary.
        let wide = "é".repeat(250);
        let pieces = split_text(&wide, 100);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces.concat(), wide);
        assert!(split_text("", 10).is_empty());
    }

    #[test]
    fn a_piece_leaves_room_for_the_prompt() {
        let estimator = TokenEstimator::default();
        let piece_chars = |prompt: &str, ratio: f64| {
            piece_chars_beside(estimator.tokens_of(prompt), 1_000, ratio)
        };
        // 1 000 tokens, the prompt ~10 + 64 margin: ~926 tokens × 3 × 0.9.
        let chars = piece_chars("count the apples here", 3.0).unwrap();
        assert!((2_400..2_550).contains(&chars), "{chars}");
        // Denser text, smaller pieces.
        let dense = piece_chars("count the apples here", 1.5).unwrap();
        assert!((1_200..1_275).contains(&dense), "{dense}");
        assert_eq!(piece_chars(&"x".repeat(3_000), 3.0), None);
    }

    #[tokio::test]
    async fn a_split_call_asks_every_piece_then_combines_in_rounds() {
        let estimator = TokenEstimator::default();
        let context = "one apple\n".repeat(1_000);
        let asked = std::sync::Mutex::new(Vec::new());
        let (answer, pieces) = split_and_combine(
            Split {
                prompt: "How many apples?",
                context: &context,
                piece: 1_000,
                fit: CombineFit {
                    budget: 120,
                    max_chars: usize::MAX,
                    estimator: &estimator,
                },
            },
            |jobs: Vec<String>| {
                asked.lock().unwrap().push(jobs.len());
                async move { Ok::<_, ()>(jobs.iter().map(|_| "100 apples".to_owned()).collect()) }
            },
        )
        .await
        .unwrap();
        assert_eq!(pieces, 10);
        assert_eq!(answer, "100 apples");
        let asked = asked.into_inner().unwrap();
        assert_eq!(asked[0], 10, "every piece first");
        assert!(
            asked.len() > 2,
            "a small window combines in rounds: {asked:?}"
        );
        assert_eq!(*asked.last().unwrap(), 1);
    }

    #[test]
    fn answers_are_combined_in_groups_that_fit() {
        let estimator = TokenEstimator::default();
        let answers: Vec<String> = (0..10)
            .map(|i| format!("{i} apples. {}", "x".repeat(300)))
            .collect();
        let fit = |budget, max_chars| CombineFit {
            budget,
            max_chars,
            estimator: &estimator,
        };
        let groups = combine_groups("How many apples?", &answers, &fit(400, usize::MAX)).unwrap();
        assert!(groups.len() > 1 && groups.len() < 10, "{groups:?}");
        assert_eq!(groups.first().unwrap().start, 0);
        assert_eq!(groups.last().unwrap().end, 10);
        assert!(groups.windows(2).all(|w| w[0].end == w[1].start));
        let huge = vec!["y".repeat(5_000)];
        assert_eq!(combine_groups("q", &huge, &fit(400, usize::MAX)), None);
        // `--sub-context-chars` bounds each combining prompt too.
        let by_chars = combine_groups("How many apples?", &answers, &fit(100_000, 700)).unwrap();
        assert_eq!(by_chars.len(), 10, "one answer a call: {by_chars:?}");
        assert_eq!(combine_groups("q", &huge, &fit(100_000, 1_000)), None);
        let prompt = combine_prompt("How many?", &answers[2..4], 2);
        assert!(prompt.contains("[part 3] 2 apples.") && prompt.contains("[part 4] 3 apples."));
    }
}
