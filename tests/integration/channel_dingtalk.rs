//! The DingTalk channel plugin through the real plugin host (and, for `allowFrom`, the real
//! gateway) against a fake DingTalk: robot messages arriving over Stream Mode become inbound
//! events and are acknowledged only once the kernel accepted them, redeliveries, disconnects
//! and dropped connections lose or double nothing, and replies reach the robot send API in
//! parts that fit, with one access token reused.

use oxibot_kernel::plugin::{PluginEvent, PluginHost, channel_spec};
use oxibot_proto::DeliveryAck;
use oxibot_tests::channels::{accept, event_where, next_delivery, next_inbound, outbound, started_channel};
use oxibot_tests::fakes_dingtalk::{
    ACCESS_TOKEN, BATCH_SEND, CLIENT_ID, CONNECTIONS_OPEN, FakeDingTalk, GROUP_SEND, SendReply, group_text,
    one_to_one_picture, one_to_one_text,
};
use oxibot_tests::llm::Reply;
use oxibot_tests::procs::sigkill;
use oxibot_tests::wait::block_on;
use oxibot_tests::{TempDir, bin, start_host};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use super::gateway::GatewayEnv;

/// Starts the host with the DingTalk channel configured for `dingtalk`, and waits until the
/// channel holds a Stream connection.
async fn dingtalk_host(dingtalk: &FakeDingTalk, extra: Value) -> (PluginHost, UnboundedReceiver<PluginEvent>) {
    let (host, events) = started_channel("dingtalk", &dingtalk.config(extra)).await;
    dingtalk.wait_connections(1).await;
    (host, events)
}

#[actix_rt::test]
async fn a_one_to_one_message_arrives_from_its_sender_and_the_reply_goes_to_that_user_through_batch_send() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({})).await;
    dingtalk.deliver("frame-1", one_to_one_text("msg-1", "staff42", "Ada", "hello robot")).await;
    let inbound = next_inbound(&mut events, "dingtalk").await;
    assert_eq!(
        (inbound.id.as_str(), inbound.sender_id.as_str(), inbound.chat_id.as_str(), inbound.content.as_str()),
        ("msg-1", "staff42", "staff42", "hello robot")
    );
    assert_eq!(inbound.metadata["is_group"], false);
    assert_eq!(inbound.metadata["username"], "Ada");
    accept(&host, "dingtalk", &inbound);
    dingtalk.wait_ack("frame-1").await;

    host.send("dingtalk", outbound(7, &inbound.chat_id, "**Hi** Ada, how can I help?", inbound.metadata.clone()))
        .unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 7, ok: true, error: None, permanent: false });
    let sends = dingtalk.calls(BATCH_SEND);
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0].body["userIds"], json!(["staff42"]));
    assert_eq!(
        (sends[0].body["robotCode"].as_str(), sends[0].body["msgKey"].as_str()),
        (Some(CLIENT_ID), Some("sampleMarkdown"))
    );
    assert_eq!(
        sends[0].msg_param(),
        json!({"title": "Hi Ada, how can I help?", "text": "**Hi** Ada, how can I help?"})
    );
    assert_eq!(sends[0].token, "token-1");
    assert!(dingtalk.calls(GROUP_SEND).is_empty());
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_group_message_is_the_groups_chat_and_the_reply_goes_to_that_conversation_through_group_send() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({})).await;
    dingtalk.deliver("frame-g1", group_text("msg-g1", "cidGroup1+A==", "staff42", "Ada", "what's the plan?")).await;
    let inbound = next_inbound(&mut events, "dingtalk").await;
    assert_eq!((inbound.chat_id.as_str(), inbound.content.as_str()), ("group:cidGroup1+A==", "what's the plan?"));
    assert_eq!(inbound.sender_id, "staff42");
    assert_eq!(inbound.metadata["is_group"], true);
    assert_eq!(inbound.metadata["conversation_title"], "Project team");
    accept(&host, "dingtalk", &inbound);

    host.send("dingtalk", outbound(8, &inbound.chat_id, "Ship it on Friday.", inbound.metadata.clone())).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let sends = dingtalk.calls(GROUP_SEND);
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0].body["openConversationId"], "cidGroup1+A==");
    assert_eq!(sends[0].msg_param()["text"], "# @Ada\n\nShip it on Friday.", "the reply names who it answers");
    assert!(dingtalk.calls(BATCH_SEND).is_empty());
    host.shutdown().await;
}

