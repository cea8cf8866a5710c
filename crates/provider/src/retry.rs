//! Retrying model calls: exponential backoff with jitter.
//!
//! Hosted model APIs shed load with `429 Too Many Requests` and `5xx`, and local servers
//! restart; a run of hundreds of calls must ride that out instead of failing on the
//! first hiccup. Only failures that another attempt can fix are retried (429, 5xx,
//! connection errors); any other 4xx is the request's fault and is returned at once.
//! A timed-out attempt is not retried either: the request timeout is the user's bound
//! on one call, and repeating it would multiply the wait.

use std::future::Future;
use std::time::{Duration, Instant};

use rand::Rng;
use reqwest::header::HeaderMap;

use super::ProviderError;

/// Retries after the first attempt, unless configured (so up to 5 attempts).
pub const DEFAULT_RETRIES: u32 = 4;
/// Delay before the first retry, unless configured; it doubles with each retry.
pub const DEFAULT_RETRY_BASE_DELAY_MS: u64 = 500;
/// Longest backoff between two attempts, whatever the retry count.
pub const MAX_BACKOFF_SECS: u64 = 30;
/// Longest wait a server's `Retry-After` may impose before rlm tries again.
pub const RETRY_AFTER_CAP_SECS: u64 = 60;

/// When and how long to wait before trying a model call again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = one attempt only).
    pub retries: u32,
    /// Delay before the first retry; doubled for each further retry.
    pub base_delay: Duration,
    /// Upper bound of the exponential backoff.
    pub max_delay: Duration,
    /// Upper bound of a server-requested `Retry-After`.
    pub retry_after_cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            retries: DEFAULT_RETRIES,
            base_delay: Duration::from_millis(DEFAULT_RETRY_BASE_DELAY_MS),
            max_delay: Duration::from_secs(MAX_BACKOFF_SECS),
            retry_after_cap: Duration::from_secs(RETRY_AFTER_CAP_SECS),
        }
    }
}

impl RetryPolicy {
    /// A policy with `retries` retries starting at `base_delay`, default caps.
    pub fn new(retries: u32, base_delay: Duration) -> Self {
        Self {
            retries,
            base_delay,
            ..Self::default()
        }
    }

    /// The backoff before retry number `retry` (1-based): `base × 2^(retry-1)`, capped
    /// at `max_delay`, then jittered uniformly into its upper half so that many
    /// clients throttled together do not come back together.
    pub fn backoff(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(20);
        let full = self
            .base_delay
            .saturating_mul(1 << doublings)
            .min(self.max_delay);
        let half = full / 2;
        let spread_nanos = u64::try_from((full - half).as_nanos()).unwrap_or(u64::MAX);
        let jitter = if spread_nanos == 0 {
            0
        } else {
            rand::rng().random_range(0..=spread_nanos)
        };
        half + Duration::from_nanos(jitter)
    }

    /// The wait before retry number `retry`: the server's `Retry-After` when it gave
    /// one (capped at `retry_after_cap`), else [`RetryPolicy::backoff`].
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(wait) => wait.min(self.retry_after_cap),
            None => self.backoff(retry),
        }
    }
}

/// True for statuses another attempt may cure: 429 and every 5xx.
pub fn is_retryable_status(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

/// True when an error body says the request itself was invalid, whatever the status:
/// llama-cpp-python answers a request its schema refuses (`response_format` of a type
/// it does not know) with 500 and "1 validation error", which no retry cures.
pub fn is_invalid_request(body: &str) -> bool {
    body.to_ascii_lowercase().contains("validation error")
}

/// Reads a server's wait request: `retry-after-ms` (OpenAI's, milliseconds) or
/// `Retry-After` in seconds. An HTTP-date `Retry-After` is ignored (backoff applies).
pub fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = |name: &str, scale: f64| {
        let text = headers.get(name)?.to_str().ok()?.trim();
        let value: f64 = text.parse().ok()?;
        (value.is_finite() && value >= 0.0)
            .then(|| Duration::from_secs_f64((value * scale).min(1e9)))
    };
    seconds("retry-after-ms", 1e-3).or_else(|| seconds("retry-after", 1.0))
}

