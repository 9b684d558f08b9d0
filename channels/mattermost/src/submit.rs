//! Handing users' posts to the kernel one at a time, in the order they came: posts of other
//! teams' channels are left out (when `teamId` is set), and a post the kernel accepted gets the
//! configured reaction.

use std::collections::HashMap;

use oxibot_plugin::chat::RecentMessages;
use oxibot_plugin::warn;
use oxibot_plugin::{ChannelError, ChannelHandle};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::api::RestApi;
use crate::incoming::UserMessage;
use crate::resume::Progress;

/// What the submitter needs besides the queue.
pub struct Submitter {
    /// The kernel.
    pub channel: ChannelHandle,
    /// Posts seen lately: an accepted one is marked so.
    pub recent: RecentMessages,
    /// The REST API, for reactions and channel lookups.
    pub rest: RestApi,
    /// The bot's user id, which reactions are made as.
    pub bot_id: String,
    /// `reactEmoji`, if any.
    pub react_emoji: Option<String>,
    /// `teamId`, if set.
    pub team_id: Option<String>,
    /// The team of each channel looked up so far.
    pub teams: HashMap<String, String>,
    /// Where a restart resumes the WebSocket from: moved on as posts are done with.
    pub progress: Progress,
}

impl Submitter {
    /// Submits queued posts until the kernel hangs up or the queue ends.
    pub async fn run(mut self, mut queue: UnboundedReceiver<(UserMessage, u64)>) {
        while let Some((message, seq)) = queue.recv().await {
            if !self.in_team(&message).await {
                self.recent.accepted(&message.id);
                self.progress.done(seq);
                continue;
            }
            if !self.submit(message).await {
                return;
            }
            self.progress.done(seq);
        }
    }

    /// Whether the post's channel belongs to the configured team (direct messages always do).
    async fn in_team(&mut self, message: &UserMessage) -> bool {
        let Some(wanted) = &self.team_id else { return true };
        if message.metadata["is_group"] == false {
            return true;
        }
        if !message.team_id.is_empty() {
            return message.team_id == *wanted;
        }
        if let Some(team) = self.teams.get(&message.channel) {
            return team == wanted;
        }
        match self.rest.channel_team(&message.channel).await {
            Ok(team) => {
                let inside = team == *wanted;
                self.teams.insert(message.channel.clone(), team);
                inside
            }
            Err(error) => {
                warn!("cannot tell the team of channel {} ({error}); leaving post {} out", message.channel, message.id);
                false
            }
        }
    }

    /// Submits one post; false once the kernel is gone.
    async fn submit(&self, message: UserMessage) -> bool {
        let mut inbound = self.channel.inbound(message.id.clone(), message.sender_id, message.chat_id, message.content);
        inbound.metadata = message.metadata;
        match self.channel.submit(inbound).await {
            Ok(()) => {}
            Err(ChannelError::Closed) => {
                self.recent.abandoned(&message.id);
                return false;
            }
            Err(ChannelError::TooLarge(reason)) => {
                warn!("post {} dropped: the kernel cannot take it ({reason})", message.id);
            }
        }
        self.recent.accepted(&message.id);
        if let Some(emoji) = &self.react_emoji {
            let (rest, bot, post, emoji) = (self.rest.clone(), self.bot_id.clone(), message.id, emoji.clone());
            tokio::spawn(async move {
                if let Err(error) = rest.add_reaction(&bot, &post, &emoji).await {
                    warn!("cannot add the reaction: {error}");
                }
            });
        }
        true
    }
}
