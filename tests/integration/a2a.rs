//! A2A both ways, with the official `a2a-sdk` (PyPI): its client against the A2A channel of a
//! real `oxibot gateway` answered by the scripted LLM (the card, a message answered, one
//! streamed, a task read back, a slow turn canceled, a wrong key refused), the channel
//! refusing to start without a key, and the `a2a` tool through `oxibot agent` asking an agent
//! built with the SDK (a conversation carried on, a wrong key, the SSRF guard).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use oxibot_kernel::plugin::channel_spec;
use oxibot_tests::channels::free_port;
use oxibot_tests::llm::Reply;
use oxibot_tests::procs::wait_until;
use oxibot_tests::{bin, start_host, stderr, stdout};
use serde_json::{Value, json};

use crate::agent::AgentEnv;
use crate::channel_websocket::failure_reason;
use crate::gateway::GatewayEnv;

/// The key the tests' A2A channels accept.
const KEY: &str = "a2a-test-key";

/// A fixture script of `tests/fixtures/a2a/`.
pub(crate) fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/a2a").join(name)
}

#[test]
fn the_official_a2a_client_reads_the_card_gets_answers_whole_and_streamed_and_cancels_a_slow_turn() {
    oxibot_tests::needs::python_module("a2a.client", "a2a-sdk[http-server]");
    let port = free_port();
    let env = GatewayEnv::with_channels(
        json!({"a2a": {"enabled": true, "port": port, "keys": ["other-key", KEY], "name": "Ada"}}),
    );
    let _gateway = env.start_with("a2a");
    env.llm.push(Reply::Text("The plain answer".into()));
    env.llm.push(Reply::Text("The streamed answer, in pieces".into()));
    env.llm.push(Reply::SlowFirstToken { delay_ms: 60_000, text: "too late".into() });
    let out = Command::new("python3")
        .arg(fixture("client.py"))
        .arg(format!("http://127.0.0.1:{port}"))
        .arg(KEY)
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}\ngateway log: {}", String::from_utf8_lossy(&out.stderr), env.log());
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();

    assert_eq!(
        got["card"],
        json!({"name": "Ada", "streaming": true, "url": format!("http://127.0.0.1:{port}/a2a"), "binding": "JSONRPC"})
    );
    let plain = &got["plain"];
    assert_eq!(plain["state"], "TASK_STATE_COMPLETED", "{got:#}");
    assert_eq!(plain["text"], "The plain answer");
    assert_eq!(plain["status_text"], "The plain answer");
    assert_eq!(got["get"], json!({"state": "TASK_STATE_COMPLETED", "text": "The plain answer"}));

    let stream = &got["stream"];
    assert_eq!(stream["text"], "The streamed answer, in pieces", "{got:#}");
    assert_eq!(stream["final_state"], "TASK_STATE_COMPLETED");
    let kinds: Vec<&str> = stream["kinds"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    assert_eq!((kinds.first(), kinds.last()), (Some(&"task"), Some(&"status_update")), "{kinds:?}");
    assert!(kinds.contains(&"artifact_update"), "{kinds:?}");
    assert_eq!(got["stream_context_id"], plain["context_id"], "the context carried on");
    let context = plain["context_id"].as_str().unwrap();
    let session = env.session_file(&format!("a2a:{context}"));
    assert!(session.contains("plain question") && session.contains("streamed question"), "one session: {session}");

    assert_eq!(got["slow_started"], "TASK_STATE_WORKING", "{got:#}");
    assert_eq!(got["canceled"], "TASK_STATE_CANCELED");
    assert_eq!(got["after_cancel"], "TASK_STATE_CANCELED");
    let again = got["cancel_again"].as_str().unwrap();
    assert!(again.contains("cannot be canceled") && again.contains("already canceled"), "{again}");
    // Without the `/stop`, the turn would wait a minute for the model's slow answer.
    let slow = format!("a2a:{}", got["slow_context_id"].as_str().unwrap());
    let stopped = || env.session_file(&slow).contains("(Stopped before finishing.)");
    assert!(wait_until(Duration::from_secs(10), stopped), "the turn was stopped: {}", env.session_file(&slow));
    assert!(!env.session_file(&slow).contains("too late"), "the stopped turn wrote no answer");

    let refused = got["bad_key"].as_str().unwrap();
    assert!(refused.contains("401"), "a wrong key gets a clear refusal: {refused}");
    let asked = env.llm.requests().iter().filter(|r| r.to_string().contains("let me in")).count();
    assert_eq!(asked, 0, "a call with a wrong key never reaches the model");
}

#[actix_rt::test]
async fn an_a2a_channel_without_a_key_refuses_to_start_on_loopback_too() {
    for section in [json!({"port": free_port()}), json!({"port": free_port(), "keys": [""]})] {
        let spec = channel_spec(&bin("oxibot"), "a2a", &section)
            .unwrap_or_else(|e| panic!("{e}; run `cargo build --workspace` before the tests"));
        let host = start_host(vec![spec]).await;
        let reason = failure_reason(&host).await;
        assert!(reason.contains("refusing to serve A2A without a key: set channels.a2a.keys"), "{section}: {reason}");
        host.shutdown().await;
    }
}

/// The fixture agent built with the SDK (`tests/fixtures/a2a/server.py`) on a free loopback
/// port; killed when dropped.
struct SdkAgent {
    child: std::process::Child,
    port: u16,
}

