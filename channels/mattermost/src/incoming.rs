//! Which posts become messages for the kernel, and what those messages say: the bot's own
//! posts, system posts and channel chatter the policy leaves out are dropped, the bot's
//! `@mention` is stripped, and a post in a channel gets the chat id of its thread.

use serde_json::{Value, json};

use crate::api::BotUser;
use crate::config::Config;

/// A user's post as the kernel gets it.
#[derive(Debug, Clone, PartialEq)]
pub struct UserMessage {
    /// The post id: the same for every delivery of the post.
    pub id: String,
    /// The channel it was posted in.
    pub channel: String,
    /// The author's user id.
    pub sender_id: String,
    /// `<channel>` for a direct message outside a thread, else `<channel>:<thread root>`: one
    /// session per thread, and the reply knows where to go from the chat id alone.
    pub chat_id: String,
    /// The text with the bot's mention removed.
    pub content: String,
    /// The team of the channel, when the event named it.
    pub team_id: String,
    /// `post_id`, `root_id`, `channel_type`, `is_group`, and nanobot's `mattermost` object.
    pub metadata: Value,
}

/// What to do with one post.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Hand it to the kernel.
    Submit(UserMessage),
    /// Leave it out, for this reason (for logs and tests).
    Ignore(&'static str),
}

/// Decides about a `posted` event's post.
pub fn judge(post: &Value, channel_type: &str, team_id: &str, bot: &BotUser, config: &Config) -> Verdict {
    let text = |key: &str| post[key].as_str().unwrap_or_default().to_owned();
    let (id, channel, sender_id, root_id) = (text("id"), text("channel_id"), text("user_id"), text("root_id"));
    if id.is_empty() || channel.is_empty() || sender_id.is_empty() {
        return Verdict::Ignore("not a post");
    }
    if sender_id == bot.id {
        return Verdict::Ignore("the bot's own post");
    }
    if text("type").starts_with("system_") {
        return Verdict::Ignore("a system post");
    }
    let message = text("message");
    let is_direct = channel_type == "D";
    if is_direct {
        if !config.dm_enabled {
            return Verdict::Ignore("direct messages are off");
        }
        if config.dm_allow_from.as_ref().is_some_and(|allowed| !allowed.iter().any(|u| u == "*" || *u == sender_id)) {
            return Verdict::Ignore("not in dm.allowFrom");
        }
    } else {
        let policy = if root_id.is_empty() { &config.group_policy } else { &config.group_policy_in_thread };
        if !policy.admits(&channel, mentions(&message, &bot.username)) {
            return Verdict::Ignore("the group policy leaves it out");
        }
    }
    let content = strip_mention(&message, &bot.username);
    if content.is_empty() && post["file_ids"].as_array().is_none_or(Vec::is_empty) {
        return Verdict::Ignore("no text");
    }
    let thread = if !root_id.is_empty() {
        Some(root_id.clone())
    } else if config.reply_in_thread && !is_direct {
        Some(id.clone())
    } else {
        None
    };
    let chat_id = thread.as_ref().map_or_else(|| channel.clone(), |root| format!("{channel}:{root}"));
    let kind = channel_kind(channel_type);
    let mut nanobot = json!({"post_id": id, "root_id": root_id, "channel_type": kind});
    if let Some(root) = &thread {
        nanobot["thread_ts"] = json!(root);
    }
    let metadata = json!({"post_id": id, "root_id": root_id, "channel_type": kind, "is_group": !is_direct,
                          "message_id": id, "mattermost": nanobot});
    let content = if content.is_empty() { "[attachment] (files are not downloaded)".to_owned() } else { content };
    Verdict::Submit(UserMessage { id, channel, sender_id, chat_id, content, team_id: team_id.to_owned(), metadata })
}

/// nanobot's names of channel types.
fn channel_kind(code: &str) -> &'static str {
    match code {
        "D" => "dm",
        "G" => "group",
        "P" => "private",
        _ => "public",
    }
}

/// Whether `text` mentions `@username` as a word of its own.
pub fn mentions(text: &str, username: &str) -> bool {
    !mention_spans(text, username).is_empty()
}

/// `text` without the bot's mentions (and the spaces after them), trimmed.
pub fn strip_mention(text: &str, username: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for (start, end) in mention_spans(text, username) {
        out.push_str(&text[from..start]);
        from = end + text[end..].len() - text[end..].trim_start().len();
    }
    out.push_str(&text[from..]);
    out.trim().to_owned()
}

/// A character that makes a word (or an e-mail address) longer.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '@'
}

/// A character a username may go on with.
fn name_goes_on(c: char) -> bool {
    is_word(c) || c == '-' || c == '.'
}

