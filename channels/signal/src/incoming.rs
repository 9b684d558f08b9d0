//! Which received envelopes become messages for the kernel, and what those messages say:
//! receipts, typing, reactions and other devices' sync messages are dropped; group messages
//! pass the group settings and (unless a `/command`) must mention the bot, whose mention is
//! stripped and the sender's name put in front; direct messages the channel's own allow list
//! names are marked authenticated, others are left to the kernel's `allowFrom` or pairing.

use std::collections::{HashMap, VecDeque};

use oxibot_plugin::chat;
use serde_json::{Value, json};

use crate::config::{Config, Policy};

/// A user's message as the kernel gets it.
///
/// - `id`: `<sender>:<timestamp>`: a message's sender and timestamp identify it in Signal.
/// - `sender_id`: The sender's phone number (its UUID when the envelope has no number).
/// - `chat_id`: The sender's number for a direct message, the group id for a group message.
/// - `content`: The text (a group message with the sender's name in front, after earlier messages).
/// - `metadata`: `timestamp`, `sender_name`, `sender_number`, `sender_ids`, `is_group`, `group_id`,
///   and `authenticated` when the channel's own settings let the sender in.
pub type UserMessage = chat::UserMessage;

/// What to do with one envelope.
pub type Verdict = chat::Verdict<UserMessage>;

/// The recent messages of each group, shown with the next one the bot answers there.
#[derive(Debug, Default)]
pub struct GroupContext {
    /// Lines by group id, oldest first.
    recent: HashMap<String, VecDeque<String>>,
}

