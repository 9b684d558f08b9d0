//! The Matrix channel plugin through the real plugin host against a fake homeserver: `/sync`
//! batches become inbound events, the sync position is saved only once the kernel accepted a
//! whole batch (so a killed channel replays it), events carried twice reach the kernel once,
//! failed polls are retried, invites are followed for allowed users, and replies reach
//! `send/m.room.message` with HTML, in the thread, cut at the limit.

use std::time::Duration;

use oxibot_kernel::plugin::{PluginEvent, PluginHost, channel_spec};
use oxibot_proto::DeliveryAck;
use oxibot_tests::channels::{accept, event_where, next_delivery, next_inbound, outbound, started_channel};
use oxibot_tests::fakes_matrix::{
    BOT, DM_ROOM, FakeMatrix, GROUP_ROOM, PASSWORD, SyncFailure, TOKEN, in_thread, mention, text,
};
use oxibot_tests::procs::sigkill;
use oxibot_tests::{bin, start_host};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

/// Starts the host with the Matrix channel configured for `matrix`, and waits until the
/// channel found its position and polls from it.
async fn matrix_host(matrix: &FakeMatrix, extra: Value) -> (PluginHost, UnboundedReceiver<PluginEvent>) {
    let (host, events) = started_channel("matrix", &matrix.config(extra)).await;
    matrix.wait_sync_from("s0").await;
    (host, events)
}

#[actix_rt::test]
async fn a_direct_message_arrives_as_an_inbound_and_the_position_moves_on_only_after_the_kernel_accepted_it() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({})).await;
    assert_eq!(matrix.syncs()[0], None, "the first sync starts from scratch");
    assert_eq!(matrix.saved_position().as_deref(), Some("s0"));
    matrix.push(DM_ROOM, vec![text("$m1", "@ada:fake.test", "hello there")]);
    let inbound = next_inbound(&mut events, "matrix").await;
    assert_eq!(inbound.id, "$m1");
    assert_eq!(
        (inbound.channel.as_str(), inbound.sender_id.as_str(), inbound.chat_id.as_str()),
        ("matrix", "@ada:fake.test", DM_ROOM)
    );
    assert_eq!(inbound.content, "hello there");
    assert_eq!(inbound.metadata, json!({"event_id": "$m1", "is_group": false}));
    assert_eq!(matrix.saved_position().as_deref(), Some("s0"), "the position moved before the kernel accepted");
    assert!(!matrix.syncs().contains(&Some("s1".into())), "polled on before the kernel accepted");
    accept(&host, "matrix", &inbound);
    matrix.wait_sync_from("s1").await;
    assert_eq!(matrix.saved_position().as_deref(), Some("s1"));
    assert!(matrix.requests("/sync").iter().all(|request| request.authorization == format!("Bearer {TOKEN}")));
    host.shutdown().await;
}

#[actix_rt::test]
async fn in_a_group_room_the_mention_policy_lets_only_messages_that_name_the_bot_through() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({"groupPolicy": "mention"})).await;
    matrix.push(GROUP_ROOM, vec![text("$chatter", "@ada:fake.test", "just chatting")]);
    matrix.push(GROUP_ROOM, vec![mention("$asked", "@ada:fake.test", "oxibot: what is up?")]);
    let inbound = next_inbound(&mut events, "matrix").await;
    assert_eq!(inbound.id, "$asked", "the first inbound must be the mention");
    assert_eq!(inbound.chat_id, GROUP_ROOM);
    assert_eq!(inbound.metadata["is_group"], true);
    accept(&host, "matrix", &inbound);
    matrix.wait_sync_from("s2").await;
    assert!(matrix.requests("/joined_members").iter().any(|request| request.path.contains(GROUP_ROOM)));
    host.shutdown().await;
}

