//! One reply as Telegram shows it: the messages holding its parts, kept in step with its text.
//! Showing a text renders it, splits it, edits the parts that changed and sends the ones that
//! are new (the first quoting the user's message); a part whose HTML Telegram refuses goes as
//! plain text. The same reply object serves a streamed reply as it grows, its final form, and
//! a delivery retried after a failure (parts already sent are not sent twice).

use std::path::Path;
use std::time::Duration;

use oxibot_plugin::chat::{Choice, SplitRules, split, visible_text};
use oxibot_plugin::warn;
use serde_json::{Value, json};

use crate::api::{BotApi, chat_id_value};
use crate::error::ApiError;
use crate::markdown::to_html;
use crate::target::ReplyTarget;
use crate::types::SentMessage;

/// The longest rate-limit wait a final delivery sits out before it gives up.
const MAX_PATIENCE: Duration = Duration::from_secs(30);
/// How many rate-limit waits a final delivery sits out.
const MAX_WAITS: usize = 3;

/// How hard to try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effort {
    /// An update of a streamed reply: a rate limit fails it at once (a later one follows).
    Draft,
    /// The final text: rate limits are waited out (within reason).
    Final,
}

/// A part already on Telegram.
#[derive(Debug, Clone)]
struct SentPart {
    message_id: i64,
    /// The HTML it was sent with (as plain text, if Telegram refused the HTML).
    html: String,
}

/// A reply in one chat.
#[derive(Debug, Clone)]
pub struct Reply {
    chat_id: String,
    target: ReplyTarget,
    /// Whether the first part quotes the user's message.
    quote: bool,
    parts: Vec<SentPart>,
    /// How many of the outbound message's files were sent.
    files_sent: usize,
    /// An inline keyboard for the first part (an approval request's buttons).
    keyboard: Option<Value>,
}

impl Reply {
    /// A reply not yet shown.
    pub fn new(chat_id: &str, target: ReplyTarget, quote: bool) -> Reply {
        Reply { chat_id: chat_id.to_owned(), target, quote, parts: Vec::new(), files_sent: 0, keyboard: None }
    }

    /// The same reply with an approval request's buttons, one per choice, as an inline
    /// keyboard on its first part (a press comes back as a `callback_query` with the answer).
    pub fn with_buttons(mut self, choices: &[Choice]) -> Reply {
        let row: Vec<Value> = choices.iter().map(|c| json!({"text": c.label, "callback_data": c.answer})).collect();
        self.keyboard = (!row.is_empty()).then(|| json!({"inline_keyboard": [row]}));
        self
    }

    /// The chat it goes to.
    pub fn chat_id(&self) -> &str {
        &self.chat_id
    }

    /// Shows `markdown`: edits the parts that changed, sends the new ones and, for the final
    /// text, deletes parts it no longer needs.
    pub async fn show(&mut self, api: &BotApi, markdown: &str, effort: Effort) -> Result<(), ApiError> {
        let parts = split(&to_html(markdown), SplitRules::TELEGRAM);
        for (index, html) in parts.iter().enumerate() {
            match self.parts.get(index) {
                Some(sent) if sent.html == *html => {}
                Some(sent) => {
                    let message_id = sent.message_id;
                    patiently(effort, || self.edit(api, message_id, html)).await?;
                    self.parts[index].html = html.clone();
                }
                None => {
                    let message_id = patiently(effort, || self.send(api, index, html)).await?;
                    self.parts.push(SentPart { message_id, html: html.clone() });
                }
            }
        }
        if effort == Effort::Final {
            self.drop_parts_beyond(api, parts.len()).await;
        }
        Ok(())
    }

