//! The Feishu channel plugin through the real plugin host against a fake Feishu: events on the
//! long connection (protobuf frames) become inbound events and are answered only once the
//! kernel accepted them, pushes repeated or cut into pieces and dropped connections lose or
//! double nothing, the mention policy keeps group chatter out, and replies are interactive
//! cards — streamed ones updated in place, long ones several.

use oxibot_kernel::plugin::{PluginEvent, PluginHost, channel_spec};
use oxibot_proto::{ApprovalAnswer, ApprovalRequest, DeliveryAck, Delta, Message, Outbound};
use oxibot_tests::channels::{accept, event_where, next_delivery, next_inbound, outbound, started_channel};
use oxibot_tests::fakes_feishu::{
    APP_ID, ENDPOINT, FakeFeishu, MESSAGES, SERVICE_ID, TENANT_TOKEN, card_action, direct_text, group_text,
    message_event,
};
use oxibot_tests::procs::sigkill;
use oxibot_tests::{TempDir, bin, start_host};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

/// Starts the host with the Feishu channel configured for `feishu`, and waits until the
/// channel holds a long connection.
async fn feishu_host(feishu: &FakeFeishu, extra: Value) -> (PluginHost, UnboundedReceiver<PluginEvent>) {
    let (host, events) = started_channel("feishu", &feishu.config(extra)).await;
    feishu.wait_connections(1).await;
    (host, events)
}

#[actix_rt::test]
async fn a_direct_message_arrives_from_its_sender_and_the_reply_is_a_card_sent_to_that_user() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({})).await;
    feishu.push_event("frame-1", &direct_text("om_1", "ou_ada", "hello bot")).await;
    let inbound = next_inbound(&mut events, "feishu").await;
    assert_eq!(
        (inbound.id.as_str(), inbound.sender_id.as_str(), inbound.chat_id.as_str(), inbound.content.as_str()),
        ("om_1", "ou_ada", "ou_ada", "hello bot")
    );
    assert_eq!(inbound.metadata["is_group"], false);
    assert_eq!(inbound.metadata["message_id"], "om_1");
    accept(&host, "feishu", &inbound);
    let answer = feishu.wait_answer("frame-1").await;
    assert_eq!(answer.frame.json()["code"], 200);
    assert!(answer.frame.header("biz_rt").is_some(), "{:?}", answer.frame.headers);

    host.send("feishu", outbound(3, &inbound.chat_id, "**Hi** Ada", inbound.metadata.clone())).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 3, ok: true, error: None, permanent: false });
    let created = feishu.calls(MESSAGES);
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].query, "receive_id_type=open_id");
    assert_eq!(
        (created[0].body["receive_id"].as_str(), created[0].body["msg_type"].as_str()),
        (Some("ou_ada"), Some("interactive"))
    );
    assert_eq!(created[0].card_markdown(), "**Hi** Ada");
    assert_eq!(created[0].authorization, "Bearer t-fake-1");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_group_message_without_a_mention_is_answered_at_once_and_ignored_while_a_mention_is_submitted_without_it() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({"topicIsolation": false})).await;
    feishu.push_event("frame-chatter", &group_text("om_c", "ou_ada", "oc_team", "just chatting", false)).await;
    feishu.wait_answer("frame-chatter").await;
    feishu.push_event("frame-mention", &group_text("om_m", "ou_ada", "oc_team", "what's next?", true)).await;
    let inbound = next_inbound(&mut events, "feishu").await;
    assert_eq!(inbound.id, "om_m", "the first inbound must be the mention");
    assert_eq!((inbound.chat_id.as_str(), inbound.content.as_str()), ("oc_team", "what's next?"));
    assert_eq!(inbound.metadata["is_group"], true);
    accept(&host, "feishu", &inbound);
    feishu.wait_answer("frame-mention").await;

    host.send("feishu", outbound(4, &inbound.chat_id, "Shipping.", inbound.metadata.clone())).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let created = feishu.calls(MESSAGES);
    assert_eq!(
        (created[0].query.as_str(), created[0].body["receive_id"].as_str()),
        ("receive_id_type=chat_id", Some("oc_team"))
    );
    host.shutdown().await;
}

