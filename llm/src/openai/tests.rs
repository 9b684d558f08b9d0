//! Unit tests of the Chat Completions body and reply parsing.

use serde_json::json;

use super::stream::ChunkReader;
use super::*;
use crate::message::{ChatMessage, Role};
use crate::types::Usage;

fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: "gpt-4.1".into(),
        messages: messages.into_iter().map(std::sync::Arc::new).collect(),
        tools: std::sync::Arc::default(),
        max_tokens: 100,
        temperature: Some(0.2),
        reasoning_effort: None,
    }
}

/// The body as JSON, for tests that look at its fields.
fn request_body(request: &ChatRequest, model: &str, stream: bool, provider: &str) -> Value {
    serde_json::from_slice(&super::request_body(request, model, stream, provider).unwrap()).unwrap()
}

/// The body built the way it was before it was written straight into bytes: a `Value` tree,
/// which orders every map's keys. The bytes sent must stay exactly these.
fn value_body(request: &ChatRequest, model: &str, stream: bool, provider: &str) -> Vec<u8> {
    let effort = request.reasoning_effort.as_deref().map(str::to_lowercase).filter(|e| !e.is_empty());
    let messages: Vec<Value> = request.messages.iter().map(|m| value_message(m)).collect();
    let mut body = json!({"model": model, "messages": messages, "stream": stream});
    let tokens_key = if wants_max_completion_tokens(provider, model) { "max_completion_tokens" } else { "max_tokens" };
    body[tokens_key] = json!(request.max_tokens.max(1));
    if let Some(temperature) = request.temperature.filter(|_| accepts_temperature(model, effort.as_deref())) {
        body["temperature"] = json!(temperature);
    }
    if let Some(effort) = effort.filter(|e| e != "none" && e != "adaptive") {
        body["reasoning_effort"] = json!(effort);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request.tools.iter().map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}})).collect();
        body["tools"] = json!(tools);
        body["tool_choice"] = json!("auto");
    }
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    serde_json::to_vec(&body).unwrap()
}

fn value_message(message: &ChatMessage) -> Value {
    let mut out = serde_json::Map::new();
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    out.insert("role".into(), json!(role));
    let calls_tools = message.role == Role::Assistant && !message.tool_calls.is_empty();
    let blank = if calls_tools || message.role == Role::Assistant && message.content.is_null() {
        Value::Null
    } else {
        json!("(empty)")
    };
    let content = match &message.content {
        Value::String(text) if text.is_empty() => blank,
        Value::Array(parts) => {
            let kept: Vec<Value> = parts
                .iter()
                .filter(|p| !(p.get("type").and_then(Value::as_str) == Some("text") && text_of(&p["text"]).is_empty()))
                .cloned()
                .collect();
            if kept.is_empty() { blank } else { Value::Array(kept) }
        }
        Value::Null => blank,
        other => other.clone(),
    };
    out.insert("content".into(), content);
    if !message.tool_calls.is_empty() {
        out.insert("tool_calls".into(), json!(message.tool_calls));
    }
    if let Some(id) = &message.tool_call_id {
        out.insert("tool_call_id".into(), json!(id));
    }
    if let Some(name) = &message.name {
        out.insert("name".into(), json!(name));
    }
    if let Some(reasoning) = &message.reasoning_content {
        out.insert("reasoning_content".into(), json!(reasoning));
    }
    Value::Object(out)
}