    /// Sends `files` not sent yet: images as photos, the rest as documents. A missing file is
    /// skipped (sending it again would not help).
    pub async fn send_files(&mut self, api: &BotApi, files: &[String]) -> Result<(), ApiError> {
        while let Some(file) = files.get(self.files_sent) {
            let path = Path::new(file);
            if path.is_file() {
                let (method, field) =
                    if is_photo(path) { ("sendPhoto", "photo") } else { ("sendDocument", "document") };
                let mut fields = vec![("chat_id", self.chat_id.clone())];
                if let Some(thread) = self.target.thread {
                    fields.push(("message_thread_id", thread.to_string()));
                }
                patiently(Effort::Final, || api.upload(method, field, &fields, path)).await?;
            } else {
                warn!("not sending {file} to chat {}: no such file", self.chat_id);
            }
            self.files_sent += 1;
        }
        Ok(())
    }

    /// Sends part `index` as HTML, or as plain text when Telegram refuses the HTML.
    async fn send(&self, api: &BotApi, index: usize, html: &str) -> Result<i64, ApiError> {
        let mut params = json!({"chat_id": chat_id_value(&self.chat_id), "text": html, "parse_mode": "HTML"});
        self.target.apply(&mut params, self.quote && index == 0);
        if let (0, Some(keyboard)) = (index, &self.keyboard) {
            params["reply_markup"] = keyboard.clone();
        }
        let sent: Result<SentMessage, ApiError> = match api.send_message(&params).await {
            Err(error) if error.is_bad_html() => api.send_message(&as_plain(params, html)).await,
            other => other,
        };
        sent.map(|message| message.message_id)
    }

    /// Replaces the text of a part, falling back to plain text like [`Reply::send`].
    async fn edit(&self, api: &BotApi, message_id: i64, html: &str) -> Result<(), ApiError> {
        let params = json!({"chat_id": chat_id_value(&self.chat_id), "message_id": message_id, "text": html, "parse_mode": "HTML"});
        match api.edit_message_text(&params).await {
            Err(error) if error.is_bad_html() => api.edit_message_text(&as_plain(params, html)).await,
            other => other,
        }
    }

    /// Deletes the parts from `keep` on (the final text turned out shorter than a draft).
    async fn drop_parts_beyond(&mut self, api: &BotApi, keep: usize) {
        for part in self.parts.split_off(keep.min(self.parts.len())) {
            if let Err(error) = api.delete_message(&self.chat_id, part.message_id).await {
                warn!("cannot delete an outdated part of a reply in chat {}: {error}", self.chat_id);
            }
        }
    }
}

/// The same request with the text shown plainly.
fn as_plain(mut params: Value, html: &str) -> Value {
    params["text"] = json!(visible_text(html));
    if let Some(map) = params.as_object_mut() {
        map.remove("parse_mode");
    }
    params
}

/// Whether Telegram takes the file as a photo (by its extension).
fn is_photo(path: &Path) -> bool {
    let extension = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    matches!(extension.as_deref(), Some("jpg" | "jpeg" | "png" | "webp"))
}

/// Runs `attempt`; for a final delivery, waits out Telegram's rate limits a few times.
async fn patiently<T, F, Fut>(effort: Effort, mut attempt: F) -> Result<T, ApiError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    let mut waits = 0;
    loop {
        match attempt().await {
            Err(error) if effort == Effort::Final && waits < MAX_WAITS => {
                match error.retry_after().filter(|wait| *wait <= MAX_PATIENCE) {
                    Some(wait) => {
                        waits += 1;
                        tokio::time::sleep(wait).await;
                    }
                    None => return Err(error),
                }
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_form_of_a_request_has_no_parse_mode_and_decoded_text() {
        let params = json!({"chat_id": 1, "text": "<b>a &lt; b</b>", "parse_mode": "HTML"});
        assert_eq!(as_plain(params, "<b>a &lt; b</b>"), json!({"chat_id": 1, "text": "a < b"}));
    }

    #[test]
    fn images_go_as_photos_and_everything_else_as_documents() {
        assert!(is_photo(Path::new("/m/chart.PNG")));
        assert!(!is_photo(Path::new("/m/report.pdf")));
        assert!(!is_photo(Path::new("/m/anim.gif")));
    }
}
