//! The parts of the Bot API's JSON objects this channel reads (`Update`, `Message`, …); every
//! other field Telegram sends is ignored.

use serde::Deserialize;

/// One event from `getUpdates`.
#[derive(Debug, Clone, Deserialize)]
pub struct Update {
    /// Increases by one per update; the poll offset is the last handled id plus one.
    pub update_id: i64,
    /// A new message; absent for the other update kinds (edits, callbacks, …).
    #[serde(default)]
    pub message: Option<Message>,
    /// A press of an inline keyboard button (an approval's answer).
    #[serde(default)]
    pub callback_query: Option<CallbackQuery>,
}

/// A press of an inline keyboard button.
#[derive(Debug, Clone, Deserialize)]
pub struct CallbackQuery {
    /// Answered with `answerCallbackQuery`, so the person's client stops waiting.
    pub id: String,
    /// Who pressed it.
    pub from: User,
    /// The message the button belongs to (absent when it is too old to be shown).
    #[serde(default)]
    pub message: Option<Message>,
    /// The button's `callback_data`.
    #[serde(default)]
    pub data: Option<String>,
}

/// A chat message.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    /// Unique within its chat.
    pub message_id: i64,
    /// The forum topic it belongs to, in a supergroup with topics.
    #[serde(default)]
    pub message_thread_id: Option<i64>,
    /// Who sent it (absent for channel posts).
    #[serde(default)]
    pub from: Option<User>,
    /// Where it was sent.
    pub chat: Chat,
    /// The text of a text message.
    #[serde(default)]
    pub text: Option<String>,
    /// The caption of a photo, document, audio or voice message.
    #[serde(default)]
    pub caption: Option<String>,
    /// The photo in every size Telegram made, smallest first.
    #[serde(default)]
    pub photo: Vec<PhotoSize>,
    /// An attached file.
    #[serde(default)]
    pub document: Option<FileRef>,
    /// A voice note.
    #[serde(default)]
    pub voice: Option<FileRef>,
    /// A music file.
    #[serde(default)]
    pub audio: Option<FileRef>,
    /// The message this one answers.
    #[serde(default)]
    pub reply_to_message: Option<Box<Message>>,
}

/// A Telegram user or bot.
#[derive(Debug, Clone, Deserialize)]
pub struct User {
    /// The numeric id.
    pub id: i64,
    /// The first name (always present).
    #[serde(default)]
    pub first_name: String,
    /// The `@username`, without the `@`.
    #[serde(default)]
    pub username: Option<String>,
}

/// A chat: private, group, supergroup or channel.
#[derive(Debug, Clone, Deserialize)]
pub struct Chat {
    /// The numeric id (negative for groups).
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type", default)]
    pub kind: String,
}

impl Chat {
    /// Whether several people may talk in it.
    pub fn is_group(&self) -> bool {
        self.kind == "group" || self.kind == "supergroup"
    }
}

/// One size of a photo.
#[derive(Debug, Clone, Deserialize)]
pub struct PhotoSize {
    /// Identifies the file for `getFile`.
    pub file_id: String,
    /// The same for every bot and distinct per size: a good file name.
    #[serde(default)]
    pub file_unique_id: Option<String>,
    /// Width in pixels.
    #[serde(default)]
    pub width: u32,
    /// Height in pixels.
    #[serde(default)]
    pub height: u32,
}

/// A document, voice note or audio file.
#[derive(Debug, Clone, Deserialize)]
pub struct FileRef {
    /// Identifies the file for `getFile`.
    pub file_id: String,
    /// The same for every bot; a good file name.
    #[serde(default)]
    pub file_unique_id: Option<String>,
    /// The name the sender gave it (documents and audio).
    #[serde(default)]
    pub file_name: Option<String>,
    /// Its MIME type, when Telegram knows it.
    #[serde(default)]
    pub mime_type: Option<String>,
}

/// The answer to `getFile`: where to download a file from.
#[derive(Debug, Clone, Deserialize)]
pub struct File {
    /// The path under `file/bot<token>/`; absent when the file cannot be downloaded.
    #[serde(default)]
    pub file_path: Option<String>,
}

/// The part of a sent message the channel needs back.
#[derive(Debug, Clone, Deserialize)]
pub struct SentMessage {
    /// Its id, for later edits.
    pub message_id: i64,
}
