//! A2A both ways, with the official `a2a-sdk` (PyPI): its client against the A2A channel of a
//! real `oxibot gateway` answered by the scripted LLM (the card, a message answered, one
//! streamed, a task read back, a slow turn canceled, a wrong key refused), and the channel
//! refusing to start without a key.

use std::path::PathBuf;
use std::process::Command;

use oxibot_kernel::plugin::channel_spec;
use oxibot_tests::channels::free_port;
use oxibot_tests::llm::Reply;
use oxibot_tests::{bin_dir, start_host};
use serde_json::{Value, json};

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
    let slow = env.session_file(&format!("a2a:{}", got["slow_context_id"].as_str().unwrap()));
    assert!(!slow.contains("too late"), "the stopped turn wrote no answer: {slow}");

    let refused = got["bad_key"].as_str().unwrap();
    assert!(refused.contains("401"), "a wrong key gets a clear refusal: {refused}");
    let asked = env.llm.requests().iter().filter(|r| r.to_string().contains("let me in")).count();
    assert_eq!(asked, 0, "a call with a wrong key never reaches the model");
}

#[actix_rt::test]
async fn an_a2a_channel_without_a_key_refuses_to_start_on_loopback_too() {
    for section in [json!({"port": free_port()}), json!({"port": free_port(), "keys": [""]})] {
        let spec = channel_spec(&bin_dir(), "a2a", &section)
            .unwrap_or_else(|e| panic!("{e}; run `cargo build --workspace` before the tests"));
        let host = start_host(vec![spec]).await;
        let reason = failure_reason(&host).await;
        assert!(reason.contains("refusing to serve A2A without a key: set channels.a2a.keys"), "{section}: {reason}");
        host.shutdown().await;
    }
}