#[actix_rt::test]
async fn with_group_user_isolation_each_member_of_a_group_has_a_chat_of_their_own_answered_in_the_group() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({"groupUserIsolation": true})).await;
    dingtalk.deliver("frame-i1", group_text("msg-i1", "cidGroup2", "staff1", "Ada", "mine")).await;
    let first = next_inbound(&mut events, "dingtalk").await;
    accept(&host, "dingtalk", &first);
    dingtalk.deliver("frame-i2", group_text("msg-i2", "cidGroup2", "staff2", "Bo", "mine too")).await;
    let second = next_inbound(&mut events, "dingtalk").await;
    assert_eq!((first.chat_id.as_str(), second.chat_id.as_str()), ("group:cidGroup2:staff1", "group:cidGroup2:staff2"));
    accept(&host, "dingtalk", &second);

    host.send("dingtalk", outbound(9, &second.chat_id, "yours", second.metadata.clone())).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    assert_eq!(dingtalk.calls(GROUP_SEND)[0].body["openConversationId"], "cidGroup2");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_callback_is_acknowledged_only_after_the_kernel_accepted_its_message() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({})).await;
    dingtalk.deliver("frame-wait", one_to_one_text("msg-wait", "staff42", "Ada", "keep me")).await;
    let inbound = next_inbound(&mut events, "dingtalk").await;
    // A barrier instead of a pause: the channel reads frames in order and queues its answers in
    // order on one queue, and it answers a ping at once. Once the pong is in, an ack of the
    // message sent on arrival would have come before it.
    dingtalk.ping("ping-barrier").await;
    dingtalk.wait_ack("ping-barrier").await;
    assert_eq!(dingtalk.acks(), ["ping-barrier"], "acknowledged before the kernel accepted");
    accept(&host, "dingtalk", &inbound);
    let ack = dingtalk.wait_ack("frame-wait").await;
    assert_eq!((ack.code, ack.data.as_str()), (200, "{\"response\":null}"));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_system_ping_is_answered_with_its_own_id_and_data() {
    let dingtalk = FakeDingTalk::start();
    let (host, _events) = dingtalk_host(&dingtalk, json!({})).await;
    dingtalk.ping("ping-7").await;
    let pong = dingtalk.wait_ack("ping-7").await;
    assert_eq!(pong.code, 200);
    assert_eq!(serde_json::from_str::<Value>(&pong.data).unwrap(), json!({"opaque": "opaque-ping-7"}));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_redelivered_callback_with_the_same_msg_id_is_submitted_once_and_every_frame_is_acknowledged() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({})).await;
    let data = one_to_one_text("msg-once", "staff42", "Ada", "only once");
    dingtalk.deliver("frame-first", data.clone()).await;
    let inbound = next_inbound(&mut events, "dingtalk").await;
    dingtalk.deliver("frame-again-1", data.clone()).await;
    accept(&host, "dingtalk", &inbound);
    dingtalk.wait_ack("frame-first").await;
    dingtalk.wait_ack("frame-again-1").await;
    dingtalk.deliver("frame-again-2", data).await;
    dingtalk.wait_ack("frame-again-2").await;
    dingtalk.deliver("frame-next", one_to_one_text("msg-next", "staff42", "Ada", "a new one")).await;
    let next = next_inbound(&mut events, "dingtalk").await;
    assert_eq!(next.content, "a new one", "the redelivered message came through twice");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_dropped_connection_is_registered_and_opened_again_and_later_messages_flow() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({})).await;
    dingtalk.cut_connection().await;
    dingtalk.wait_connections(2).await;
    assert_eq!(dingtalk.calls(CONNECTIONS_OPEN).len(), 2, "each connection has a fresh ticket");
    dingtalk.deliver("frame-back", one_to_one_text("msg-back", "staff42", "Ada", "back?")).await;
    let inbound = next_inbound(&mut events, "dingtalk").await;
    assert_eq!(inbound.content, "back?");
    accept(&host, "dingtalk", &inbound);
    let ack = dingtalk.wait_ack("frame-back").await;
    assert_eq!(ack.connection, 1, "acknowledged on the new connection");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_disconnect_frame_makes_the_channel_open_a_new_connection_with_a_fresh_ticket() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({})).await;
    dingtalk.disconnect().await;
    dingtalk.wait_connections(2).await;
    assert_eq!(dingtalk.calls(CONNECTIONS_OPEN).len(), 2);
    assert!(!dingtalk.acks().contains(&"disconnect-1".to_owned()), "a disconnect needs no answer");
    dingtalk.deliver("frame-after", one_to_one_text("msg-after", "staff42", "Ada", "still there?")).await;
    let inbound = next_inbound(&mut events, "dingtalk").await;
    assert_eq!(inbound.content, "still there?");
    accept(&host, "dingtalk", &inbound);
    dingtalk.wait_ack("frame-after").await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_long_reply_is_sent_in_parts_that_each_fit_dingtalks_limit() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({})).await;
    let lines: Vec<String> = (0..200).map(|n| format!("line {n:03} {}", "字".repeat(40))).collect();
    let content = format!("intro\n```\n{}\n```\noutro", lines.join("\n"));
    host.send("dingtalk", outbound(10, "staff42", &content, json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let texts: Vec<String> =
        dingtalk.calls(BATCH_SEND).iter().map(|send| send.msg_param()["text"].as_str().unwrap().to_owned()).collect();
    assert!(texts.len() >= 3, "{} parts", texts.len());
    for text in &texts {
        assert!(text.chars().count() <= 4000, "a part of {} characters", text.chars().count());
        assert_eq!(text.matches("```").count() % 2, 0, "a part with an open code block: {text}");
    }
    assert!(texts[0].starts_with("intro\n```\nline 000"));
    assert!(texts.last().unwrap().ends_with("\n```\noutro"));
    let all = texts.join("\n");
    assert!((0..200).all(|n| all.contains(&format!("line {n:03} "))));
    host.shutdown().await;
}

#[actix_rt::test]
async fn the_access_token_is_fetched_once_and_reused_for_every_reply() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({})).await;
    for id in 11..14 {
        host.send("dingtalk", outbound(id, "staff42", &format!("reply {id}"), json!({}))).unwrap();
        assert!(next_delivery(&mut events).await.ok);
    }
    host.send("dingtalk", outbound(14, "group:cidG", "to the group", json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    assert_eq!(dingtalk.calls(ACCESS_TOKEN).len(), 1);
    assert_eq!(dingtalk.calls(ACCESS_TOKEN)[0].body, json!({"appKey": CLIENT_ID, "appSecret": "fake-client-secret"}));
    let mut sends = dingtalk.calls(BATCH_SEND);
    sends.extend(dingtalk.calls(GROUP_SEND));
    assert_eq!(sends.len(), 4);
    assert!(sends.iter().all(|send| send.token == "token-1"), "{sends:?}");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_revoked_access_token_is_replaced_once_and_the_reply_still_goes_out() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({})).await;
    host.send("dingtalk", outbound(15, "staff42", "first", json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    dingtalk.revoke_tokens();
    host.send("dingtalk", outbound(16, "staff42", "second", json!({}))).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 16, ok: true, error: None, permanent: false });
    assert_eq!(dingtalk.calls(ACCESS_TOKEN).len(), 2);
    let tokens: Vec<String> = dingtalk.calls(BATCH_SEND).into_iter().map(|send| send.token).collect();
    assert_eq!(tokens, ["token-1", "token-1", "token-2"]);
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_send_dingtalk_refuses_is_acked_as_a_failed_delivery_and_a_rate_limit_is_waited_out() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({})).await;
    dingtalk.push_send_reply(SendReply::Error(400, "staffId.notExisted".into()));
    host.send("dingtalk", outbound(17, "nobody", "anyone?", json!({}))).unwrap();
    let ack = next_delivery(&mut events).await;
    assert_eq!((ack.id, ack.ok), (17, false));
    assert!(ack.error.as_deref().unwrap_or_default().contains("staffId.notExisted"), "{ack:?}");

    dingtalk.push_send_reply(SendReply::RateLimited(0));
    host.send("dingtalk", outbound(18, "staff42", "patience", json!({}))).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 18, ok: true, error: None, permanent: false });
    assert_eq!(dingtalk.calls(BATCH_SEND).len(), 3);
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_picture_is_downloaded_into_the_media_dir_and_handed_to_the_kernel_as_media() {
    let dingtalk = FakeDingTalk::start();
    let media = TempDir::new("dingtalk-media");
    dingtalk.add_file("dc-photo", b"\x89PNG fake picture");
    let (host, mut events) = dingtalk_host(&dingtalk, json!({"mediaDir": media.path()})).await;
    dingtalk.deliver("frame-pic", one_to_one_picture("msg-pic", "staff42", "Ada", "dc-photo")).await;
    let inbound = next_inbound(&mut events, "dingtalk").await;
    assert_eq!(inbound.content, "[Image]");
    assert_eq!(inbound.media.len(), 1);
    assert!(inbound.media[0].starts_with(&media.path().display().to_string()), "{:?}", inbound.media);
    assert_eq!(std::fs::read(&inbound.media[0]).unwrap(), b"\x89PNG fake picture");
    let download = &dingtalk.calls("/v1.0/robot/messageFiles/download")[0];
    assert_eq!(download.body, json!({"downloadCode": "dc-photo", "robotCode": CLIENT_ID}));
    accept(&host, "dingtalk", &inbound);
    dingtalk.wait_ack("frame-pic").await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_one_to_one_message_gets_only_a_notice_when_private_chats_are_disabled() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({"disablePrivateChat": true})).await;
    dingtalk.deliver("frame-dm", one_to_one_text("msg-dm", "staff42", "Ada", "psst")).await;
    dingtalk.wait_ack("frame-dm").await;
    let notices = dingtalk.wait_calls(BATCH_SEND, 1).await;
    assert_eq!(notices[0].body["userIds"], json!(["staff42"]));
    assert!(notices[0].msg_param()["text"].as_str().unwrap().contains("群聊"), "{:?}", notices[0].msg_param());
    dingtalk.deliver("frame-group", group_text("msg-group", "cidG", "staff42", "Ada", "hello all")).await;
    let inbound = next_inbound(&mut events, "dingtalk").await;
    assert_eq!(inbound.id, "msg-group", "the private message reached the kernel");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_message_not_accepted_before_the_channel_died_is_submitted_again_when_dingtalk_redelivers_it() {
    let dingtalk = FakeDingTalk::start();
    let (host, mut events) = dingtalk_host(&dingtalk, json!({})).await;
    let data = one_to_one_text("msg-crash", "staff42", "Ada", "do not lose me");
    dingtalk.deliver("frame-before-crash", data.clone()).await;
    let first = next_inbound(&mut events, "dingtalk").await;
    sigkill(host.statuses()[0].pid.unwrap());
    event_where(&mut events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == "dingtalk")).await;
    dingtalk.wait_connections(2).await;
    dingtalk.deliver("frame-redelivered", data).await;
    let again = next_inbound(&mut events, "dingtalk").await;
    assert_eq!((again.id.as_str(), again.content.as_str()), (first.id.as_str(), "do not lose me"));
    accept(&host, "dingtalk", &again);
    dingtalk.wait_ack("frame-redelivered").await;
    assert_eq!(dingtalk.acks(), ["frame-redelivered"], "the frame seen by the killed instance was acknowledged");
    host.shutdown().await;
}