#[actix_rt::test]
async fn with_an_open_group_policy_every_group_message_is_submitted_and_each_topic_is_a_chat_of_its_own() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({"groupPolicy": "open"})).await;
    feishu.push_event("frame-a", &group_text("om_a", "ou_ada", "oc_team", "first topic", false)).await;
    let first = next_inbound(&mut events, "feishu").await;
    accept(&host, "feishu", &first);
    let mut in_topic = group_text("om_b", "ou_bo", "oc_team", "a reply in the first topic", false);
    in_topic["event"]["message"]["root_id"] = json!("om_a");
    in_topic["event"]["message"]["thread_id"] = json!("omt_a");
    feishu.push_event("frame-b", &in_topic).await;
    let second = next_inbound(&mut events, "feishu").await;
    assert_eq!((first.chat_id.as_str(), second.chat_id.as_str()), ("oc_team:om_a", "oc_team:om_a"));
    accept(&host, "feishu", &second);

    host.send("feishu", outbound(5, &second.chat_id, "in the topic", second.metadata.clone())).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let replies = feishu.calls_like("POST", "/open-apis/im/v1/messages/om_b/reply");
    assert_eq!(replies.len(), 1, "a reply in a topic stays in the topic");
    assert_eq!(replies[0].body["reply_in_thread"], false);
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_event_is_answered_only_after_the_kernel_accepted_its_message() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({})).await;
    feishu.push_event("frame-wait", &direct_text("om_wait", "ou_ada", "keep me")).await;
    let inbound = next_inbound(&mut events, "feishu").await;
    // A barrier instead of a pause: the channel reads frames in order and queues its answers in
    // order, and it answers group chatter at once. Once that answer is in, an answer to the
    // message sent on arrival would have come before it.
    feishu.push_event("frame-barrier", &group_text("om_x", "ou_bo", "oc_team", "chatter", false)).await;
    feishu.wait_answer("frame-barrier").await;
    assert_eq!(feishu.answered(), ["frame-barrier"], "answered before the kernel accepted");
    accept(&host, "feishu", &inbound);
    feishu.wait_answer("frame-wait").await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_event_pushed_again_is_submitted_once_and_every_frame_is_answered() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({})).await;
    let event = direct_text("om_once", "ou_ada", "only once");
    feishu.push_event("frame-first", &event).await;
    let inbound = next_inbound(&mut events, "feishu").await;
    feishu.push_event("frame-again-1", &event).await;
    accept(&host, "feishu", &inbound);
    feishu.wait_answer("frame-first").await;
    feishu.wait_answer("frame-again-1").await;
    feishu.push_event("frame-again-2", &event).await;
    feishu.wait_answer("frame-again-2").await;
    feishu.push_event("frame-next", &direct_text("om_next", "ou_ada", "a new one")).await;
    let next = next_inbound(&mut events, "feishu").await;
    assert_eq!(next.content, "a new one", "the message pushed again came through twice");
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_event_cut_into_pieces_is_joined_before_it_is_read() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({})).await;
    let long = "长".repeat(2000);
    feishu.push_event_in_pieces("frame-cut", &direct_text("om_cut", "ou_ada", &long), 3).await;
    let inbound = next_inbound(&mut events, "feishu").await;
    assert_eq!(inbound.content, long);
    accept(&host, "feishu", &inbound);
    feishu.wait_answer("frame-cut").await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn the_channel_pings_with_the_service_id_of_its_connection() {
    let feishu = FakeFeishu::start();
    let (host, _events) = feishu_host(&feishu, json!({})).await;
    let pings = feishu.wait_pings(1).await;
    assert_eq!((pings[0].frame.service, pings[0].frame.method), (SERVICE_ID, 0));
    assert_eq!(pings[0].frame.headers, [("type".to_owned(), "ping".to_owned())]);
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_dropped_connection_is_opened_again_with_a_fresh_endpoint_and_messages_still_flow() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({})).await;
    feishu.cut_connection().await;
    feishu.wait_connections(2).await;
    assert_eq!(feishu.calls(ENDPOINT).len(), 2, "each connection has a fresh ticket");
    feishu.push_event("frame-back", &direct_text("om_back", "ou_ada", "back?")).await;
    let inbound = next_inbound(&mut events, "feishu").await;
    assert_eq!(inbound.content, "back?");
    accept(&host, "feishu", &inbound);
    assert_eq!(feishu.wait_answer("frame-back").await.connection, 1, "answered on the new connection");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_streamed_reply_is_one_card_updated_to_the_final_text() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({})).await;
    for text in ["Hel", "lo ", "there"] {
        host.send("feishu", Message::Delta(Delta { stream_id: 9, chat_id: "ou_ada".into(), text: text.into() }))
            .unwrap();
    }
    let final_reply = Outbound {
        id: 6,
        chat_id: "ou_ada".into(),
        content: "Hello there, **Ada**".into(),
        media: vec![],
        stream_id: Some(9),
        metadata: json!({}),
    };
    feishu.wait_calls(MESSAGES, 1).await;
    host.send("feishu", Message::Outbound(final_reply)).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 6, ok: true, error: None, permanent: false });
    let created = feishu.calls(MESSAGES);
    assert_eq!(created.len(), 1, "one card for the whole reply");
    assert!(created[0].card_markdown().starts_with("Hel"), "{}", created[0].card_markdown());
    let updates = feishu.calls_like("PATCH", "/open-apis/im/v1/messages/om_bot_1");
    assert_eq!(updates.last().unwrap().card_markdown(), "Hello there, **Ada**");
    host.shutdown().await;
}

