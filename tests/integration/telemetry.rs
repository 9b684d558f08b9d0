//! OpenTelemetry export (issue 33) through the real `oxibot agent`, the scripted LLM and a
//! real OTLP receiver (Arize Phoenix): a tool-using turn arrives as one trace — the turn's
//! span with a `chat` span per model call and an `execute_tool` span per call as its
//! children — with the GenAI attributes, and message contents only when the user opts in;
//! the model calls outside a turn (a helper, Dream's two phases, consolidation, the heartbeat's
//! decision) and recall's embedding requests arrive as spans with their source and tokens; the
//! token and duration histograms reach a real OTLP metrics receiver with their attributes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use oxibot_tests::llm::{COMPLETION_TOKENS, PROMPT_TOKENS, Reply};
use oxibot_tests::otlp_metrics::{MetricsReceiver, point_attribute};
use oxibot_tests::phoenix::{Phoenix, attribute};
use oxibot_tests::procs::wait_until;
use oxibot_tests::stderr;
use serde_json::{Value, json};

use crate::agent::AgentEnv;

/// The model the scripted provider says answered, where a test asks it to name one.
const ANSWERING_MODEL: &str = "test-model-2026-11-27";

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
    // The provider names the model that answered, as a router or an alias does.
    env.llm.answer_as(ANSWERING_MODEL);
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
        assert_eq!(attribute(chat, "gen_ai.response.model"), Some(&json!(ANSWERING_MODEL)), "{chat:#}");
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

/// Words of Dream's analysis prompt (templates/agent/dream_phase1.md).
const DREAM_PHASE1: &str = "maintain the long-term memory";
/// Words of Dream's editing prompt (templates/agent/dream_phase2.md).
const DREAM_PHASE2: &str = "apply a list of findings";
/// Words of a helper's system prompt (templates/agent/subagent.md).
const HELPER: &str = "The main assistant started you for one task";
/// Words of consolidation's prompt.
const CONSOLIDATE: &str = "keep the archive";
/// Words of the heartbeat's notify-or-not decision prompt.
const NOTIFY_DECISION: &str = "You decide whether the result of a scheduled background check";

/// The first span Phoenix holds that `matches`, waiting up to a minute for it.
fn span_where(phoenix: &Phoenix, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
    let mut found = None;
    let arrived = wait_until(Duration::from_secs(60), || {
        found = phoenix.spans().into_iter().find(|span| matches(span));
        found.is_some()
    });
    assert!(arrived, "no span of {what} arrived: {:#?}", phoenix.spans());
    found.unwrap()
}

/// Whether `span` is a `chat` span of `source` (and of `phase`, when given).
fn chat_of(span: &Value, source: &str, phase: Option<&str>) -> bool {
    attribute(span, "gen_ai.operation.name") == Some(&json!("chat"))
        && attribute(span, "oxibot.usage.source") == Some(&json!(source))
        && phase.is_none_or(|phase| attribute(span, "oxibot.usage.phase") == Some(&json!(phase)))
}

/// Asserts `span` carries the scripted reply's token counts.
fn assert_tokens(span: &Value) {
    assert_eq!(attribute(span, "gen_ai.usage.input_tokens"), Some(&json!(PROMPT_TOKENS)), "{span:#}");
    assert_eq!(attribute(span, "gen_ai.usage.output_tokens"), Some(&json!(COMPLETION_TOKENS)), "{span:#}");
}

