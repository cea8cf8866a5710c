//! The model providers against the scripted mock server (and real commands for `cli`):
//! what comes back, what was sent, and how failures are retried and reported.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on setup errors"
)]

use std::sync::Mutex;
use std::time::Duration;

use rlm_provider::{
    build_provider, AnthropicProvider, ApiKey, ChatMessage, ChatRequest, CliProvider,
    OpenAiProvider, Provider, ProviderConfig, ProviderError, ProviderKind, ToolSpec, Usage,
};
use rlm_test_support::mock_llm::{
    Api, MockLlm, MockReply, MockRule, MockScript, MockToolCall, StreamCut,
};

const SECRET: &str = "sk-test-SECRET-never-recorded-0042";

fn config(kind: ProviderKind, base_url: &str, stream: bool) -> ProviderConfig {
    let mut config = ProviderConfig::new(kind, "test-model");
    config.base_url = Some(base_url.to_owned());
    config.stream = stream;
    config.retry_base_delay = Duration::from_millis(2);
    config
}

fn openai(base_url: &str, stream: bool) -> OpenAiProvider {
    OpenAiProvider::new(
        &config(ProviderKind::OpenAi, base_url, stream),
        Some(ApiKey::new(SECRET)),
    )
    .unwrap()
}

fn anthropic(base_url: &str, stream: bool) -> AnthropicProvider {
    AnthropicProvider::new(
        &config(ProviderKind::Anthropic, base_url, stream),
        Some(ApiKey::new(SECRET)),
    )
    .unwrap()
}

fn cli(command: &str) -> CliProvider {
    let mut config = ProviderConfig::new(ProviderKind::Cli, "");
    config.llm_cmd = Some(command.to_owned());
    CliProvider::new(&config).unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::system("You are terse."),
            ChatMessage::user("Say hello."),
        ],
        ..ChatRequest::default()
    }
}

/// Calls `provider` and collects the streamed deltas.
async fn complete_collecting(
    provider: &dyn Provider,
    request: &ChatRequest,
) -> (Result<rlm_provider::Completion, ProviderError>, Vec<String>) {
    let deltas = Mutex::new(Vec::new());
    let sink = |delta: &str| deltas.lock().unwrap().push(delta.to_owned());
    let result = provider.complete(request, Some(&sink)).await;
    (result, deltas.into_inner().unwrap())
}

/// No recorded request carries the key or any authentication header value.
fn assert_key_not_recorded(mock: &MockLlm) {
    let recorded = serde_json::to_string(&mock.requests()).unwrap();
    assert!(
        !recorded.contains(SECRET),
        "the key was recorded: {recorded}"
    );
    for request in mock.requests() {
        assert!(request.auth_present(), "the key was not sent");
        assert!(request
            .headers
            .iter()
            .all(|(name, _)| name != "authorization" && name != "x-api-key"));
    }
}

#[tokio::test]
async fn openai_non_streaming_reads_text_and_usage() {
    let mock = MockLlm::start(MockScript::replies([
        MockReply::text("Hello there.").with_usage(11, 7)
    ]))
    .await
    .unwrap();
    let provider = openai(&mock.openai_base_url(), false);
    let (completion, deltas) = complete_collecting(&provider, &request()).await;
    let completion = completion.unwrap();
    assert_eq!(completion.text, "Hello there.");
    assert_eq!(
        completion.usage,
        Usage {
            prompt_tokens: 11,
            completion_tokens: 7
        }
    );
    assert!(completion.usage_reported);
    assert_eq!(completion.model, "mock-llm");
    assert_eq!(completion.attempts, 1);
    assert_eq!(deltas, ["Hello there."]);

    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.api, Some(Api::OpenAi));
    assert_eq!(sent.model(), Some("test-model"));
    assert!(!sent.stream());
    assert!(sent.body.get("stream_options").is_none());
    assert_eq!(sent.system_prompt().as_deref(), Some("You are terse."));
    assert_eq!(sent.last_user_message().as_deref(), Some("Say hello."));
    assert_eq!(
        sent.body_bytes,
        serde_json::to_vec(&sent.body).unwrap().len()
    );
    assert_key_not_recorded(&mock);
}