#[actix_rt::test]
async fn in_a_group_room_the_open_policy_lets_every_message_through() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({})).await;
    matrix.push(GROUP_ROOM, vec![text("$chatter", "@ada:fake.test", "just chatting"), text("$own", BOT, "my reply")]);
    matrix.push(GROUP_ROOM, vec![text("$after", "@bob:fake.test", "me too")]);
    let inbound = next_inbound(&mut events, "matrix").await;
    assert_eq!((inbound.id.as_str(), inbound.content.as_str()), ("$chatter", "just chatting"));
    accept(&host, "matrix", &inbound);
    let next = next_inbound(&mut events, "matrix").await;
    assert_eq!(next.id, "$after", "the bot's own message came through");
    accept(&host, "matrix", &next);
    matrix.wait_sync_from("s2").await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_event_carried_by_two_batches_reaches_the_kernel_once() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({})).await;
    let event = text("$once", "@ada:fake.test", "only once");
    matrix.push(DM_ROOM, vec![event.clone()]);
    let inbound = next_inbound(&mut events, "matrix").await;
    accept(&host, "matrix", &inbound);
    matrix.push(DM_ROOM, vec![event, text("$next", "@ada:fake.test", "a new one")]);
    let next = next_inbound(&mut events, "matrix").await;
    assert_eq!(next.id, "$next", "the event carried again came through twice");
    accept(&host, "matrix", &next);
    matrix.wait_sync_from("s2").await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_batch_not_accepted_before_the_channel_died_is_replayed_and_an_accepted_one_is_not() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({})).await;
    matrix.push(DM_ROOM, vec![text("$kept", "@ada:fake.test", "seen and saved")]);
    let kept = next_inbound(&mut events, "matrix").await;
    accept(&host, "matrix", &kept);
    matrix.wait_sync_from("s1").await;
    matrix.push(DM_ROOM, vec![text("$lost", "@ada:fake.test", "do not lose me")]);
    let first = next_inbound(&mut events, "matrix").await;
    assert_eq!(first.id, "$lost");
    sigkill(host.statuses()[0].pid.unwrap());
    event_where(&mut events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == "matrix")).await;
    let again = next_inbound(&mut events, "matrix").await;
    assert_eq!((again.id.as_str(), again.content.as_str()), ("$lost", "do not lose me"), "not replayed from s1");
    accept(&host, "matrix", &again);
    matrix.wait_sync_from("s2").await;
    assert_eq!(matrix.saved_position().as_deref(), Some("s2"));
    let from_scratch = matrix.syncs().iter().filter(|since| since.is_none()).count();
    assert_eq!(from_scratch, 1, "the restarted channel did not go on from its saved position");
    host.shutdown().await;
}