/// Messages of every shape the wire knows: empty text, tool calls, tool results, content
/// parts (one of them empty), reasoning, local fields, text that needs escaping.
fn every_kind_of_message() -> Vec<ChatMessage> {
    let call = ToolCall::new("call_1", "read_file", r#"{"path":"a \"quoted\" é"}"#);
    let mut assistant = ChatMessage::text(Role::Assistant, "");
    assistant.tool_calls = vec![call.clone(), ToolCall::new("call_2", "exec", "{}")];
    assistant.reasoning_content = Some("thinking\nit over".into());
    assistant.thinking_blocks = Some(json!([{"type": "thinking", "thinking": "x"}]));
    assistant.timestamp = Some("2026-01-01T00:00:00".into());
    assistant.extra.insert("custom".into(), json!({"z": 1, "a": [true, null]}));
    let mut parts = ChatMessage::text(Role::User, "");
    parts.content = json!([{"type": "text", "text": "look"}, {"type": "text", "text": ""},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}]);
    let mut empty_parts = ChatMessage::text(Role::User, "");
    empty_parts.content = json!([{"type": "text", "text": ""}]);
    let mut null_assistant = ChatMessage::text(Role::Assistant, "");
    null_assistant.content = Value::Null;
    let mut number = ChatMessage::text(Role::User, "");
    number.content = json!(42);
    vec![
        ChatMessage::text(Role::System, "be brief\n\t\u{1} \u{2028} 🐈"),
        ChatMessage::text(Role::User, "read a"),
        assistant,
        ChatMessage::tool_result(&call, ""),
        ChatMessage::tool_result(&call, "</script> \\ done"),
        parts,
        empty_parts,
        null_assistant,
        number,
        ChatMessage::text(Role::Assistant, "ok"),
    ]
}

#[test]
fn the_body_is_byte_for_byte_the_one_a_value_tree_gives() {
    let mut req = request(every_kind_of_message());
    let mut exec = tool("exec");
    exec.parameters = json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]});
    req.tools = vec![tool("read_file"), exec].into();
    for (model, provider, effort, temperature, stream) in [
        ("gpt-4.1", "custom", None, Some(0.2), true),
        ("gpt-4.1", "openai", Some("High"), Some(0.7), false),
        ("o3-mini", "custom", Some("none"), Some(1.0), true),
        ("deepseek-reasoner", "deepseek", Some("adaptive"), None, false),
        ("m", "custom", Some(""), Some(f64::NAN), true),
    ] {
        req.reasoning_effort = effort.map(str::to_owned);
        req.temperature = temperature;
        let bytes = super::request_body(&req, model, stream, provider).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            String::from_utf8(value_body(&req, model, stream, provider)).unwrap(),
            "{model} {provider}"
        );
    }
    req.tools = std::sync::Arc::default();
    let bytes = super::request_body(&req, "m", false, "custom").unwrap();
    assert_eq!(bytes, value_body(&req, "m", false, "custom"));
}

#[test]
fn a_conversation_kept_encoded_gives_the_bytes_encoding_it_afresh_gives() {
    let messages = every_kind_of_message();
    let mut conversation = Conversation::default();
    let mut req = request(vec![ChatMessage::text(Role::System, "You are \"careful\".\n")]);
    req.tools = vec![tool("read_file")].into();
    let mut body = |req: &ChatRequest| {
        let kept = encode_request(req, Some(&mut conversation), "gpt-4.1", true, "custom", None).unwrap();
        assert_eq!(
            String::from_utf8(kept).unwrap(),
            String::from_utf8(value_body(req, "gpt-4.1", true, "custom")).unwrap()
        );
    };
    // The conversation grows, is answered again, moves its start forward, changes a message
    // (a tool result cut to fit), shrinks, and loses its system prompt.
    for message in &messages {
        req.messages.push(std::sync::Arc::new(message.clone()));
        body(&req);
        body(&req);
    }
    req.messages.remove(1);
    body(&req);
    let last = req.messages.len() - 1;
    req.messages[last] = std::sync::Arc::new(ChatMessage::text(Role::User, "changed"));
    body(&req);
    req.messages.truncate(2);
    body(&req);
    req.messages.remove(0);
    body(&req);
}

