//! A reply is bounded in bytes and in time, whatever the server does: an endless
//! stream of deltas, an endless whole body, or a stream that drips a byte a second
//! ends with an error naming the endpoint, the bound and the flag — never a process
//! that grows until the kernel kills it, nor a call that never returns.

use std::time::Duration;

use rlm_provider::{
    build_provider, ChatMessage, ChatRequest, ProviderConfig, ProviderError, ProviderKind,
};
use rlm_test_support::mock_llm::{MockLlm, MockReply, MockScript};

/// A bound small enough for the tests to reach at once.
const LIMIT_BYTES: u64 = 256 * 1024;

fn config(kind: ProviderKind, base_url: &str, stream: bool) -> ProviderConfig {
    let mut config = ProviderConfig::new(kind, "test-model");
    config.base_url = Some(base_url.to_owned());
    config.stream = stream;
    config.retries = 2;
    config.retry_base_delay = Duration::from_millis(2);
    config.max_reply_bytes = LIMIT_BYTES;
    config
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::user("Say hello.")],
        ..ChatRequest::default()
    }
}

#[tokio::test]
async fn an_endless_reply_ends_at_the_size_bound_streamed_or_whole_in_either_api() {
    let mock = MockLlm::start(MockScript::always(MockReply::endless(4 * 1024)))
        .await
        .unwrap();
    let cases = [
        (ProviderKind::OpenAi, true),
        (ProviderKind::OpenAi, false),
        (ProviderKind::Anthropic, true),
        (ProviderKind::Anthropic, false),
    ];
    for (kind, stream) in cases {
        let before = mock.request_count();
        let provider = build_provider(&config(kind, &mock.base_url(), stream)).unwrap();
        let error = provider.complete(&request(), None).await.unwrap_err();
        match &error {
            ProviderError::ReplyTooLarge {
                endpoint,
                limit_bytes,
            } => {
                assert!(endpoint.starts_with(&mock.base_url()), "{endpoint}");
                assert_eq!(*limit_bytes, LIMIT_BYTES);
            }
            other => panic!("{kind} stream={stream}: expected ReplyTooLarge, got {other:?}"),
        }
        let message = error.to_string();
        assert!(
            message.contains("262144 bytes") && message.contains("--max-reply-bytes"),
            "{message}"
        );
        // A runaway is not asked again: another attempt would run away the same.
        assert_eq!(mock.request_count(), before + 1, "{kind} stream={stream}");
    }
}

#[tokio::test]
async fn a_stream_that_drips_ends_at_the_request_timeout() {
    // One byte every 100 ms, for ever: each read brings something, so only a bound on
    // the whole attempt (not on the wait for each chunk) ends it.
    let drip = MockReply::endless(16).chunked(1, Duration::from_millis(100));
    let mock = MockLlm::start(MockScript::always(drip)).await.unwrap();
    let mut settings = config(ProviderKind::OpenAi, &mock.base_url(), true);
    settings.request_timeout = Duration::from_secs(1);
    let provider = build_provider(&settings).unwrap();
    let error = provider.complete(&request(), None).await.unwrap_err();
    assert!(
        matches!(error, ProviderError::Timeout { attempts: 1, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("--request-timeout"), "{error}");
}

#[tokio::test]
async fn a_reply_within_the_bound_is_read_whole() {
    let mock = MockLlm::start(MockScript::always(MockReply::text("x".repeat(100_000))))
        .await
        .unwrap();
    for stream in [true, false] {
        let provider =
            build_provider(&config(ProviderKind::OpenAi, &mock.base_url(), stream)).unwrap();
        let completion = provider.complete(&request(), None).await.unwrap();
        assert_eq!(completion.text.len(), 100_000);
    }
}