/// How one attempt failed, as seen by the retry loop.
#[derive(Debug)]
pub(crate) enum AttemptError {
    /// The server answered with a non-success status.
    Status {
        /// HTTP status.
        status: u16,
        /// Start of the body, key scrubbed.
        body: String,
        /// The server's requested wait, if any.
        retry_after: Option<Duration>,
    },
    /// No connection: refused, DNS failure, nothing listening.
    Connect(String),
    /// A connection, but closed or reset before any answer came. Retried like a
    /// connection failure, but reported as what it is (the endpoint is reachable).
    Dropped(String),
    /// The server answered, but the answer was cut short: the stream broke, ended
    /// without its end event, or the body could not be read to its end. Retried like
    /// a connection failure, but reported as what it is (the endpoint is reachable).
    Interrupted(String),
    /// A failure no retry can fix; returned as is.
    Fatal(ProviderError),
}

/// Runs `attempt` (given the 1-based attempt number) under `policy`, each attempt
/// bounded by `timeout`. Returns the value and the number of attempts it took.
pub(crate) async fn run_with_retries<T, F, Fut>(
    policy: &RetryPolicy,
    endpoint: &str,
    timeout: Duration,
    mut attempt: F,
) -> Result<(T, u32), ProviderError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, AttemptError>>,
{
    let max_attempts = policy.retries.saturating_add(1);
    let mut number = 0;
    loop {
        number += 1;
        let started = Instant::now();
        let failure = match tokio::time::timeout(timeout, attempt(number)).await {
            Ok(Ok(value)) => return Ok((value, number)),
            Ok(Err(failure)) => failure,
            Err(_elapsed) => {
                return Err(ProviderError::Timeout {
                    endpoint: endpoint.to_owned(),
                    timeout_secs: timeout_secs(timeout),
                    attempts: number,
                });
            }
        };
        let last = number >= max_attempts;
        let retry_after = match failure {
            AttemptError::Status {
                status,
                body,
                retry_after,
            } => {
                if last || !is_retryable_status(status) || is_invalid_request(&body) {
                    return Err(ProviderError::Http {
                        endpoint: endpoint.to_owned(),
                        status,
                        body,
                        attempts: number,
                    });
                }
                tracing::warn!(
                    endpoint,
                    status,
                    attempt = number,
                    "model endpoint failed; retrying"
                );
                retry_after
            }
            AttemptError::Connect(message) => {
                if last {
                    return Err(ProviderError::Unreachable {
                        endpoint: endpoint.to_owned(),
                        attempts: number,
                        message,
                    });
                }
                tracing::warn!(endpoint, %message, attempt = number, "model endpoint unreachable; retrying");
                None
            }
            AttemptError::Dropped(message) => {
                if last {
                    return Err(ProviderError::Dropped {
                        endpoint: endpoint.to_owned(),
                        attempts: number,
                        message,
                    });
                }
                tracing::warn!(endpoint, %message, attempt = number, "model endpoint closed the connection; retrying");
                None
            }
            AttemptError::Interrupted(message) => {
                if last {
                    return Err(ProviderError::Interrupted {
                        endpoint: endpoint.to_owned(),
                        attempts: number,
                        message,
                    });
                }
                tracing::warn!(endpoint, %message, attempt = number, "model answer cut short; retrying");
                None
            }
            AttemptError::Fatal(error) => return Err(error),
        };
        let wait = policy.delay(number, retry_after);
        tracing::debug!(?wait, elapsed = ?started.elapsed(), "waiting before the next attempt");
        tokio::time::sleep(wait).await;
    }
}