#[tokio::test]
async fn openai_streaming_passes_deltas_and_reads_usage() {
    let answer = "The answer is forty two, as always.";
    let mock = MockLlm::start(MockScript::replies([
        MockReply::text(answer).with_usage(20, 9)
    ]))
    .await
    .unwrap();
    let provider = openai(&mock.base_url(), true);
    let (completion, deltas) = complete_collecting(&provider, &request()).await;
    let completion = completion.unwrap();
    assert_eq!(completion.text, answer);
    assert!(
        deltas.len() >= 5,
        "expected one delta per word, got {deltas:?}"
    );
    assert_eq!(deltas.concat(), answer);
    assert_eq!(
        completion.usage,
        Usage {
            prompt_tokens: 20,
            completion_tokens: 9
        }
    );
    assert!(completion.usage_reported);

    let sent = &mock.requests()[0];
    assert_eq!(sent.path, "/chat/completions");
    assert!(sent.stream());
    assert_eq!(sent.body["stream_options"]["include_usage"], true);
    assert_key_not_recorded(&mock);
}

#[tokio::test]
async fn openai_without_usage_estimates_it() {
    let mock = MockLlm::start(MockScript::replies([
        MockReply::text("12345678").without_usage(),
        MockReply::text("12345678").without_usage(),
    ]))
    .await
    .unwrap();
    for stream in [false, true] {
        let completion = openai(&mock.base_url(), stream)
            .complete(&request(), None)
            .await
            .unwrap();
        assert!(!completion.usage_reported);
        // "You are terse." + "Say hello." = 24 chars → 6 tokens; 8 chars → 2 tokens.
        assert_eq!(
            completion.usage,
            Usage {
                prompt_tokens: 6,
                completion_tokens: 2
            }
        );
    }
}

#[tokio::test]
async fn anthropic_non_streaming_sends_messages_api_shape() {
    let mock = MockLlm::start(MockScript::replies([
        MockReply::text("Bonjour.").with_usage(30, 4)
    ]))
    .await
    .unwrap();
    let provider = anthropic(&mock.base_url(), false);
    let completion = provider.complete(&request(), None).await.unwrap();
    assert_eq!(completion.text, "Bonjour.");
    assert_eq!(
        completion.usage,
        Usage {
            prompt_tokens: 30,
            completion_tokens: 4
        }
    );
    assert!(completion.usage_reported);

    let sent = &mock.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.api, Some(Api::Anthropic));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.auth_headers, ["x-api-key"]);
    assert_eq!(sent.body["system"], "You are terse.");
    assert_eq!(sent.body["max_tokens"], 4096);
    assert_eq!(sent.messages().len(), 1);
    assert_eq!(sent.last_user_message().as_deref(), Some("Say hello."));
    assert_key_not_recorded(&mock);
}

#[tokio::test]
async fn anthropic_streaming_passes_deltas_and_reads_usage() {
    let answer = "Streaming from the Messages API works.";
    let mock = MockLlm::start(MockScript::replies([
        MockReply::text(answer).with_usage(40, 8)
    ]))
    .await
    .unwrap();
    let provider = anthropic(&mock.base_url(), true);
    let (completion, deltas) = complete_collecting(&provider, &request()).await;
    let completion = completion.unwrap();
    assert_eq!(completion.text, answer);
    assert!(deltas.len() >= 5, "{deltas:?}");
    assert_eq!(deltas.concat(), answer);
    assert_eq!(
        completion.usage,
        Usage {
            prompt_tokens: 40,
            completion_tokens: 8
        }
    );
    assert!(mock.requests()[0].stream());
    assert_key_not_recorded(&mock);
}

#[tokio::test]
async fn multibyte_text_split_across_stream_chunks_survives() {
    let answer = "日本語のテキスト — ünïcödé 🎉🦀 done";
    // 7-byte writes cut three- and four-byte characters (and the JSON) anywhere.
    let reply = || MockReply::text(answer).chunked(7, Duration::from_millis(1));
    let mock = MockLlm::start(MockScript::replies([reply(), reply()]))
        .await
        .unwrap();

    let (completion, deltas) =
        complete_collecting(&openai(&mock.base_url(), true), &request()).await;
    assert_eq!(completion.unwrap().text, answer);
    assert_eq!(deltas.concat(), answer);

    let (completion, deltas) =
        complete_collecting(&anthropic(&mock.base_url(), true), &request()).await;
    assert_eq!(completion.unwrap().text, answer);
    assert_eq!(deltas.concat(), answer);
}

