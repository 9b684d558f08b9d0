//! Which Events API events become messages for the kernel, and what those messages say: the
//! bot's own posts, edits and channel chatter it was not asked about are left out, mentions of
//! the bot are stripped, and the thread to answer in goes into the metadata.

use oxibot_plugin::chat;
use serde_json::{Value, json};

use crate::api::BotIdentity;
use crate::config::{Config, GroupPolicy};

/// A user's message as the kernel gets it.
#[derive(Debug, Clone, PartialEq)]
pub struct UserMessage {
    /// `<channel>:<ts>`: the same for the `message` and `app_mention` events of one post, and
    /// for every redelivery of them.
    pub id: String,
    /// The Slack channel (or DM) id the message was posted in.
    pub channel: String,
    /// The message's timestamp, its id within the channel.
    pub ts: String,
    /// The Slack user id of the author.
    pub sender_id: String,
    /// The Slack channel id, or `<channel>:<thread_ts>` for per-thread sessions.
    pub chat_id: String,
    /// The text with the bot's mentions removed.
    pub content: String,
    /// `ts`, `thread_ts`, `is_group`, `team`.
    pub metadata: Value,
}

/// What to do with one event.
pub type Verdict = chat::Verdict<UserMessage>;

/// Subtypes that still carry a user's words.
const USER_SUBTYPES: &[&str] = &["file_share", "thread_broadcast"];

/// Decides about the `event` of an Events API `payload`.
pub fn judge(payload: &Value, bot: &BotIdentity, config: &Config) -> Verdict {
    let event = &payload["event"];
    let kind = event["type"].as_str().unwrap_or_default();
    if kind != "message" && kind != "app_mention" {
        return Verdict::Ignore("not a message");
    }
    if let Some(reason) = not_from_a_user(event, bot) {
        return Verdict::Ignore(reason);
    }
    let (Some(channel), Some(ts), Some(user)) = (text(event, "channel"), text(event, "ts"), text(event, "user")) else {
        return Verdict::Ignore("no channel, ts or user");
    };
    let is_group = event["channel_type"].as_str() != Some("im");
    let raw_text = event["text"].as_str().unwrap_or_default();
    if is_group && !wanted_in_channel(kind, raw_text, channel, bot, &config.group_policy) {
        return Verdict::Ignore("a channel message the policy leaves out");
    }
    if !is_group && !config.dm_enabled {
        return Verdict::Ignore("direct messages are disabled");
    }
    let content = with_file_names(strip_mentions(raw_text, &bot.user_id), event);
    if content.is_empty() {
        return Verdict::Ignore("no text");
    }
    let thread_ts = text(event, "thread_ts").unwrap_or(ts);
    let team = text(event, "team").or_else(|| text(payload, "team_id")).unwrap_or_default();
    let chat_id = if config.thread_sessions && replies_go_to_thread(is_group, ts, thread_ts, config.reply_in_thread) {
        format!("{channel}:{thread_ts}")
    } else {
        channel.to_owned()
    };
    Verdict::Submit(UserMessage {
        id: format!("{channel}:{ts}"),
        channel: channel.to_owned(),
        ts: ts.to_owned(),
        sender_id: user.to_owned(),
        chat_id,
        content,
        metadata: json!({"ts": ts, "thread_ts": thread_ts, "is_group": is_group, "team": team}),
    })
}

/// A press of an approval button (a `block_actions` interaction whose action's value is an
/// approval answer) as the message of the person who pressed it; the kernel decides whether
/// that person may answer. Any other interaction is none.
pub fn button_press(payload: &Value, config: &Config) -> Option<UserMessage> {
    if payload["type"].as_str() != Some("block_actions") {
        return None;
    }
    let answer = payload["actions"].as_array()?.iter().find_map(|action| action["value"].as_str())?;
    if !chat::is_approval_answer(answer) {
        return None;
    }
    let user = payload["user"]["id"].as_str()?;
    let channel = payload["channel"]["id"].as_str().or_else(|| payload["container"]["channel_id"].as_str())?;
    let message = &payload["message"];
    let ts = message["ts"].as_str().unwrap_or_default();
    let thread_ts = message["thread_ts"].as_str().unwrap_or(ts);
    let is_group = !channel.starts_with('D');
    let chat_id =
        if config.thread_sessions && thread_ts != ts { format!("{channel}:{thread_ts}") } else { channel.to_owned() };
    let pressed = payload["trigger_id"].as_str().or_else(|| payload["actions"][0]["action_ts"].as_str()).unwrap_or(ts);
    Some(UserMessage {
        id: format!("action:{pressed}"),
        channel: channel.to_owned(),
        ts: ts.to_owned(),
        sender_id: user.to_owned(),
        chat_id,
        content: answer.to_owned(),
        metadata: json!({"ts": ts, "thread_ts": thread_ts, "is_group": is_group, "team": payload["team"]["id"]}),
    })
}