impl GroupContext {
    /// Notes a line of group `group`, keeping at most `size`.
    fn push(&mut self, group: &str, line: String, size: usize) {
        let lines = self.recent.entry(group.to_owned()).or_default();
        while lines.len() >= size {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The lines noted in `group` since it was last answered, which are forgotten now.
    fn take(&mut self, group: &str) -> Vec<String> {
        self.recent.remove(group).map(Vec::from).unwrap_or_default()
    }
}

/// Envelope keys that may name the sender, in the order they are preferred.
const SENDER_KEYS: &[&str] = &["sourceNumber", "source", "sourceUuid", "sourceServiceId", "sourceAci"];

/// Decides about the `params` of a `receive` notification (`{"envelope": …}`).
pub fn judge(params: &Value, config: &Config, groups: &mut GroupContext) -> Verdict {
    let envelope = &params["envelope"];
    let ids = sender_ids(envelope);
    let Some(sender) = primary(&ids) else { return Verdict::Ignore("no sender") };
    if ids.iter().any(|id| same_id(id, &config.account)) {
        return Verdict::Ignore("the bot's own message");
    }
    let data = &envelope["dataMessage"];
    if !data.is_object() {
        return Verdict::Ignore("not a data message");
    }
    if !data["reaction"].is_null() {
        return Verdict::Ignore("a reaction");
    }
    let text = data["message"].as_str().unwrap_or_default();
    let attachments = data["attachments"].as_array().cloned().unwrap_or_default();
    if text.trim().is_empty() && attachments.is_empty() {
        return Verdict::Ignore("empty");
    }
    let timestamp = data["timestamp"].as_u64().or(envelope["timestamp"].as_u64()).unwrap_or_default();
    let name = envelope["sourceName"].as_str().filter(|name| !name.is_empty()).unwrap_or(&sender).to_owned();
    let mentions = data["mentions"].as_array().cloned().unwrap_or_default();
    let group = group_id(data);
    let (chat_id, content, authenticated) = match &group {
        Some(group) => {
            if !config.group_enabled {
                return Verdict::Ignore("groups are off");
            }
            if !listed(&config.group_policy, group) {
                return Verdict::Ignore("not an allowed group");
            }
            let own_words = strip_bot_mentions(text, &mentions, &config.account);
            let line = format!("[{name}]: {}", with_attachments(&own_words, &attachments));
            let is_command = text.trim_start().starts_with('/');
            if config.require_mention && !is_command && !mentions_bot(text, &mentions, &config.account) {
                groups.push(group, line, config.group_buffer);
                return Verdict::Ignore("no mention of the bot");
            }
            let earlier = groups.take(group);
            let content = if earlier.is_empty() {
                line
            } else {
                format!("[Recent group messages for context:]\n{}\n---\n{line}", earlier.join("\n"))
            };
            (group.clone(), content, true)
        }
        None => {
            if !config.dm_enabled {
                return Verdict::Ignore("direct messages are off");
            }
            let allowed = match &config.dm_policy {
                Policy::Open => true,
                Policy::Allowlist(list) => {
                    list.iter().any(|entry| entry == "*" || ids.iter().any(|id| same_id(id, entry)))
                }
            };
            (sender.clone(), with_attachments(text.trim(), &attachments), allowed)
        }
    };
    let mut metadata = json!({"timestamp": timestamp, "sender_name": name, "sender_number": sender, "sender_ids": ids,
                              "is_group": group.is_some(), "group_id": group});
    if authenticated {
        metadata["authenticated"] = json!(true);
    }
    Verdict::Submit(UserMessage {
        id: format!("{sender}:{timestamp}"),
        sender_id: sender,
        chat_id,
        content,
        attachments: Vec::new(),
        metadata,
    })
}

/// Every id the envelope gives the sender.
fn sender_ids(envelope: &Value) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for key in SENDER_KEYS {
        if let Some(id) = envelope[*key].as_str().map(str::trim).filter(|id| !id.is_empty())
            && !ids.iter().any(|known| known == id)
        {
            ids.push(id.to_owned());
        }
    }
    ids
}

/// The phone number among `ids`, else the first id.
fn primary(ids: &[String]) -> Option<String> {
    ids.iter().find(|id| id.starts_with('+')).or(ids.first()).cloned()
}

/// Whether two Signal ids are the same: case aside, and with or without the `+` of a number.
pub fn same_id(a: &str, b: &str) -> bool {
    let normal = |id: &str| id.trim().trim_start_matches('+').to_lowercase();
    !a.trim().is_empty() && normal(a) == normal(b)
}

fn group_id(data: &Value) -> Option<String> {
    let candidates = [&data["groupInfo"]["groupId"], &data["groupV2"]["id"], &data["groupInfo"]["id"]];
    candidates.into_iter().find_map(|id| id.as_str().filter(|id| !id.is_empty()).map(str::to_owned))
}

fn listed(policy: &Policy, id: &str) -> bool {
    match policy {
        Policy::Open => true,
        Policy::Allowlist(list) => list.iter().any(|entry| entry == "*" || entry == id),
    }
}

/// The ids a mention names (`number`, `uuid`, …).
fn mention_ids(mention: &Value) -> Vec<&str> {
    ["number", "uuid", "serviceId", "aci"]
        .iter()
        .filter_map(|key| mention[*key].as_str())
        .filter(|id| !id.is_empty())
        .collect()
}

/// The `(start, length)` of a mention, in UTF-16 units.
fn mention_span(mention: &Value) -> Option<(usize, usize)> {
    let start = usize::try_from(mention["start"].as_u64()?).ok()?;
    let length = usize::try_from(mention["length"].as_u64()?).ok()?;
    (length > 0).then_some((start, length))
}

/// Whether the message names the bot: a mention of its number, a mention without ids at the
/// very start (how some clients send them), a leading mention placeholder, or its number in the
/// text.
fn mentions_bot(text: &str, mentions: &[Value], account: &str) -> bool {
    let utf16: Vec<u16> = text.encode_utf16().collect();
    let leading = |start: usize| String::from_utf16_lossy(&utf16[..start.min(utf16.len())]).trim().is_empty();
    mentions.iter().any(|mention| {
        let ids = mention_ids(mention);
        ids.iter().any(|id| same_id(id, account))
            || (ids.is_empty() && mention_span(mention).is_some_and(|(s, _)| leading(s)))
    }) || (mentions.is_empty() && text.trim_start().starts_with('\u{fffc}'))
        || text.contains(account)
        || text.contains(account.trim_start_matches('+'))
}

/// `text` without the spans of mentions of the bot (and of id-less leading mentions), trimmed.
fn strip_bot_mentions(text: &str, mentions: &[Value], account: &str) -> String {
    let utf16: Vec<u16> = text.encode_utf16().collect();
    let mut spans: Vec<(usize, usize)> = mentions
        .iter()
        .filter(|mention| {
            let ids = mention_ids(mention);
            ids.iter().any(|id| same_id(id, account))
                || (ids.is_empty()
                    && mention_span(mention).is_some_and(|(start, _)| {
                        String::from_utf16_lossy(&utf16[..start.min(utf16.len())]).trim().is_empty()
                    }))
        })
        .filter_map(mention_span)
        .collect();
    if spans.is_empty() {
        let leading = text.len() - text.trim_start().len();
        if text[leading..].starts_with('\u{fffc}') {
            return text[leading + '\u{fffc}'.len_utf8()..].trim().to_owned();
        }
    }
    spans.sort_unstable_by(|a, b| b.cmp(a));
    let mut kept = utf16;
    for (start, length) in spans {
        if start < kept.len() {
            let end = (start + length).min(kept.len());
            kept.drain(start..end);
        }
    }
    String::from_utf16_lossy(&kept).trim().to_owned()
}

/// The text with a line naming each attachment (they are not copied).
fn with_attachments(text: &str, attachments: &[Value]) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !text.is_empty() {
        parts.push(text.to_owned());
    }
    for attachment in attachments {
        let name = attachment["filename"].as_str().or(attachment["contentType"].as_str()).unwrap_or("file");
        parts.push(format!("[attachment: {name}] (attachments are not copied)"));
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOT: &str = "+15550009999";

    fn config(extra: Value) -> Config {
        let mut section = json!({"phoneNumber": BOT});
        section.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        Config::from_value(&section).unwrap()
    }

    fn envelope(data: Value) -> Value {
        json!({"envelope": {"source": "+15551234567", "sourceNumber": "+15551234567", "sourceUuid": "uuid-ada",
                            "sourceName": "Ada", "sourceDevice": 1, "timestamp": 1_700_000_000_000_u64, "dataMessage": data}})
    }

    fn text(message: &str) -> Value {
        json!({"timestamp": 1_700_000_000_000_u64, "message": message})
    }

    fn in_group(message: &str, mentions: Value) -> Value {
        json!({"timestamp": 1_700_000_000_001_u64, "message": message, "mentions": mentions,
               "groupInfo": {"groupId": "grp==", "type": "DELIVER"}})
    }

    fn submitted(verdict: Verdict) -> UserMessage {
        match verdict {
            Verdict::Submit(message) => message,
            Verdict::Ignore(reason) => panic!("ignored: {reason}"),
        }
    }

    #[test]
    fn a_direct_message_from_the_allow_list_is_submitted_as_authenticated() {
        let config = config(json!({"dm": {"allowFrom": ["15551234567"]}}));
        let message = submitted(judge(&envelope(text("hello")), &config, &mut GroupContext::default()));
        assert_eq!(message.id, "+15551234567:1700000000000");
        assert_eq!(
            (message.sender_id.as_str(), message.chat_id.as_str(), message.content.as_str()),
            ("+15551234567", "+15551234567", "hello")
        );
        assert_eq!(message.metadata["authenticated"], true);
        assert_eq!(message.metadata["is_group"], false);
        assert_eq!(message.metadata["sender_ids"], json!(["+15551234567", "uuid-ada"]));
    }

    #[test]
    fn a_direct_message_from_someone_else_is_left_to_the_kernel() {
        let message = submitted(judge(&envelope(text("let me in")), &config(json!({})), &mut GroupContext::default()));
        assert_eq!(message.metadata.get("authenticated"), None);
        let open = config(json!({"dm": {"policy": "open"}}));
        assert_eq!(
            submitted(judge(&envelope(text("hi")), &open, &mut GroupContext::default())).metadata["authenticated"],
            true
        );
        let off = config(json!({"dm": {"enabled": false}}));
        assert_eq!(
            judge(&envelope(text("hi")), &off, &mut GroupContext::default()),
            Verdict::Ignore("direct messages are off")
        );
    }

    #[test]
    fn group_messages_need_groups_on_an_allowed_group_and_a_mention() {
        let mention = json!([{"number": BOT, "uuid": "uuid-bot", "start": 0, "length": 1}]);
        let off = config(json!({}));
        assert_eq!(
            judge(&envelope(in_group("\u{fffc} hi", mention.clone())), &off, &mut GroupContext::default()),
            Verdict::Ignore("groups are off")
        );
        let other_group = config(json!({"group": {"enabled": true, "allowFrom": ["other=="]}}));
        assert_eq!(
            judge(&envelope(in_group("\u{fffc} hi", mention.clone())), &other_group, &mut GroupContext::default()),
            Verdict::Ignore("not an allowed group")
        );
        let on = config(json!({"group": {"enabled": true, "policy": "open"}}));
        let mut groups = GroupContext::default();
        assert_eq!(
            judge(&envelope(in_group("just chatting", json!([]))), &on, &mut groups),
            Verdict::Ignore("no mention of the bot")
        );
        let message = submitted(judge(&envelope(in_group("\u{fffc} what is up?", mention)), &on, &mut groups));
        assert_eq!(message.chat_id, "grp==");
        assert_eq!(
            message.content,
            "[Recent group messages for context:]\n[Ada]: just chatting\n---\n[Ada]: what is up?"
        );
        assert_eq!(message.metadata["group_id"], "grp==");
        let command = submitted(judge(&envelope(in_group("/new", json!([]))), &on, &mut groups));
        assert_eq!(command.content, "[Ada]: /new", "the context was shown once");
    }

    #[test]
    fn mentions_are_found_by_number_by_leading_position_or_in_the_text() {
        let id_less = [json!({"start": 0, "length": 1})];
        assert!(mentions_bot("\u{fffc} hi", &id_less, BOT));
        assert!(!mentions_bot("hi \u{fffc}", &[json!({"start": 3, "length": 1})], BOT));
        assert!(mentions_bot("hey 15550009999", &[], BOT));
        assert!(!mentions_bot("hey", &[json!({"number": "+1555000", "start": 0, "length": 1})], BOT));
        let emoji_first = "😀 \u{fffc} go";
        let span = [json!({"number": BOT, "start": 3, "length": 1})];
        assert_eq!(strip_bot_mentions(emoji_first, &span, BOT), "😀  go");
    }

    #[test]
    fn receipts_reactions_and_own_messages_are_left_out() {
        let config = config(json!({"dm": {"policy": "open"}}));
        let receipt = json!({"envelope": {"source": "+1555", "receiptMessage": {"isDelivery": true}}});
        assert_eq!(judge(&receipt, &config, &mut GroupContext::default()), Verdict::Ignore("not a data message"));
        let reaction = envelope(json!({"timestamp": 1, "reaction": {"emoji": "👍"}}));
        assert_eq!(judge(&reaction, &config, &mut GroupContext::default()), Verdict::Ignore("a reaction"));
        let own = json!({"envelope": {"sourceNumber": BOT, "dataMessage": {"message": "me"}}});
        assert_eq!(judge(&own, &config, &mut GroupContext::default()), Verdict::Ignore("the bot's own message"));
    }
}
