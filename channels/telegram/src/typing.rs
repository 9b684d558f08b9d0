//! The "typing…" indicator: shown when a user's message was accepted and renewed every few
//! seconds (Telegram shows it for about five) until the reply arrives, for two minutes at most.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::api::BotApi;

/// How often the indicator is renewed.
const RENEW_EVERY: Duration = Duration::from_secs(4);
/// How long it is shown at most when no reply comes.
const GIVE_UP_AFTER: Duration = Duration::from_secs(120);

/// The chats where the bot currently shows it is typing.
#[derive(Debug, Clone)]
pub struct Typing {
    api: BotApi,
    /// Chat id → the task renewing its indicator.
    tasks: Arc<Mutex<HashMap<String, AbortHandle>>>,
}

impl Typing {
    /// No chat shows the indicator yet.
    pub fn new(api: BotApi) -> Typing {
        Typing { api, tasks: Arc::default() }
    }

    /// Shows the indicator in `chat_id` (in topic `thread`) until [`Typing::stop`].
    pub fn start(&self, chat_id: &str, thread: Option<i64>) {
        let task = tokio::spawn(keep_typing(self.api.clone(), chat_id.to_owned(), thread));
        if let Some(previous) = self.lock().insert(chat_id.to_owned(), task.abort_handle()) {
            previous.abort();
        }
    }

    /// Stops the indicator in `chat_id`, if it is shown.
    pub fn stop(&self, chat_id: &str) {
        if let Some(task) = self.lock().remove(chat_id) {
            task.abort();
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, AbortHandle>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Renews the indicator until aborted, until the time is up, or until Telegram refuses it.
async fn keep_typing(api: BotApi, chat_id: String, thread: Option<i64>) {
    let until = Instant::now() + GIVE_UP_AFTER;
    while Instant::now() < until {
        if let Err(error) = api.send_typing(&chat_id, thread).await {
            eprintln!("cannot show typing in chat {chat_id}: {error}");
            return;
        }
        tokio::time::sleep(RENEW_EVERY).await;
    }
}
