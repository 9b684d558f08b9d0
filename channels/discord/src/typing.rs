//! The typing indicator: "… is typing" shown in a chat from the moment a message is accepted
//! until the reply is posted (renewed every few seconds, for two minutes at most).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::task::AbortHandle;

use crate::rest::Rest;

/// How often the indicator is renewed (Discord shows it for about ten seconds).
const RENEW_EVERY: Duration = Duration::from_secs(8);
/// How long the indicator is kept up without a reply.
const GIVE_UP_AFTER: Duration = Duration::from_secs(120);

/// The chats showing the indicator, each with the task renewing it.
#[derive(Clone, Default)]
pub struct Typing {
    active: Arc<Mutex<HashMap<String, AbortHandle>>>,
}

impl Typing {
    /// Shows the indicator in `channel_id` until [`Typing::stop`] or the time limit.
    pub fn start(&self, rest: &Rest, channel_id: &str) {
        let task = tokio::spawn(keep_typing(rest.clone(), channel_id.to_owned()));
        if let Some(previous) = self.lock().insert(channel_id.to_owned(), task.abort_handle()) {
            previous.abort();
        }
    }

    /// Stops the indicator in `channel_id`, if it shows.
    pub fn stop(&self, channel_id: &str) {
        if let Some(task) = self.lock().remove(channel_id) {
            task.abort();
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, AbortHandle>> {
        self.active.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Renews the indicator until aborted or the time limit; stops at the first failure.
async fn keep_typing(rest: Rest, channel_id: String) {
    let renewals = GIVE_UP_AFTER.as_secs() / RENEW_EVERY.as_secs();
    for _ in 0..renewals {
        if let Err(error) = rest.trigger_typing(&channel_id).await {
            eprintln!("discord: cannot show typing in {channel_id}: {error}");
            return;
        }
        tokio::time::sleep(RENEW_EVERY).await;
    }
}
