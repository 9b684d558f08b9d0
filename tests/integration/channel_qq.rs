//! The QQ channel plugin through the real plugin host (and, for `allowFrom`, the real gateway)
//! against a fake QQ bot platform: C2C and group messages arriving over the gateway become
//! inbound events, a message sent twice is submitted once, an event counts as handled only
//! once the kernel accepted its message, a dropped connection is resumed (and what it missed
//! sent again), and replies are passive replies with fresh `msg_seq`s, in parts that fit.

use oxibot_kernel::plugin::{PluginEvent, PluginHost, channel_spec};
use oxibot_proto::DeliveryAck;
use oxibot_tests::channels::{accept, next_delivery, next_inbound, outbound, started_channel};
use oxibot_tests::fakes_qq::{FakeQq, TOKEN_PATH, c2c_message, group_message, group_messages, user_messages};
use oxibot_tests::llm::Reply;
use oxibot_tests::wait::block_on;
use oxibot_tests::{TempDir, bin, start_host};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use super::gateway::GatewayEnv;

const C2C: &str = "C2C_MESSAGE_CREATE";
const GROUP_AT: &str = "GROUP_AT_MESSAGE_CREATE";

/// Starts the host with the QQ channel configured for `qq` (no "processing" notice unless
/// `extra` sets one), and waits until the channel's session is ready.
async fn qq_host(qq: &FakeQq, extra: Value) -> (PluginHost, UnboundedReceiver<PluginEvent>) {
    let mut config = qq.config(json!({"ackMessage": ""}));
    config.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let (host, events) = started_channel("qq", &config).await;
    qq.wait_ready(1).await;
    (host, events)
}

