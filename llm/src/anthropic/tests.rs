//! Unit tests of the Anthropic body, history conversion and reply parsing.

use serde_json::json;

use super::convert::tool_id;
use super::*;
use crate::message::{ChatMessage, Role};
use crate::types::Usage;

fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: "claude-test".into(),
        messages: messages.into_iter().map(std::sync::Arc::new).collect(),
        tools: std::sync::Arc::default(),
        max_tokens: 1000,
        temperature: Some(0.1),
        reasoning_effort: None,
    }
}

fn tool(name: &str) -> oxibot_proto::ToolSpec {
    serde_json::from_value(
        json!({"name": name, "description": "does things", "parameters": {"type": "object", "properties": {}}}),
    )
    .unwrap()
}

/// A history with one round of two parallel tool calls.
fn tool_round() -> Vec<ChatMessage> {
    let (a, b) = (ToolCall::new("call_1", "read_file", r#"{"path":"a"}"#), ToolCall::new("call.2", "glob", "not json"));
    let mut assistant = ChatMessage::text(Role::Assistant, "checking");
    assistant.tool_calls = vec![a.clone(), b.clone()];
    assistant.thinking_blocks =
        Some(json!([{"type": "thinking", "thinking": "plan", "signature": "sig"}, {"type": "unknown"}]));
    vec![
        ChatMessage::text(Role::System, "you are terse"),
        ChatMessage::text(Role::User, "look"),
        assistant,
        ChatMessage::tool_result(&a, "A"),
        ChatMessage::tool_result(&b, "B"),
    ]
}

#[test]
fn the_system_prompt_is_top_level_and_tool_results_share_one_user_turn() {
    let body = request_body(&request(tool_round()), "claude-test", false);
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "you are terse", "cache_control": {"type": "ephemeral"}}])
    );
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[0], json!({"role": "user", "content": "look"}));
    let b_id = tool_id("call.2");
    assert_eq!(
        messages[1]["content"],
        json!([
            {"type": "thinking", "thinking": "plan", "signature": "sig"},
            {"type": "text", "text": "checking"},
            {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a"}},
            {"type": "tool_use", "id": b_id, "name": "glob", "input": {}, "cache_control": {"type": "ephemeral"}},
        ])
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "A"},
            {"type": "tool_result", "tool_use_id": b_id, "content": "B"},
        ]})
    );
}

#[test]
fn tools_are_defined_with_input_schemas_and_the_last_is_cached() {
    let mut req = request(vec![ChatMessage::text(Role::User, "hi")]);
    req.tools = vec![tool("a"), tool("b")].into();
    let body = request_body(&req, "claude-test", true);
    assert_eq!(
        body["tools"][0],
        json!({"name": "a", "description": "does things", "input_schema": {"type": "object", "properties": {}}})
    );
    assert_eq!(body["tools"][1]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(
        (body["tool_choice"].clone(), body["stream"].clone(), body["temperature"].clone()),
        (json!({"type": "auto"}), json!(true), json!(0.1))
    );
}

#[test]
fn reasoning_effort_turns_on_thinking_with_a_budget_and_drops_temperature() {
    let mut req = request(vec![ChatMessage::text(Role::User, "hi")]);
    req.reasoning_effort = Some("medium".into());
    let body = request_body(&req, "claude-test", false);
    assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 4096}));
    assert_eq!((body["max_tokens"].clone(), body.get("temperature")), (json!(8192), None));
    req.reasoning_effort = Some("none".into());
    assert!(request_body(&req, "claude-test", false).get("thinking").is_none());
}

#[test]
fn roles_alternate_and_the_conversation_starts_and_ends_with_the_user() {
    let messages = vec![
        ChatMessage::text(Role::Assistant, "earlier answer"),
        ChatMessage::text(Role::User, "one"),
        ChatMessage::text(Role::User, "two"),
        ChatMessage::text(Role::Assistant, "prefill"),
    ];
    let body = request_body(&request(messages), "claude-test", false);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "(conversation continued)"},
            {"role": "assistant", "content": [{"type": "text", "text": "earlier answer", "cache_control": {"type": "ephemeral"}}]},
            {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        ])
    );
}

