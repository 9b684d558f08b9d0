//! What a `/sync` answer holds for the channel (invites, and the timeline of each joined room
//! with its member count when the server says it), and which timeline events become messages
//! for the kernel: the bot's own, edits, encrypted and non-message events are left out, and in
//! rooms of more than two members the group policy decides.

use serde_json::{Value, json};

use crate::config::{Config, GroupPolicy};

/// One `/sync` answer, reduced to what the channel uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Where the next `/sync` goes on from.
    pub next_batch: String,
    /// Rooms the bot was invited to: (room id, inviter).
    pub invites: Vec<(String, String)>,
    /// Joined rooms with news, in the server's order.
    pub rooms: Vec<RoomNews>,
}

/// What happened in one joined room.
#[derive(Debug, Clone, PartialEq)]
pub struct RoomNews {
    /// The room id, `!abc:server`.
    pub room: String,
    /// `m.joined_member_count` of the room summary, when the server sent it (it does when the
    /// count changed).
    pub joined_members: Option<usize>,
    /// Whether the membership changed in this batch (so a count known before is stale).
    pub members_changed: bool,
    /// The timeline events, oldest first.
    pub events: Vec<Value>,
    /// Whether the batch shows the room's `m.room.encryption` state (in its state or its
    /// timeline): the room is end-to-end encrypted.
    pub encrypted: bool,
}

/// Reads a `/sync` answer.
pub fn batch(answer: &Value) -> Batch {
    let next_batch = answer["next_batch"].as_str().unwrap_or_default().to_owned();
    let invites = answer["rooms"]["invite"]
        .as_object()
        .map(|rooms| rooms.iter().filter_map(|(room, news)| Some((room.clone(), inviter(news)?))).collect())
        .unwrap_or_default();
    let rooms = answer["rooms"]["join"]
        .as_object()
        .map(|rooms| rooms.iter().map(|(room, news)| room_news(room, news)).collect())
        .unwrap_or_default();
    Batch { next_batch, invites, rooms }
}

/// The sender of the invite in an invited room's stripped state.
fn inviter(news: &Value) -> Option<String> {
    let events = news["invite_state"]["events"].as_array()?;
    events
        .iter()
        .rev()
        .find(|event| event["type"] == "m.room.member" && event["content"]["membership"] == "invite")
        .and_then(|event| event["sender"].as_str())
        .map(str::to_owned)
}

fn room_news(room: &str, news: &Value) -> RoomNews {
    let events: Vec<Value> = news["timeline"]["events"].as_array().cloned().unwrap_or_default();
    let state_changes = || news["state"]["events"].as_array().into_iter().flatten();
    let members_changed = events.iter().chain(state_changes()).any(|event| event["type"] == "m.room.member");
    let encrypted = events.iter().chain(state_changes()).any(|event| event["type"] == "m.room.encryption");
    let joined_members =
        news["summary"]["m.joined_member_count"].as_u64().and_then(|count| usize::try_from(count).ok());
    RoomNews { room: room.to_owned(), joined_members, members_changed, events, encrypted }
}

/// The timeline events after the bot's own join, when the timeline holds it: the first batch
/// after a join carries the room's recent history, written before the bot was there and not
/// for it. A change of the bot's name or avatar (a join event after a join) is no join.
pub fn after_join<'a>(events: &'a [Value], bot: &str) -> &'a [Value] {
    let is_join = |event: &Value| {
        event["type"] == "m.room.member"
            && event["state_key"] == bot
            && event["content"]["membership"] == "join"
            && event["unsigned"]["prev_content"]["membership"] != "join"
    };
    match events.iter().rposition(is_join) {
        Some(join) => &events[join + 1..],
        None => events,
    }
}

/// A user's room message, before the group policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The event id, `$…`: the same in every batch that carries the event.
    pub event_id: String,
    /// The author, `@user:server`.
    pub sender: String,
    /// The text (for attachments, a line naming them).
    pub content: String,
    /// Whether `m.mentions` (or, from older clients, the text) names the bot.
    pub mentions_bot: bool,
    /// Whether `m.mentions` says `@room`.
    pub mentions_room: bool,
    /// The root of the thread the message is in, if any.
    pub thread_root: Option<String>,
}

/// Message types whose `body` is the user's words.
const TEXT_TYPES: &[&str] = &["m.text", "m.emote", "m.notice"];
/// Attachment message types, and how a message of that type is named to the kernel.
const ATTACHMENT_TYPES: &[(&str, &str)] =
    &[("m.image", "image"), ("m.file", "file"), ("m.audio", "audio"), ("m.video", "video")];

