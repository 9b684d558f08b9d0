//! The WebSocket channel through the real plugin host, driven by a real WebSocket client: the
//! token (required on loopback too), other sites' pages and rebound host names refused, messages becoming inbound events, `accepted` after the kernel's acceptance, deltas and
//! replies reaching every client of a chat, and the errors a client or the kernel can meet.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use oxibot_kernel::plugin::{PluginEvent, PluginHost, PluginSpec, channel_spec};
use oxibot_proto::{Delta, Feature, Inbound, InboundAccepted, Message as Wire, Outbound};
use oxibot_tests::channels::{WAIT, event_where, free_port};
use oxibot_tests::{bin, start_host};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Bytes, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Client = WebSocketStream<MaybeTlsStream<TcpStream>>;

fn websocket_spec(config: Value) -> PluginSpec {
    channel_spec(&bin("oxibot"), "websocket", &config)
        .unwrap_or_else(|e| panic!("{e}; run `cargo build --workspace` before the tests"))
}

/// The token the tests' channels are configured with unless a test sets its own.
const TOKEN: &str = "test-ws-token";

/// A host running the WebSocket channel on a free port with [`TOKEN`] (plus `extra` config,
/// which may replace it), once it is ready.
async fn websocket_host(extra: Value) -> (PluginHost, UnboundedReceiver<PluginEvent>, u16) {
    let port = free_port();
    let mut config = json!({"port": port, "token": TOKEN});
    config.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let host = start_host(vec![websocket_spec(config)]).await;
    let mut events = host.subscribe();
    let ready =
        event_where(&mut events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == "websocket")).await;
    let PluginEvent::Ready { features, .. } = ready else { unreachable!() };
    assert!(features.contains(&Feature::Streaming), "{features:?}");
    (host, events, port)
}

/// Connects to `ws://127.0.0.1:port<path_and_query>` presenting [`TOKEN`] as a bearer header.
async fn connect(port: u16, path_and_query: &str) -> Client {
    connect_with(port, path_and_query, Some(&format!("Bearer {TOKEN}"))).await
}

