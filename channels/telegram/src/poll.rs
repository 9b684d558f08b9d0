//! The long-polling loop: `getUpdates` from the offset, each message read, its files fetched,
//! submitted to the kernel, and only once the kernel accepted it the offset moves past it. A
//! press of an approval button is submitted as its answer text, from the person who pressed it. A
//! message the kernel does not accept in time stays unconfirmed, so the next `getUpdates`
//! brings it again (with the same id: the update id).

use std::path::PathBuf;
use std::time::Duration;

use oxibot_plugin::chat::{Backoff, Typing, is_approval_answer};
use oxibot_plugin::{ChannelError, ChannelHandle, Inbound};
use oxibot_plugin::{info, warn};

use crate::api::BotApi;
use crate::config::GroupPolicy;
use crate::error::{ApiError, TelegramError};
use crate::incoming::{self, Bot, Draft, Skip};
use crate::media;
use crate::target::LastMessages;
use crate::types::{CallbackQuery, Update};

/// The first wait after a failed request; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between failed requests.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How often the typing indicator is renewed (Telegram shows it for about five seconds).
const TYPING_RENEWAL: Duration = Duration::from_secs(4);
/// How long the typing indicator is shown at most when no reply comes.
const TYPING_LIMIT: Duration = Duration::from_secs(120);

/// The "typing…" indicators of the bot's chats: shown when a user's message was accepted and
/// renewed until the reply arrives, for two minutes at most.
pub fn typing_indicators() -> Typing {
    Typing::new(TYPING_RENEWAL, TYPING_LIMIT)
}

/// The waits between failed requests to Telegram: 1 s doubling up to a minute.
pub const BACKOFF: Backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF);

/// What became of one update.
#[derive(Debug, PartialEq, Eq)]
enum Handled {
    /// Accepted or skipped: the offset may move past it.
    Done,
    /// Not accepted in time: ask Telegram for it again.
    Pending,
    /// The kernel hung up.
    Closed,
}

/// Everything the loop needs.
pub struct Poller {
    /// The Bot API.
    pub api: BotApi,
    /// The connection to the kernel.
    pub channel: ChannelHandle,
    /// The bot, for mentions.
    pub bot: Bot,
    /// Group messages' fate.
    pub group_policy: GroupPolicy,
    /// Where files go.
    pub media_dir: PathBuf,
    /// How long one `getUpdates` waits.
    pub poll_timeout: Duration,
    /// How long a submit may wait for acceptance.
    pub accept_timeout: Duration,
    /// The typing indicators.
    pub typing: Typing,
    /// Reply targets for streamed replies.
    pub last_messages: LastMessages,
}