#[actix_rt::test]
async fn failed_and_cut_polls_are_tried_again_and_messages_still_flow() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({})).await;
    // The poll from s0 is already held; the failures hit the ones after it.
    matrix.fail_next_sync(SyncFailure::Cut);
    matrix.fail_next_sync(SyncFailure::Status(502, "M_UNKNOWN"));
    matrix.push(DM_ROOM, vec![text("$before", "@ada:fake.test", "before")]);
    let before = next_inbound(&mut events, "matrix").await;
    accept(&host, "matrix", &before);
    matrix.push(DM_ROOM, vec![text("$back", "@ada:fake.test", "back?")]);
    let inbound = next_inbound(&mut events, "matrix").await;
    assert_eq!(inbound.content, "back?");
    let polls = matrix.syncs().iter().filter(|since| since.as_deref() == Some("s1")).count();
    assert!(polls >= 3, "{polls} polls from s1: the failures were not retried");
    accept(&host, "matrix", &inbound);
    matrix.wait_sync_from("s2").await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn the_bot_joins_rooms_users_of_allow_from_invite_it_to_and_no_others() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({"allowFrom": ["@ada:fake.test"]})).await;
    matrix.invite("!stranger:fake.test", "@eve:fake.test");
    matrix.invite("!friends:fake.test", "@ada:fake.test");
    matrix.push(DM_ROOM, vec![text("$barrier", "@ada:fake.test", "barrier")]);
    let inbound = next_inbound(&mut events, "matrix").await;
    assert_eq!(inbound.id, "$barrier");
    let joins: Vec<String> = matrix.requests("/join").into_iter().map(|request| request.path).collect();
    assert_eq!(joins, ["/_matrix/client/v3/rooms/!friends:fake.test/join"]);
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_outbound_reaches_the_room_as_text_with_html_in_the_thread_and_is_acked_ok() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({})).await;
    let metadata = json!({"event_id": "$e2", "is_group": true, "thread_root_event_id": "$root", "thread_reply_to_event_id": "$e2"});
    host.send("matrix", outbound(11, GROUP_ROOM, "## Result\n**Done** & *relax*", metadata)).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 11, ok: true, error: None, permanent: false });
    let sent = matrix.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].room, GROUP_ROOM);
    assert_eq!(
        sent[0].content,
        json!({"msgtype": "m.text", "body": "## Result\n**Done** & *relax*", "m.mentions": {},
               "format": "org.matrix.custom.html", "formatted_body": "<h2>Result</h2>\n<p><strong>Done</strong> &amp; <em>relax</em></p>",
               "m.relates_to": {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": true, "m.in_reply_to": {"event_id": "$e2"}}})
    );
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_reply_to_a_message_in_a_thread_goes_back_into_that_thread() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({})).await;
    matrix.push(DM_ROOM, vec![in_thread("$t2", "@ada:fake.test", "and then?", "$t1")]);
    let inbound = next_inbound(&mut events, "matrix").await;
    accept(&host, "matrix", &inbound);
    host.send("matrix", outbound(12, &inbound.chat_id, "then this", inbound.metadata.clone())).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let relation = &matrix.sent()[0].content["m.relates_to"];
    assert_eq!((relation["rel_type"].as_str(), relation["event_id"].as_str()), (Some("m.thread"), Some("$t1")));
    assert_eq!(relation["m.in_reply_to"]["event_id"], "$t2");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_long_reply_is_sent_in_parts_that_each_fit_the_limit_and_a_retry_sends_none_twice() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({})).await;
    let lines: Vec<String> = (0..600).map(|n| format!("line {n:03} {}", "x".repeat(40))).collect();
    let content = format!("intro\n```\n{}\n```\noutro", lines.join("\n"));
    host.send("matrix", outbound(13, DM_ROOM, &content, json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let sent = matrix.sent();
    assert!(sent.len() >= 3, "{} parts", sent.len());
    let bodies: Vec<&str> = sent.iter().map(|message| message.content["body"].as_str().unwrap()).collect();
    for body in &bodies {
        assert!(body.len() <= 10_000, "a part of {} bytes", body.len());
        assert_eq!(body.matches("```").count() % 2, 0, "a part with an open code block");
    }
    let all = bodies.join("\n");
    assert!((0..600).all(|n| all.contains(&format!("line {n:03} "))));
    host.send("matrix", outbound(13, DM_ROOM, &content, json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    assert_eq!(matrix.sent().len(), sent.len(), "the retry of reply 13 posted parts again");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_refused_access_token_fails_the_channel_with_a_reason_that_names_the_key() {
    let matrix = FakeMatrix::start();
    let spec = channel_spec(&bin("oxibot"), "matrix", &matrix.config(json!({"accessToken": "syt_revoked"}))).unwrap();
    let host = start_host(vec![spec]).await;
    let failed = tokio::time::timeout(Duration::from_secs(10), async {
        while host.statuses()[0].state != "failed" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert!(failed.await.is_ok(), "{:?}", host.statuses()[0].state);
    let reason = host.statuses()[0].reason.clone().unwrap();
    assert!(reason.contains("channels.matrix.accessToken") && reason.contains("M_UNKNOWN_TOKEN"), "{reason}");
    assert!(matrix.syncs().is_empty());
    host.shutdown().await;
}

#[actix_rt::test]
async fn with_a_password_the_channel_logs_in_once_and_a_restart_reuses_the_saved_session() {
    let matrix = FakeMatrix::start();
    let config = json!({"accessToken": "", "password": PASSWORD, "deviceId": ""});
    let (host, mut events) = matrix_host(&matrix, config).await;
    let logins = matrix.requests("/login");
    assert_eq!(logins.len(), 1);
    assert_eq!(logins[0].authorization, "", "a login carries no token");
    assert_eq!(logins[0].body["identifier"], json!({"type": "m.id.user", "user": BOT}));
    let session = std::fs::read_to_string(matrix.media_dir().join("session.json")).unwrap();
    assert!(session.contains(TOKEN) && session.contains("NEWDEVICE"), "{session}");
    sigkill(host.statuses()[0].pid.unwrap());
    event_where(&mut events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == "matrix")).await;
    matrix.push(DM_ROOM, vec![text("$after", "@ada:fake.test", "still you?")]);
    assert_eq!(next_inbound(&mut events, "matrix").await.id, "$after");
    assert_eq!(matrix.requests("/login").len(), 1, "the restart logged in again instead of reusing the session");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_refused_password_fails_the_channel_with_a_reason_that_names_the_key() {
    let matrix = FakeMatrix::start();
    let section = matrix.config(json!({"accessToken": "", "password": "wrong"}));
    let spec = channel_spec(&bin("oxibot"), "matrix", &section).unwrap();
    let host = start_host(vec![spec]).await;
    let failed = tokio::time::timeout(Duration::from_secs(10), async {
        while host.statuses()[0].state != "failed" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert!(failed.await.is_ok(), "{:?}", host.statuses()[0].state);
    let reason = host.statuses()[0].reason.clone().unwrap();
    assert!(reason.contains("channels.matrix.password") && reason.contains("M_FORBIDDEN"), "{reason}");
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_accepted_message_shows_typing_in_its_room_until_the_reply_is_sent() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({})).await;
    matrix.push(DM_ROOM, vec![text("$ask", "@ada:fake.test", "think about it")]);
    let inbound = next_inbound(&mut events, "matrix").await;
    accept(&host, "matrix", &inbound);
    let typing_path = format!("/_matrix/client/v3/rooms/{DM_ROOM}/typing/{BOT}");
    let typing = |shown: bool| {
        let path = typing_path.clone();
        let requests = matrix.requests(&format!("/typing/{BOT}"));
        requests.iter().any(|request| request.path == path && request.body["typing"] == shown)
    };
    oxibot_tests::wait::eventually("the room shows the bot typing", || typing(true)).await;
    host.send("matrix", outbound(15, DM_ROOM, "done thinking", json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    oxibot_tests::wait::eventually("the typing notice is hidden after the reply", || typing(false)).await;
    host.shutdown().await;
}

/// The bot's own join, as the first batch after it shows it.
fn bot_joined() -> Value {
    json!({"type": "m.room.member", "event_id": "$joined", "state_key": BOT, "sender": BOT,
           "origin_server_ts": 1_700_000_000_000_u64, "content": {"membership": "join"},
           "unsigned": {"prev_content": {"membership": "invite"}}})
}

/// Issue 27, finding 3: the first batch after a join carries the room's recent history, and
/// every message of it was answered.
#[actix_rt::test]
async fn messages_written_before_the_bot_joined_get_no_reply_and_those_after_do() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({})).await;
    let history = vec![
        text("$old1", "@ada:fake.test", "who should we ask?"),
        text("$old2", "@ada:fake.test", "let me invite the bot"),
        bot_joined(),
        text("$new", "@ada:fake.test", "hello bot"),
    ];
    matrix.push(DM_ROOM, history);
    let inbound = next_inbound(&mut events, "matrix").await;
    assert_eq!(inbound.id, "$new", "a message from before the join reached the kernel");
    host.shutdown().await;
}

/// Issue 27, finding 4: an encrypted room (Element's default for direct chats) got silence,
/// and only the gateway log said why.
#[actix_rt::test]
async fn an_encrypted_room_is_told_once_that_it_gets_no_answers() {
    let matrix = FakeMatrix::start();
    let (host, mut events) = matrix_host(&matrix, json!({})).await;
    let encryption = json!({"type": "m.room.encryption", "event_id": "$enc", "state_key": "", "sender": "@ada:fake.test",
                            "content": {"algorithm": "m.megolm.v1.aes-sha2"}});
    let secret = json!({"type": "m.room.encrypted", "event_id": "$secret", "sender": "@ada:fake.test",
                        "content": {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgA"}});
    let room = "!secret:fake.test";
    matrix.push_rooms(json!({"join": {room: {"state": {"events": [encryption.clone()]},
                                             "timeline": {"events": [bot_joined(), secret.clone()]}}}}));
    matrix.push_rooms(json!({"join": {room: {"timeline": {"events": [encryption, secret]}}}}));
    matrix.push(DM_ROOM, vec![text("$barrier", "@ada:fake.test", "barrier")]);
    assert_eq!(next_inbound(&mut events, "matrix").await.id, "$barrier");
    let notices: Vec<_> = matrix.sent().into_iter().filter(|sent| sent.room == room).collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].content["msgtype"], "m.notice");
    let body = notices[0].content["body"].as_str().unwrap();
    assert!(body.contains("end-to-end encrypted") && body.contains("without encryption"), "{body}");
    host.shutdown().await;
}