#[actix_rt::test]
async fn refused_credentials_fail_the_channel_with_a_reason_that_names_the_keys() {
    let dingtalk = FakeDingTalk::start();
    let spec = channel_spec(&bin("oxibot"), "dingtalk", &dingtalk.config(json!({"clientSecret": "wrong"}))).unwrap();
    let host = start_host(vec![spec]).await;
    oxibot_tests::wait::eventually("the channel has failed", || host.statuses()[0].state == "failed").await;
    let reason = host.statuses()[0].reason.clone().unwrap();
    assert!(reason.contains("channels.dingtalk.clientId, clientSecret") && reason.contains("401"), "{reason}");
    assert!(dingtalk.calls(ACCESS_TOKEN).is_empty());
    host.shutdown().await;
}

#[test]
fn only_senders_in_allow_from_reach_the_model_and_the_others_are_acknowledged_without_a_reply() {
    let dingtalk = FakeDingTalk::start();
    let section = dingtalk.config(json!({"enabled": true, "allowFrom": ["staff-ok"]}));
    let env = GatewayEnv::with_channels(json!({"dingtalk": section}));
    let _gateway = env.start_with("dingtalk");
    env.llm.push(Reply::Text("Hello, allowed one".into()));
    block_on(async {
        dingtalk.wait_connections(1).await;
        dingtalk.deliver("frame-stranger", one_to_one_text("msg-stranger", "staff-no", "Eve", "let me in")).await;
        dingtalk.wait_ack("frame-stranger").await;
        dingtalk.deliver("frame-friend", one_to_one_text("msg-friend", "staff-ok", "Ada", "hi")).await;
        let sends = dingtalk.wait_calls(BATCH_SEND, 1).await;
        assert_eq!(sends[0].body["userIds"], json!(["staff-ok"]));
        assert_eq!(sends[0].msg_param()["text"], "Hello, allowed one");
    });
    assert_eq!(dingtalk.calls(BATCH_SEND).len(), 1, "the stranger got an answer");
    assert_eq!(env.llm.requests().len(), 1, "the stranger reached the model");
}