#[test]
fn kept_system_prompts_and_tool_lists_give_the_bytes_encoding_them_gives() {
    let prefixes = PrefixCache::default();
    let messages = every_kind_of_message();
    let mut req = request(vec![ChatMessage::text(Role::System, "You are \"careful\".\n")]);
    req.messages.extend(messages.into_iter().map(std::sync::Arc::new));
    req.tools = vec![tool("read_file"), tool("only_at_first")].into();
    let body = |req: &ChatRequest, prefixes: Option<&PrefixCache>| {
        String::from_utf8(encode_request(req, None, "gpt-4.1", true, "custom", prefixes).unwrap()).unwrap()
    };
    for _ in 0..3 {
        assert_eq!(body(&req, Some(&prefixes)), body(&req, None));
    }
    req.messages[0] = std::sync::Arc::new(ChatMessage::text(Role::System, "A new prompt."));
    req.tools = vec![tool("read_file")].into();
    let changed = body(&req, Some(&prefixes));
    assert_eq!(changed, body(&req, None), "a changed prompt or tool list was served from the old entry");
    assert!(changed.contains("A new prompt.") && !changed.contains("only_at_first"));
    req.messages.remove(0);
    assert_eq!(body(&req, Some(&prefixes)), body(&req, None), "a request without a system prompt");
}

fn tool(name: &str) -> oxibot_proto::ToolSpec {
    serde_json::from_value(json!({"name": name, "description": "reads", "parameters": {"type": "object"}})).unwrap()
}

#[test]
fn messages_go_out_without_local_fields_and_with_reasoning_replayed() {
    let call = ToolCall::new("call_1", "read_file", r#"{"path":"a"}"#);
    let mut assistant = ChatMessage::text(Role::Assistant, "");
    assistant.tool_calls = vec![call.clone()];
    assistant.reasoning_content = Some("thinking it over".into());
    assistant.thinking_blocks = Some(json!([{"type": "thinking", "thinking": "x", "signature": "s"}]));
    assistant.timestamp = Some("2026-01-01T00:00:00".into());
    assistant.extra.insert("custom".into(), json!(1));
    let messages = vec![
        ChatMessage::text(Role::System, "be brief"),
        ChatMessage::text(Role::User, "read a"),
        assistant,
        ChatMessage::tool_result(&call, ""),
    ];
    let body = request_body(&request(messages), "gpt-4.1", false, "custom");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "read a"},
            {"role": "assistant", "content": null, "reasoning_content": "thinking it over",
             "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]},
            {"role": "tool", "content": "(empty)", "tool_call_id": "call_1", "name": "read_file"},
        ])
    );
}

#[test]
fn the_body_carries_tools_limits_and_stream_options() {
    let mut req = request(vec![ChatMessage::text(Role::User, "hi")]);
    req.tools = vec![tool("read_file")].into();
    let body = request_body(&req, "my-model", true, "custom");
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "read_file", "description": "reads", "parameters": {"type": "object"}}}])
    );
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!((body["max_tokens"].clone(), body["temperature"].clone()), (json!(100), json!(0.2)));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert!(request_body(&req, "my-model", false, "custom").get("stream_options").is_none());
}

#[test]
fn reasoning_models_get_max_completion_tokens_and_no_temperature() {
    let mut req = request(vec![ChatMessage::text(Role::User, "hi")]);
    let body = request_body(&req, "o3-mini", false, "custom");
    assert_eq!(
        (body.get("max_tokens"), body["max_completion_tokens"].clone(), body.get("temperature")),
        (None, json!(100), None)
    );
    req.reasoning_effort = Some("High".into());
    let body = request_body(&req, "deepseek-reasoner", false, "deepseek");
    assert_eq!((body["reasoning_effort"].clone(), body.get("temperature")), (json!("high"), None));
    assert!(
        request_body(&req, "gpt-4.1", false, "openai").get("max_tokens").is_none(),
        "openai itself takes max_completion_tokens"
    );
}

