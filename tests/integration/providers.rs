//! The provider clients against the scripted LLM over real HTTP: both wire formats, whole
//! and streamed replies, tool calls, reasoning, retries and the errors that end them.

use std::path::Path;
use std::time::{Duration, Instant};

use oxibot_kernel::config::Config;
use oxibot_kernel::message::{ChatMessage, Role, ToolCall, shared};
use oxibot_kernel::provider::{ChatRequest, ChatResponse, Provider, ProviderError, StreamEvent, Usage, Wire};
use oxibot_tests::llm::{CACHED_TOKENS, COMPLETION_TOKENS, PROMPT_TOKENS, REASONING_TOKENS, Reply, ScriptedLlm};
use oxibot_tests::wait::within_deadline;
use serde_json::{Value, json};

const WIRES: [Wire; 2] = [Wire::OpenAiCompatible, Wire::Anthropic];
const FAST_RETRIES: [Duration; 3] = [Duration::from_millis(10), Duration::from_millis(20), Duration::from_millis(40)];

/// A scripted LLM and a provider pointed at it.
struct Setup {
    llm: ScriptedLlm,
    provider: Provider,
    model: String,
}

impl Setup {
    /// `custom` (OpenAI-compatible) or `anthropic`, with a key and millisecond retries.
    fn new(wire: Wire) -> Setup {
        let llm = ScriptedLlm::start();
        let (name, model) = match wire {
            Wire::OpenAiCompatible => ("custom", "scripted-model"),
            Wire::Anthropic => ("anthropic", "anthropic/claude-test"),
        };
        let config = config(
            json!({"agents": {"defaults": {"model": model}}, "providers": {name: {"apiKey": "test-key", "apiBase": llm.base_url()}}}),
        );
        let provider = Provider::from_config(&config.llm()).unwrap().with_retry_delays(FAST_RETRIES.to_vec());
        assert_eq!(provider.wire(), wire);
        Setup { llm, provider, model: model.to_owned() }
    }

    fn request(&self, messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            model: self.model.clone(),
            messages: shared(messages),
            tools: Default::default(),
            max_tokens: 256,
            temperature: Some(0.1),
            reasoning_effort: None,
        }
    }

    /// Sends a system prompt and "hi", collecting the stream events.
    async fn chat(&self, stream: bool) -> (Result<ChatResponse, ProviderError>, Vec<StreamEvent>) {
        let request =
            self.request(vec![ChatMessage::text(Role::System, "you are a test"), ChatMessage::text(Role::User, "hi")]);
        send(&self.provider, &request, stream).await
    }
}

fn config(value: Value) -> Config {
    Config::parse(&value.to_string(), Path::new("config.json")).unwrap()
}

async fn send(
    provider: &Provider,
    request: &ChatRequest,
    stream: bool,
) -> (Result<ChatResponse, ProviderError>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let result = provider.chat(request, stream, &mut |event| events.push(event)).await;
    (result, events)
}

