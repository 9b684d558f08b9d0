//! The Slack channel plugin through the real plugin host against a fake Slack: Socket Mode
//! envelopes become inbound events and are acknowledged only once the kernel accepted them,
//! redeliveries and reconnects lose or double nothing, and replies reach `chat.postMessage` as
//! mrkdwn in the right thread.

use std::time::Duration;

use oxibot_kernel::plugin::{PluginEvent, PluginHost, channel_spec};
use oxibot_proto::DeliveryAck;
use oxibot_tests::channels::{accept, event_where, next_delivery, next_inbound, outbound, started_channel};
use oxibot_tests::fakes_slack::{
    APP_TOKEN, BOT_TOKEN, FakeSlack, PostReply, app_mention, channel_message, direct_message,
};
use oxibot_tests::procs::sigkill;
use oxibot_tests::{bin, start_host};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

/// Starts the host with the Slack channel configured for `slack`, and waits until the channel
/// holds a Socket Mode connection.
async fn slack_host(slack: &FakeSlack, extra: Value) -> (PluginHost, UnboundedReceiver<PluginEvent>) {
    let (host, events) = started_channel("slack", &slack.config(extra)).await;
    slack.wait_connections(1).await;
    (host, events)
}

#[actix_rt::test]
async fn a_direct_message_arrives_as_an_inbound_and_its_envelope_is_acked_only_after_the_kernel_accepted_it() {
    let slack = FakeSlack::start();
    let (host, mut events) = slack_host(&slack, json!({})).await;
    slack.deliver("env-dm-1", direct_message("D1", "U42", "hello there", "1700000000.000100"), 0).await;
    let inbound = next_inbound(&mut events, "slack").await;
    assert_eq!(inbound.id, "D1:1700000000.000100");
    assert_eq!(
        (inbound.channel.as_str(), inbound.sender_id.as_str(), inbound.chat_id.as_str()),
        ("slack", "U42", "D1")
    );
    assert_eq!(inbound.content, "hello there");
    assert_eq!(
        inbound.metadata,
        json!({"ts": "1700000000.000100", "thread_ts": "1700000000.000100", "is_group": false, "team": "T1"})
    );
    // A barrier instead of a pause: the channel reads envelopes in order and queues their
    // acks in order, and it acks channel chatter at once. Once the chatter's ack is in, an ack
    // of the direct message sent on arrival would have come before it.
    slack.deliver("env-barrier", channel_message("C7", "U42", "just chatting", "1700000000.000200"), 0).await;
    slack.wait_ack("env-barrier").await;
    assert_eq!(slack.acks(), ["env-barrier"], "acked before the kernel accepted");
    accept(&host, "slack", &inbound);
    slack.wait_ack("env-dm-1").await;
    let auth = slack.calls("auth.test");
    assert_eq!(auth[0].authorization, format!("Bearer {BOT_TOKEN}"));
    assert_eq!(slack.calls("apps.connections.open")[0].authorization, format!("Bearer {APP_TOKEN}"));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_channel_message_without_a_mention_is_acked_at_once_and_ignored_while_an_app_mention_is_submitted_without_the_mention()
 {
    let slack = FakeSlack::start();
    let (host, mut events) = slack_host(&slack, json!({})).await;
    slack.deliver("env-chatter", channel_message("C7", "U42", "just chatting", "1700000001.000100"), 0).await;
    slack.wait_ack("env-chatter").await;
    slack.deliver("env-mention", app_mention("C7", "U42", "<@UBOT> what is *up*?", "1700000002.000100"), 0).await;
    let inbound = next_inbound(&mut events, "slack").await;
    assert_eq!(inbound.id, "C7:1700000002.000100", "the first inbound must be the mention");
    assert_eq!(inbound.content, "what is *up*?");
    assert_eq!(inbound.chat_id, "C7");
    assert_eq!(inbound.metadata["is_group"], true);
    assert_eq!(inbound.metadata["thread_ts"], "1700000002.000100");
    accept(&host, "slack", &inbound);
    slack.wait_ack("env-mention").await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_redelivered_envelope_does_not_produce_a_second_inbound_and_is_acked() {
    let slack = FakeSlack::start();
    let (host, mut events) = slack_host(&slack, json!({})).await;
    let event = direct_message("D1", "U42", "only once", "1700000003.000100");
    slack.deliver("env-first", event.clone(), 0).await;
    let inbound = next_inbound(&mut events, "slack").await;
    slack.deliver("env-retry-1", event.clone(), 1).await;
    accept(&host, "slack", &inbound);
    slack.wait_ack("env-first").await;
    slack.wait_ack("env-retry-1").await;
    slack.deliver("env-retry-2", event, 2).await;
    slack.wait_ack("env-retry-2").await;
    slack.deliver("env-next", direct_message("D1", "U42", "a new one", "1700000004.000100"), 0).await;
    let next = next_inbound(&mut events, "slack").await;
    assert_eq!(next.content, "a new one", "the redelivered message came through twice");
    host.shutdown().await;
}

#[actix_rt::test]
async fn after_a_disconnect_the_channel_opens_a_new_connection_and_messages_still_flow() {
    let slack = FakeSlack::start();
    let (host, mut events) = slack_host(&slack, json!({})).await;
    slack.disconnect().await;
    slack.wait_connections(2).await;
    assert_eq!(slack.calls("apps.connections.open").len(), 2);
    slack.deliver("env-after-refresh", direct_message("D1", "U42", "still there?", "1700000005.000100"), 0).await;
    let inbound = next_inbound(&mut events, "slack").await;
    assert_eq!(inbound.content, "still there?");
    accept(&host, "slack", &inbound);
    slack.wait_ack("env-after-refresh").await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_dropped_connection_is_opened_again_after_a_pause_and_messages_still_flow() {
    let slack = FakeSlack::start();
    let (host, mut events) = slack_host(&slack, json!({})).await;
    slack.cut_connection().await;
    slack.wait_connections(2).await;
    slack.deliver("env-after-cut", direct_message("D1", "U42", "back?", "1700000006.000100"), 0).await;
    let inbound = next_inbound(&mut events, "slack").await;
    assert_eq!(inbound.content, "back?");
    accept(&host, "slack", &inbound);
    slack.wait_ack("env-after-cut").await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_outbound_reaches_chat_post_message_as_mrkdwn_in_the_thread_and_is_acked_ok() {
    let slack = FakeSlack::start();
    let (host, mut events) = slack_host(&slack, json!({})).await;
    let metadata = json!({"ts": "1700000007.000200", "thread_ts": "1700000007.000100", "is_group": true, "team": "T1"});
    host.send(
        "slack",
        outbound(11, "C7", "## Result\n**Done**: see [the log](https://x.io/log?a=1&b=2) & *relax*", metadata),
    )
    .unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 11, ok: true, error: None, permanent: false });
    let posts = slack.calls("chat.postMessage");
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].authorization, format!("Bearer {BOT_TOKEN}"));
    assert_eq!(
        posts[0].body,
        json!({"channel": "C7", "thread_ts": "1700000007.000100", "mrkdwn": true, "text": "*Result*\n*Done*: see <https://x.io/log?a=1&amp;b=2|the log> &amp; _relax_"})
    );
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_reply_to_a_top_level_direct_message_is_posted_outside_any_thread() {
    let slack = FakeSlack::start();
    let (host, mut events) = slack_host(&slack, json!({})).await;
    let metadata =
        json!({"ts": "1700000008.000100", "thread_ts": "1700000008.000100", "is_group": false, "team": "T1"});
    host.send("slack", outbound(12, "D1", "hi", metadata)).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    assert_eq!(slack.calls("chat.postMessage")[0].body, json!({"channel": "D1", "text": "hi", "mrkdwn": true}));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_long_reply_is_posted_in_parts_that_each_fit_slacks_limit() {
    let slack = FakeSlack::start();
    let (host, mut events) = slack_host(&slack, json!({})).await;
    let lines: Vec<String> = (0..200).map(|n| format!("line {n:03} {}", "x".repeat(40))).collect();
    let content = format!("intro\n```\n{}\n```\noutro", lines.join("\n"));
    host.send("slack", outbound(13, "C7", &content, json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let posts = slack.calls("chat.postMessage");
    assert!(posts.len() >= 3, "{} parts", posts.len());
    let texts: Vec<&str> = posts.iter().map(|post| post.body["text"].as_str().unwrap()).collect();
    for text in &texts {
        assert!(text.chars().count() <= 3900, "a part of {} characters", text.chars().count());
        assert_eq!(text.matches("```").count() % 2, 0, "a part with an open code block: {text}");
    }
    assert!(texts[0].starts_with("intro\n```\nline 000"));
    assert!(texts.last().unwrap().ends_with(&format!("line 199 {}\n```\noutro", "x".repeat(40))));
    let all = texts.join("\n");
    assert!((0..200).all(|n| all.contains(&format!("line {n:03} "))));
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_api_error_from_chat_post_message_is_acked_as_a_failed_delivery() {
    let slack = FakeSlack::start();
    let (host, mut events) = slack_host(&slack, json!({})).await;
    slack.push_post_reply(PostReply::Error("channel_not_found".into()));
    host.send("slack", outbound(14, "C404", "anyone?", json!({}))).unwrap();
    let ack = next_delivery(&mut events).await;
    assert_eq!((ack.id, ack.ok), (14, false));
    assert!(ack.error.as_deref().unwrap_or_default().contains("channel_not_found"), "{ack:?}");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_rate_limited_post_is_tried_again_after_the_wait_slack_asked_for() {
    let slack = FakeSlack::start();
    let (host, mut events) = slack_host(&slack, json!({})).await;
    slack.push_post_reply(PostReply::RateLimited(1));
    let started = std::time::Instant::now();
    host.send("slack", outbound(15, "C7", "patience", json!({}))).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 15, ok: true, error: None, permanent: false });
    assert!(started.elapsed() >= Duration::from_secs(1), "retried after {:?}", started.elapsed());
    assert_eq!(slack.calls("chat.postMessage").len(), 2);
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_accepted_message_gets_the_configured_reaction() {
    let slack = FakeSlack::start();
    let (host, mut events) = slack_host(&slack, json!({"reactEmoji": "eyes"})).await;
    slack.deliver("env-react", direct_message("D1", "U42", "look", "1700000009.000100"), 0).await;
    let inbound = next_inbound(&mut events, "slack").await;
    accept(&host, "slack", &inbound);
    let reactions = slack.wait_calls("reactions.add", 1).await;
    assert_eq!(reactions[0].body, json!({"channel": "D1", "timestamp": "1700000009.000100", "name": "eyes"}));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_message_not_accepted_before_the_channel_died_is_submitted_again_when_slack_redelivers_it() {
    let slack = FakeSlack::start();
    let (host, mut events) = slack_host(&slack, json!({})).await;
    let event = direct_message("D1", "U42", "do not lose me", "1700000010.000100");
    slack.deliver("env-before-crash", event.clone(), 0).await;
    let first = next_inbound(&mut events, "slack").await;
    sigkill(host.statuses()[0].pid.unwrap());
    event_where(&mut events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == "slack")).await;
    slack.wait_connections(2).await;
    slack.deliver("env-redelivered", event, 1).await;
    let again = next_inbound(&mut events, "slack").await;
    assert_eq!((again.id.as_str(), again.content.as_str()), (first.id.as_str(), "do not lose me"));
    accept(&host, "slack", &again);
    slack.wait_ack("env-redelivered").await;
    assert_eq!(slack.acks(), ["env-redelivered"], "the envelope seen by the killed instance was acked");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_refused_bot_token_fails_the_channel_with_a_reason_that_names_the_key() {
    let slack = FakeSlack::start();
    let spec = channel_spec(&bin("oxibot"), "slack", &slack.config(json!({"botToken": "xoxb-revoked"}))).unwrap();
    let host = start_host(vec![spec]).await;
    let failed = tokio::time::timeout(Duration::from_secs(10), async {
        while host.statuses()[0].state != "failed" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert!(failed.await.is_ok(), "{:?}", host.statuses()[0].state);
    let reason = host.statuses()[0].reason.clone().unwrap();
    assert!(
        reason.contains("slack refused the bot token (channels.slack.botToken)") && reason.contains("invalid_auth"),
        "{reason}"
    );
    assert!(slack.calls("apps.connections.open").is_empty());
    host.shutdown().await;
}