#[test]
fn a_whole_reply_is_read_with_tool_calls_reasoning_and_cached_tokens() {
    let reply = json!({"choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": "let me look", "reasoning_content": "hmm",
        "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}},
                       {"id": "call_9", "type": "function", "function": {"name": "list_dir", "arguments": ""}}]}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 16},
                  "completion_tokens_details": {"reasoning_tokens": 4}}});
    let parsed = parse_response(&reply, "custom").unwrap();
    assert_eq!(parsed.content.as_deref(), Some("let me look"));
    assert_eq!(parsed.reasoning_content.as_deref(), Some("hmm"));
    assert_eq!(parsed.tool_calls[0], ToolCall::new("call_9", "read_file", "{\"path\":\"a\"}"));
    assert_ne!(parsed.tool_calls[1].id, "call_9", "a repeated id is replaced");
    assert_eq!(parsed.tool_calls[1].function.arguments, "{}");
    assert_eq!(parsed.usage, Usage { prompt_tokens: 20, completion_tokens: 7, cached_tokens: 16, reasoning_tokens: 4 });
    assert_eq!(parsed.finish_reason.as_deref(), Some("tool_calls"));
}

#[test]
fn a_reply_without_choices_or_with_an_error_object_is_an_error() {
    assert!(
        matches!(parse_response(&json!({"id": "x"}), "custom"), Err(ProviderError::Malformed(m)) if m.starts_with("reply has no choices"))
    );
    let error = json!({"error": {"message": "overloaded", "type": "server_error"}});
    assert_eq!(
        parse_response(&error, "custom").unwrap_err(),
        ProviderError::Server { status: 500, message: "overloaded".into() }
    );
}

fn read_stream(chunks: &[serde_json::Value], done: bool) -> (Result<ChatResponse, ProviderError>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let mut on_event = |e: StreamEvent| events.push(e);
    let mut reader = ChunkReader::new(Collector::new(Some(&mut on_event)), "custom");
    for chunk in chunks {
        assert!(!reader.on_event(&chunk.to_string()).unwrap());
    }
    if done {
        assert!(reader.on_event("[DONE]").unwrap());
    }
    let result = reader.finish(done);
    (result, events)
}

#[test]
fn streamed_tool_calls_are_assembled_by_index() {
    let delta = |d: serde_json::Value| json!({"choices": [{"index": 0, "delta": d, "finish_reason": null}]});
    let chunks = [
        delta(json!({"role": "assistant", "reasoning_content": "plan"})),
        delta(json!({"content": "on it"})),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": ""}}]}),
        ),
        delta(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "glob", "arguments": "{\"pat"}}]}),
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\": "}}]})),
        delta(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"a\"}"}}, {"index": 1, "function": {"arguments": "tern\":\"*\"}"}}]}),
        ),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 1}}}),
    ];
    let (reply, events) = read_stream(&chunks, true);
    let reply = reply.unwrap();
    assert_eq!(
        reply.tool_calls,
        vec![
            ToolCall::new("call_a", "read_file", "{\"path\": \"a\"}"),
            ToolCall::new("call_b", "glob", "{\"pattern\":\"*\"}")
        ]
    );
    assert_eq!((reply.content.as_deref(), reply.reasoning_content.as_deref()), (Some("on it"), Some("plan")));
    assert_eq!(reply.usage, Usage { prompt_tokens: 3, completion_tokens: 4, cached_tokens: 1, reasoning_tokens: 0 });
    assert_eq!(events, vec![StreamEvent::Reasoning("plan".into()), StreamEvent::Text("on it".into())]);
}

#[test]
fn a_stream_without_done_is_cut_unless_it_finished() {
    let text = json!({"choices": [{"delta": {"content": "par"}}]});
    assert!(matches!(read_stream(std::slice::from_ref(&text), false).0, Err(ProviderError::StreamCut(_))));
    let finished = json!({"choices": [{"delta": {}, "finish_reason": "stop"}]});
    assert_eq!(read_stream(&[text, finished], false).0.unwrap().content.as_deref(), Some("par"));
}

