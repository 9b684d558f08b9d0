//! Channel plugins through the real plugin host, driven through the loopback channel's TCP
//! port: inbound messages become events, `send` reaches the chat, a killed channel comes back,
//! and tool plugins in the same host are unaffected.

use std::time::Duration;

use oxibot_kernel::plugin::{PluginError, PluginEvent, PluginHost};
use oxibot_proto::{Call, CallContext, DeliveryAck, Delta, Feature, Inbound, InboundAccepted, Message, PeerKind};
use oxibot_tests::channels::{LineClient, event_where, free_port, loopback_spec, outbound};
use oxibot_tests::procs::sigkill;
use oxibot_tests::{context, start_host, stderr, stress_spec};
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

/// Waits for the loopback channel's `Ready` and checks what it announced.
async fn expect_ready(events: &mut UnboundedReceiver<PluginEvent>) {
    let ready = event_where(events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == "loopback")).await;
    let PluginEvent::Ready { kind, features, .. } = ready else { unreachable!() };
    assert_eq!(kind, PeerKind::Channel);
    assert!(features.contains(&Feature::Streaming), "{features:?}");
}

/// Writes a line and returns the inbound event it became.
async fn submit_line(client: &mut LineClient, events: &mut UnboundedReceiver<PluginEvent>, line: &str) -> Inbound {
    client.send(line).await;
    match event_where(events, |e| matches!(e, PluginEvent::Inbound { .. })).await {
        PluginEvent::Inbound { plugin, inbound } => {
            assert_eq!(plugin, "loopback");
            inbound
        }
        _ => unreachable!(),
    }
}

fn accepted(inbound: &Inbound) -> Message {
    Message::InboundAccepted(InboundAccepted { id: inbound.id.clone() })
}

async fn loopback_host(port: u16) -> (PluginHost, UnboundedReceiver<PluginEvent>) {
    let host = start_host(vec![loopback_spec(port)]).await;
    let mut events = host.subscribe();
    expect_ready(&mut events).await;
    (host, events)
}