#[test]
fn model_calls_outside_the_turn_reach_phoenix_as_chat_spans_with_their_source_and_tokens() {
    let phoenix = Phoenix::start();
    let env = exporting_agent(&phoenix, false);
    let path = env.home.path().join("config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["memory"] = json!({"embedding": "test-embedding"});
    env.write_config(&config);

    // A helper, and recall's embedding of the question.
    let spawn = json!({"task": "What is six times seven?", "wait": true});
    env.llm.push(Reply::ToolCalls(vec![("spawn".into(), spawn.to_string())]));
    env.llm.route(HELPER, Reply::Text("42".into()));
    env.llm.push(Reply::Text("It is 42.".into()));
    let out = env.agent("six times seven?");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let helper = span_where(&phoenix, "the helper's call", |span| chat_of(span, "subagent", None));
    assert_eq!(attribute(&helper, "gen_ai.conversation.id"), Some(&json!("cli:direct")), "its parent: {helper:#}");
    assert_tokens(&helper);
    let embedding = span_where(&phoenix, "an embedding request", |span| {
        attribute(span, "gen_ai.operation.name") == Some(&json!("embeddings"))
    });
    assert_eq!(attribute(&embedding, "oxibot.usage.source"), Some(&json!("embedding")), "{embedding:#}");
    assert_eq!(attribute(&embedding, "gen_ai.request.model"), Some(&json!("test-embedding")), "{embedding:#}");
    assert!(attribute(&embedding, "gen_ai.usage.input_tokens").is_some_and(|n| n.as_u64() >= Some(1)), "{embedding:#}");

    // Both of Dream's phases.
    env.write("memory/MEMORY.md", "# Memory\n");
    let entry = json!({"cursor": 1, "timestamp": "2026-04-03 10:00", "content": "- Sam moved to Lyon"});
    env.write("memory/history.jsonl", &format!("{entry}\n"));
    env.llm.route(DREAM_PHASE1, Reply::Text("[USER] lives in Lyon".into()));
    env.llm.route(DREAM_PHASE2, Reply::Text("Nothing to change after all.".into()));
    assert!(env.agent("/dream").status.success());
    for phase in ["analysis", "edit"] {
        let dream = span_where(&phoenix, "a Dream phase", |span| chat_of(span, "dream", Some(phase)));
        assert_tokens(&dream);
    }

    // Consolidation's summary.
    env.llm.route(CONSOLIDATE, Reply::Text("- user asked for six times seven".into()));
    assert!(env.agent("/new").status.success());
    let summary = span_where(&phoenix, "consolidation's call", |span| chat_of(span, "consolidation", None));
    assert_tokens(&summary);
    assert_eq!(attribute(&summary, "gen_ai.request.model"), Some(&json!("test-model")), "{summary:#}");

    // The heartbeat's decision, in a running gateway.
    let gateway = crate::gateway::GatewayEnv::with_channels(
        json!({"websocket": {"enabled": true, "port": oxibot_tests::channels::free_port()}}),
    );
    gateway.edit_config(|config| {
        config["gateway"]["heartbeat"] = json!({"intervalS": 1});
        config["telemetry"] = json!({"otlpEndpoint": phoenix.otlp_endpoint()});
    });
    gateway.llm.push(Reply::Text("The disk is fine.".into()));
    let quiet = json!({"notify": false});
    gateway.llm.route(NOTIFY_DECISION, Reply::ToolCalls(vec![("notify".into(), quiet.to_string())]));
    std::fs::create_dir_all(gateway.workspace()).unwrap();
    std::fs::write(gateway.workspace().join("HEARTBEAT.md"), "## Tasks\n\n- Check the disk usage\n").unwrap();
    let _running = gateway.start_with("websocket");
    let decision = span_where(&phoenix, "the heartbeat's decision", |span| {
        chat_of(span, "heartbeat", None) && span["parent_id"].is_null()
    });
    std::fs::write(gateway.workspace().join("HEARTBEAT.md"), "## Tasks\n").unwrap();
    assert_eq!(attribute(&decision, "gen_ai.conversation.id"), Some(&json!("heartbeat:direct")), "{decision:#}");
    assert_tokens(&decision);
}

#[test]
fn a_turns_token_and_duration_histograms_reach_an_otlp_metrics_receiver_per_model_call() {
    let receiver = MetricsReceiver::start();
    let env = AgentEnv::new();
    let path = env.home.path().join("config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["telemetry"] = json!({"otlpEndpoint": receiver.otlp_endpoint()});
    env.write_config(&config);
    env.llm.answer_as(ANSWERING_MODEL);
    // Two model calls: the tool call, then the answer.
    tool_using_turn(&env, "what is the secret word?");

    let chats = |name: &str| -> Vec<Value> {
        let points = receiver.histogram_points(name);
        points.into_iter().filter(|point| point_attribute(point, "gen_ai.operation.name") == Some("chat")).collect()
    };
    let arrived = wait_until(Duration::from_secs(30), || !chats("gen_ai.client.operation.duration").is_empty());
    assert!(arrived, "no duration histogram arrived");
    let durations = chats("gen_ai.client.operation.duration");
    assert_eq!(durations.len(), 1, "one series for the turn's calls: {durations:#?}");
    let duration = &durations[0];
    assert_eq!(duration["count"], "2", "each model call's latency is recorded: {duration:#}");
    assert!(duration["sum"].as_f64().is_some_and(|sum| sum > 0.0), "{duration:#}");
    assert_eq!(point_attribute(duration, "oxibot.usage.source"), Some("user"), "{duration:#}");
    assert_eq!(point_attribute(duration, "gen_ai.request.model"), Some("test-model"), "{duration:#}");
    assert_eq!(point_attribute(duration, "gen_ai.response.model"), Some(ANSWERING_MODEL), "{duration:#}");

    let tokens = chats("gen_ai.client.token.usage");
    let of_type = |kind: &str| {
        tokens.iter().find(|point| point_attribute(point, "gen_ai.token.type") == Some(kind)).cloned().unwrap()
    };
    let (input, output) = (of_type("input"), of_type("output"));
    assert_eq!(input["count"], "2", "{input:#}");
    assert_eq!(input["sum"].as_f64(), Some((2 * PROMPT_TOKENS) as f64), "{input:#}");
    assert_eq!(output["sum"].as_f64(), Some((2 * COMPLETION_TOKENS) as f64), "{output:#}");
    assert_eq!(point_attribute(&input, "oxibot.usage.source"), Some("user"), "{input:#}");
}