/// A provider of `api` streaming from `base_url`.
fn streaming(api: Api, base_url: &str) -> Box<dyn Provider> {
    match api {
        Api::OpenAi => Box::new(openai(base_url, true)),
        Api::Anthropic => Box::new(anthropic(base_url, true)),
        Api::Responses => {
            unreachable!("rlm has no Responses API provider; the mock serves it for agent CLIs")
        }
    }
}

/// Seen failing before the fix: the half answer came back as if whole, in one attempt.
#[tokio::test]
async fn a_stream_that_ends_without_its_end_event_is_retried() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let mock = MockLlm::start(MockScript::replies([
            MockReply::text("the first half of").cut(StreamCut::WithoutEnd),
            MockReply::text("the whole answer"),
        ]))
        .await
        .unwrap();
        let (completion, deltas) =
            complete_collecting(streaming(api, &mock.base_url()).as_ref(), &request()).await;
        let completion = completion.unwrap();
        assert_eq!(completion.text, "the whole answer", "{api:?}");
        assert_eq!(completion.attempts, 2, "{api:?}");
        let shown = deltas.concat();
        assert!(
            shown.starts_with("the first half of") && shown.ends_with("the whole answer"),
            "{api:?}: {shown:?}"
        );
        assert!(shown.contains("asking again"), "{api:?}: {shown:?}");
    }
}

/// Seen failing before the fix: a stream broken after some text was a fatal error.
#[tokio::test]
async fn a_stream_broken_after_some_text_is_retried() {
    // OpenAI: the role chunk and one text delta; Anthropic: message_start,
    // content_block_start, ping and one text delta.
    for (api, events) in [(Api::OpenAi, 2), (Api::Anthropic, 4)] {
        let mock = MockLlm::start(MockScript::replies([
            MockReply::text("words that never end").cut(StreamCut::DropAfter(events)),
            MockReply::text("second try"),
        ]))
        .await
        .unwrap();
        let (completion, deltas) =
            complete_collecting(streaming(api, &mock.base_url()).as_ref(), &request()).await;
        let completion = completion.unwrap();
        assert_eq!(completion.text, "second try", "{api:?}");
        assert_eq!(completion.attempts, 2, "{api:?}");
        assert!(deltas.concat().ends_with("second try"), "{deltas:?}");
    }
}

/// Seen failing before the fix: the error said "check --base-url" although the server
/// had answered every attempt.
#[tokio::test]
async fn answers_cut_on_every_attempt_do_not_blame_the_base_url() {
    for cut in [StreamCut::WithoutEnd, StreamCut::DropAfter(2)] {
        let reply = || MockReply::text("never finished").cut(cut);
        let mock = MockLlm::start(MockScript::replies([reply(), reply()]))
            .await
            .unwrap();
        let mut settings = config(ProviderKind::OpenAi, &mock.base_url(), true);
        settings.retries = 1;
        let provider = OpenAiProvider::new(&settings, None).unwrap();
        let error = provider.complete(&request(), None).await.unwrap_err();
        assert!(
            matches!(error, ProviderError::Interrupted { attempts: 2, .. }),
            "{cut:?}: {error:?}"
        );
        let message = error.to_string();
        assert!(!message.contains("--base-url"), "{message}");
        assert!(message.contains("cut short"), "{message}");
        assert_eq!(mock.request_count(), 2);
    }
}