/// Reads a timeline event as a user's message, or says why it is none.
pub fn candidate(event: &Value, bot: &str) -> Result<Candidate, &'static str> {
    match event["type"].as_str() {
        Some("m.room.message") => {}
        Some("m.room.encrypted") => return Err("encrypted (only unencrypted rooms are supported)"),
        _ => return Err("not a message"),
    }
    let sender = event["sender"].as_str().unwrap_or_default();
    if sender.is_empty() || sender == bot {
        return Err("the bot's own message");
    }
    let content = &event["content"];
    if content["m.relates_to"]["rel_type"] == "m.replace" {
        return Err("an edit");
    }
    let event_id = event["event_id"].as_str().filter(|id| !id.is_empty()).ok_or("no event id")?;
    let text = text_of(content).ok_or("no text")?;
    let mentions = &content["m.mentions"];
    let named_in_mentions = mentions["user_ids"].as_array().is_some_and(|ids| ids.iter().any(|id| id == bot));
    let named_in_text = content["formatted_body"].as_str().is_some_and(|html| html.contains(&format!("/#/{bot}")))
        || text.contains(bot);
    let thread_root = (content["m.relates_to"]["rel_type"] == "m.thread")
        .then(|| content["m.relates_to"]["event_id"].as_str())
        .flatten()
        .map(str::to_owned);
    Ok(Candidate {
        event_id: event_id.to_owned(),
        sender: sender.to_owned(),
        content: text,
        mentions_bot: named_in_mentions || named_in_text,
        mentions_room: mentions["room"] == true,
        thread_root,
    })
}

/// The text of a message's content: its body, or a line naming an attachment.
fn text_of(content: &Value) -> Option<String> {
    let msgtype = content["msgtype"].as_str()?;
    let body = content["body"].as_str().unwrap_or_default().trim();
    if TEXT_TYPES.contains(&msgtype) {
        return (!body.is_empty()).then(|| body.to_owned());
    }
    let (_, kind) = ATTACHMENT_TYPES.iter().find(|(known, _)| *known == msgtype)?;
    Some(format!("[{kind}: {body}] (attachments are not downloaded)"))
}

/// Whether a message passes the group policy: always in a direct room (two members at most).
pub fn admitted(candidate: &Candidate, room: &str, is_direct: bool, config: &Config) -> bool {
    if is_direct {
        return true;
    }
    match &config.group_policy {
        GroupPolicy::Open => true,
        GroupPolicy::Mention => candidate.mentions_bot || (config.allow_room_mentions && candidate.mentions_room),
        GroupPolicy::Allowlist(rooms) => rooms.iter().any(|allowed| allowed == room),
    }
}