#[actix_rt::test]
async fn a_line_written_to_the_loopback_port_arrives_as_an_inbound_event() {
    let port = free_port();
    let (host, mut events) = loopback_host(port).await;
    let mut client = LineClient::connect(port).await;
    let inbound = submit_line(&mut client, &mut events, "alice:chat-1:hello: there").await;
    assert_eq!(inbound.channel, "loopback");
    assert_eq!(inbound.sender_id, "alice");
    assert_eq!(inbound.chat_id, "chat-1");
    assert_eq!(inbound.content, "hello: there");
    assert!(!inbound.id.is_empty());
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_accepted_inbound_and_an_outbound_come_back_as_lines_and_the_delivery_is_acked() {
    let port = free_port();
    let (host, mut events) = loopback_host(port).await;
    let mut client = LineClient::connect(port).await;
    let inbound = submit_line(&mut client, &mut events, "alice:chat-1:hi").await;
    host.send("loopback", accepted(&inbound)).unwrap();
    assert_eq!(client.line().await, format!("ACCEPTED {}", inbound.id));
    host.send("loopback", Message::Delta(Delta { stream_id: 1, chat_id: "chat-1".into(), text: "Hel".into() }))
        .unwrap();
    host.send("loopback", outbound(42, "chat-1", "Hello\nalice", json!({}))).unwrap();
    assert_eq!(client.line().await, "DELTA chat-1 Hel");
    assert_eq!(client.line().await, "OUT chat-1 Hello\\nalice");
    let delivery = event_where(&mut events, |e| matches!(e, PluginEvent::Delivery { .. })).await;
    assert_eq!(
        delivery,
        PluginEvent::Delivery {
            plugin: "loopback".into(),
            ack: DeliveryAck { id: 42, ok: true, error: None, permanent: false }
        }
    );
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_outbound_with_nobody_to_receive_it_is_acked_with_an_error() {
    let port = free_port();
    let (host, mut events) = loopback_host(port).await;
    host.send("loopback", outbound(7, "chat-1", "anyone?", json!({}))).unwrap();
    let PluginEvent::Delivery { ack, .. } =
        event_where(&mut events, |e| matches!(e, PluginEvent::Delivery { .. })).await
    else {
        unreachable!()
    };
    assert_eq!((ack.id, ack.ok, ack.error.as_deref()), (7, false, Some("no client is connected")));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_sigkilled_channel_reports_down_then_ready_and_messages_flow_again_while_tools_work() {
    let port = free_port();
    let host = start_host(vec![stress_spec("stress", &[]), loopback_spec(port)]).await;
    let mut events = host.subscribe();
    expect_ready(&mut events).await;
    let pid = host.statuses()[1].pid.unwrap();
    sigkill(pid);
    let lifecycle = |e: &PluginEvent| matches!(e, PluginEvent::Down { plugin, .. } | PluginEvent::Ready { plugin, .. } if plugin == "loopback");
    match event_where(&mut events, lifecycle).await {
        PluginEvent::Down { reason, .. } => assert!(reason.contains("SIGKILL"), "{reason}"),
        other => panic!("expected Down first, got {other:?}"),
    }
    expect_ready(&mut events).await;
    assert_ne!(host.statuses()[1].pid, Some(pid));
    let mut client = LineClient::connect(port).await;
    let inbound = submit_line(&mut client, &mut events, "bob:chat-2:back again").await;
    host.send("loopback", accepted(&inbound)).unwrap();
    assert_eq!(client.line().await, format!("ACCEPTED {}", inbound.id));
    let result = host.call("echo", json!({"text": "unaffected"}), context(&std::env::temp_dir()), None).await.unwrap();
    assert_eq!(result.content, "unaffected");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_tool_plugin_in_the_same_host_still_serves_calls_and_statuses_tell_the_kinds_apart() {
    let port = free_port();
    let host = start_host(vec![stress_spec("stress", &[]), loopback_spec(port)]).await;
    let result = host.call("echo", json!({"text": "still here"}), context(&std::env::temp_dir()), None).await.unwrap();
    assert_eq!(result.content, "still here");
    let kinds: Vec<(String, PeerKind, &str)> = host.statuses().into_iter().map(|s| (s.name, s.kind, s.state)).collect();
    assert_eq!(
        kinds,
        [("stress".to_owned(), PeerKind::Tool, "running"), ("loopback".to_owned(), PeerKind::Channel, "running")]
    );
    assert!(host.tools().iter().all(|tool| tool.name != "loopback"), "a channel registers no tools");
    host.shutdown().await;
}

#[actix_rt::test]
async fn send_refuses_unknown_plugins_tool_plugins_and_messages_that_are_not_for_channels() {
    let port = free_port();
    let host = start_host(vec![stress_spec("stress", &[]), loopback_spec(port)]).await;
    let error = host.send("nope", outbound(1, "c", "x", json!({}))).unwrap_err();
    assert!(matches!(error, PluginError::UnknownPlugin { .. }), "{error}");
    let error = host.send("stress", outbound(1, "c", "x", json!({}))).unwrap_err();
    assert_eq!(error.to_string(), "plugin 'stress' is a tool plugin, not a channel");
    let call =
        Message::Call(Call { id: 1, tool: "echo".into(), arguments: json!({}), context: CallContext::default() });
    let error = host.send("loopback", call).unwrap_err();
    assert!(matches!(error, PluginError::NotForChannel { .. }), "{error}");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_channel_whose_service_keeps_failing_is_given_up_and_send_says_it_is_not_running() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let host = start_host(vec![loopback_spec(port)]).await;
    let failed = || host.statuses()[0].state == "failed";
    let settled = tokio::time::timeout(Duration::from_secs(10), async {
        while !failed() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert!(settled.await.is_ok(), "{:?}", host.statuses()[0].state);
    let reason = host.statuses()[0].reason.clone().unwrap();
    assert!(reason.contains("cannot listen on 127.0.0.1"), "{reason}");
    let error = host.send("loopback", outbound(1, "c", "x", json!({}))).unwrap_err();
    assert!(matches!(&error, PluginError::NotRunning { state, .. } if state == "failed"), "{error}");
    drop(taken);
    host.shutdown().await;
}

#[test]
fn the_loopback_channel_refuses_to_run_outside_the_kernel() {
    let spec = loopback_spec(1);
    let out =
        std::process::Command::new(&spec.command).args(&spec.args).env_remove("OXIBOT_PLUGIN_SOCKET").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("started by the oxibot kernel"), "{}", stderr(&out));
}
