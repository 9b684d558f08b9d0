//! The WebSocket side: connect to `/api/v4/websocket`, answer nothing before the
//! `authentication_challenge` with the token is accepted, read events, and after a drop connect
//! again (with growing waits) asking the server to resume the connection (see [`Progress`]),
//! so posts sent meanwhile are replayed rather than lost.

use std::sync::Arc;
use std::time::Duration;

use futures_util::SinkExt;
use oxibot_plugin::chat::socket::{self, CONNECT_TIMEOUT, Drive, Keepalive, OpenError};
use oxibot_plugin::chat::{Backoff, RecentMessages, Seen};
use oxibot_plugin::{info, warn};
use tokio::sync::mpsc::UnboundedSender;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::api::BotUser;
use crate::config::Config;
use crate::events::{self, Frame};
use crate::incoming::{self, UserMessage, Verdict};
use crate::resume::Progress;

/// The sequence number of the authentication challenge, the only action the channel sends.
const CHALLENGE_SEQ: u64 = 1;
/// The waits between attempts to connect: 1 s, 2 s, 4 s, … up to 30 s, as nanobot.
pub const BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

/// Everything the WebSocket side needs.
pub struct Listener {
    /// The channel's settings.
    pub config: Arc<Config>,
    /// Who the bot is, to spot mentions and its own posts.
    pub bot: BotUser,
    /// Posts seen lately, so one delivered twice reaches the kernel once.
    pub recent: RecentMessages,
    /// Posts for the kernel, in order, with the sequence numbers of their events.
    pub submissions: UnboundedSender<(UserMessage, u64)>,
    /// Where a new socket resumes from.
    pub progress: Progress,
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
enum Ending {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("the server refused the token on the websocket: {0}")]
    Refused(String),
    #[error("the websocket dropped: {0}")]
    Dropped(String),
}

impl Listener {
    /// Keeps a connection up for good.
    pub async fn run(self) {
        let mut backoff = BACKOFF;
        loop {
            let ending = self.connection(&mut backoff).await;
            let wait = backoff.next_wait();
            warn!("{ending}; connecting again in {wait:?}");
            tokio::time::sleep(wait).await;
        }
    }

    /// Runs one connection until it ends; resets `backoff` once it is authenticated.
    async fn connection(&self, backoff: &mut Backoff) -> Ending {
        let mut url = self.config.websocket_url();
        if let Some(from) = self.progress.resume_point() {
            url.push_str(&format!("?connection_id={}&sequence_number={}", from.connection_id, from.next_seq));
        }
        let mut socket = match socket::open(&url, CONNECT_TIMEOUT).await {
            Ok(socket) => socket,
            Err(error) => return Ending::Open(error),
        };
        let challenge = events::authentication_challenge(CHALLENGE_SEQ, &self.config.token);
        if let Err(error) = socket.send(WsMessage::Text(challenge.into())).await {
            return Ending::Dropped(error.to_string());
        }
        let options = Drive { service: "the server", keepalive: Keepalive::DEFAULT, outgoing: None, ping: None };
        let ending = socket::drive(socket, options, |text| self.on_frame(events::parse(text), backoff)).await;
        ending.unwrap_or_else(Ending::Dropped)
    }

    /// Handles one frame; `Some` ends the connection.
    fn on_frame(&self, frame: Frame, backoff: &mut Backoff) -> Option<Ending> {
        match frame {
            Frame::Reply { seq_reply: CHALLENGE_SEQ, ok: false, error } => return Some(Ending::Refused(error)),
            Frame::Reply { .. } | Frame::Unknown => {}
            Frame::Hello { seq, connection_id } => {
                backoff.reset();
                let known = self.progress.resume_point().is_some();
                if self.progress.hello(connection_id, seq) {
                    info!("websocket connection resumed");
                } else if known {
                    warn!(
                        "the server could not resume the websocket connection; posts sent meanwhile are not replayed"
                    );
                }
            }
            Frame::Posted { seq, post, channel_type, team_id } => {
                self.progress.read(seq);
                self.on_post(seq, &post, &channel_type, &team_id);
            }
            Frame::Other { seq } => self.progress.read(seq),
        }
        None
    }

    /// Queues a post for the kernel unless it is left out or was seen before.
    fn on_post(&self, seq: u64, post: &serde_json::Value, channel_type: &str, team_id: &str) {
        let message = match incoming::judge(post, channel_type, team_id, &self.bot, &self.config) {
            Verdict::Submit(message) => message,
            Verdict::Ignore(_) => return,
        };
        match self.recent.arrived(&message.id, &message.id) {
            Seen::New => {
                self.progress.queued(seq);
                if self.submissions.send((message, seq)).is_err() {
                    warn!("the submitter is gone; a post is dropped");
                }
            }
            Seen::InFlight | Seen::Accepted => info!("post {} arrived again; answered once", message.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_thirty_seconds() {
        let mut backoff = BACKOFF;
        assert_eq!((0..7).map(|_| backoff.next_wait().as_secs()).collect::<Vec<_>>(), [1, 2, 4, 8, 16, 30, 30]);
    }
}
