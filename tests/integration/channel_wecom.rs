//! The WeCom channel plugin through the real plugin host (and, for `allowFrom`, the real
//! gateway) against a fake WeCom long connection: callbacks become inbound events, a message
//! delivered twice reaches the kernel once, replies are stream replies to their callbacks
//! (streamed while written, the rest of a long one pushed in parts that fit), users opening a
//! chat are welcomed, and a dropped or taken-over connection is subscribed again.

use oxibot_kernel::plugin::{PluginEvent, PluginHost, channel_spec};
use oxibot_proto::{DeliveryAck, Delta, Message, Outbound};
use oxibot_tests::channels::{accept, event_where, next_delivery, next_inbound, outbound, started_channel};
use oxibot_tests::fakes_wecom::{FakeWeCom, INVALID_REQ_ID, direct_text, group_text};
use oxibot_tests::llm::Reply;
use oxibot_tests::wait::block_on;
use oxibot_tests::{bin, start_host};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use super::gateway::GatewayEnv;

/// Starts the host with the WeCom channel configured for `wecom`, and waits until the channel
/// has subscribed.
async fn wecom_host(wecom: &FakeWeCom, extra: Value) -> (PluginHost, UnboundedReceiver<PluginEvent>) {
    let (host, events) = started_channel("wecom", &wecom.config(extra)).await;
    wecom.wait_subscriptions(1).await;
    (host, events)
}