/// Connects to `ws://127.0.0.1:port<path_and_query>`, with an `Authorization` header if given,
/// retrying while the channel starts listening.
async fn connect_with(port: u16, path_and_query: &str, authorization: Option<&str>) -> Client {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut request = format!("ws://127.0.0.1:{port}{path_and_query}").into_client_request().unwrap();
        if let Some(value) = authorization {
            request.headers_mut().insert("authorization", HeaderValue::from_str(value).unwrap());
        }
        match tokio_tungstenite::connect_async(request).await {
            Ok((client, _)) => return client,
            Err(error) if tokio::time::Instant::now() > deadline => {
                panic!("cannot connect to the websocket channel: {error}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// The next frame from the server, failing after [`WAIT`].
async fn next_frame(client: &mut Client) -> Message {
    match tokio::time::timeout(WAIT, client.next()).await {
        Ok(Some(Ok(frame))) => frame,
        Ok(other) => panic!("the websocket connection ended: {other:?}"),
        Err(_) => panic!("no frame within {WAIT:?}"),
    }
}

/// The next JSON text frame, skipping control frames.
async fn next_json(client: &mut Client) -> Value {
    loop {
        match next_frame(client).await {
            Message::Text(text) => return serde_json::from_str(&text).unwrap(),
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("expected a text frame, got {other:?}"),
        }
    }
}

async fn send_json(client: &mut Client, frame: Value) {
    client.send(Message::text(frame.to_string())).await.unwrap();
}

/// Reads the `ready` frame and returns the chat id it announces.
async fn ready_chat(client: &mut Client) -> String {
    let ready = next_json(client).await;
    assert_eq!(ready["type"], "ready", "{ready}");
    ready["chat_id"].as_str().unwrap().to_owned()
}

async fn next_inbound(events: &mut UnboundedReceiver<PluginEvent>) -> Inbound {
    match event_where(events, |e| matches!(e, PluginEvent::Inbound { .. })).await {
        PluginEvent::Inbound { plugin, inbound } => {
            assert_eq!(plugin, "websocket");
            inbound
        }
        _ => unreachable!(),
    }
}

fn outbound(id: u64, chat_id: &str, content: &str, stream_id: Option<u64>) -> Wire {
    Wire::Outbound(Outbound {
        id,
        chat_id: chat_id.into(),
        content: content.into(),
        media: vec![],
        stream_id,
        metadata: json!({}),
    })
}

async fn next_delivery(events: &mut UnboundedReceiver<PluginEvent>) -> oxibot_proto::DeliveryAck {
    match event_where(events, |e| matches!(e, PluginEvent::Delivery { .. })).await {
        PluginEvent::Delivery { ack, .. } => ack,
        _ => unreachable!(),
    }
}

#[actix_rt::test]
async fn a_client_without_the_token_gets_an_error_frame_and_a_policy_violation_close() {
    let (host, _events, port) = websocket_host(json!({"token": "s3cret"})).await;
    for path in ["/ws", "/ws?token=wrong"] {
        let mut client = connect_with(port, path, None).await;
        let error = next_json(&mut client).await;
        assert_eq!(error["type"], "error");
        assert!(error["error"].as_str().unwrap().contains("not authorised"), "{error}");
        match next_frame(&mut client).await {
            Message::Close(Some(close)) => assert_eq!(close.code, CloseCode::Policy),
            other => panic!("expected a close with 1008, got {other:?}"),
        }
    }
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_client_presenting_the_token_in_the_query_or_a_bearer_header_is_admitted() {
    let (host, _events, port) = websocket_host(json!({"token": "s3cret"})).await;
    let mut by_query = connect_with(port, "/ws?token=s3cret&chat_id=c1", None).await;
    assert_eq!(ready_chat(&mut by_query).await, "c1");
    let mut by_header = connect_with(port, "/ws?chat_id=c2", Some("Bearer s3cret")).await;
    assert_eq!(ready_chat(&mut by_header).await, "c2");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_message_frame_arrives_as_an_inbound_in_the_clients_chat() {
    let (host, mut events, port) = websocket_host(json!({})).await;
    let mut client = connect(port, "/ws?chat_id=team&client_id=alice").await;
    assert_eq!(ready_chat(&mut client).await, "team");
    send_json(&mut client, json!({"type": "message", "text": "hello there", "id": "m-1"})).await;
    let inbound = next_inbound(&mut events).await;
    assert_eq!(
        (inbound.channel.as_str(), inbound.chat_id.as_str(), inbound.sender_id.as_str()),
        ("websocket", "team", "alice")
    );
    assert_eq!(inbound.content, "hello there");
    assert_eq!(inbound.metadata["is_group"], false);
    assert_eq!(inbound.metadata["message_id"], "m-1");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_connection_without_a_chat_id_gets_a_fresh_chat_announced_in_its_ready_frame() {
    let (host, mut events, port) = websocket_host(json!({})).await;
    let mut first = connect(port, "/ws").await;
    let mut second = connect(port, "/ws").await;
    let (chat_a, chat_b) = (ready_chat(&mut first).await, ready_chat(&mut second).await);
    assert_ne!(chat_a, chat_b);
    send_json(&mut first, json!({"type": "message", "text": "hi"})).await;
    let inbound = next_inbound(&mut events).await;
    assert_eq!(inbound.chat_id, chat_a);
    assert!(!inbound.sender_id.is_empty());
    host.shutdown().await;
}

#[actix_rt::test]
async fn the_client_is_told_accepted_only_after_the_kernel_accepted_the_message() {
    let (host, mut events, port) = websocket_host(json!({})).await;
    let mut client = connect(port, "/ws?chat_id=c1").await;
    ready_chat(&mut client).await;
    send_json(&mut client, json!({"type": "message", "text": "one", "id": "m-1"})).await;
    send_json(&mut client, json!({"type": "message", "text": "two"})).await;
    let first = next_inbound(&mut events).await;
    // Nothing is said before the acceptance: a ping gets its pong first.
    send_json(&mut client, json!({"type": "ping"})).await;
    assert_eq!(next_json(&mut client).await, json!({"type": "pong"}));
    host.send("websocket", Wire::InboundAccepted(InboundAccepted { id: first.id.clone() })).unwrap();
    assert_eq!(next_json(&mut client).await, json!({"type": "accepted", "id": "m-1"}));
    // The second message is submitted only after the first was accepted.
    let second = next_inbound(&mut events).await;
    assert_eq!(second.content, "two");
    host.send("websocket", Wire::InboundAccepted(InboundAccepted { id: second.id.clone() })).unwrap();
    assert_eq!(next_json(&mut client).await, json!({"type": "accepted", "id": second.id}));
    host.shutdown().await;
}

#[actix_rt::test]
async fn deltas_then_the_final_message_reach_every_client_of_the_chat_and_the_delivery_is_acked() {
    let (host, mut events, port) = websocket_host(json!({})).await;
    let mut phone = connect(port, "/ws?chat_id=shared").await;
    let mut laptop = connect(port, "/ws?chat_id=shared").await;
    let mut elsewhere = connect(port, "/ws?chat_id=other").await;
    for client in [&mut phone, &mut laptop, &mut elsewhere] {
        ready_chat(client).await;
    }
    for text in ["Hel", "lo"] {
        host.send("websocket", Wire::Delta(Delta { stream_id: 9, chat_id: "shared".into(), text: text.into() }))
            .unwrap();
    }
    host.send("websocket", outbound(42, "shared", "Hello", Some(9))).unwrap();
    for client in [&mut phone, &mut laptop] {
        assert_eq!(next_json(client).await, json!({"type": "delta", "text": "Hel", "stream_id": 9}));
        assert_eq!(next_json(client).await, json!({"type": "delta", "text": "lo", "stream_id": 9}));
        assert_eq!(next_json(client).await, json!({"type": "message", "text": "Hello", "stream_id": 9}));
    }
    let ack = next_delivery(&mut events).await;
    assert_eq!((ack.id, ack.ok), (42, true));
    send_json(&mut elsewhere, json!({"type": "ping"})).await;
    assert_eq!(next_json(&mut elsewhere).await, json!({"type": "pong"}), "the other chat got nothing before its pong");
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_outbound_for_a_chat_without_clients_is_acked_with_an_error() {
    let (host, mut events, port) = websocket_host(json!({})).await;
    let mut client = connect(port, "/ws?chat_id=present").await;
    ready_chat(&mut client).await;
    host.send("websocket", outbound(7, "absent", "anyone?", None)).unwrap();
    let ack = next_delivery(&mut events).await;
    assert_eq!((ack.id, ack.ok), (7, false));
    assert_eq!(ack.error.as_deref(), Some("no client is connected to chat absent"));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_bad_frame_gets_an_error_frame_and_the_connection_stays_usable() {
    let (host, mut events, port) = websocket_host(json!({})).await;
    let mut client = connect(port, "/ws?chat_id=c1").await;
    ready_chat(&mut client).await;
    client.send(Message::text("not json")).await.unwrap();
    let error = next_json(&mut client).await;
    assert_eq!(error["type"], "error");
    assert!(error["error"].as_str().unwrap().starts_with("invalid frame"), "{error}");
    send_json(&mut client, json!({"type": "message", "text": ""})).await;
    assert_eq!(next_json(&mut client).await["type"], "error");
    client.send(Message::Binary(Bytes::from_static(b"\x00\x01"))).await.unwrap();
    assert!(next_json(&mut client).await["error"].as_str().unwrap().contains("binary"));
    send_json(&mut client, json!({"type": "message", "text": "still here"})).await;
    assert_eq!(next_inbound(&mut events).await.content, "still here");
    host.shutdown().await;
}

#[actix_rt::test]
async fn websocket_pings_are_answered_with_pongs() {
    let (host, _events, port) = websocket_host(json!({})).await;
    let mut client = connect(port, "/ws").await;
    ready_chat(&mut client).await;
    client.send(Message::Ping(Bytes::from_static(b"are you there"))).await.unwrap();
    assert_eq!(next_frame(&mut client).await, Message::Pong(Bytes::from_static(b"are you there")));
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_upgrade_on_another_path_is_refused() {
    let (host, _events, port) = websocket_host(json!({"path": "/chat"})).await;
    oxibot_tests::http::connect(port).await;
    let error = tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}/ws?token={TOKEN}")).await.unwrap_err();
    assert!(error.to_string().contains("404"), "{error}");
    let mut client = connect(port, "/chat").await;
    ready_chat(&mut client).await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_websocket_channel_without_a_token_refuses_to_start_on_loopback_too() {
    for host_name in ["127.0.0.1", "0.0.0.0"] {
        let host = start_host(vec![websocket_spec(json!({"host": host_name, "port": free_port()}))]).await;
        let reason = failure_reason(&host).await;
        assert!(reason.contains("refusing to serve without a token"), "{host_name}: {reason}");
        host.shutdown().await;
    }
}

/// Issue 23, finding 1: a page of another site (or a DNS-rebound name) made the user's
/// browser open the chat socket, and its message ran `exec`. The browser sends the page's
/// `Origin` and the name it resolved as `Host`; both are refused with 403 before the upgrade,
/// even when the token is right, and no message reaches the kernel.
#[actix_rt::test]
async fn a_browser_upgrade_from_another_site_or_a_rebound_host_name_is_refused() {
    let (host, mut events, port) = websocket_host(json!({})).await;
    oxibot_tests::http::connect(port).await;
    for (origin, host_header) in [
        (Some("http://evil.example"), format!("127.0.0.1:{port}")),
        (None, format!("evil.example:{port}")),
        (Some("http://evil.example"), "evil.example".to_owned()),
    ] {
        let mut request = format!("ws://127.0.0.1:{port}/ws?token={TOKEN}").into_client_request().unwrap();
        request.headers_mut().insert("host", HeaderValue::from_str(&host_header).unwrap());
        if let Some(origin) = origin {
            request.headers_mut().insert("origin", HeaderValue::from_static(origin));
        }
        let error = tokio_tungstenite::connect_async(request).await.unwrap_err();
        assert!(error.to_string().contains("403"), "{origin:?} {host_header}: {error}");
    }
    let mut own_page = format!("ws://127.0.0.1:{port}/ws?token={TOKEN}").into_client_request().unwrap();
    own_page.headers_mut().insert("origin", HeaderValue::from_str(&format!("http://127.0.0.1:{port}")).unwrap());
    let (mut client, _) = tokio_tungstenite::connect_async(own_page).await.unwrap();
    ready_chat(&mut client).await;
    send_json(&mut client, json!({"type": "message", "text": "from my own page"})).await;
    assert_eq!(next_inbound(&mut events).await.content, "from my own page", "only the own page's message arrives");
    host.shutdown().await;
}

/// Waits until the host gave up on its only plugin and returns why.
pub async fn failure_reason(host: &PluginHost) -> String {
    let failed = || host.statuses()[0].state == "failed";
    let settled = tokio::time::timeout(Duration::from_secs(10), async {
        while !failed() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert!(settled.await.is_ok(), "{:?}", host.statuses()[0].state);
    host.statuses()[0].reason.clone().unwrap()
}