#[actix_rt::test]
async fn with_streaming_off_deltas_are_ignored_and_the_reply_is_one_new_card() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({"streaming": false})).await;
    host.send("feishu", Message::Delta(Delta { stream_id: 10, chat_id: "ou_ada".into(), text: "Hel".into() })).unwrap();
    let final_reply = Outbound {
        id: 7,
        chat_id: "ou_ada".into(),
        content: "Hello".into(),
        media: vec![],
        stream_id: Some(10),
        metadata: json!({}),
    };
    host.send("feishu", Message::Outbound(final_reply)).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let created = feishu.calls(MESSAGES);
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].card_markdown(), "Hello");
    assert!(feishu.calls_like("PATCH", MESSAGES).is_empty());
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_long_reply_is_sent_as_several_cards_that_each_fit() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({})).await;
    let lines: Vec<String> = (0..400).map(|n| format!("line {n:03} {}", "字".repeat(40))).collect();
    let content = format!("intro\n```\n{}\n```\noutro", lines.join("\n"));
    host.send("feishu", outbound(8, "ou_ada", &content, json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let texts: Vec<String> = feishu.calls(MESSAGES).iter().map(|call| call.card_markdown()).collect();
    assert!(texts.len() >= 3, "{} cards", texts.len());
    for text in &texts {
        assert!(text.len() <= 15_000, "a card of {} bytes", text.len());
        assert_eq!(text.matches("```").count() % 2, 0, "a card with an open code block");
    }
    let all = texts.join("\n");
    assert!((0..400).all(|n| all.contains(&format!("line {n:03} "))));
    host.shutdown().await;
}

#[actix_rt::test]
async fn with_reply_to_message_a_group_reply_quotes_the_message_in_a_thread() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({"replyToMessage": true})).await;
    feishu.push_event("frame-q", &group_text("om_q", "ou_ada", "oc_team", "question", true)).await;
    let inbound = next_inbound(&mut events, "feishu").await;
    accept(&host, "feishu", &inbound);
    host.send("feishu", outbound(11, &inbound.chat_id, "answer", inbound.metadata.clone())).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let replies = feishu.calls_like("POST", "/open-apis/im/v1/messages/om_q/reply");
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].body["reply_in_thread"], true);
    assert_eq!(replies[0].card_markdown(), "answer");
    assert!(feishu.calls(MESSAGES).is_empty());
    host.shutdown().await;
}

