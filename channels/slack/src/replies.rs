//! Delivering the kernel's replies with `chat.postMessage`: Markdown turned into mrkdwn, long
//! texts posted in parts, in the thread the metadata names, then acknowledged to the kernel.

use oxibot_plugin::chat::{self, Choice, PartsSent, SplitRules, approval, leave_files_out, split};
use oxibot_plugin::{ApprovalRequest, Outbound};
use serde_json::{Value, json};

use crate::api::{WebApi, WebError};
use crate::incoming::replies_go_to_thread;
use crate::mrkdwn::to_mrkdwn;

/// Where a reply goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The Slack channel id.
    pub channel: String,
    /// The thread to post in, if any.
    pub thread_ts: Option<String>,
}

impl Destination {
    /// Where `outbound` goes: the channel of its chat id, in the thread its metadata (or a
    /// per-thread chat id `<channel>:<thread_ts>`) names when replies go to threads.
    pub fn of(outbound: &Outbound, reply_in_thread: bool) -> Destination {
        let (channel, chat_thread) = match outbound.chat_id.split_once(':') {
            Some((channel, thread)) if !thread.is_empty() => (channel, Some(thread)),
            _ => (outbound.chat_id.as_str(), None),
        };
        let thread_ts = metadata_thread(&outbound.metadata, reply_in_thread).or(chat_thread);
        Destination { channel: channel.to_owned(), thread_ts: thread_ts.map(str::to_owned) }
    }
}

/// The thread named by the metadata copied from the user's message, if the reply goes there.
fn metadata_thread(metadata: &Value, reply_in_thread: bool) -> Option<&str> {
    let thread_ts = metadata["thread_ts"].as_str().filter(|ts| !ts.is_empty())?;
    let is_group = metadata["is_group"].as_bool() != Some(false);
    match metadata["ts"].as_str() {
        Some(ts) => replies_go_to_thread(is_group, ts, thread_ts, reply_in_thread).then_some(thread_ts),
        None => reply_in_thread.then_some(thread_ts),
    }
}

/// Block Kit for an approval request: its text, then one button per choice (the answer as
/// the button's value, which comes back in the `block_actions` interaction).
fn approval_blocks(text: &str, choices: &[Choice]) -> Value {
    let shown: String = text.chars().take(2900).collect();
    let buttons: Vec<Value> = choices
        .iter()
        .enumerate()
        .map(|(index, choice)| {
            let style = if choice.refuses { "danger" } else { "primary" };
            json!({"type": "button", "text": {"type": "plain_text", "text": choice.label}, "value": choice.answer,
                   "action_id": format!("oxibot_approval_{index}"), "style": style})
        })
        .collect();
    json!([
        {"type": "section", "text": {"type": "mrkdwn", "text": shown}},
        {"type": "actions", "elements": buttons}
    ])
}

/// Posts replies for the bot.
pub struct Replies {
    /// The Web API.
    pub web: WebApi,
    /// The bot token.
    pub token: String,
    /// `replyInThread`.
    pub reply_in_thread: bool,
    /// Outbound id → parts already posted, for replies not delivered whole yet (kept on disk).
    pub posted: PartsSent,
}

impl Replies {
    /// One `chat.postMessage`.
    async fn post(&self, destination: &Destination, text: &str, buttons: Option<&[Choice]>) -> Result<(), WebError> {
        let mut body = json!({"channel": destination.channel, "text": text, "mrkdwn": true});
        if let Some(choices) = buttons {
            body["blocks"] = approval_blocks(text, choices);
        }
        if let Some(thread_ts) = &destination.thread_ts {
            body["thread_ts"] = json!(thread_ts);
        }
        self.web.call("chat.postMessage", &self.token, &body).await.map(drop)
    }
}

impl Replies {
    /// Posts every part of `outbound` not posted yet; an approval request's `buttons` go on
    /// its first part.
    async fn post_parts(&mut self, outbound: &Outbound, buttons: &[Choice]) -> Result<(), String> {
        let parts = split(&to_mrkdwn(&outbound.content), SplitRules::SLACK);
        leave_files_out(outbound, !parts.is_empty(), "slack")?;
        let destination = Destination::of(outbound, self.reply_in_thread);
        let already = self.posted.already(outbound.id);
        for (index, part) in parts.iter().enumerate().skip(already) {
            let buttons = (index == 0 && !buttons.is_empty()).then_some(buttons);
            self.post(&destination, part, buttons).await.map_err(|error| error.to_string())?;
            self.posted.posted(outbound.id, index + 1, parts.len());
        }
        Ok(())
    }
}

impl chat::Replies for Replies {
    type Error = String;

    /// Posts every part of `outbound` not posted yet.
    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), String> {
        self.post_parts(outbound, &[]).await
    }

    /// Posts an approval request with a button per answer.
    async fn ask(&mut self, request: &ApprovalRequest) -> Result<(), String> {
        self.post_parts(&approval::as_outbound(request), &approval::choices(request)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbound(chat_id: &str, metadata: Value) -> Outbound {
        Outbound { id: 1, chat_id: chat_id.into(), content: "x".into(), media: vec![], stream_id: None, metadata }
    }

    fn thread_of(chat_id: &str, metadata: Value, reply_in_thread: bool) -> Option<String> {
        Destination::of(&outbound(chat_id, metadata), reply_in_thread).thread_ts
    }

    #[test]
    fn a_reply_to_a_channel_message_goes_to_its_thread_when_replies_in_threads_are_on() {
        let metadata = json!({"ts": "1.0", "thread_ts": "1.0", "is_group": true});
        assert_eq!(thread_of("C1", metadata.clone(), true).as_deref(), Some("1.0"));
        assert_eq!(thread_of("C1", metadata, false), None);
    }

    #[test]
    fn a_reply_to_a_message_already_in_a_thread_stays_in_that_thread() {
        let metadata = json!({"ts": "2.5", "thread_ts": "2.0", "is_group": true});
        assert_eq!(thread_of("C1", metadata, false).as_deref(), Some("2.0"));
    }

    #[test]
    fn a_reply_to_a_top_level_direct_message_is_not_threaded() {
        assert_eq!(thread_of("D1", json!({"ts": "3.0", "thread_ts": "3.0", "is_group": false}), true), None);
        assert_eq!(
            thread_of("D1", json!({"ts": "3.5", "thread_ts": "3.0", "is_group": false}), true).as_deref(),
            Some("3.0")
        );
    }

    #[test]
    fn a_per_thread_chat_id_names_the_channel_and_the_thread() {
        let destination = Destination::of(&outbound("C1:4.0", json!({})), true);
        assert_eq!(destination, Destination { channel: "C1".into(), thread_ts: Some("4.0".into()) });
        assert_eq!(
            Destination::of(&outbound("C1", json!({})), true),
            Destination { channel: "C1".into(), thread_ts: None }
        );
    }
}