#[test]
fn images_become_image_blocks() {
    let mut user = ChatMessage::text(Role::User, "");
    user.content = json!([{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]);
    let body = request_body(&request(vec![user]), "claude-test", false);
    assert_eq!(
        body["messages"][0]["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
    );
}

#[test]
fn tool_ids_are_made_acceptable_without_colliding() {
    assert_eq!(tool_id("toolu_01-ok"), "toolu_01-ok");
    assert!(tool_id("a.b").starts_with("a_b_"));
    assert_ne!(tool_id("a.b"), tool_id("a|b"));
}

#[test]
fn a_whole_message_is_read_with_thinking_tool_use_and_cache_counts() {
    let reply = json!({"type": "message", "stop_reason": "tool_use", "content": [
        {"type": "thinking", "thinking": "plan", "signature": "sig"},
        {"type": "text", "text": "looking"},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}}],
        "usage": {"input_tokens": 5, "cache_creation_input_tokens": 2, "cache_read_input_tokens": 10, "output_tokens": 7}});
    let parsed = parse_message(&reply, "anthropic").unwrap();
    assert_eq!(parsed.content.as_deref(), Some("looking"));
    assert_eq!(parsed.tool_calls, vec![ToolCall::new("toolu_1", "read_file", r#"{"path":"a"}"#)]);
    assert_eq!(parsed.thinking_blocks, Some(json!([{"type": "thinking", "thinking": "plan", "signature": "sig"}])));
    assert_eq!(parsed.reasoning_content.as_deref(), Some("plan"));
    assert_eq!(parsed.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(parsed.usage, Usage { prompt_tokens: 17, completion_tokens: 7, cached_tokens: 10, reasoning_tokens: 0 });
}

fn read_events(events: &[serde_json::Value]) -> (Result<ChatResponse, ProviderError>, Vec<StreamEvent>) {
    let mut seen = Vec::new();
    let mut on_event = |e: StreamEvent| seen.push(e);
    let mut reader = super::stream::EventReader::new(Collector::new(Some(&mut on_event)), "anthropic");
    let mut done = false;
    for event in events {
        match reader.on_event(&event.to_string()) {
            Ok(stop) => done = stop,
            Err(error) => return (Err(error), Vec::new()),
        }
    }
    let result = reader.finish(done);
    (result, seen)
}

#[test]
fn a_streamed_message_assembles_thinking_text_and_tool_input() {
    let events = [
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 9, "cache_read_input_tokens": 3, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-1"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "ok"}}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "glob", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"pattern\":"}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\"*\"}"}}),
        json!({"type": "ping"}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ];
    let (reply, seen) = read_events(&events);
    let reply = reply.unwrap();
    assert_eq!(reply.tool_calls, vec![ToolCall::new("toolu_1", "glob", r#"{"pattern":"*"}"#)]);
    assert_eq!(reply.thinking_blocks, Some(json!([{"type": "thinking", "thinking": "hmm", "signature": "sig-1"}])));
    assert_eq!(reply.usage, Usage { prompt_tokens: 12, completion_tokens: 5, cached_tokens: 3, reasoning_tokens: 0 });
    assert_eq!(seen, vec![StreamEvent::Reasoning("hmm".into()), StreamEvent::Text("ok".into())]);
}

#[test]
fn a_stream_error_event_and_a_missing_message_stop_are_errors() {
    let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    assert_eq!(
        read_events(&[overloaded]).0.unwrap_err(),
        ProviderError::Server { status: 529, message: "Overloaded".into() }
    );
    let partial = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "par"}});
    assert!(matches!(read_events(&[partial]).0, Err(ProviderError::StreamCut(_))));
}

#[test]
fn events_with_unknown_fields_escapes_and_redacted_thinking_are_read() {
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "model": "m", "content": [], "usage": {"input_tokens": 4}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "opaque"}}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "Hi "}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "\"you\"\n", "new": true}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "future_delta", "text": "ignored"}}),
        json!({"type": "something_new", "index": 7, "payload": {"x": 1}}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 3}}),
        json!({"type": "message_stop", "extra": 1}),
    ];
    let (reply, seen) = read_events(&events);
    let reply = reply.unwrap();
    assert_eq!(reply.content.as_deref(), Some("Hi \"you\"\n"));
    assert_eq!(reply.thinking_blocks, Some(json!([{"type": "redacted_thinking", "data": "opaque"}])));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert_eq!(reply.usage, Usage { prompt_tokens: 4, completion_tokens: 3, cached_tokens: 0, reasoning_tokens: 0 });
    assert_eq!(seen, vec![StreamEvent::Text("Hi ".into()), StreamEvent::Text("\"you\"\n".into())]);
}

#[test]
fn an_event_of_the_wrong_shape_is_a_clear_error() {
    for bad in ["{not json", r#"{"type": "content_block_delta", "index": "one"}"#, r#"{"type": 5}"#] {
        let mut reader = super::stream::EventReader::new(Collector::new(None), "anthropic");
        let error = reader.on_event(bad).unwrap_err();
        assert!(
            matches!(&error, ProviderError::Malformed(text) if text.starts_with("stream event is not valid json")),
            "{bad}: {error}"
        );
    }
}