#[actix_rt::test]
async fn the_tenant_token_is_fetched_once_reused_and_replaced_when_refused() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({})).await;
    for id in 12..14 {
        host.send("feishu", outbound(id, "ou_ada", "hi", json!({}))).unwrap();
        assert!(next_delivery(&mut events).await.ok);
    }
    assert_eq!(feishu.calls(TENANT_TOKEN).len(), 1, "bot info and both replies share one token");
    assert_eq!(feishu.calls(TENANT_TOKEN)[0].body, json!({"app_id": APP_ID, "app_secret": "fake-app-secret"}));
    feishu.revoke_tokens();
    host.send("feishu", outbound(14, "ou_ada", "again", json!({}))).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 14, ok: true, error: None, permanent: false });
    assert_eq!(feishu.calls(TENANT_TOKEN).len(), 2);
    assert_eq!(feishu.calls(MESSAGES).last().unwrap().authorization, "Bearer t-fake-2");
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_accepted_message_gets_the_configured_reaction() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({"reactEmoji": "THUMBSUP"})).await;
    feishu.push_event("frame-r", &direct_text("om_r", "ou_ada", "look")).await;
    let inbound = next_inbound(&mut events, "feishu").await;
    accept(&host, "feishu", &inbound);
    let path = "/open-apis/im/v1/messages/om_r/reactions";
    let reactions = feishu.wait_calls(path, 1).await;
    assert_eq!(reactions[0].body, json!({"reaction_type": {"emoji_type": "THUMBSUP"}}));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_picture_is_downloaded_into_the_media_dir_and_handed_to_the_kernel_as_media() {
    let feishu = FakeFeishu::start();
    let media = TempDir::new("feishu-media");
    feishu.add_file("img_v2_photo", b"\x89PNG fake picture");
    let (host, mut events) = feishu_host(&feishu, json!({"mediaDir": media.path()})).await;
    let picture =
        message_event("om_pic", "ou_ada", "oc_p2p_ou_ada", "p2p", "image", &json!({"image_key": "img_v2_photo"}));
    feishu.push_event("frame-pic", &picture).await;
    let inbound = next_inbound(&mut events, "feishu").await;
    assert_eq!(inbound.content, "[image]");
    assert_eq!(inbound.media.len(), 1);
    assert!(inbound.media[0].starts_with(&media.path().display().to_string()), "{:?}", inbound.media);
    assert_eq!(std::fs::read(&inbound.media[0]).unwrap(), b"\x89PNG fake picture");
    let download = &feishu.calls("/open-apis/im/v1/messages/om_pic/resources/img_v2_photo")[0];
    assert_eq!(download.query, "type=image");
    accept(&host, "feishu", &inbound);
    feishu.wait_answer("frame-pic").await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_message_not_accepted_before_the_channel_died_is_submitted_again_when_feishu_pushes_it_again() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({})).await;
    let event = direct_text("om_crash", "ou_ada", "do not lose me");
    feishu.push_event("frame-before-crash", &event).await;
    let first = next_inbound(&mut events, "feishu").await;
    sigkill(host.statuses()[0].pid.unwrap());
    event_where(&mut events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == "feishu")).await;
    feishu.wait_connections(2).await;
    feishu.push_event("frame-pushed-again", &event).await;
    let again = next_inbound(&mut events, "feishu").await;
    assert_eq!((again.id.as_str(), again.content.as_str()), (first.id.as_str(), "do not lose me"));
    accept(&host, "feishu", &again);
    feishu.wait_answer("frame-pushed-again").await;
    assert_eq!(feishu.answered(), ["frame-pushed-again"], "the frame seen by the killed instance was answered");
    host.shutdown().await;
}