/// The metadata the kernel keeps with the message and copies into the reply: the event, the
/// thread to answer in, and whether the room is a group.
pub fn metadata(candidate: &Candidate, is_direct: bool) -> Value {
    let mut metadata = json!({"event_id": candidate.event_id, "is_group": !is_direct});
    if let Some(root) = &candidate.thread_root {
        metadata["thread_root_event_id"] = json!(root);
        metadata["thread_reply_to_event_id"] = json!(candidate.event_id);
    }
    metadata
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOT: &str = "@bot:h";

    fn text_event(sender: &str, body: &str, extra: Value) -> Value {
        let mut content = json!({"msgtype": "m.text", "body": body});
        if let (Some(content), Some(extra)) = (content.as_object_mut(), extra.as_object()) {
            content.extend(extra.clone());
        }
        json!({"type": "m.room.message", "event_id": "$e1", "sender": sender, "origin_server_ts": 1, "content": content})
    }

    fn config(policy: &str) -> Config {
        Config::from_value(
            &json!({"userId": BOT, "accessToken": "t", "groupPolicy": policy, "groupAllowFrom": ["!ok:h"]}),
        )
        .unwrap()
    }

    #[test]
    fn a_sync_answer_gives_invites_and_room_timelines_with_member_counts() {
        let answer = json!({"next_batch": "s2", "rooms": {
            "invite": {"!new:h": {"invite_state": {"events": [
                {"type": "m.room.member", "state_key": BOT, "sender": "@ada:h", "content": {"membership": "invite"}}]}}},
            "join": {"!r:h": {"summary": {"m.joined_member_count": 2}, "timeline": {"events": [text_event("@ada:h", "hi", json!({}))]}}}
        }});
        let batch = batch(&answer);
        assert_eq!(batch.next_batch, "s2");
        assert_eq!(batch.invites, [("!new:h".to_owned(), "@ada:h".to_owned())]);
        assert_eq!(batch.rooms[0].room, "!r:h");
        assert_eq!(batch.rooms[0].joined_members, Some(2));
        assert!(!batch.rooms[0].members_changed);
        assert_eq!(batch.rooms[0].events.len(), 1);
    }

    #[test]
    fn only_events_after_the_bots_own_join_are_news() {
        let join = |prev: Value| {
            json!({"type": "m.room.member", "state_key": BOT, "sender": BOT, "content": {"membership": "join"},
                   "unsigned": {"prev_content": prev}})
        };
        let before = text_event("@ada:h", "before", json!({}));
        let after = text_event("@ada:h", "after", json!({}));
        let events = [before.clone(), join(json!({"membership": "invite"})), after.clone()];
        assert_eq!(after_join(&events, BOT), std::slice::from_ref(&after));
        let renamed = [before.clone(), join(json!({"membership": "join", "displayname": "old"})), after];
        assert_eq!(after_join(&renamed, BOT).len(), 3, "a new display name is no join");
        assert_eq!(after_join(std::slice::from_ref(&before), BOT), std::slice::from_ref(&before));
    }

    #[test]
    fn the_encryption_state_in_the_state_or_the_timeline_marks_a_room_encrypted() {
        let encryption =
            json!({"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}});
        let in_state = json!({"next_batch": "s1", "rooms": {"join": {"!r:h": {"state": {"events": [encryption]}}}}});
        assert!(batch(&in_state).rooms[0].encrypted);
        let plain = json!({"next_batch": "s1", "rooms": {"join": {"!r:h": {"timeline": {"events": []}}}}});
        assert!(!batch(&plain).rooms[0].encrypted);
    }

    #[test]
    fn a_membership_event_marks_the_member_count_stale() {
        let join = json!({"type": "m.room.member", "state_key": "@eve:h", "sender": "@eve:h", "content": {"membership": "join"}});
        let answer = json!({"next_batch": "s3", "rooms": {"join": {"!r:h": {"timeline": {"events": [join]}}}}});
        assert!(batch(&answer).rooms[0].members_changed);
    }

    #[test]
    fn a_text_message_is_read_with_its_mentions_and_thread() {
        let event = text_event(
            "@ada:h",
            "bot: look",
            json!({"m.mentions": {"user_ids": [BOT]}, "m.relates_to": {"rel_type": "m.thread", "event_id": "$root"}}),
        );
        let candidate = candidate(&event, BOT).unwrap();
        assert_eq!((candidate.event_id.as_str(), candidate.sender.as_str()), ("$e1", "@ada:h"));
        assert!(candidate.mentions_bot && !candidate.mentions_room);
        assert_eq!(candidate.thread_root.as_deref(), Some("$root"));
        assert_eq!(
            metadata(&candidate, false),
            json!({"event_id": "$e1", "is_group": true, "thread_root_event_id": "$root", "thread_reply_to_event_id": "$e1"})
        );
    }

    #[test]
    fn own_messages_edits_encrypted_and_other_events_are_left_out() {
        assert_eq!(candidate(&text_event(BOT, "me", json!({})), BOT), Err("the bot's own message"));
        let edit =
            text_event("@ada:h", "* fixed", json!({"m.relates_to": {"rel_type": "m.replace", "event_id": "$e0"}}));
        assert_eq!(candidate(&edit, BOT), Err("an edit"));
        let encrypted = json!({"type": "m.room.encrypted", "event_id": "$x", "sender": "@ada:h", "content": {}});
        assert!(candidate(&encrypted, BOT).unwrap_err().starts_with("encrypted"));
        let topic = json!({"type": "m.room.topic", "event_id": "$t", "sender": "@ada:h", "content": {"topic": "x"}});
        assert_eq!(candidate(&topic, BOT), Err("not a message"));
    }

    #[test]
    fn an_attachment_is_named_in_the_text() {
        let mut event = text_event("@ada:h", "cat.png", json!({}));
        event["content"]["msgtype"] = json!("m.image");
        assert_eq!(candidate(&event, BOT).unwrap().content, "[image: cat.png] (attachments are not downloaded)");
    }

    #[test]
    fn the_group_policy_applies_to_rooms_of_more_than_two_members_only() {
        let plain = candidate(&text_event("@ada:h", "hello all", json!({})), BOT).unwrap();
        let mention = candidate(&text_event("@ada:h", "hey", json!({"m.mentions": {"user_ids": [BOT]}})), BOT).unwrap();
        let room = candidate(&text_event("@ada:h", "@room", json!({"m.mentions": {"room": true}})), BOT).unwrap();
        let by_name = candidate(&text_event("@ada:h", "ask @bot:h please", json!({})), BOT).unwrap();
        assert!(admitted(&plain, "!r:h", false, &config("open")));
        assert!(admitted(&plain, "!r:h", true, &config("mention")));
        assert!(!admitted(&plain, "!r:h", false, &config("mention")));
        assert!(admitted(&mention, "!r:h", false, &config("mention")));
        assert!(admitted(&by_name, "!r:h", false, &config("mention")));
        assert!(!admitted(&room, "!r:h", false, &config("mention")));
        let mut room_mentions = config("mention");
        room_mentions.allow_room_mentions = true;
        assert!(admitted(&room, "!r:h", false, &room_mentions));
        assert!(admitted(&plain, "!ok:h", false, &config("allowlist")));
        assert!(!admitted(&plain, "!r:h", false, &config("allowlist")));
    }
}