/// Where `@username` stands as a word: not inside an e-mail address or a longer name.
fn mention_spans(text: &str, username: &str) -> Vec<(usize, usize)> {
    if username.is_empty() {
        return Vec::new();
    }
    let needle = format!("@{username}");
    let standalone = |start: usize| {
        let end = start + needle.len();
        let before_ok = !text[..start].chars().next_back().is_some_and(is_word);
        let mut rest = text[end..].chars();
        // A trailing dot ends a sentence; one followed by more name characters is a longer name.
        let after_ok = match rest.next() {
            None => true,
            Some('.') => !rest.next().is_some_and(name_goes_on),
            Some(c) => !name_goes_on(c),
        };
        (before_ok && after_ok).then_some((start, end))
    };
    text.match_indices(&needle).filter_map(|(start, _)| standalone(start)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bot() -> BotUser {
        BotUser { id: "botid".into(), username: "oxibot".into() }
    }

    fn config(extra: Value) -> Config {
        let mut section = json!({"serverUrl": "http://h", "token": "t"});
        section.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        Config::from_value(&section).unwrap()
    }

    fn post(id: &str, user: &str, message: &str, root: &str) -> Value {
        json!({"id": id, "channel_id": "chan", "user_id": user, "message": message, "root_id": root, "type": ""})
    }

    fn submitted(verdict: Verdict) -> UserMessage {
        match verdict {
            Verdict::Submit(message) => message,
            Verdict::Ignore(reason) => panic!("ignored: {reason}"),
        }
    }

    #[test]
    fn a_direct_message_is_submitted_in_the_channel_itself() {
        let message = submitted(judge(&post("p1", "ada", "hello", ""), "D", "", &bot(), &config(json!({}))));
        assert_eq!((message.id.as_str(), message.chat_id.as_str(), message.content.as_str()), ("p1", "chan", "hello"));
        assert_eq!(message.metadata["is_group"], false);
        assert_eq!(message.metadata["mattermost"], json!({"post_id": "p1", "root_id": "", "channel_type": "dm"}));
    }

    #[test]
    fn a_channel_post_needs_a_mention_and_gets_the_chat_id_of_its_thread() {
        let config = config(json!({}));
        assert_eq!(
            judge(&post("p1", "ada", "just chatting", ""), "O", "", &bot(), &config),
            Verdict::Ignore("the group policy leaves it out")
        );
        let message = submitted(judge(&post("p2", "ada", "@oxibot what is up?", ""), "O", "t1", &bot(), &config));
        assert_eq!((message.chat_id.as_str(), message.content.as_str()), ("chan:p2", "what is up?"));
        assert_eq!(message.metadata["mattermost"]["thread_ts"], "p2");
        let in_thread = submitted(judge(&post("p3", "ada", "and @oxibot.", "p2"), "O", "", &bot(), &config));
        assert_eq!((in_thread.chat_id.as_str(), in_thread.content.as_str()), ("chan:p2", "and ."));
    }

    #[test]
    fn the_thread_policy_can_open_threads_while_the_channel_needs_mentions() {
        let config = config(json!({"groupPolicyInThread": "open"}));
        assert!(matches!(judge(&post("p1", "ada", "more", "p0"), "O", "", &bot(), &config), Verdict::Submit(_)));
        assert!(matches!(judge(&post("p2", "ada", "more", ""), "O", "", &bot(), &config), Verdict::Ignore(_)));
    }

    #[test]
    fn own_system_and_disabled_direct_posts_are_left_out() {
        assert_eq!(
            judge(&post("p1", "botid", "me", ""), "D", "", &bot(), &config(json!({}))),
            Verdict::Ignore("the bot's own post")
        );
        let mut joined = post("p2", "ada", "ada joined", "");
        joined["type"] = json!("system_join_channel");
        assert_eq!(
            judge(&joined, "O", "", &bot(), &config(json!({"groupPolicy": "open"}))),
            Verdict::Ignore("a system post")
        );
        let off = config(json!({"dm": {"enabled": false}}));
        assert_eq!(
            judge(&post("p3", "ada", "hi", ""), "D", "", &bot(), &off),
            Verdict::Ignore("direct messages are off")
        );
        let allowlist = config(json!({"dm": {"policy": "allowlist", "allowFrom": ["bob"]}}));
        assert_eq!(
            judge(&post("p4", "ada", "hi", ""), "D", "", &bot(), &allowlist),
            Verdict::Ignore("not in dm.allowFrom")
        );
    }

    #[test]
    fn mentions_are_whole_names_only() {
        assert!(mentions("hey @oxibot", "oxibot"));
        assert!(mentions("@oxibot, hi", "oxibot"));
        assert!(mentions("thanks @oxibot.", "oxibot"));
        assert!(!mentions("hey @oxibot2", "oxibot"));
        assert!(!mentions("mail me at x@oxibot.com", "oxibot"));
        assert!(!mentions("hey @oxibot.dev", "oxibot"));
        assert_eq!(strip_mention("@oxibot  do it @oxibot", "oxibot"), "do it");
    }
}