/// A timeout in whole seconds for messages, rounded up so 200 ms reads "1 s".
pub(crate) fn timeout_secs(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_millis().div_ceil(1000)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn backoff_doubles_within_jitter_and_is_capped() {
        let policy = RetryPolicy {
            retries: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
            retry_after_cap: Duration::from_secs(1),
        };
        for _ in 0..50 {
            let first = policy.backoff(1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let second = policy.backoff(2);
            assert!(second >= Duration::from_millis(100) && second <= Duration::from_millis(200));
            let capped = policy.backoff(9);
            assert!(capped >= Duration::from_millis(175) && capped <= Duration::from_millis(350));
        }
        assert_eq!(
            RetryPolicy::new(3, Duration::ZERO).backoff(3),
            Duration::ZERO
        );
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let policy = RetryPolicy::new(4, Duration::from_millis(1));
        assert_eq!(
            policy.delay(1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            policy.delay(1, Some(Duration::from_secs(3600))),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn retry_after_headers_parse() {
        let mut headers = HeaderMap::new();
        assert_eq!(parse_retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(parse_retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(
            parse_retry_after(&headers),
            Some(Duration::from_millis(250))
        );
        let mut dated = HeaderMap::new();
        dated.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(parse_retry_after(&dated), None);
        dated.insert("retry-after", HeaderValue::from_static("-1"));
        assert_eq!(parse_retry_after(&dated), None);
    }

    #[test]
    fn only_429_and_5xx_are_retryable() {
        assert!(is_retryable_status(429));
        assert!(is_retryable_status(500));
        assert!(is_retryable_status(503));
        assert!(!is_retryable_status(400));
        assert!(!is_retryable_status(401));
        assert!(!is_retryable_status(404));
        assert!(is_invalid_request(
            "{\"error\":{\"message\":\"1 validation error:\\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type')"
        ));
        assert!(!is_invalid_request("overloaded"));
    }

    #[tokio::test]
    async fn loop_is_bounded_and_reports_attempts() {
        let policy = RetryPolicy::new(2, Duration::from_millis(1));
        let mut calls = 0;
        let result: Result<((), u32), _> =
            run_with_retries(&policy, "http://x", Duration::from_secs(5), |_| {
                calls += 1;
                async { Err(AttemptError::Connect("refused".into())) }
            })
            .await;
        assert_eq!(calls, 3);
        match result {
            Err(ProviderError::Unreachable {
                attempts, endpoint, ..
            }) => {
                assert_eq!(attempts, 3);
                assert_eq!(endpoint, "http://x");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_dropped_connection_is_retried_and_does_not_blame_the_url() {
        let policy = RetryPolicy::new(1, Duration::from_millis(1));
        let mut calls = 0;
        let result: Result<((), u32), _> =
            run_with_retries(&policy, "http://x", Duration::from_secs(5), |_| {
                calls += 1;
                async { Err(AttemptError::Dropped("connection reset".into())) }
            })
            .await;
        assert_eq!(calls, 2);
        let error = result.unwrap_err();
        assert!(
            matches!(error, ProviderError::Dropped { attempts: 2, .. }),
            "{error:?}"
        );
        assert!(!error.to_string().contains("--base-url"), "{error}");
    }

    #[tokio::test]
    async fn a_cut_answer_is_retried_and_does_not_blame_the_url() {
        let policy = RetryPolicy::new(1, Duration::from_millis(1));
        let mut calls = 0;
        let result: Result<((), u32), _> =
            run_with_retries(&policy, "http://x", Duration::from_secs(5), |_| {
                calls += 1;
                async { Err(AttemptError::Interrupted("the stream ended".into())) }
            })
            .await;
        assert_eq!(calls, 2);
        let error = result.unwrap_err();
        assert!(
            matches!(error, ProviderError::Interrupted { attempts: 2, .. }),
            "{error:?}"
        );
        assert!(!error.to_string().contains("--base-url"), "{error}");
    }

    #[tokio::test]
    async fn client_errors_are_not_retried() {
        let policy = RetryPolicy::new(4, Duration::from_millis(1));
        let mut calls = 0;
        let result: Result<((), u32), _> =
            run_with_retries(&policy, "http://x", Duration::from_secs(5), |_| {
                calls += 1;
                async {
                    Err(AttemptError::Status {
                        status: 400,
                        body: "bad".into(),
                        retry_after: None,
                    })
                }
            })
            .await;
        assert_eq!(calls, 1);
        assert!(matches!(
            result,
            Err(ProviderError::Http {
                status: 400,
                attempts: 1,
                ..
            })
        ));
    }

    #[tokio::test]
    async fn success_after_failures_counts_attempts() {
        let policy = RetryPolicy::new(4, Duration::from_millis(1));
        let result = run_with_retries(
            &policy,
            "http://x",
            Duration::from_secs(5),
            |n| async move {
                if n < 3 {
                    Err(AttemptError::Status {
                        status: 503,
                        body: String::new(),
                        retry_after: None,
                    })
                } else {
                    Ok(n * 10)
                }
            },
        )
        .await;
        assert!(matches!(result, Ok((30, 3))));
    }
}
