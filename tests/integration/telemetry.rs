//! OpenTelemetry export (issue 33) through the real `oxibot agent`, the scripted LLM and a
//! real OTLP receiver (Arize Phoenix): a tool-using turn arrives as one trace — the turn's
//! span with a `chat` span per model call and an `execute_tool` span per call as its
//! children — with the GenAI attributes, and message contents only when the user opts in.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use oxibot_tests::llm::{COMPLETION_TOKENS, PROMPT_TOKENS, Reply};
use oxibot_tests::phoenix::{Phoenix, attribute};
use oxibot_tests::stderr;
use serde_json::{Value, json};

use crate::agent::AgentEnv;

/// An agent whose config exports to `phoenix`, contents included or not.
fn exporting_agent(phoenix: &Phoenix, include_content: bool) -> AgentEnv {
    let env = AgentEnv::new();
    let path = env.home.path().join("config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["telemetry"] = json!({"otlpEndpoint": phoenix.otlp_endpoint(), "includeContent": include_content});
    env.write_config(&config);
    env
}

/// Runs a turn that reads a file with `read_file`, then answers.
fn tool_using_turn(env: &AgentEnv, question: &str) {
    env.write("notes.md", "the secret word is marmalade\n");
    env.llm.push(Reply::ToolCalls(vec![("read_file".into(), r#"{"path": "notes.md"}"#.into())]));
    env.llm.push(Reply::Text("The secret word is marmalade.".into()));
    let out = env.agent(question);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
}

/// The spans of the one trace whose turn span is not in `known`, once all four arrived.
fn new_trace(phoenix: &Phoenix, known: &BTreeSet<String>) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let spans = phoenix.spans();
        let traces: BTreeSet<String> = spans
            .iter()
            .map(|span| span["context"]["trace_id"].as_str().unwrap().to_owned())
            .filter(|trace| !known.contains(trace))
            .collect();
        if let Some(trace) = traces.iter().next() {
            let of_trace: Vec<Value> =
                spans.into_iter().filter(|span| span["context"]["trace_id"] == trace.as_str()).collect();
            if of_trace.len() >= 4 {
                assert_eq!(traces.len(), 1, "one turn makes one trace: {traces:?}");
                return of_trace;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the turn's spans did not arrive:\n{}", phoenix.log());
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn traces_of(spans: &[Value]) -> BTreeSet<String> {
    spans.iter().map(|span| span["context"]["trace_id"].as_str().unwrap().to_owned()).collect()
}

fn named<'a>(spans: &'a [Value], operation: &str) -> Vec<&'a Value> {
    spans.iter().filter(|span| attribute(span, "gen_ai.operation.name") == Some(&json!(operation))).collect()
}

#[test]
fn a_tool_using_turn_reaches_a_real_otlp_receiver_as_one_trace_with_the_genai_attributes() {
    let phoenix = Phoenix::start();
    let env = exporting_agent(&phoenix, false);
    tool_using_turn(&env, "what is the secret word?");
    let spans = new_trace(&phoenix, &BTreeSet::new());
    assert_eq!(spans.len(), 4, "a turn span, two model calls and one tool call: {spans:#?}");

    let turn = named(&spans, "invoke_agent");
    assert_eq!(turn.len(), 1, "{spans:#?}");
    let turn = turn[0];
    assert!(turn["parent_id"].is_null(), "the turn's span is the trace's root: {turn:#}");
    assert_eq!(attribute(turn, "oxibot.usage.source"), Some(&json!("user")), "{turn:#}");
    assert_eq!(attribute(turn, "gen_ai.conversation.id"), Some(&json!("cli:direct")), "{turn:#}");
    assert_eq!(attribute(turn, "gen_ai.usage.input_tokens"), Some(&json!(2 * PROMPT_TOKENS)), "{turn:#}");
    let turn_id = &turn["context"]["span_id"];

    let chats = named(&spans, "chat");
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for chat in &chats {
        assert_eq!(&chat["parent_id"], turn_id, "a model call is the turn's child: {chat:#}");
        assert_eq!(chat["name"], "chat test-model");
        assert_eq!(attribute(chat, "gen_ai.request.model"), Some(&json!("test-model")), "{chat:#}");
        assert_eq!(attribute(chat, "gen_ai.response.model"), Some(&json!("test-model")), "{chat:#}");
        assert_eq!(attribute(chat, "gen_ai.provider.name"), Some(&json!("custom")), "{chat:#}");
        assert_eq!(attribute(chat, "gen_ai.usage.input_tokens"), Some(&json!(PROMPT_TOKENS)), "{chat:#}");
        assert_eq!(attribute(chat, "gen_ai.usage.output_tokens"), Some(&json!(COMPLETION_TOKENS)), "{chat:#}");
        assert!(attribute(chat, "gen_ai.input.messages").is_none(), "no contents unless asked for: {chat:#}");
    }

    let tools = named(&spans, "execute_tool");
    assert_eq!(tools.len(), 1, "{spans:#?}");
    let tool = tools[0];
    assert_eq!(&tool["parent_id"], turn_id, "a tool call is the turn's child: {tool:#}");
    assert_eq!(tool["name"], "execute_tool read_file");
    assert_eq!(attribute(tool, "gen_ai.tool.name"), Some(&json!("read_file")), "{tool:#}");
    assert_eq!(attribute(tool, "gen_ai.tool.call.id"), Some(&json!("call_1")), "{tool:#}");
    assert!(attribute(tool, "gen_ai.tool.call.result").is_none(), "no contents unless asked for: {tool:#}");

    // Opted in, the same turn carries the prompt, the reply and the tool's result.
    let known = traces_of(&phoenix.spans());
    let env = exporting_agent(&phoenix, true);
    tool_using_turn(&env, "what is the secret word, with contents?");
    let spans = new_trace(&phoenix, &known);
    let first_chat = named(&spans, "chat").into_iter().find(|chat| {
        attribute(chat, "gen_ai.output.messages").and_then(Value::as_str).is_some_and(|out| out.contains("read_file"))
    });
    let first_chat = first_chat.unwrap_or_else(|| panic!("a model call with its reply: {spans:#?}"));
    let input = attribute(first_chat, "gen_ai.input.messages").and_then(Value::as_str).unwrap_or_default();
    assert!(input.contains("with contents?"), "the prompt is in the span: {first_chat:#}");
    let tool = named(&spans, "execute_tool")[0];
    let stored = env.session_lines().into_iter().find(|line| line["role"] == "tool").expect("a tool result");
    let result = attribute(tool, "gen_ai.tool.call.result").and_then(Value::as_str);
    assert_eq!(result, stored["content"].as_str(), "the tool's result is in the span: {tool:#}");
}