#[test]
fn a_chunk_that_is_not_json_names_the_problem() {
    let mut reader = ChunkReader::new(Collector::new(None), "custom");
    let error = reader.on_event("{not json").unwrap_err();
    assert!(
        error.to_string().starts_with("unreadable response from the provider: stream chunk is not valid json"),
        "{error}"
    );
}

#[test]
fn every_chunk_shape_is_read_without_a_json_tree() {
    let chunks = [
        // Reasoning under OpenRouter's name, with fields nobody reads.
        json!({"id": "x", "object": "chat.completion.chunk", "system_fingerprint": null,
               "choices": [{"index": 0, "delta": {"role": "assistant", "reasoning": "think", "extra": {"a": [1]}},
                            "logprobs": null, "finish_reason": null}]}),
        // A null `reasoning_content` falls back to `reasoning`.
        json!({"choices": [{"delta": {"reasoning_content": null, "reasoning": "ing"}}]}),
        // Content as a list of parts, escapes in the text, a delta of null.
        json!({"choices": [{"delta": {"content": [{"type": "text", "text": "a \"quoted\"\n"}, {"type": "image"}]}}]}),
        json!({"choices": [{"delta": null}]}),
        json!({"choices": [{"delta": {"content": "é ✓", "tool_calls": null}}]}),
        // A piece without `index` belongs to the call at its position in the chunk.
        json!({"choices": [{"delta": {"tool_calls": [{"id": "call_\u{e9}", "function": {"name": "glob", "arguments": "{}"}}]}}]}),
        json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
        // A usage-only chunk, with a second choice nobody reads.
        json!({"choices": null, "usage": {"prompt_tokens": 5, "completion_tokens": 2, "prompt_cache_hit_tokens": 4,
               "completion_tokens_details": {"reasoning_tokens": 1}}}),
        json!({"choices": [], "usage": null}),
    ];
    let (reply, events) = read_stream(&chunks, true);
    let reply = reply.unwrap();
    assert_eq!(reply.reasoning_content.as_deref(), Some("thinking"));
    assert_eq!(reply.content.as_deref(), Some("a \"quoted\"\né ✓"));
    assert_eq!(reply.tool_calls, vec![ToolCall::new("call_é", "glob", "{}")]);
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(reply.usage, Usage { prompt_tokens: 5, completion_tokens: 2, cached_tokens: 4, reasoning_tokens: 1 });
    assert_eq!(
        events,
        vec![
            StreamEvent::Reasoning("think".into()),
            StreamEvent::Reasoning("ing".into()),
            StreamEvent::Text("a \"quoted\"\n".into()),
            StreamEvent::Text("é ✓".into()),
        ]
    );
}

#[test]
fn an_error_object_inside_the_stream_is_the_error_the_caller_sees() {
    let mut reader = ChunkReader::new(Collector::new(None), "custom");
    let chunk = json!({"error": {"code": "rate_limit_exceeded", "message": "slow down"}}).to_string();
    assert_eq!(
        reader.on_event(&chunk).unwrap_err(),
        ProviderError::RateLimited { retry_after: None, message: "slow down".into() }
    );
    assert!(!reader.on_event(&json!({"error": null, "choices": []}).to_string()).unwrap());
}

#[test]
fn a_chunk_of_the_wrong_shape_is_a_clear_error() {
    for bad in [r#"{"choices": "none"}"#, r#"{"choices": [{"finish_reason": 3}]}"#, r#"[1, 2]"#] {
        let mut reader = ChunkReader::new(Collector::new(None), "custom");
        let error = reader.on_event(bad).unwrap_err();
        assert!(
            matches!(&error, ProviderError::Malformed(text) if text.starts_with("stream chunk is not valid json (invalid type")),
            "{bad}: {error}"
        );
    }
}