/// The streamed text since the last restart.
fn shown_text(events: &[StreamEvent]) -> String {
    let after_restart = events.iter().rposition(|e| *e == StreamEvent::Restart).map_or(0, |i| i + 1);
    events[after_restart..]
        .iter()
        .filter_map(|e| if let StreamEvent::Text(t) = e { Some(t.as_str()) } else { None })
        .collect()
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn plain_text_comes_back_whole_and_streamed_in_both_wire_formats() {
    for wire in WIRES {
        for stream in [false, true] {
            let setup = Setup::new(wire);
            setup.llm.push(Reply::Text("Hello there, world".into()));
            let (reply, events) = setup.chat(stream).await;
            let reply = reply.unwrap();
            assert_eq!(reply.content.as_deref(), Some("Hello there, world"), "{wire:?} stream={stream}");
            assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
            assert_eq!(
                reply.usage,
                Usage {
                    prompt_tokens: PROMPT_TOKENS,
                    completion_tokens: COMPLETION_TOKENS,
                    cached_tokens: CACHED_TOKENS,
                    reasoning_tokens: if wire == Wire::Anthropic { 0 } else { REASONING_TOKENS }
                }
            );
            if stream {
                assert!(events.len() > 1, "the text arrives in pieces: {events:?}");
                assert_eq!(shown_text(&events), "Hello there, world");
            } else {
                assert!(events.is_empty());
            }
            assert_eq!(setup.llm.requests()[0]["stream"], json!(stream));
        }
    }
}

#[tokio::test]
async fn requests_carry_the_wire_model_and_each_formats_credentials() {
    let openai = Setup::new(Wire::OpenAiCompatible);
    openai.chat(false).await.0.unwrap();
    assert_eq!(openai.llm.requests()[0]["model"], "scripted-model");
    assert_eq!(header(&openai.llm.request_headers()[0], "authorization"), Some("Bearer test-key"));

    let anthropic = Setup::new(Wire::Anthropic);
    anthropic.chat(false).await.0.unwrap();
    assert_eq!(anthropic.provider.wire_model(), "claude-test");
    assert_eq!(anthropic.llm.requests()[0]["model"], "claude-test");
    let headers = &anthropic.llm.request_headers()[0];
    assert_eq!(
        (header(headers, "x-api-key"), header(headers, "anthropic-version")),
        (Some("test-key"), Some("2023-06-01"))
    );
}

#[tokio::test]
async fn tool_calls_are_assembled_from_streamed_deltas_in_both_wire_formats() {
    for wire in WIRES {
        for stream in [true, false] {
            let setup = Setup::new(wire);
            setup.llm.push(Reply::TextAndTools(
                "Reading both.".into(),
                vec![
                    ("read_file".into(), r#"{"path":"a.txt"}"#.into()),
                    ("glob".into(), r#"{"pattern":"*.md"}"#.into()),
                ],
            ));
            let reply = setup.chat(stream).await.0.unwrap();
            let expected = vec![
                ToolCall::new("call_1", "read_file", r#"{"path":"a.txt"}"#),
                ToolCall::new("call_2", "glob", r#"{"pattern":"*.md"}"#),
            ];
            assert_eq!(reply.tool_calls, expected, "{wire:?} stream={stream}");
            assert_eq!(reply.content.as_deref(), Some("Reading both."));
            assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        }
    }
}

#[tokio::test]
async fn reasoning_is_kept_and_streamed_as_reasoning_events() {
    for wire in WIRES {
        let setup = Setup::new(wire);
        setup.llm.push(Reply::Reasoning { reasoning: "Let me think about it.".into(), text: "42".into() });
        let (reply, events) = setup.chat(true).await;
        let reply = reply.unwrap();
        assert_eq!(reply.reasoning_content.as_deref(), Some("Let me think about it."), "{wire:?}");
        assert_eq!(reply.content.as_deref(), Some("42"));
        let reasoning: String = events
            .iter()
            .filter_map(|e| if let StreamEvent::Reasoning(t) = e { Some(t.as_str()) } else { None })
            .collect();
        assert_eq!(reasoning, "Let me think about it.");
        if wire == Wire::Anthropic {
            assert_eq!(
                reply.thinking_blocks,
                Some(json!([{"type": "thinking", "thinking": "Let me think about it.", "signature": "sig-scripted"}]))
            );
        }
    }
}

#[tokio::test]
async fn reasoning_and_thinking_blocks_are_replayed_on_the_next_request() {
    for wire in WIRES {
        let setup = Setup::new(wire);
        let mut earlier = ChatMessage::text(Role::Assistant, "6 times 7 is 42");
        earlier.reasoning_content = Some("multiply".into());
        earlier.thinking_blocks = Some(json!([{"type": "thinking", "thinking": "multiply", "signature": "sig-old"}]));
        let history = vec![
            ChatMessage::text(Role::System, "sys"),
            ChatMessage::text(Role::User, "6*7?"),
            earlier,
            ChatMessage::text(Role::User, "and 6*8?"),
        ];
        send(&setup.provider, &setup.request(history), false).await.0.unwrap();
        let sent = &setup.llm.requests()[0]["messages"];
        match wire {
            Wire::OpenAiCompatible => assert_eq!(sent[2]["reasoning_content"], "multiply"),
            Wire::Anthropic => assert_eq!(
                sent[1]["content"][0],
                json!({"type": "thinking", "thinking": "multiply", "signature": "sig-old"})
            ),
        }
    }
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_waiting_at_least_that_long() {
    let setup = Setup::new(Wire::OpenAiCompatible);
    setup.llm.push(Reply::Status {
        code: 429,
        retry_after: Some(1),
        body: r#"{"error": {"message": "slow down", "type": "rate_limit_exceeded"}}"#.into(),
    });
    setup.llm.push(Reply::Text("made it".into()));
    let started = Instant::now();
    let reply = setup.chat(false).await.0.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1), "waited only {:?}", started.elapsed());
    assert_eq!(reply.content.as_deref(), Some("made it"));
    assert_eq!(setup.llm.requests().len(), 2);
}

#[tokio::test]
async fn a_500_is_retried_and_then_succeeds() {
    for wire in WIRES {
        let setup = Setup::new(wire);
        setup.llm.push(Reply::Status { code: 500, retry_after: None, body: "internal oops".into() });
        setup.llm.push(Reply::Status { code: 503, retry_after: None, body: "busy".into() });
        setup.llm.push(Reply::Text("recovered".into()));
        let reply = setup.chat(true).await.0.unwrap();
        assert_eq!(reply.content.as_deref(), Some("recovered"));
        assert_eq!(setup.llm.requests().len(), 3);
    }
}

#[tokio::test]
async fn a_401_is_not_retried_and_says_which_key_to_check() {
    for wire in WIRES {
        let setup = Setup::new(wire);
        setup.llm.push(Reply::Status {
            code: 401,
            retry_after: None,
            body: r#"{"error": {"message": "invalid api key"}}"#.into(),
        });
        let error = setup.chat(true).await.0.unwrap_err();
        assert!(matches!(error, ProviderError::Auth { .. }), "{error:?}");
        let name = setup.provider.name();
        let text = error.to_string();
        assert!(
            text.starts_with(&format!(
                "{name} refused the credentials: invalid api key (401); check providers.{name}.apiKey"
            )),
            "{text}"
        );
        assert_eq!(setup.llm.requests().len(), 1, "401 must not be retried");
    }
}

#[tokio::test]
async fn a_400_and_a_quota_429_are_not_retried() {
    let setup = Setup::new(Wire::OpenAiCompatible);
    setup.llm.push(Reply::Status {
        code: 400,
        retry_after: None,
        body: r#"{"error": {"message": "max_tokens too large"}}"#.into(),
    });
    let error = setup.chat(false).await.0.unwrap_err();
    assert_eq!(error, ProviderError::Rejected { status: 400, message: "max_tokens too large".into() });
    setup.llm.push(Reply::Status {
        code: 429,
        retry_after: None,
        body: r#"{"error": {"code": "insufficient_quota", "message": "You exceeded your current quota"}}"#.into(),
    });
    let error = setup.chat(false).await.0.unwrap_err();
    assert!(matches!(error, ProviderError::Quota { .. }), "{error:?}");
    assert_eq!(setup.llm.requests().len(), 2);
}

#[tokio::test]
async fn a_stream_cut_midway_is_retried_and_the_consumer_is_told_to_restart() {
    for wire in WIRES {
        let setup = Setup::new(wire);
        setup.llm.push(Reply::CutStream { text: "partial answer that will be cut".into(), after_chunks: 2 });
        setup.llm.push(Reply::Text("complete answer".into()));
        let (reply, events) = setup.chat(true).await;
        assert_eq!(reply.unwrap().content.as_deref(), Some("complete answer"), "{wire:?}");
        let restart = events.iter().position(|e| *e == StreamEvent::Restart).expect("a restart event");
        assert_eq!(events[..restart], [StreamEvent::Text("partial ".into()), StreamEvent::Text("answer ".into())]);
        assert_eq!(shown_text(&events), "complete answer");
        assert_eq!(setup.llm.requests().len(), 2);
    }
}

#[tokio::test]
async fn a_body_cut_midway_without_streaming_is_retried_silently() {
    for wire in WIRES {
        let setup = Setup::new(wire);
        setup.llm.push(Reply::CutStream { text: "this body will be cut in half".into(), after_chunks: 0 });
        setup.llm.push(Reply::Text("whole".into()));
        let (reply, events) = setup.chat(false).await;
        assert_eq!(reply.unwrap().content.as_deref(), Some("whole"), "{wire:?}");
        assert!(events.is_empty());
    }
}

#[tokio::test]
async fn malformed_json_fails_after_the_retries_with_a_message_naming_it() {
    for wire in WIRES {
        for stream in [false, true] {
            let setup = Setup::new(wire);
            for _ in 0..4 {
                setup.llm.push(Reply::Malformed);
            }
            let error = setup.chat(stream).await.0.unwrap_err();
            assert!(matches!(error, ProviderError::Malformed(_)), "{error:?}");
            let what = if stream { "stream" } else { "response body is not valid json" };
            assert!(
                error.to_string().contains(what) && error.to_string().contains("not valid json"),
                "{wire:?} stream={stream}: {error}"
            );
            assert_eq!(setup.llm.requests().len(), 4, "one try and three retries");
        }
    }
}

#[tokio::test]
async fn a_slow_first_token_still_succeeds() {
    for wire in WIRES {
        let setup = Setup::new(wire);
        setup.llm.push(Reply::SlowFirstToken { delay_ms: 300, text: "worth the wait".into() });
        let (reply, events) = setup.chat(true).await;
        assert_eq!(reply.unwrap().content.as_deref(), Some("worth the wait"));
        assert_eq!(shown_text(&events), "worth the wait");
        assert_eq!(setup.llm.requests().len(), 1);
    }
}

#[tokio::test]
async fn a_response_silent_past_the_idle_timeout_is_retried() {
    let mut setup = Setup::new(Wire::OpenAiCompatible);
    setup.provider = setup.provider.clone().with_idle_timeout(Duration::from_millis(200));
    // The first answer stays silent for ten minutes: only the idle timeout can end the wait
    // within the test's deadline.
    setup.llm.push(Reply::SlowFirstToken { delay_ms: 600_000, text: "too late".into() });
    setup.llm.push(Reply::Text("in time".into()));
    let reply = within_deadline("gave up after the idle timeout, not the delay", setup.chat(true)).await.0.unwrap();
    assert_eq!(reply.content.as_deref(), Some("in time"));
    assert_eq!(setup.llm.requests().len(), 2, "the silent request was retried");
}

#[tokio::test]
async fn the_anthropic_request_has_a_cached_top_level_system_prompt_and_tool_result_blocks() {
    let setup = Setup::new(Wire::Anthropic);
    let (a, b) = (
        ToolCall::new("call_1", "read_file", r#"{"path":"a"}"#),
        ToolCall::new("call_2", "read_file", r#"{"path":"b"}"#),
    );
    let mut assistant = ChatMessage::text(Role::Assistant, "");
    assistant.tool_calls = vec![a.clone(), b.clone()];
    let history = vec![
        ChatMessage::text(Role::System, "you are a test"),
        ChatMessage::text(Role::User, "read a and b"),
        assistant,
        ChatMessage::tool_result(&a, "A"),
        ChatMessage::tool_result(&b, "B"),
    ];
    let mut request = setup.request(history);
    request.tools = vec![serde_json::from_value(json!({"name": "read_file", "description": "reads a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}})).unwrap()].into();
    send(&setup.provider, &request, true).await.0.unwrap();
    let sent = &setup.llm.requests()[0];
    assert_eq!(
        sent["system"],
        json!([{"type": "text", "text": "you are a test", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(sent["tools"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(sent["tools"][0]["input_schema"]["properties"]["path"]["type"], "string");
    let messages = sent["messages"].as_array().unwrap();
    assert!(messages.iter().all(|m| m["role"] != "system" && m["role"] != "tool"));
    assert_eq!(
        messages[1]["content"][0],
        json!({"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a"}})
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "A"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": "B"},
        ]})
    );
}

#[tokio::test]
async fn the_registry_picks_custom_when_only_an_api_base_is_configured() {
    let llm = ScriptedLlm::start();
    let config = config(
        json!({"agents": {"defaults": {"model": "some-local-model"}}, "providers": {"custom": {"apiBase": llm.base_url()}}}),
    );
    let provider = Provider::from_config(&config.llm()).unwrap();
    assert_eq!(
        (provider.name(), provider.wire_model(), provider.wire()),
        ("custom", "some-local-model", Wire::OpenAiCompatible)
    );
    llm.push(Reply::Text("local hello".into()));
    let request = ChatRequest {
        model: "some-local-model".into(),
        messages: shared([ChatMessage::text(Role::User, "hi")]),
        tools: Default::default(),
        max_tokens: 64,
        temperature: None,
        reasoning_effort: None,
    };
    let reply = send(&provider, &request, false).await.0.unwrap();
    assert_eq!(reply.content.as_deref(), Some("local hello"));
    assert_eq!(header(&llm.request_headers()[0], "authorization"), None, "no key, no auth header");
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_network_error_after_the_retries() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = config(
        json!({"agents": {"defaults": {"model": "m"}}, "providers": {"custom": {"apiBase": format!("http://127.0.0.1:{port}/v1")}}}),
    );
    let provider = Provider::from_config(&config.llm()).unwrap().with_retry_delays(FAST_RETRIES.to_vec());
    let request = ChatRequest {
        model: "m".into(),
        messages: shared([ChatMessage::text(Role::User, "hi")]),
        tools: Default::default(),
        max_tokens: 64,
        temperature: None,
        reasoning_effort: None,
    };
    let error = send(&provider, &request, true).await.0.unwrap_err();
    assert!(matches!(error, ProviderError::Network(_)), "{error:?}");
    assert!(error.to_string().starts_with("cannot reach the provider: "), "{error}");
}
