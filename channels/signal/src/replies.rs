//! Delivering the kernel's replies with signal-cli's `send`: to the sender's number, or to the
//! group, as plain text with text styles (from the reply's Markdown), cut into parts, then
//! acknowledged to the kernel.

use oxibot_plugin::chat::{self, Markup, Measure, SplitRules, serve_replies, split};
use oxibot_plugin::{ChannelHandle, Outbound};
use serde_json::{Value, json};

use crate::api::Daemon;
use crate::styles::{styles_of_part, to_signal};

/// How long a part may be: nanobot's limit for signal-cli (Signal's own is about 64 KB).
pub const RULES: SplitRules = SplitRules { limit: 64_000, measure: Measure::Chars, markup: Markup::Markdown };

/// Sends replies for the bot.
pub struct Replies {
    /// The daemon.
    pub daemon: Daemon,
}

impl Replies {
    /// Delivers the kernel's outbound messages until it hangs up, acknowledging each.
    pub async fn serve(mut self, channel: &ChannelHandle) {
        serve_replies(channel, &mut self).await;
    }

    /// Sends every part of `outbound`; files go along with the first.
    async fn deliver(&self, outbound: &Outbound) -> Result<(), String> {
        let (plain, styles) = to_signal(&outbound.content);
        let mut parts = split(&plain, RULES);
        if parts.is_empty() {
            if outbound.media.is_empty() {
                return Ok(());
            }
            parts.push(String::new());
        }
        let mut cursor = 0;
        for (index, part) in parts.iter().enumerate() {
            let mut params = recipient(&outbound.chat_id, &outbound.metadata);
            params["message"] = json!(part);
            // A part is a piece of the plain text (unless the splitter had to reopen a code
            // fence, which plain text hardly holds); its styles are the ones inside it.
            if let Some(at) = plain.get(cursor..).and_then(|rest| rest.find(part.as_str())) {
                let start = plain[..cursor + at].encode_utf16().count();
                cursor += at + part.len();
                let part_styles = styles_of_part(&styles, start, part.encode_utf16().count());
                if !part_styles.is_empty() {
                    params["textStyle"] = json!(part_styles);
                }
            }
            if index == 0 && !outbound.media.is_empty() {
                params["attachments"] = json!(outbound.media);
            }
            self.daemon.call("send", params).await.map_err(|error| error.to_string())?;
        }
        Ok(())
    }
}

impl chat::Replies for Replies {
    type Error = String;

    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), String> {
        Replies::deliver(self, outbound).await
    }
}

/// Whom a reply goes to: the group the metadata names (or a chat id that looks like a group
/// id, base64 with `=` padding), else the number or UUID of a person.
pub fn recipient(chat_id: &str, metadata: &Value) -> Value {
    let named_group = metadata["group_id"].as_str() == Some(chat_id);
    let looks_like_group = chat_id.contains('=') || (chat_id.len() > 40 && !chat_id.contains('-'));
    if named_group || looks_like_group { json!({"groupId": chat_id}) } else { json!({"recipient": [chat_id]}) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_goes_to_the_group_or_to_the_person() {
        assert_eq!(recipient("+15551234567", &json!({})), json!({"recipient": ["+15551234567"]}));
        assert_eq!(
            recipient("a4b9c1d2-0000-4000-8000-000000000000", &json!({})),
            json!({"recipient": ["a4b9c1d2-0000-4000-8000-000000000000"]})
        );
        assert_eq!(recipient("Zm9vYmFyYmF6cXV4==", &json!({})), json!({"groupId": "Zm9vYmFyYmF6cXV4=="}));
        assert_eq!(recipient("grp", &json!({"group_id": "grp"})), json!({"groupId": "grp"}));
    }
}