#[actix_rt::test]
async fn a_c2c_message_arrives_from_its_sender_and_the_reply_is_a_passive_reply_to_it() {
    let qq = FakeQq::start();
    let (host, mut events) = qq_host(&qq, json!({})).await;
    let identify = &qq.payloads(2)[0];
    assert_eq!(
        (identify.data["token"].as_str(), identify.data["intents"].as_u64()),
        (Some("QQBot token-1"), Some(1 << 25))
    );
    qq.dispatch(C2C, c2c_message("msg-1", "U_ADA", "hello bot")).await;
    let inbound = next_inbound(&mut events, "qq").await;
    assert_eq!(
        (inbound.id.as_str(), inbound.sender_id.as_str(), inbound.chat_id.as_str(), inbound.content.as_str()),
        ("msg-1", "U_ADA", "U_ADA", "hello bot")
    );
    assert_eq!(inbound.metadata, json!({"is_group": false, "message_id": "msg-1", "chat_type": "c2c"}));
    accept(&host, "qq", &inbound);

    host.send("qq", outbound(7, "U_ADA", "**Hi** Ada", inbound.metadata.clone())).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 7, ok: true, error: None, permanent: false });
    let sends = qq.calls(&user_messages("U_ADA"));
    assert_eq!(sends.len(), 1);
    assert_eq!((sends[0].body["msg_type"].as_u64(), sends[0].text()), (Some(0), "**Hi** Ada"));
    assert_eq!(sends[0].body["msg_id"], "msg-1", "a passive reply names the message");
    assert!(sends[0].body["msg_seq"].as_u64().is_some());
    assert_eq!(sends[0].authorization, "QQBot token-1");
    assert_eq!(qq.calls(TOKEN_PATH).len(), 1, "one token for the gateway and the reply");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_group_message_is_the_groups_chat_and_the_reply_goes_to_the_group_as_markdown() {
    let qq = FakeQq::start();
    let (host, mut events) = qq_host(&qq, json!({"msgFormat": "markdown"})).await;
    qq.dispatch(GROUP_AT, group_message("msg-g", "G_TEAM", "M_ADA", "what's the plan?")).await;
    let inbound = next_inbound(&mut events, "qq").await;
    assert_eq!((inbound.chat_id.as_str(), inbound.sender_id.as_str()), ("G_TEAM", "M_ADA"));
    assert_eq!((inbound.content.as_str(), inbound.metadata["is_group"].as_bool()), ("what's the plan?", Some(true)));
    accept(&host, "qq", &inbound);
    host.send("qq", outbound(8, "G_TEAM", "Ship it **Friday**.", json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok, "a chat known as a group is answered there without metadata");
    let sends = qq.calls(&group_messages("G_TEAM"));
    assert_eq!((sends[0].body["msg_type"].as_u64(), sends[0].text()), (Some(2), "Ship it **Friday**."));
    assert!(qq.calls(&user_messages("G_TEAM")).is_empty());
    host.shutdown().await;
}

#[actix_rt::test]
async fn the_processing_notice_is_a_passive_reply_to_the_accepted_message_with_a_msg_seq_of_its_own() {
    let qq = FakeQq::start();
    let (host, mut events) = qq_host(&qq, json!({"ackMessage": "⏳ Processing..."})).await;
    qq.dispatch(C2C, c2c_message("msg-n", "U_ADA", "think hard")).await;
    let inbound = next_inbound(&mut events, "qq").await;
    accept(&host, "qq", &inbound);
    let notices = qq.wait_sends(&user_messages("U_ADA"), 1).await;
    assert_eq!((notices[0].text(), notices[0].body["msg_id"].as_str()), ("⏳ Processing...", Some("msg-n")));
    host.send("qq", outbound(9, "U_ADA", "done", inbound.metadata.clone())).unwrap();
    assert!(next_delivery(&mut events).await.ok, "the reply's msg_seq differs from the notice's");
    let seqs: Vec<u64> =
        qq.calls(&user_messages("U_ADA")).iter().map(|call| call.body["msg_seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs.len(), 2);
    assert_ne!(seqs[0], seqs[1]);
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_message_sent_twice_reaches_the_kernel_once() {
    let qq = FakeQq::start();
    let (host, mut events) = qq_host(&qq, json!({})).await;
    qq.dispatch(C2C, c2c_message("msg-once", "U_ADA", "only once")).await;
    let inbound = next_inbound(&mut events, "qq").await;
    qq.dispatch(C2C, c2c_message("msg-once", "U_ADA", "only once")).await;
    accept(&host, "qq", &inbound);
    qq.dispatch(C2C, c2c_message("msg-once", "U_ADA", "only once")).await;
    qq.dispatch(C2C, c2c_message("msg-next", "U_ADA", "a new one")).await;
    assert_eq!(next_inbound(&mut events, "qq").await.content, "a new one", "the message sent again came through");
    host.shutdown().await;
}

#[actix_rt::test]
async fn heartbeats_report_a_message_event_handled_only_once_the_kernel_accepted_it() {
    let qq = FakeQq::with_heartbeat(50);
    let (host, mut events) = qq_host(&qq, json!({})).await;
    let seq = qq.dispatch(C2C, c2c_message("msg-hb", "U_ADA", "count me")).await;
    let inbound = next_inbound(&mut events, "qq").await;
    qq.wait_heartbeat(json!(seq - 1)).await;
    assert!(qq.payloads(1).iter().all(|beat| beat.data != json!(seq)), "handled before the kernel accepted it");
    accept(&host, "qq", &inbound);
    qq.wait_heartbeat(json!(seq)).await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_dropped_connection_is_resumed_and_the_events_it_missed_arrive() {
    let qq = FakeQq::start();
    let (host, mut events) = qq_host(&qq, json!({})).await;
    qq.dispatch(C2C, c2c_message("msg-a", "U_ADA", "before the drop")).await;
    let first = next_inbound(&mut events, "qq").await;
    accept(&host, "qq", &first);
    host.send("qq", outbound(1, "U_ADA", "ok", first.metadata.clone())).unwrap();
    next_delivery(&mut events).await;
    qq.cut_connections();
    let missed = qq.dispatch(C2C, c2c_message("msg-b", "U_ADA", "while you were away")).await;
    qq.wait_ready(2).await;
    assert_eq!(next_inbound(&mut events, "qq").await.content, "while you were away");
    let resume = &qq.wait_payloads(6, 1).await[0];
    assert_eq!(resume.data["session_id"], "session-1");
    assert!(resume.data["seq"].as_u64().unwrap() < missed, "resumed after {}", resume.data["seq"]);
    assert_eq!(qq.payloads(2).len(), 1, "identified once, resumed after the drop");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_message_not_yet_accepted_when_the_connection_dropped_is_sent_again_and_submitted_once() {
    let qq = FakeQq::start();
    let (host, mut events) = qq_host(&qq, json!({})).await;
    let seq = qq.dispatch(C2C, c2c_message("msg-w", "U_ADA", "wait for me")).await;
    let inbound = next_inbound(&mut events, "qq").await;
    qq.cut_connections();
    qq.wait_ready(2).await;
    let resume = &qq.wait_payloads(6, 1).await[0];
    assert_eq!(resume.data["seq"].as_u64(), Some(seq - 1), "the unaccepted message is asked for again");
    accept(&host, "qq", &inbound);
    qq.dispatch(C2C, c2c_message("msg-x", "U_ADA", "next")).await;
    assert_eq!(next_inbound(&mut events, "qq").await.content, "next", "the message sent again came through twice");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_reconnect_request_resumes_and_a_session_qq_forgot_is_identified_anew() {
    let qq = FakeQq::start();
    let (host, mut events) = qq_host(&qq, json!({})).await;
    qq.ask_to_reconnect();
    qq.wait_ready(2).await;
    assert_eq!(qq.payloads(6).len(), 1, "a reconnect resumes");
    qq.forget_sessions();
    qq.cut_connections();
    qq.wait_payloads(2, 2).await;
    qq.wait_ready(3).await;
    qq.dispatch(C2C, c2c_message("msg-new", "U_ADA", "new session")).await;
    assert_eq!(next_inbound(&mut events, "qq").await.content, "new session");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_long_reply_is_sent_in_parts_that_fit_each_with_its_own_msg_seq() {
    let qq = FakeQq::start();
    let (host, mut events) = qq_host(&qq, json!({})).await;
    qq.dispatch(C2C, c2c_message("msg-long", "U_ADA", "write a lot")).await;
    let inbound = next_inbound(&mut events, "qq").await;
    accept(&host, "qq", &inbound);
    let lines: Vec<String> = (0..200).map(|n| format!("line {n:03} {}", "字".repeat(40))).collect();
    let content = format!("intro\n```\n{}\n```\noutro", lines.join("\n"));
    host.send("qq", outbound(10, "U_ADA", &content, inbound.metadata.clone())).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 10, ok: true, error: None, permanent: false });
    let sends = qq.calls(&user_messages("U_ADA"));
    assert!(sends.len() >= 3, "{} parts", sends.len());
    for send in &sends {
        assert!(send.text().chars().count() <= 4000, "a part of {} characters", send.text().chars().count());
        assert_eq!(send.text().matches("```").count() % 2, 0, "a part with an open code block");
        assert_eq!((send.status, send.body["msg_id"].as_str()), (200, Some("msg-long")));
    }
    let all: String = sends.iter().map(|send| send.text()).collect::<Vec<_>>().join("\n");
    assert!(all.starts_with("intro\n```\nline 000") && all.ends_with("\n```\noutro"));
    assert!((0..200).all(|n| all.contains(&format!("line {n:03} "))));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_send_qq_refuses_is_acked_as_a_failed_delivery_with_qqs_words() {
    let qq = FakeQq::start();
    let (host, mut events) = qq_host(&qq, json!({})).await;
    qq.refuse_next_send(400, 22_009, "msg limit exceed");
    host.send("qq", outbound(11, "U_ADA", "anyone?", json!({}))).unwrap();
    let ack = next_delivery(&mut events).await;
    assert_eq!((ack.id, ack.ok), (11, false));
    assert!(ack.error.as_deref().unwrap_or_default().contains("msg limit exceed"), "{ack:?}");
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_attachment_is_downloaded_into_the_media_dir_and_handed_to_the_kernel_as_media() {
    let qq = FakeQq::start();
    let media = TempDir::new("qq-media");
    qq.add_file("photo.jpg", b"\xff\xd8 fake jpeg");
    let (host, mut events) = qq_host(&qq, json!({"mediaDir": media.path()})).await;
    let mut data = c2c_message("msg-pic", "U_ADA", "");
    data["attachments"] =
        json!([{"url": qq.file_url("photo.jpg"), "filename": "photo.jpg", "content_type": "image/jpeg"}]);
    qq.dispatch(C2C, data).await;
    let inbound = next_inbound(&mut events, "qq").await;
    assert_eq!(inbound.content, "[image: photo.jpg]");
    assert_eq!(inbound.media.len(), 1);
    assert!(inbound.media[0].starts_with(&media.path().display().to_string()), "{:?}", inbound.media);
    assert_eq!(std::fs::read(&inbound.media[0]).unwrap(), b"\xff\xd8 fake jpeg");
    host.shutdown().await;
}

#[actix_rt::test]
async fn refused_credentials_fail_the_channel_with_a_reason_that_names_the_keys() {
    let qq = FakeQq::start();
    let spec = channel_spec(&bin("oxibot"), "qq", &qq.config(json!({"secret": "wrong"}))).unwrap();
    let host = start_host(vec![spec]).await;
    oxibot_tests::wait::eventually("the channel has failed", || host.statuses()[0].state == "failed").await;
    let reason = host.statuses()[0].reason.clone().unwrap();
    assert!(reason.contains("channels.qq.appId, secret") && reason.contains("invalid appid or secret"), "{reason}");
    assert!(qq.payloads(2).is_empty(), "identified without a token");
    host.shutdown().await;
}

#[test]
fn only_senders_in_allow_from_reach_the_model() {
    let qq = FakeQq::start();
    let section = qq.config(json!({"enabled": true, "allowFrom": ["U_ADA"], "ackMessage": ""}));
    let env = GatewayEnv::with_channels(json!({"qq": section}));
    let _gateway = env.start_with("qq");
    env.llm.push(Reply::Text("Hello, allowed one".into()));
    block_on(async {
        qq.wait_ready(1).await;
        qq.dispatch(GROUP_AT, group_message("msg-stranger", "G_TEAM", "M_EVE", "let me in")).await;
        qq.dispatch(C2C, c2c_message("msg-friend", "U_ADA", "hi")).await;
        let sends = qq.wait_sends(&user_messages("U_ADA"), 1).await;
        assert_eq!(sends[0].text(), "Hello, allowed one");
    });
    assert!(qq.calls(&group_messages("G_TEAM")).is_empty(), "the stranger got an answer");
    assert_eq!(env.llm.requests().len(), 1, "the stranger reached the model");
}