#[actix_rt::test]
async fn refused_credentials_fail_the_channel_with_a_reason_that_names_the_keys() {
    let feishu = FakeFeishu::start();
    let spec = channel_spec(&bin("oxibot"), "feishu", &feishu.config(json!({"appSecret": "wrong"}))).unwrap();
    let host = start_host(vec![spec]).await;
    oxibot_tests::wait::eventually("the channel has failed", || host.statuses()[0].state == "failed").await;
    let reason = host.statuses()[0].reason.clone().unwrap();
    assert!(reason.contains("channels.feishu.appId, appSecret") && reason.contains("10014"), "{reason}");
    assert!(feishu.calls(ENDPOINT).is_empty());
    host.shutdown().await;
}

/// An approval request for a one-to-one chat: the kernel's `approval_request` with the three
/// answers a person may give.
fn approval_request(id: u64, chat_id: &str) -> Message {
    let answer =
        |label: &str, answer: &str, refuses| ApprovalAnswer { label: label.into(), answer: answer.into(), refuses };
    Message::ApprovalRequest(ApprovalRequest {
        id,
        chat_id: chat_id.into(),
        code: "AB12CD34".into(),
        tool: "exec".into(),
        shown: "exec: sh -c 'ls'".into(),
        timeout_secs: 300,
        text: "Approval needed: `ls`".into(),
        answers: vec![
            answer("Approve", "/approve AB12CD34", false),
            answer("Always", "/approve AB12CD34 always", false),
            answer("Deny", "/deny AB12CD34", true),
        ],
        metadata: json!({}),
    })
}

/// Issue 28: an approval request is an interactive card with a button per answer; a press
/// (Feishu's `card.action.trigger` callback) is the presser's answer in the chat the request
/// was asked in, and a press of any other button is no message.
#[actix_rt::test]
async fn an_approval_request_is_a_card_with_buttons_and_a_press_is_the_pressers_answer() {
    let feishu = FakeFeishu::start();
    let (host, mut events) = feishu_host(&feishu, json!({})).await;
    host.send("feishu", approval_request(6, "ou_ada")).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let created = feishu.calls(MESSAGES);
    assert_eq!(
        (created[0].query.as_str(), created[0].body["receive_id"].as_str()),
        ("receive_id_type=open_id", Some("ou_ada"))
    );
    assert_eq!(created[0].body["msg_type"], "interactive");
    assert_eq!(created[0].card_markdown(), "Approval needed: `ls`");
    let card: Value = serde_json::from_str(created[0].body["content"].as_str().unwrap()).unwrap();
    let buttons = card["elements"][1]["actions"].as_array().unwrap().clone();
    let labels: Vec<&str> = buttons.iter().map(|b| b["text"]["content"].as_str().unwrap()).collect();
    assert_eq!(labels, ["Approve", "Always", "Deny"]);
    assert_eq!(buttons[2]["type"], "danger");

    feishu
        .push_event("frame-other", &card_action("ev-other", "ou_ada", "oc_p2p_ou_ada", "om_card", &json!({"x": 1})))
        .await;
    feishu.wait_answer("frame-other").await;
    feishu
        .push_event("frame-press", &card_action("ev-press", "ou_ada", "oc_p2p_ou_ada", "om_card", &buttons[0]["value"]))
        .await;
    let inbound = next_inbound(&mut events, "feishu").await;
    assert_eq!(
        (inbound.id.as_str(), inbound.sender_id.as_str(), inbound.chat_id.as_str(), inbound.content.as_str()),
        ("ev-press", "ou_ada", "ou_ada", "/approve AB12CD34"),
        "the other button's press became a message, or the press lost its chat"
    );
    accept(&host, "feishu", &inbound);
    feishu.wait_answer("frame-press").await;
    host.shutdown().await;
}