impl SdkAgent {
    /// Starts it with `key` and waits until it answers.
    fn start(key: &str) -> SdkAgent {
        oxibot_tests::needs::python_module("a2a.server.routes", "a2a-sdk[http-server]");
        oxibot_tests::needs::python_module("uvicorn", "uvicorn");
        let port = free_port();
        let child = Command::new("python3")
            .arg(fixture("server.py"))
            .arg(port.to_string())
            .arg(key)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let agent = SdkAgent { child, port };
        let listening = || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
        assert!(wait_until(Duration::from_secs(60), listening), "the SDK's A2A server never listened on {port}");
        agent
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for SdkAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `oxibot agent` with `tools` whose model makes each of `calls` to the `a2a` tool in turn,
/// then answers; returns what each call gave the model.
fn ask_through_agent(tools: Value, calls: &[Value]) -> Vec<String> {
    let env = AgentEnv::new();
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home.path().join("config.json")).unwrap()).unwrap();
    config["tools"] = tools;
    env.write_config(&config);
    for call in calls {
        env.llm.push(Reply::ToolCalls(vec![("a2a".into(), call.to_string())]));
    }
    env.llm.push(Reply::Text("Asked.".into()));
    let out = env.agent("ask the other agent");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Asked.");
    let requests = env.llm.requests();
    (1..=calls.len())
        .map(|n| {
            let messages = requests[n]["messages"].as_array().unwrap();
            let result = messages.iter().rev().find(|m| m["role"] == "tool").expect("tool result sent back");
            result["content"].as_str().unwrap().to_owned()
        })
        .collect()
}

fn agents(url: &str, key: &str) -> Value {
    json!({"echo": {"url": url, "apiKey": key, "description": "repeats what it heard"}})
}

#[test]
fn the_a2a_tool_asks_an_sdk_agent_and_carries_a_conversation_on_by_its_context() {
    let remote = SdkAgent::start("remote-key");
    let tools = json!({"a2a": {"agents": agents(&remote.url(), "remote-key")}, "ssrfWhitelist": ["127.0.0.1/32"]});
    let ask = |message: &str| json!({"agent": "echo", "message": message, "contextId": "tea-talk"});
    let results = ask_through_agent(tools, &[ask("What is oolong?"), ask("And sencha?")]);
    let first = &results[0];
    assert!(first.starts_with("[Reply from the A2A agent 'echo'"), "{first}");
    assert!(first.contains("contextId: tea-talk"), "{first}");
    assert!(first.contains("Remote agent heard 'What is oolong?' (turn 1 of this context)"), "{first}");
    assert!(results[1].contains("Remote agent heard 'And sencha?' (turn 2 of this context)"), "{}", results[1]);
}

#[test]
fn the_a2a_tool_tells_the_model_of_a_wrong_key_and_of_an_agent_the_ssrf_guard_refuses() {
    let remote = SdkAgent::start("remote-key");
    let call = json!({"agent": "echo", "message": "hello"});
    let whitelisted = json!({"a2a": {"agents": agents(&remote.url(), "wrong-key")}, "ssrfWhitelist": ["127.0.0.1/32"]});
    let wrong_key = &ask_through_agent(whitelisted, std::slice::from_ref(&call))[0];
    assert!(wrong_key.contains("A2A agent 'echo' did not answer") && wrong_key.contains("401"), "{wrong_key}");
    let guarded = json!({"a2a": {"agents": agents(&remote.url(), "remote-key")}});
    let refused = &ask_through_agent(guarded, &[call])[0];
    assert!(
        refused.contains("cannot read the agent card of 'echo'") && refused.contains("refused: 127.0.0.1"),
        "{refused}"
    );
    assert!(!refused.contains("Remote agent heard"), "{refused}");
}

/// A JSON-RPC call of `method` with `params`.
fn rpc(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": "1", "method": method, "params": params})
}

#[test]
fn a_caller_that_drops_its_stream_finds_the_finished_reply_in_the_task() {
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"a2a": {"enabled": true, "port": port, "keys": [KEY]}}));
    let _gateway = env.start_with("a2a");
    env.llm.push(Reply::StallAfter { text: "A reply worth waiting for".into(), after_chunks: 1, delay_ms: 1500 });
    let auth = format!("Bearer {KEY}");
    let headers = [("Authorization", auth.as_str()), ("A2A-Version", "1.0")];
    oxibot_tests::wait::block_on(async {
        let message =
            json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "take your time"}]}});
        let mut stream =
            oxibot_tests::http::post_json(port, "/a2a", &headers, &rpc("SendStreamingMessage", message)).await;
        let first: Value = serde_json::from_str(&stream.next_event().await.unwrap()).unwrap();
        let task_id = first["result"]["task"]["id"].as_str().unwrap().to_owned();
        drop(stream);
        let get = rpc("GetTask", json!({"id": task_id}));
        let finished = || async {
            let task = oxibot_tests::http::post_json(port, "/a2a", &headers, &get).await.json().await;
            (task["result"]["status"]["state"] == "TASK_STATE_COMPLETED").then_some(task)
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let task = loop {
            if let Some(task) = finished().await {
                break task;
            }
            assert!(std::time::Instant::now() < deadline, "the task never completed: {}", env.log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(task["result"]["artifacts"][0]["parts"][0]["text"], "A reply worth waiting for");
    });
}