#[actix_rt::test]
async fn a_direct_message_arrives_from_its_sender_and_the_reply_finishes_a_stream_reply_to_its_callback() {
    let wecom = FakeWeCom::start();
    let (host, mut events) = wecom_host(&wecom, json!({})).await;
    let subscribe = &wecom.frames("aibot_subscribe")[0];
    assert_eq!(subscribe.body, json!({"bot_id": "aib-fake-bot", "secret": "fake-wecom-secret"}));
    wecom.deliver("req-1", direct_text("msg-1", "ada", "hello bot")).await;
    let inbound = next_inbound(&mut events, "wecom").await;
    assert_eq!(
        (inbound.id.as_str(), inbound.sender_id.as_str(), inbound.chat_id.as_str(), inbound.content.as_str()),
        ("msg-1", "ada", "ada", "hello bot")
    );
    assert_eq!(
        (inbound.metadata["is_group"].as_bool(), inbound.metadata["req_id"].as_str()),
        (Some(false), Some("req-1"))
    );
    accept(&host, "wecom", &inbound);

    host.send("wecom", outbound(7, &inbound.chat_id, "**Hi** Ada", inbound.metadata.clone())).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 7, ok: true, error: None, permanent: false });
    let replies = wecom.wait_finished_reply("req-1").await;
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].body["msgtype"], "stream");
    assert_eq!(replies[0].stream_content(), "**Hi** Ada", "WeCom renders the Markdown itself");
    assert!(wecom.frames("aibot_send_msg").is_empty());
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_group_message_is_the_groups_chat_without_the_mention_and_is_answered_on_its_callback() {
    let wecom = FakeWeCom::start();
    let (host, mut events) = wecom_host(&wecom, json!({})).await;
    wecom.deliver("req-g", group_text("msg-g", "wrkGroup1", "ada", "what's the plan?")).await;
    let inbound = next_inbound(&mut events, "wecom").await;
    assert_eq!((inbound.chat_id.as_str(), inbound.content.as_str()), ("wrkGroup1", "what's the plan?"));
    assert_eq!((inbound.sender_id.as_str(), inbound.metadata["is_group"].as_bool()), ("ada", Some(true)));
    accept(&host, "wecom", &inbound);
    host.send("wecom", outbound(8, "wrkGroup1", "Ship it on Friday.", inbound.metadata.clone())).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    assert_eq!(wecom.wait_finished_reply("req-g").await[0].stream_content(), "Ship it on Friday.");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_message_delivered_twice_reaches_the_kernel_once() {
    let wecom = FakeWeCom::start();
    let (host, mut events) = wecom_host(&wecom, json!({})).await;
    let body = direct_text("msg-once", "ada", "only once");
    wecom.deliver("req-first", body.clone()).await;
    let inbound = next_inbound(&mut events, "wecom").await;
    wecom.deliver("req-again-1", body.clone()).await;
    accept(&host, "wecom", &inbound);
    wecom.deliver("req-again-2", body).await;
    wecom.deliver("req-next", direct_text("msg-next", "ada", "a new one")).await;
    let next = next_inbound(&mut events, "wecom").await;
    assert_eq!(next.content, "a new one", "the message delivered again came through twice");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_streamed_reply_is_shown_while_written_and_finished_with_the_final_text_under_one_stream_id() {
    let wecom = FakeWeCom::start();
    let (host, mut events) = wecom_host(&wecom, json!({})).await;
    wecom.deliver("req-s", direct_text("msg-s", "ada", "tell me")).await;
    let inbound = next_inbound(&mut events, "wecom").await;
    accept(&host, "wecom", &inbound);
    for text in ["Hel", "lo ", "there"] {
        host.send("wecom", Message::Delta(Delta { stream_id: 9, chat_id: "ada".into(), text: text.into() })).unwrap();
    }
    let first = wecom.wait_frames("aibot_respond_msg", 1).await;
    assert!(first[0].stream_content().starts_with("Hel") && !first[0].finished(), "{:?}", first[0]);
    let final_reply = Outbound {
        id: 6,
        chat_id: "ada".into(),
        content: "Hello there, **Ada**".into(),
        media: vec![],
        stream_id: Some(9),
        metadata: inbound.metadata.clone(),
    };
    host.send("wecom", Message::Outbound(final_reply)).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 6, ok: true, error: None, permanent: false });
    let replies = wecom.wait_finished_reply("req-s").await;
    let last = replies.last().unwrap();
    assert_eq!((last.stream_content(), last.finished()), ("Hello there, **Ada**", true));
    let stream_ids: Vec<&Value> = replies.iter().map(|reply| &reply.body["stream"]["id"]).collect();
    assert!(stream_ids.iter().all(|id| *id == stream_ids[0]), "one stream: {stream_ids:?}");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_long_reply_finishes_the_stream_with_its_first_part_and_pushes_the_rest_in_parts_that_fit() {
    let wecom = FakeWeCom::start();
    let (host, mut events) = wecom_host(&wecom, json!({})).await;
    wecom.deliver("req-long", direct_text("msg-long", "ada", "write a lot")).await;
    let inbound = next_inbound(&mut events, "wecom").await;
    accept(&host, "wecom", &inbound);
    let lines: Vec<String> = (0..600).map(|n| format!("line {n:03} {}", "字".repeat(40))).collect();
    let content = format!("intro\n```\n{}\n```\noutro", lines.join("\n"));
    host.send("wecom", outbound(10, "ada", &content, inbound.metadata.clone())).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let mut texts = vec![wecom.wait_finished_reply("req-long").await[0].stream_content().to_owned()];
    let pushes = wecom.frames("aibot_send_msg");
    assert!(pushes.len() >= 2, "{} pushes", pushes.len());
    for push in &pushes {
        assert_eq!((push.body["chatid"].as_str(), push.body["msgtype"].as_str()), (Some("ada"), Some("markdown")));
        texts.push(push.body["markdown"]["content"].as_str().unwrap().to_owned());
    }
    for text in &texts {
        assert!(text.len() <= 20_480, "a part of {} bytes", text.len());
        assert_eq!(text.matches("```").count() % 2, 0, "a part with an open code block");
    }
    assert!(texts[0].starts_with("intro\n```\nline 000"));
    assert!(texts.last().unwrap().ends_with("\n```\noutro"));
    let all = texts.join("\n");
    assert!((0..600).all(|n| all.contains(&format!("line {n:03} "))));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_dropped_connection_is_subscribed_again_and_a_reply_to_a_callback_it_lost_is_pushed_to_the_chat() {
    let wecom = FakeWeCom::start();
    let (host, mut events) = wecom_host(&wecom, json!({})).await;
    wecom.deliver("req-before", direct_text("msg-before", "ada", "before the drop")).await;
    let before = next_inbound(&mut events, "wecom").await;
    accept(&host, "wecom", &before);
    wecom.cut_connection().await;
    wecom.wait_subscriptions(2).await;

    host.send("wecom", outbound(11, "ada", "late answer", before.metadata.clone())).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 11, ok: true, error: None, permanent: false });
    let refused = wecom.frames("aibot_respond_msg");
    assert_eq!(
        (refused.len(), refused[0].errcode),
        (1, INVALID_REQ_ID),
        "the new connection does not know the callback"
    );
    let pushes = wecom.frames("aibot_send_msg");
    assert_eq!((pushes.len(), pushes[0].connection), (1, 1));
    assert_eq!(pushes[0].body["markdown"]["content"], "late answer");

    wecom.deliver("req-back", direct_text("msg-back", "ada", "back?")).await;
    let inbound = next_inbound(&mut events, "wecom").await;
    assert_eq!(inbound.content, "back?");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_channel_whose_bot_another_connection_took_over_stops_and_is_restarted_by_the_kernel() {
    let wecom = FakeWeCom::start();
    let (host, mut events) = wecom_host(&wecom, json!({})).await;
    let first_pid = host.statuses()[0].pid;
    wecom.take_over_elsewhere().await;
    let down = event_where(&mut events, |e| matches!(e, PluginEvent::Down { .. })).await;
    let PluginEvent::Down { reason, .. } = down else { unreachable!() };
    assert!(reason.contains("took the bot over"), "{reason}");
    wecom.wait_subscriptions(2).await;
    assert_ne!(host.statuses()[0].pid, first_pid, "the same process subscribed again");
    wecom.deliver("req-mine", direct_text("msg-mine", "ada", "still mine?")).await;
    assert_eq!(next_inbound(&mut events, "wecom").await.content, "still mine?");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_user_opening_a_chat_gets_the_welcome_message_on_the_events_callback() {
    let wecom = FakeWeCom::start();
    let (host, _events) = wecom_host(&wecom, json!({"welcomeMessage": "你好! Ask me anything."})).await;
    wecom.enter_chat("req-enter", "ada").await;
    let welcome = &wecom.wait_frames("aibot_respond_welcome_msg", 1).await[0];
    assert_eq!((welcome.req_id.as_str(), welcome.errcode), ("req-enter", 0));
    assert_eq!(welcome.body, json!({"msgtype": "text", "text": {"content": "你好! Ask me anything."}}));
    host.shutdown().await;
}

#[actix_rt::test]
async fn without_a_welcome_message_opening_a_chat_gets_no_answer() {
    let wecom = FakeWeCom::start();
    let (host, mut events) = wecom_host(&wecom, json!({})).await;
    wecom.enter_chat("req-enter", "ada").await;
    wecom.deliver("req-after", direct_text("msg-after", "ada", "hi")).await;
    next_inbound(&mut events, "wecom").await;
    assert!(wecom.frames("aibot_respond_welcome_msg").is_empty());
    host.shutdown().await;
}

#[actix_rt::test]
async fn refused_credentials_fail_the_channel_with_a_reason_that_names_the_keys() {
    let wecom = FakeWeCom::start();
    let spec = channel_spec(&bin("oxibot"), "wecom", &wecom.config(json!({"secret": "wrong"}))).unwrap();
    let host = start_host(vec![spec]).await;
    oxibot_tests::wait::eventually("the channel has failed", || host.statuses()[0].state == "failed").await;
    let reason = host.statuses()[0].reason.clone().unwrap();
    assert!(reason.contains("channels.wecom.botId, secret") && reason.contains("40058"), "{reason}");
    host.shutdown().await;
}

#[test]
fn only_senders_in_allow_from_reach_the_model() {
    let wecom = FakeWeCom::start();
    let section = wecom.config(json!({"enabled": true, "allowFrom": ["ada"]}));
    let env = GatewayEnv::with_channels(json!({"wecom": section}));
    let _gateway = env.start_with("wecom");
    env.llm.push(Reply::Text("Hello, allowed one".into()));
    block_on(async {
        wecom.wait_subscriptions(1).await;
        wecom.deliver("req-stranger", direct_text("msg-stranger", "eve", "let me in")).await;
        wecom.deliver("req-friend", direct_text("msg-friend", "ada", "hi")).await;
        let replies = wecom.wait_finished_reply("req-friend").await;
        assert_eq!(replies.last().unwrap().stream_content(), "Hello, allowed one");
    });
    assert!(
        wecom.frames("aibot_respond_msg").iter().all(|reply| reply.req_id == "req-friend"),
        "the stranger got an answer"
    );
    assert_eq!(env.llm.requests().len(), 1, "the stranger reached the model");
}
