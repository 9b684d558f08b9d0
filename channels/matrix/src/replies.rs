//! Delivering the kernel's replies: each reply cut into parts a room message holds, each part
//! sent as an `m.text` message with its HTML rendering, in the thread the user wrote in, then
//! acknowledged to the kernel.

use oxibot_plugin::chat::{Markup, Measure, SplitRules, Typing, leave_files_out, split};
use oxibot_plugin::warn;
use oxibot_plugin::{ChannelEvent, ChannelHandle, Outbound};
use serde_json::{Value, json};

use crate::api::ClientApi;
use crate::html::{FORMAT, to_html};

/// How long a part may be: a room event holds at most 65,536 bytes, and the part goes in twice
/// (the body and its HTML, where escaping can make it longer).
pub const RULES: SplitRules = SplitRules { limit: 10_000, measure: Measure::Bytes, markup: Markup::Markdown };

/// Sends replies for the bot.
pub struct Replies {
    /// The homeserver.
    pub api: ClientApi,
    /// The "typing…" notices, ended once the reply is out.
    pub typing: Typing,
    /// The bot's user id, whose typing notice ends.
    pub user_id: String,
}

impl Replies {
    /// Delivers the kernel's outbound messages until it hangs up, acknowledging each.
    pub async fn serve(self, channel: &ChannelHandle) {
        while let Some(event) = channel.next_event().await {
            let ChannelEvent::Outbound(outbound) = event else { continue };
            let outcome = self.deliver(&outbound).await;
            self.stop_typing(&outbound.chat_id);
            if let Err(reason) = &outcome {
                warn!("reply {} to {} not delivered: {reason}", outbound.id, outbound.chat_id);
            }
            let _ = channel.ack(outbound.id, outcome);
        }
    }

    /// Sends every part of `outbound`. A part sent before is sent with the same transaction
    /// id, which the homeserver answers without posting it again: the id is made of the
    /// outbound id, which the kernel keeps for every attempt of a reply (across restarts of
    /// this channel too) and never gives twice (its ids start from the clock).
    async fn deliver(&self, outbound: &Outbound) -> Result<(), String> {
        let parts = split(&outbound.content, RULES);
        leave_files_out(outbound, !parts.is_empty(), "matrix")?;
        let thread = thread_relation(&outbound.metadata);
        for (index, part) in parts.iter().enumerate() {
            let txn = format!("oxibot-{}-{index}", outbound.id);
            let content = message_content(part, thread.as_ref());
            self.api.send_message(&outbound.chat_id, &txn, &content).await.map_err(|error| error.to_string())?;
        }
        Ok(())
    }
}

impl Replies {
    /// Stops renewing the room's typing notice and hides it (a failure is only logged).
    fn stop_typing(&self, room: &str) {
        self.typing.stop(room);
        let (api, room, user) = (self.api.clone(), room.to_owned(), self.user_id.clone());
        tokio::spawn(async move {
            if let Err(error) = api.set_typing(&room, &user, false).await {
                warn!("cannot hide the typing notice in {room}: {error}");
            }
        });
    }
}

/// The content of one `m.text` message.
pub fn message_content(markdown: &str, thread: Option<&Value>) -> Value {
    let mut content = json!({"msgtype": "m.text", "body": markdown, "m.mentions": {}});
    if let Some(html) = to_html(markdown) {
        content["format"] = json!(FORMAT);
        content["formatted_body"] = json!(html);
    }
    if let Some(thread) = thread {
        content["m.relates_to"] = thread.clone();
    }
    content
}

/// The thread relation for a reply whose user message was in a thread.
fn thread_relation(metadata: &Value) -> Option<Value> {
    let root = metadata["thread_root_event_id"].as_str().filter(|id| !id.is_empty())?;
    let reply_to = metadata["thread_reply_to_event_id"].as_str().or(metadata["event_id"].as_str()).unwrap_or(root);
    Some(
        json!({"rel_type": "m.thread", "event_id": root, "is_falling_back": true, "m.in_reply_to": {"event_id": reply_to}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_carries_its_text_and_html_and_mentions_nobody() {
        let content = message_content("**hi**", None);
        assert_eq!(
            content,
            json!({"msgtype": "m.text", "body": "**hi**", "m.mentions": {}, "format": FORMAT, "formatted_body": "<p><strong>hi</strong></p>"})
        );
        assert_eq!(message_content("hi", None), json!({"msgtype": "m.text", "body": "hi", "m.mentions": {}}));
    }

    #[test]
    fn a_reply_to_a_message_in_a_thread_goes_into_that_thread() {
        let metadata = json!({"event_id": "$e2", "thread_root_event_id": "$root", "thread_reply_to_event_id": "$e2"});
        let thread = thread_relation(&metadata).unwrap();
        assert_eq!(
            thread,
            json!({"rel_type": "m.thread", "event_id": "$root", "is_falling_back": true, "m.in_reply_to": {"event_id": "$e2"}})
        );
        assert_eq!(thread_relation(&json!({"event_id": "$e2"})), None);
    }

    #[test]
    fn a_long_reply_is_cut_into_parts_of_at_most_ten_thousand_bytes() {
        let text = "word ".repeat(5000);
        let parts = split(&text, RULES);
        assert!(parts.len() >= 3 && parts.iter().all(|part| part.len() <= 10_000));
    }
}