/// Whether a reply to a message goes into a thread: always when the message is in one, and for
/// a channel's top-level message when replies in threads are wanted.
pub fn replies_go_to_thread(is_group: bool, ts: &str, thread_ts: &str, reply_in_thread: bool) -> bool {
    ts != thread_ts || (is_group && reply_in_thread)
}

/// Why an event is not a user's message, if it is not.
fn not_from_a_user(event: &Value, bot: &BotIdentity) -> Option<&'static str> {
    if text(event, "user") == Some(bot.user_id.as_str()) {
        return Some("the bot's own message");
    }
    if event.get("bot_id").is_some_and(|id| !id.is_null()) {
        return Some("a bot's message");
    }
    match text(event, "subtype") {
        Some(subtype) if !USER_SUBTYPES.contains(&subtype) => Some("a message subtype that is not a user's post"),
        _ => None,
    }
}

/// Whether a channel message goes to the kernel under `policy`.
fn wanted_in_channel(kind: &str, raw_text: &str, channel: &str, bot: &BotIdentity, policy: &GroupPolicy) -> bool {
    match policy {
        GroupPolicy::Open => true,
        GroupPolicy::Mention => kind == "app_mention" || mentions(raw_text, &bot.user_id),
        GroupPolicy::Allowlist(channels) => channels.iter().any(|allowed| allowed == channel),
    }
}

/// Whether `text` mentions the user `user_id` (`<@U1>` or `<@U1|name>`).
fn mentions(text: &str, user_id: &str) -> bool {
    text.contains(&format!("<@{user_id}>")) || text.contains(&format!("<@{user_id}|"))
}