#[tokio::test]
async fn rate_limit_then_success_is_retried() {
    let mock = MockLlm::start(MockScript::replies([
        MockReply::error(429, "slow down").with_retry_after("0"),
        MockReply::text("made it"),
    ]))
    .await
    .unwrap();
    let completion = openai(&mock.base_url(), true)
        .complete(&request(), None)
        .await
        .unwrap();
    assert_eq!(completion.text, "made it");
    assert_eq!(completion.attempts, 2);
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn server_errors_exhaust_retries_into_an_http_error() {
    let mock = MockLlm::start(MockScript::always(MockReply::error(
        500,
        "upstream exploded",
    )))
    .await
    .unwrap();
    let error = anthropic(&mock.base_url(), false)
        .complete(&request(), None)
        .await
        .unwrap_err();
    match &error {
        ProviderError::Http {
            status,
            attempts,
            body,
            endpoint,
        } => {
            assert_eq!(*status, 500);
            assert_eq!(*attempts, 5);
            assert!(body.contains("upstream exploded"), "{body}");
            assert_eq!(endpoint, &format!("{}/v1/messages", mock.base_url()));
        }
        other => panic!("expected an HTTP error, got {other:?}"),
    }
    assert_eq!(mock.request_count(), 5);
}

#[tokio::test]
async fn client_errors_are_not_retried_and_the_key_is_scrubbed() {
    let mock = MockLlm::start(MockScript::replies([MockReply::error(
        401,
        format!("invalid key {SECRET}"),
    )]))
    .await
    .unwrap();
    let error = openai(&mock.base_url(), false)
        .complete(&request(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ProviderError::Http {
                status: 401,
                attempts: 1,
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(!message.contains(SECRET), "{message}");
    assert!(message.contains("[redacted]"), "{message}");
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn a_dropped_connection_is_retried() {
    let mock = MockLlm::start(MockScript::replies([
        MockReply::close(),
        MockReply::text("second try"),
    ]))
    .await
    .unwrap();
    let completion = openai(&mock.base_url(), false)
        .complete(&request(), None)
        .await
        .unwrap();
    assert_eq!(completion.text, "second try");
    assert_eq!(completion.attempts, 2);
}

#[tokio::test]
async fn connection_refused_is_unreachable_and_names_the_endpoint() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let mut settings = config(ProviderKind::OpenAi, &base_url, false);
    settings.retries = 2;
    let provider = OpenAiProvider::new(&settings, None).unwrap();
    let error = provider.complete(&request(), None).await.unwrap_err();
    match &error {
        ProviderError::Unreachable {
            endpoint, attempts, ..
        } => {
            assert_eq!(endpoint, &format!("{base_url}/chat/completions"));
            assert_eq!(*attempts, 3);
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert!(
        error.to_string().contains(&format!("127.0.0.1:{port}")),
        "{error}"
    );
}

#[tokio::test]
async fn a_slow_answer_times_out() {
    let mock = MockLlm::start(MockScript::replies([
        MockReply::text("too late").with_delay(Duration::from_secs(30))
    ]))
    .await
    .unwrap();
    let mut settings = config(ProviderKind::OpenAi, &mock.base_url(), true);
    settings.request_timeout = Duration::from_millis(200);
    let provider = OpenAiProvider::new(&settings, None).unwrap();
    let error = provider.complete(&request(), None).await.unwrap_err();
    assert!(
        matches!(error, ProviderError::Timeout { attempts: 1, .. }),
        "{error:?}"
    );
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn a_missing_key_is_an_error_only_for_remote_endpoints() {
    let unset = "RLM_TEST_PROVIDER_KEY_THAT_IS_NEVER_SET";
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        let mut remote = config(kind, "https://api.example.com/v1", false);
        remote.api_key_env = Some(unset.to_owned());
        match build_provider(&remote) {
            Err(ProviderError::MissingKey { var }) => assert_eq!(var, unset),
            Err(other) => panic!("expected MissingKey, got {other:?}"),
            Ok(provider) => panic!("expected MissingKey, got {}", provider.describe()),
        }
        let mut local = config(kind, "http://127.0.0.1:8080/v1", false);
        local.api_key_env = Some(unset.to_owned());
        assert!(build_provider(&local).is_ok());
    }
}

#[tokio::test]
async fn a_local_endpoint_without_a_key_gets_no_auth_header() {
    let mock = MockLlm::start(MockScript::always("fine")).await.unwrap();
    let settings = config(ProviderKind::OpenAi, &mock.base_url(), false);
    let provider = OpenAiProvider::new(&settings, None).unwrap();
    provider.complete(&request(), None).await.unwrap();
    assert!(!mock.requests()[0].auth_present());
}

#[tokio::test]
async fn connections_are_kept_alive_between_calls() {
    let mock = MockLlm::start(MockScript::always("again")).await.unwrap();
    let provider = openai(&mock.base_url(), true);
    for _ in 0..3 {
        provider.complete(&request(), None).await.unwrap();
    }
    let connections: Vec<u64> = mock.requests().iter().map(|r| r.connection).collect();
    assert_eq!(connections, [0, 0, 0]);
}

#[tokio::test]
async fn rules_answer_before_the_queue() {
    let mock = MockLlm::start(
        MockScript::replies(["from the queue"]).rule(MockRule::contains("chunk 7", "rule answer")),
    )
    .await
    .unwrap();
    let provider = openai(&mock.base_url(), false);
    let ask = |text: &str| ChatRequest {
        messages: vec![ChatMessage::user(text)],
        ..ChatRequest::default()
    };
    assert_eq!(
        provider
            .complete(&ask("summarise chunk 7"), None)
            .await
            .unwrap()
            .text,
        "rule answer"
    );
    assert_eq!(
        provider
            .complete(&ask("anything"), None)
            .await
            .unwrap()
            .text,
        "from the queue"
    );
    let error = provider.complete(&ask("more"), None).await.unwrap_err();
    assert!(error.to_string().contains("script exhausted"), "{error}");
}

#[tokio::test]
async fn cli_passes_the_prompt_as_an_argument() {
    let provider = cli(r#"sh -c 'printf "%s\n\n" "$1"' sh {prompt}"#);
    let ask = ChatRequest {
        messages: vec![ChatMessage::user("what's 'quoted' $HOME?")],
        ..ChatRequest::default()
    };
    let completion = provider.complete(&ask, None).await.unwrap();
    assert_eq!(completion.text, "what's 'quoted' $HOME?");
    assert!(!completion.usage_reported);
    assert_eq!(completion.attempts, 1);
}

#[tokio::test]
async fn cli_passes_the_prompt_on_stdin_flattened() {
    let provider = cli("cat");
    let (completion, deltas) = complete_collecting(&provider, &request()).await;
    let completion = completion.unwrap();
    assert_eq!(
        completion.text,
        "System:\nYou are terse.\n\nUser:\nSay hello."
    );
    assert_eq!(deltas, std::slice::from_ref(&completion.text));
    assert_eq!(completion.model, "cat");
}

#[tokio::test]
async fn cli_failure_reports_status_and_stderr_tail() {
    let provider = cli("sh -c 'echo partial; echo something broke >&2; exit 3'");
    let error = provider.complete(&request(), None).await.unwrap_err();
    match &error {
        ProviderError::Command {
            command,
            status,
            stderr_tail,
        } => {
            assert!(command.starts_with("sh -c"), "{command}");
            assert_eq!(status, "exit status 3");
            assert_eq!(stderr_tail, "something broke");
        }
        other => panic!("expected a command error, got {other:?}"),
    }
}

#[tokio::test]
async fn cli_missing_program_and_timeout_are_command_errors() {
    let error = cli("rlm-no-such-program-anywhere --flag")
        .complete(&request(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ProviderError::Command { status, .. } if status.contains("could not start")),
        "{error:?}"
    );

    let mut settings = ProviderConfig::new(ProviderKind::Cli, "sleeper");
    settings.llm_cmd = Some("sleep 30".into());
    settings.request_timeout = Duration::from_millis(200);
    let provider = CliProvider::new(&settings).unwrap();
    let error = provider.complete(&request(), None).await.unwrap_err();
    assert!(
        matches!(&error, ProviderError::Command { status, .. } if status.contains("timeout")),
        "{error:?}"
    );
}

/// A conversation that offers two tools; `results` answers the calls of an earlier
/// reply (empty on the first request).
fn tool_request(results: Vec<ChatMessage>) -> ChatRequest {
    let spec = |name: &str| ToolSpec {
        name: name.into(),
        description: format!("the {name} tool"),
        parameters: serde_json::json!({"type": "object", "properties": {"variable": {"type": "string"}}}),
    };
    let mut messages = vec![
        ChatMessage::system("Use tools."),
        ChatMessage::user("Find it."),
    ];
    messages.extend(results);
    ChatRequest {
        messages,
        tools: vec![spec("ctx_grep"), spec("ctx_slice")],
        ..ChatRequest::default()
    }
}

fn scripted_calls() -> MockReply {
    MockReply::tool_calls(
        "Looking é.",
        [
            MockToolCall::new(
                "ctx_grep",
                serde_json::json!({"variable": "context", "pattern": "vault|é"}),
            )
            .with_id("id-a"),
            MockToolCall::new(
                "ctx_slice",
                serde_json::json!({"variable": "context", "start": 0, "end": 2000}),
            ),
        ],
    )
}

/// Tool calls come back whole, in order, with their arguments exactly as sent —
/// streamed (argument pieces joined by index) or not — and the results go back in
/// each API's own shape.
#[tokio::test]
async fn tool_calls_round_trip_in_both_wire_formats_streamed_or_not() {
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        for stream in [false, true] {
            let mock = MockLlm::start(MockScript::replies([
                scripted_calls(),
                MockReply::text("FINAL(done)"),
            ]))
            .await
            .unwrap();
            let provider: Box<dyn Provider> = match kind {
                ProviderKind::OpenAi => Box::new(openai(&mock.base_url(), stream)),
                _ => Box::new(anthropic(&mock.base_url(), stream)),
            };
            let label = format!("{kind:?} stream={stream}");
            let completion = provider
                .complete(&tool_request(Vec::new()), None)
                .await
                .unwrap();
            assert_eq!(completion.text, "Looking é.", "{label}");
            let calls = &completion.tool_calls;
            assert_eq!(calls.len(), 2, "{label}: {calls:?}");
            assert_eq!(calls[0].id, "id-a", "{label}");
            assert_eq!(calls[0].name, "ctx_grep", "{label}");
            let first: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
            assert_eq!(
                first,
                serde_json::json!({"variable": "context", "pattern": "vault|é"}),
                "{label}"
            );
            assert_eq!(calls[1].name, "ctx_slice", "{label}");
            assert!(!calls[1].id.is_empty(), "{label}");
            let sent = &mock.requests()[0];
            assert_eq!(sent.tool_names(), ["ctx_grep", "ctx_slice"], "{label}");

            let results = vec![
                ChatMessage::assistant_calls(completion.text.clone(), calls.clone()),
                ChatMessage::tool_result(calls[0].id.clone(), "1 line matches", false),
                ChatMessage::tool_result(calls[1].id.clone(), "bad range", true),
                ChatMessage::user("State: iteration 2"),
            ];
            let done = provider
                .complete(&tool_request(results), None)
                .await
                .unwrap();
            assert_eq!(done.text, "FINAL(done)", "{label}");
            assert!(done.tool_calls.is_empty(), "{label}");
            let second = &mock.requests()[1];
            let answered = second.tool_result_details();
            assert_eq!(answered.len(), 2, "{label}: {:?}", second.body);
            assert_eq!(answered[0].tool_call_id, "id-a", "{label}");
            assert_eq!(answered[0].content, "1 line matches", "{label}");
            assert_eq!(answered[1].tool_call_id, calls[1].id, "{label}");
            if kind == ProviderKind::Anthropic {
                assert!(answered[1].is_error && !answered[0].is_error, "{label}");
            }
        }
    }
}

/// llama.cpp's server once repeated a call's id and name in every streamed chunk:
/// the name is not doubled and the arguments still join.
#[tokio::test]
async fn streamed_calls_that_repeat_their_names_still_join() {
    let mock = MockLlm::start(MockScript::replies([
        scripted_calls().repeating_tool_names()
    ]))
    .await
    .unwrap();
    let completion = openai(&mock.base_url(), true)
        .complete(&tool_request(Vec::new()), None)
        .await
        .unwrap();
    assert_eq!(completion.tool_calls[0].name, "ctx_grep");
    assert_eq!(completion.tool_calls[1].name, "ctx_slice");
    let second: serde_json::Value =
        serde_json::from_str(&completion.tool_calls[1].arguments).unwrap();
    assert_eq!(second["end"], 2000);
}

/// Arguments that are not JSON reach the caller as they came (the tools environment
/// answers them with an error naming the tool), in both formats.
#[tokio::test]
async fn arguments_that_are_not_json_come_through_as_text() {
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        let mock = MockLlm::start(MockScript::replies([MockReply::tool_calls(
            "",
            [MockToolCall::raw("ctx_grep", "{variable: context")],
        )]))
        .await
        .unwrap();
        let provider: Box<dyn Provider> = match kind {
            ProviderKind::OpenAi => Box::new(openai(&mock.base_url(), true)),
            _ => Box::new(anthropic(&mock.base_url(), true)),
        };
        let completion = provider
            .complete(&tool_request(Vec::new()), None)
            .await
            .unwrap();
        assert_eq!(
            completion.tool_calls[0].arguments, "{variable: context",
            "{kind:?}"
        );
    }
}
