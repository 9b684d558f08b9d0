//! The `/sync` loop: long polls from the saved position, hands each batch's messages to the
//! kernel in order, and saves the batch's `next_batch` only once the kernel accepted every one
//! of them, so a crash replays the batch instead of losing it. Failed polls are tried again
//! with growing waits; a refused token ends the channel.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use oxibot_plugin::chat::{Backoff, RecentMessages, Seen, Typing};
use oxibot_plugin::{ChannelError, ChannelHandle};
use oxibot_plugin::{info, warn};
use serde_json::json;

use crate::api::ClientApi;
use crate::config::Config;
use crate::error::MatrixError;
use crate::incoming::{self, Batch, Candidate};
use crate::store::SyncStore;

/// How long the server holds a `/sync` that has nothing to say.
const POLL_TIMEOUT: Duration = Duration::from_secs(30);
/// The waits between failed polls: 1 s, 2 s, 4 s, … up to a minute.
pub const BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
/// What an encrypted room is told, once.
const ENCRYPTED_NOTICE: &str = "This room is end-to-end encrypted, and I cannot read encrypted messages, so I will \
     not answer here. Please write to me in a room without encryption.";
/// The sync filter: no presence or account data, a long enough timeline, members loaded lazily.
const FILTER: &str = r#"{"presence":{"not_types":["*"]},"account_data":{"not_types":["*"]},"room":{"timeline":{"limit":100},"state":{"lazy_load_members":true},"ephemeral":{"not_types":["*"]},"account_data":{"not_types":["*"]}}}"#;

/// Everything the loop needs.
pub struct Syncer {
    /// The homeserver.
    pub api: ClientApi,
    /// The channel's settings.
    pub config: Arc<Config>,
    /// The saved position.
    pub store: SyncStore,
    /// The kernel.
    pub channel: ChannelHandle,
    /// Messages submitted lately, so one a batch carries again reaches the kernel once.
    pub recent: RecentMessages,
    /// Known member counts by room, to tell direct rooms from groups.
    pub members: HashMap<String, usize>,
    /// The "typing…" notices shown from acceptance until the reply.
    pub typing: Typing,
    /// The encrypted rooms already told that they get no answers.
    pub told_encrypted: HashSet<String>,
}

/// How handing a batch to the kernel ended.
enum Handed {
    /// Every message is accepted: the position may move on.
    All,
    /// The kernel hung up.
    KernelGone,
}

