//! From the kernel's replies to Discord messages: the reply split into messages of at most
//! 2000 characters (the first one answering the user's message), files attached to the last,
//! each posted in turn, then the delivery acked. Parts already posted are not posted again
//! when the kernel retries a delivery that failed halfway, also after the plugin restarted
//! (they are noted in the media directory, [`PartsSent`]).

use std::path::PathBuf;

use oxibot_plugin::chat::{Choice, PartsSent, SplitRules, Typing, approval, split};
use oxibot_plugin::warn;
use oxibot_plugin::{ChannelEvent, ChannelHandle, Outbound};
use serde_json::{Value, json};

use crate::api::Rest;
use crate::error::RestError;

/// How many files Discord takes in one message.
const FILES_PER_MESSAGE: usize = 10;

/// One Discord message to post.
#[derive(Debug, Clone, PartialEq)]
pub struct Post {
    /// Its text.
    pub content: String,
    /// The message it answers.
    pub reply_to: Option<String>,
    /// Files to attach.
    pub files: Vec<PathBuf>,
}

impl Post {
    /// The message JSON: text, reply reference, and mentions limited to users (never
    /// `@everyone`, `@here` or roles).
    pub fn body(&self) -> Value {
        let mut body = json!({"content": self.content, "allowed_mentions": {"parse": ["users"], "replied_user": true}});
        if let Some(message_id) = &self.reply_to {
            body["message_reference"] = json!({"message_id": message_id, "fail_if_not_exists": false});
        }
        body
    }
}

/// One action row with a button per approval choice; the answer is the button's `custom_id`,
/// which comes back in the `INTERACTION_CREATE` of a press.
fn approval_components(choices: &[Choice]) -> Value {
    let buttons: Vec<Value> = choices
        .iter()
        .map(|choice| {
            let style = if choice.refuses { 4 } else { 1 };
            json!({"type": 2, "style": style, "label": choice.label, "custom_id": choice.answer})
        })
        .collect();
    json!([{"type": 1, "components": buttons}])
}

/// The messages a reply becomes.
pub fn plan(outbound: &Outbound) -> Vec<Post> {
    let reply_to = outbound.metadata.get("message_id").and_then(id_text);
    let mut posts: Vec<Post> = split(&outbound.content, SplitRules::DISCORD)
        .into_iter()
        .map(|content| Post { content, reply_to: None, files: Vec::new() })
        .collect();
    let files: Vec<PathBuf> = outbound.media.iter().map(PathBuf::from).collect();
    for (index, batch) in files.chunks(FILES_PER_MESSAGE).enumerate() {
        match posts.last_mut() {
            Some(last) if index == 0 => last.files = batch.to_vec(),
            _ => posts.push(Post { content: String::new(), reply_to: None, files: batch.to_vec() }),
        }
    }
    if let (Some(first), Some(id)) = (posts.first_mut(), reply_to) {
        first.reply_to = Some(id);
    }
    posts
}

/// A message id given as a string or a number.
fn id_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) if !text.is_empty() => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// Delivers the kernel's replies one after another.
pub struct Outbox {
    rest: Rest,
    typing: Typing,
    /// Outbound id → how many of its posts are already in Discord (kept on disk).
    posted: PartsSent,
}

impl Outbox {
    /// An outbox posting through `rest`, ending the typing indicators in `typing`, with the
    /// posts of earlier runs' replies in `posted`.
    pub fn new(rest: Rest, typing: Typing, posted: PartsSent) -> Outbox {
        Outbox { rest, typing, posted }
    }

    /// Delivers and acks every outbound and approval request until the kernel hangs up.
    /// Deltas are not expected (the channel does not stream) and are ignored.
    pub async fn serve(&mut self, channel: &ChannelHandle) {
        while let Some(event) = channel.next_event().await {
            let (outbound, buttons) = match event {
                ChannelEvent::Outbound(outbound) => (outbound, Vec::new()),
                ChannelEvent::Approval(request) => (approval::as_outbound(&request), approval::choices(&request)),
                ChannelEvent::Delta(_) => continue,
            };
            let outcome = self.deliver(&outbound, &buttons).await;
            self.typing.stop(&outbound.chat_id);
            if let Err(error) = &outcome {
                warn!("discord: reply {} to {} not delivered: {error}", outbound.id, outbound.chat_id);
            }
            let _ = channel.ack(outbound.id, outcome.map_err(|e| e.to_string()));
        }
    }

    /// Posts every message of a reply not posted yet; an approval request's `buttons` go on
    /// the first.
    async fn deliver(&mut self, outbound: &Outbound, buttons: &[Choice]) -> Result<(), RestError> {
        let posts = plan(outbound);
        let done = self.posted.already(outbound.id);
        for (index, post) in posts.iter().enumerate().skip(done) {
            let mut body = post.body();
            if index == 0 && !buttons.is_empty() {
                body["components"] = approval_components(buttons);
            }
            let sent = if post.files.is_empty() {
                self.rest.create_message(&outbound.chat_id, &body).await
            } else {
                self.rest.create_message_with_files(&outbound.chat_id, &body, &post.files).await
            };
            sent?;
            self.posted.posted(outbound.id, index + 1, posts.len());
            // Discord hides the indicator once the bot posts; keep it from coming back.
            self.typing.stop(&outbound.chat_id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbound(content: &str, media: &[&str], metadata: Value) -> Outbound {
        Outbound {
            id: 1,
            chat_id: "c".into(),
            content: content.into(),
            media: media.iter().map(|m| m.to_string()).collect(),
            stream_id: None,
            metadata,
        }
    }

    #[test]
    fn only_the_first_part_answers_the_users_message() {
        let posts = plan(&outbound(&"word ".repeat(900), &[], json!({"message_id": "55"})));
        assert_eq!(posts.len(), 3);
        assert_eq!(posts[0].body()["message_reference"]["message_id"], "55");
        assert!(posts[1].body().get("message_reference").is_none());
    }

    #[test]
    fn the_body_never_pings_everyone_or_roles() {
        let body = plan(&outbound("@everyone hi", &[], json!({})))[0].body();
        assert_eq!(body["allowed_mentions"]["parse"], json!(["users"]));
        assert!(body.get("message_reference").is_none());
    }

    #[test]
    fn files_ride_on_the_last_part_ten_at_a_time() {
        let media: Vec<String> = (0..12).map(|i| format!("/f{i}")).collect();
        let media: Vec<&str> = media.iter().map(String::as_str).collect();
        let posts = plan(&outbound("see attached", &media, json!({"message_id": 9})));
        assert_eq!(posts.len(), 2);
        assert_eq!((posts[0].files.len(), posts[0].reply_to.as_deref()), (10, Some("9")));
        assert_eq!((posts[1].content.as_str(), posts[1].files.len()), ("", 2));
        let files_only = plan(&outbound("", &["/a"], json!({})));
        assert_eq!(files_only, [Post { content: String::new(), reply_to: None, files: vec![PathBuf::from("/a")] }]);
    }
}