impl Poller {
    /// Polls until the kernel hangs up (`Ok`) or Telegram refuses the token.
    pub async fn run(self) -> Result<(), TelegramError> {
        let mut offset: Option<i64> = None;
        let mut backoff = BACKOFF;
        loop {
            let updates = match self.api.get_updates(offset, self.poll_timeout).await {
                Ok(updates) => updates,
                Err(error) => {
                    let wait = wait_after(&error, backoff.next_wait())?;
                    warn!("{error}; polling again in {}s", wait.as_secs());
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
            backoff.reset();
            for update in updates {
                match self.handle(&update).await {
                    Handled::Done => offset = Some(update.update_id + 1),
                    Handled::Pending => break,
                    Handled::Closed => return Ok(()),
                }
            }
        }
    }

    /// Reads, fetches and submits one update.
    async fn handle(&self, update: &Update) -> Handled {
        if let Some(query) = &update.callback_query {
            return self.handle_button(update.update_id, query).await;
        }
        let Some(message) = &update.message else { return Handled::Done };
        let draft = match incoming::read(message, &self.bot, self.group_policy) {
            Ok(draft) => draft,
            Err(Skip::NotAddressed) => return Handled::Done,
            Err(skip) => {
                info!("skipping update {}: {skip:?}", update.update_id);
                return Handled::Done;
            }
        };
        let (chat_id, target) = (draft.chat_id.clone(), draft.target);
        let inbound = self.inbound(update.update_id, draft).await;
        match tokio::time::timeout(self.accept_timeout, self.channel.submit(inbound)).await {
            Err(_) => {
                info!(
                    "the kernel has not accepted update {} within {}s; fetching it again",
                    update.update_id,
                    self.accept_timeout.as_secs()
                );
                Handled::Pending
            }
            Ok(Err(ChannelError::Closed)) => Handled::Closed,
            Ok(Err(error)) => {
                warn!("dropping update {}: {error}", update.update_id);
                Handled::Done
            }
            Ok(Ok(())) => {
                self.last_messages.remember(&chat_id, target);
                self.show_typing(&chat_id, target.thread);
                Handled::Done
            }
        }
    }

    /// Submits an approval button's answer as the message of the person who pressed it (the
    /// kernel checks that person); any other button press is only acknowledged.
    async fn handle_button(&self, update_id: i64, query: &CallbackQuery) -> Handled {
        let answer = query.data.as_deref().filter(|data| is_approval_answer(data));
        let (Some(answer), Some(message)) = (answer, &query.message) else {
            let _ = self.api.answer_callback_query(&query.id, "").await;
            return Handled::Done;
        };
        let chat_id = message.chat.id.to_string();
        let mut inbound =
            self.channel.inbound(update_id.to_string(), query.from.id.to_string(), chat_id, answer.to_owned());
        inbound.metadata = serde_json::json!({
            "message_id": message.message_id,
            "is_group": message.chat.is_group(),
            "chat_type": message.chat.kind,
            "user_id": query.from.id,
            "first_name": query.from.first_name,
            "username": query.from.username,
        });
        let handled = match tokio::time::timeout(self.accept_timeout, self.channel.submit(inbound)).await {
            Err(_) => return Handled::Pending,
            Ok(Err(ChannelError::Closed)) => Handled::Closed,
            Ok(_) => Handled::Done,
        };
        if let Err(error) = self.api.answer_callback_query(&query.id, "Sent").await {
            warn!("cannot acknowledge a button press: {error}");
        }
        handled
    }

    /// Shows "typing…" in `chat_id` (in topic `thread`) until the reply arrives; stops at the
    /// first failure.
    fn show_typing(&self, chat_id: &str, thread: Option<i64>) {
        let (api, id) = (self.api.clone(), chat_id.to_owned());
        self.typing.start(chat_id, move || {
            let (api, id) = (api.clone(), id.clone());
            async move {
                let shown = api.send_typing(&id, thread).await;
                shown.map_err(|error| warn!("cannot show typing in chat {id}: {error}"))
            }
        });
    }

    /// The inbound message for a draft, its files fetched (a file that cannot be fetched is
    /// named in the text instead).
    async fn inbound(&self, update_id: i64, draft: Draft) -> Inbound {
        let mut media = Vec::new();
        let mut placeholders = Vec::new();
        for attachment in &draft.attachments {
            match media::fetch(&self.api, &self.media_dir, attachment).await {
                Ok(path) => {
                    media.push(path.display().to_string());
                    placeholders.push(attachment.kind.placeholder().to_owned());
                }
                Err(error) => {
                    warn!("cannot fetch a file of update {update_id}: {error}");
                    placeholders.push(format!("{} (could not be downloaded)", attachment.kind.placeholder()));
                }
            }
        }
        let content = if draft.text.is_empty() { placeholders.join(" ") } else { draft.text };
        let mut inbound = self.channel.inbound(update_id.to_string(), draft.sender_id, draft.chat_id, content);
        inbound.media = media;
        inbound.metadata = draft.metadata;
        inbound
    }
}

/// How long to wait after a failed `getUpdates`; a refused token ends the channel.
fn wait_after(error: &ApiError, backoff: Duration) -> Result<Duration, TelegramError> {
    match error.code() {
        Some(401) => Err(TelegramError::Unauthorized),
        Some(409) => {
            warn!(
                "Telegram reports a conflict: another process polls this bot, or a webhook is set (delete it with deleteWebhook)"
            );
            Ok(backoff.max(Duration::from_secs(5)))
        }
        _ => Ok(error.retry_after().unwrap_or(backoff)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(code: u16, retry_after: Option<u64>) -> ApiError {
        ApiError::Rejected {
            method: "getUpdates".into(),
            code,
            description: "x".into(),
            retry_after: retry_after.map(Duration::from_secs),
        }
    }

    #[test]
    fn a_refused_token_ends_polling() {
        assert!(matches!(wait_after(&rejected(401, None), FIRST_BACKOFF), Err(TelegramError::Unauthorized)));
    }

    #[test]
    fn telegrams_retry_after_is_honoured_and_a_conflict_waits_at_least_five_seconds() {
        assert_eq!(wait_after(&rejected(429, Some(7)), FIRST_BACKOFF).unwrap(), Duration::from_secs(7));
        assert_eq!(wait_after(&rejected(409, None), FIRST_BACKOFF).unwrap(), Duration::from_secs(5));
        let network = ApiError::Network { method: "getUpdates".into(), reason: "refused".into() };
        assert_eq!(wait_after(&network, Duration::from_secs(8)).unwrap(), Duration::from_secs(8));
    }
}