impl Syncer {
    /// Polls for good; returns when the kernel hangs up, or fails when the token is refused.
    pub async fn run(mut self) -> Result<(), MatrixError> {
        let mut since = self.store.load();
        if since.is_none() {
            info!("no saved sync position; starting from now (earlier messages are not answered)");
        }
        let mut backoff = BACKOFF;
        loop {
            // The first sync of an account only finds where "now" is: it does not wait.
            let timeout = if since.is_some() { POLL_TIMEOUT } else { Duration::ZERO };
            let answer = match self.api.sync(since.as_deref(), timeout, FILTER).await {
                Ok(answer) => answer,
                Err(error) if error.is_token_problem() => return Err(MatrixError::Token(error)),
                Err(error) => {
                    let wait = backoff.next_wait();
                    warn!("{error}; polling again in {wait:?}");
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
            backoff.reset();
            let batch = incoming::batch(&answer);
            if since.is_some() {
                if let Handed::KernelGone = self.hand_over(&batch).await {
                    return Ok(());
                }
            } else {
                // Invites wait in every answer until followed; messages before now are history.
                self.follow_invites(&batch).await;
                self.note_members(&batch);
            }
            if let Err(error) = self.store.save(&batch.next_batch) {
                warn!("{error}; a restart will see this batch again");
            }
            since = Some(batch.next_batch);
        }
    }

    /// Follows invites and submits the batch's messages in order.
    async fn hand_over(&mut self, batch: &Batch) -> Handed {
        self.follow_invites(batch).await;
        self.note_members(batch);
        for news in &batch.rooms {
            if news.encrypted {
                self.refuse_encryption(&news.room).await;
            }
            for event in incoming::after_join(&news.events, &self.config.user_id) {
                let candidate = match incoming::candidate(event, &self.config.user_id) {
                    Ok(candidate) => candidate,
                    Err(reason) if reason.starts_with("encrypted") => {
                        info!("{}: left out a message: {reason}", news.room);
                        continue;
                    }
                    Err(_) => continue,
                };
                let is_direct = self.is_direct(&news.room).await;
                if !incoming::admitted(&candidate, &news.room, is_direct, &self.config) {
                    continue;
                }
                if let Handed::KernelGone = self.submit(&news.room, candidate, is_direct).await {
                    return Handed::KernelGone;
                }
            }
        }
        Handed::All
    }

    /// Says once in `room`, and in the log, that its messages cannot be read: it is end-to-end
    /// encrypted and this channel has no encryption. The transaction id is the room's, so a
    /// replayed batch does not post the notice twice.
    async fn refuse_encryption(&mut self, room: &str) {
        if !self.told_encrypted.insert(room.to_owned()) {
            return;
        }
        warn!("{room} is end-to-end encrypted: its messages cannot be read (only unencrypted rooms are supported)");
        let content = json!({"msgtype": "m.notice", "body": ENCRYPTED_NOTICE, "m.mentions": {}});
        if let Err(error) = self.api.send_message(room, &format!("oxibot-encrypted-{room}"), &content).await {
            warn!("cannot tell {room} that encrypted rooms are not supported: {error}");
        }
    }

    /// Submits one message and waits until the kernel accepted it.
    async fn submit(&self, room: &str, candidate: Candidate, is_direct: bool) -> Handed {
        let id = candidate.event_id.clone();
        if self.recent.arrived(&id, &id) != Seen::New {
            return Handed::All;
        }
        let mut inbound = self.channel.inbound(id.clone(), candidate.sender.clone(), room, candidate.content.clone());
        inbound.metadata = incoming::metadata(&candidate, is_direct);
        match self.channel.submit(inbound).await {
            Ok(()) => {}
            Err(ChannelError::Closed) => {
                self.recent.abandoned(&id);
                return Handed::KernelGone;
            }
            Err(ChannelError::TooLarge(reason)) => {
                warn!("message {id} dropped: the kernel cannot take it ({reason})");
                self.recent.accepted(&id);
                return Handed::All;
            }
        }
        self.recent.accepted(&id);
        self.show_typing(room);
        Handed::All
    }

    /// Shows "typing…" in `room` until the reply goes out.
    fn show_typing(&self, room: &str) {
        let (api, room_id, user) = (self.api.clone(), room.to_owned(), self.config.user_id.clone());
        self.typing.start(room, move || {
            let (api, room_id, user) = (api.clone(), room_id.clone(), user.clone());
            async move { api.set_typing(&room_id, &user, true).await }
        });
    }

    /// Joins the rooms the batch invites the bot to, when their inviters may invite it.
    async fn follow_invites(&self, batch: &Batch) {
        for (room, inviter) in &batch.invites {
            if !self.config.inviters.allows(inviter) {
                info!("not joining {room}: {inviter} is not in channels.matrix.allowFrom");
                continue;
            }
            match self.api.join(room).await {
                Ok(()) => info!("joined {room} (invited by {inviter})"),
                Err(error) => warn!("cannot join {room}: {error}"),
            }
        }
    }

    /// Keeps the member counts the batch tells, and forgets those it makes stale.
    fn note_members(&mut self, batch: &Batch) {
        for news in &batch.rooms {
            match news.joined_members {
                Some(count) => {
                    self.members.insert(news.room.clone(), count);
                }
                None if news.members_changed => {
                    self.members.remove(&news.room);
                }
                None => {}
            }
        }
    }

    /// Whether `room` has two members at most, asking the server when the count is unknown
    /// (a room it cannot count is taken for a group).
    async fn is_direct(&mut self, room: &str) -> bool {
        if let Some(count) = self.members.get(room) {
            return *count <= 2;
        }
        match self.api.joined_member_count(room).await {
            Ok(count) => {
                self.members.insert(room.to_owned(), count);
                count <= 2
            }
            Err(error) => {
                warn!("cannot count the members of {room} ({error}); treating it as a group");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_is_valid_json() {
        let filter: serde_json::Value = serde_json::from_str(FILTER).unwrap();
        assert_eq!(filter["room"]["timeline"]["limit"], 100);
    }
}