/// `text` without mentions of `user_id`, spaces around them squeezed, trimmed.
pub fn strip_mentions(text: &str, user_id: &str) -> String {
    let open = format!("<@{user_id}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let closes_here = after.starts_with('>') || after.starts_with('|');
        match after.find('>').filter(|_| closes_here) {
            Some(end) => {
                out.push_str(&rest[..start]);
                rest = &after[end + 1..];
                if out.ends_with(' ') || out.is_empty() {
                    rest = rest.trim_start_matches(' ');
                }
            }
            None => {
                out.push_str(&rest[..start + open.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.trim().to_owned()
}

/// The text followed by one `[file: name]` line per shared file (their content is not fetched).
fn with_file_names(content: String, event: &Value) -> String {
    let Some(files) = event["files"].as_array() else { return content };
    let names = files.iter().filter_map(|file| file["name"].as_str().or_else(|| file["title"].as_str()));
    let mut lines: Vec<String> = if content.is_empty() { Vec::new() } else { vec![content] };
    lines.extend(names.map(|name| format!("[file: {name}]")));
    lines.join("\n")
}

/// A non-empty string field of `value`.
fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value[key].as_str().filter(|text| !text.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bot() -> BotIdentity {
        BotIdentity { user_id: "UBOT".into(), user: "oxibot".into(), bot_id: Some("BBOT".into()), team: "Team".into() }
    }

    fn config(policy: GroupPolicy) -> Config {
        Config {
            bot_token: "xoxb".into(),
            app_token: "xapp".into(),
            api_base: "http://x".into(),
            group_policy: policy,
            reply_in_thread: true,
            thread_sessions: false,
            dm_enabled: true,
            react_emoji: None,
        }
    }

    fn payload(event: Value) -> Value {
        json!({"team_id": "T1", "event_id": "Ev1", "event": event})
    }

    fn submitted(verdict: Verdict) -> UserMessage {
        match verdict {
            Verdict::Submit(message) => message,
            Verdict::Ignore(reason) => panic!("ignored: {reason}"),
        }
    }

    #[test]
    fn a_direct_message_is_submitted_with_its_channel_ts_and_team() {
        let event = json!({"type": "message", "channel_type": "im", "channel": "D1", "user": "U1", "text": "hi there", "ts": "1.5", "team": "T9"});
        let message = submitted(judge(&payload(event), &bot(), &config(GroupPolicy::Mention)));
        assert_eq!(
            (message.id.as_str(), message.sender_id.as_str(), message.chat_id.as_str(), message.content.as_str()),
            ("D1:1.5", "U1", "D1", "hi there")
        );
        assert_eq!(message.metadata, json!({"ts": "1.5", "thread_ts": "1.5", "is_group": false, "team": "T9"}));
    }

    #[test]
    fn under_the_mention_policy_only_mentions_of_the_bot_pass_in_channels() {
        let plain = json!({"type": "message", "channel_type": "channel", "channel": "C1", "user": "U1", "text": "chatter", "ts": "2.0"});
        assert_eq!(
            judge(&payload(plain), &bot(), &config(GroupPolicy::Mention)),
            Verdict::Ignore("a channel message the policy leaves out")
        );
        let mention = json!({"type": "message", "channel_type": "channel", "channel": "C1", "user": "U1", "text": "<@UBOT> help", "ts": "2.1"});
        assert_eq!(submitted(judge(&payload(mention), &bot(), &config(GroupPolicy::Mention))).content, "help");
        let app_mention = json!({"type": "app_mention", "channel": "C1", "user": "U1", "text": "hey <@UBOT|oxibot> now", "ts": "2.2", "thread_ts": "2.0"});
        let message = submitted(judge(&payload(app_mention), &bot(), &config(GroupPolicy::Mention)));
        assert_eq!(message.content, "hey now");
        assert_eq!(message.metadata, json!({"ts": "2.2", "thread_ts": "2.0", "is_group": true, "team": "T1"}));
    }

    #[test]
    fn the_open_policy_takes_every_channel_message_and_the_allowlist_only_listed_channels() {
        let event = json!({"type": "message", "channel_type": "channel", "channel": "C1", "user": "U1", "text": "chatter", "ts": "2.0"});
        assert!(matches!(judge(&payload(event.clone()), &bot(), &config(GroupPolicy::Open)), Verdict::Submit(_)));
        assert!(matches!(
            judge(&payload(event.clone()), &bot(), &config(GroupPolicy::Allowlist(vec!["C1".into()]))),
            Verdict::Submit(_)
        ));
        assert!(matches!(
            judge(&payload(event), &bot(), &config(GroupPolicy::Allowlist(vec!["C2".into()]))),
            Verdict::Ignore(_)
        ));
    }

    #[test]
    fn the_bots_own_posts_other_bots_and_edits_are_ignored_but_file_shares_are_not() {
        let base = |extra: Value| {
            let mut event = json!({"type": "message", "channel_type": "im", "channel": "D1", "user": "U1", "text": "x", "ts": "3.0"});
            event.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            judge(&payload(event), &bot(), &config(GroupPolicy::Mention))
        };
        assert_eq!(base(json!({"user": "UBOT"})), Verdict::Ignore("the bot's own message"));
        assert_eq!(base(json!({"bot_id": "B2", "subtype": "bot_message"})), Verdict::Ignore("a bot's message"));
        assert!(matches!(base(json!({"subtype": "message_changed"})), Verdict::Ignore(_)));
        let shared = submitted(base(json!({"subtype": "file_share", "files": [{"name": "notes.txt"}]})));
        assert_eq!(shared.content, "x\n[file: notes.txt]");
    }

    #[test]
    fn thread_sessions_key_the_chat_by_thread_where_replies_go_to_threads() {
        let mut with_threads = config(GroupPolicy::Open);
        with_threads.thread_sessions = true;
        let top_level = json!({"type": "message", "channel_type": "channel", "channel": "C1", "user": "U1", "text": "x", "ts": "4.0"});
        assert_eq!(submitted(judge(&payload(top_level), &bot(), &with_threads)).chat_id, "C1:4.0");
        let dm =
            json!({"type": "message", "channel_type": "im", "channel": "D1", "user": "U1", "text": "x", "ts": "4.1"});
        assert_eq!(submitted(judge(&payload(dm), &bot(), &with_threads)).chat_id, "D1");
        let dm_thread = json!({"type": "message", "channel_type": "im", "channel": "D1", "user": "U1", "text": "x", "ts": "4.2", "thread_ts": "4.1"});
        assert_eq!(submitted(judge(&payload(dm_thread), &bot(), &with_threads)).chat_id, "D1:4.1");
    }

    #[test]
    fn direct_messages_can_be_switched_off_and_empty_texts_are_dropped() {
        let mut no_dms = config(GroupPolicy::Mention);
        no_dms.dm_enabled = false;
        let dm =
            json!({"type": "message", "channel_type": "im", "channel": "D1", "user": "U1", "text": "x", "ts": "5.0"});
        assert_eq!(judge(&payload(dm), &bot(), &no_dms), Verdict::Ignore("direct messages are disabled"));
        let only_mention =
            json!({"type": "app_mention", "channel": "C1", "user": "U1", "text": "<@UBOT>", "ts": "5.1"});
        assert_eq!(judge(&payload(only_mention), &bot(), &config(GroupPolicy::Mention)), Verdict::Ignore("no text"));
    }

    #[test]
    fn stripping_mentions_keeps_other_users_and_look_alikes() {
        assert_eq!(strip_mentions("<@UBOT> ask <@U2> about <@UBOTX>", "UBOT"), "ask <@U2> about <@UBOTX>");
        assert_eq!(strip_mentions("a <@UBOT> b<@UBOT|bot>c", "UBOT"), "a bc");
        assert_eq!(strip_mentions("<@UBOT", "UBOT"), "<@UBOT");
    }
}
