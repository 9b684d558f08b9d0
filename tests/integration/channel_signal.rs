//! The Signal channel plugin through the real plugin host against a fake signal-cli daemon:
//! `receive` events become inbound events, the direct and group policies and mentions decide,
//! a message delivered twice reaches the kernel once, a closed event stream is opened again,
//! and replies reach JSON-RPC `send` to the person or the group, cut at the limit.

use oxibot_kernel::plugin::{PluginEvent, PluginHost};
use oxibot_proto::DeliveryAck;
use oxibot_tests::channels::{accept, next_delivery, next_inbound, outbound, started_channel};
use oxibot_tests::fakes_signal::{FakeSignal, direct_text, group_text};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

const ADA: &str = "+15551234567";
const GROUP: &str = "RnJpZW5kcyBvZiBveGlib3Q=";

/// Starts the host with the Signal channel configured for `signal`, and waits until the
/// channel holds an event stream.
async fn signal_host(signal: &FakeSignal, extra: Value) -> (PluginHost, UnboundedReceiver<PluginEvent>) {
    let (host, events) = started_channel("signal", &signal.config(extra)).await;
    signal.wait_streams(1).await;
    (host, events)
}

#[actix_rt::test]
async fn a_direct_message_from_the_allow_list_arrives_as_an_authenticated_inbound() {
    let signal = FakeSignal::start();
    let (host, mut events) = signal_host(&signal, json!({"dm": {"allowFrom": [ADA]}})).await;
    signal.receive(direct_text(ADA, "Ada", "hello there", 1_700_000_000_000)).await;
    let inbound = next_inbound(&mut events, "signal").await;
    assert_eq!(inbound.id, "+15551234567:1700000000000");
    assert_eq!(
        (inbound.sender_id.as_str(), inbound.chat_id.as_str(), inbound.content.as_str()),
        (ADA, ADA, "hello there")
    );
    assert_eq!(inbound.metadata["authenticated"], true);
    assert_eq!(inbound.metadata["is_group"], false);
    assert_eq!(inbound.metadata["sender_name"], "Ada");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_direct_message_from_a_stranger_is_left_to_the_kernels_allow_list_or_pairing() {
    let signal = FakeSignal::start();
    let (host, mut events) = signal_host(&signal, json!({"dm": {"allowFrom": ["+15550000000"]}})).await;
    signal.receive(direct_text("+15557654321", "Eve", "let me in", 1_700_000_000_100)).await;
    let inbound = next_inbound(&mut events, "signal").await;
    assert_eq!(inbound.sender_id, "+15557654321");
    assert_eq!(inbound.metadata.get("authenticated"), None, "the channel vouched for a stranger");
    host.shutdown().await;
}

#[actix_rt::test]
async fn in_a_group_only_a_mention_of_the_bot_is_answered_with_what_was_said_before() {
    let signal = FakeSignal::start();
    let (host, mut events) = signal_host(&signal, json!({"group": {"enabled": true, "allowFrom": [GROUP]}})).await;
    signal.receive(group_text(ADA, "Ada", "RWxzZXdoZXJl", "elsewhere", 1_700_000_000_200, true)).await;
    signal.receive(group_text(ADA, "Ada", GROUP, "just chatting", 1_700_000_000_300, false)).await;
    signal.receive(group_text("+15552223333", "Bob", GROUP, "what is up?", 1_700_000_000_400, true)).await;
    let inbound = next_inbound(&mut events, "signal").await;
    assert_eq!(inbound.id, "+15552223333:1700000000400", "the first inbound must be the mention in the allowed group");
    assert_eq!(inbound.chat_id, GROUP);
    assert_eq!(inbound.content, "[Recent group messages for context:]\n[Ada]: just chatting\n---\n[Bob]: what is up?");
    assert_eq!(
        (inbound.metadata["is_group"].as_bool(), inbound.metadata["group_id"].as_str()),
        (Some(true), Some(GROUP))
    );
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_message_delivered_twice_reaches_the_kernel_once() {
    let signal = FakeSignal::start();
    let (host, mut events) = signal_host(&signal, json!({"dm": {"policy": "open"}})).await;
    let envelope = direct_text(ADA, "Ada", "only once", 1_700_000_000_500);
    signal.receive(envelope.clone()).await;
    let inbound = next_inbound(&mut events, "signal").await;
    signal.receive(envelope.clone()).await;
    accept(&host, "signal", &inbound);
    signal.receive(envelope).await;
    signal.receive(direct_text(ADA, "Ada", "a new one", 1_700_000_000_600)).await;
    let next = next_inbound(&mut events, "signal").await;
    assert_eq!(next.content, "a new one", "the message delivered again came through twice");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_closed_event_stream_is_opened_again_and_messages_still_flow() {
    let signal = FakeSignal::start();
    let (host, mut events) = signal_host(&signal, json!({"dm": {"policy": "open"}})).await;
    signal.cut().await;
    signal.wait_streams(2).await;
    assert!(signal.checks() >= 2, "the daemon was not checked again before the new stream");
    signal.receive(direct_text(ADA, "Ada", "back?", 1_700_000_000_700)).await;
    let inbound = next_inbound(&mut events, "signal").await;
    assert_eq!(inbound.content, "back?");
    host.shutdown().await;
}

#[actix_rt::test]
async fn replies_go_to_the_person_or_the_group_through_json_rpc_send_with_markdown_as_text_styles() {
    let signal = FakeSignal::start();
    let (host, mut events) = signal_host(&signal, json!({})).await;
    host.send("signal", outbound(11, ADA, "**hi** Ada", json!({"is_group": false}))).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 11, ok: true, error: None, permanent: false });
    host.send("signal", outbound(12, GROUP, "hi all", json!({"is_group": true, "group_id": GROUP}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let sends = signal.calls("send");
    assert_eq!(sends[0].params, json!({"recipient": [ADA], "message": "hi Ada", "textStyle": ["0:2:BOLD"]}));
    assert_eq!(sends[1].params, json!({"groupId": GROUP, "message": "hi all"}));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_long_reply_is_sent_in_parts_that_each_fit_the_limit() {
    let signal = FakeSignal::start();
    let (host, mut events) = signal_host(&signal, json!({})).await;
    let lines: Vec<String> = (0..3000).map(|n| format!("line {n:04} {}", "x".repeat(40))).collect();
    host.send("signal", outbound(13, ADA, &lines.join("\n"), json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let sends = signal.calls("send");
    assert!(sends.len() >= 3, "{} parts", sends.len());
    let texts: Vec<&str> = sends.iter().map(|send| send.params["message"].as_str().unwrap()).collect();
    assert!(texts.iter().all(|text| text.chars().count() <= 64_000));
    let all = texts.join("\n");
    assert!((0..3000).all(|n| all.contains(&format!("line {n:04} "))));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_send_signal_cli_refuses_is_acked_as_a_failed_delivery_with_its_reason() {
    let signal = FakeSignal::start();
    let (host, mut events) = signal_host(&signal, json!({})).await;
    signal.fail_next_send("Unregistered user +15550000001");
    host.send("signal", outbound(14, "+15550000001", "anyone?", json!({}))).unwrap();
    let ack = next_delivery(&mut events).await;
    assert_eq!((ack.id, ack.ok), (14, false));
    assert!(ack.error.as_deref().unwrap_or_default().contains("Unregistered user"), "{ack:?}");
    host.shutdown().await;
}
