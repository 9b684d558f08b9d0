//! What the Gateway client remembers across connections (session, last sequence number, the
//! bot's id) and how it reacts to each payload, without touching the socket.

use oxibot_plugin::chat::Backoff;
use oxibot_plugin::{info, warn};
use serde::Deserialize;
use serde_json::Value;

use super::payload::{self, CloseVerdict, Payload};
use crate::error::DiscordError;
use crate::events::{InteractionCreate, MessageCreate, Ready};

/// A session that can be resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// READY's `session_id`.
    pub id: String,
    /// Where to reconnect to resume it.
    pub resume_url: String,
}

/// How a connection ended, which decides how the next one starts.
#[derive(Debug)]
pub enum Ending {
    /// Connect again and resume the session if there is one.
    Reconnect,
    /// Connect again with a new session (after a short wait, as Discord asks).
    NewSession,
    /// Stop: Discord will not accept this config.
    Fatal(DiscordError),
    /// Stop: nobody takes the messages any more (the channel is shutting down).
    Stopped,
}

/// What the connection should do after a payload or frame.
#[derive(Debug)]
pub enum Flow {
    /// Nothing.
    Continue,
    /// The server acknowledged a heartbeat.
    Acked,
    /// Send a heartbeat now.
    BeatNow,
    /// Hand a user's message to the inbound pipeline.
    Deliver(Box<MessageCreate>),
    /// Hand an approval button's answer to the inbound pipeline, with the interaction's id and
    /// token to respond with.
    Pressed(Box<MessageCreate>, (String, String)),
    /// Close this connection.
    End(Ending),
}

/// The client's memory, kept across connections.
#[derive(Debug)]
pub struct GatewayState {
    token: String,
    intents: u64,
    gateway_url: String,
    /// The session to resume, once READY came.
    pub session: Option<Session>,
    /// The last sequence number received.
    pub seq: Option<u64>,
    /// The bot's user id, from READY.
    pub bot_id: Option<String>,
    /// The wait before the next connection; started over by READY or RESUMED.
    pub backoff: Backoff,
}

impl GatewayState {
    /// A client that has not connected yet, waiting between connections as `backoff` says.
    pub fn new(token: String, intents: u64, gateway_url: String, backoff: Backoff) -> GatewayState {
        GatewayState { token, intents, gateway_url, session: None, seq: None, bot_id: None, backoff }
    }

    /// Where the next connection goes: the resume URL while there is a session.
    pub fn connect_url(&self) -> &str {
        self.session.as_ref().map_or(&self.gateway_url, |session| &session.resume_url)
    }

    /// The payload after HELLO: RESUME while there is a session, IDENTIFY otherwise.
    pub fn greeting(&self) -> String {
        match &self.session {
            Some(session) => payload::resume(&self.token, &session.id, self.seq),
            None => payload::identify(&self.token, self.intents),
        }
    }

    /// Drops the session so the next connection identifies afresh.
    pub fn forget_session(&mut self) {
        self.session = None;
        self.seq = None;
    }

    /// Reacts to one payload.
    pub fn on_payload(&mut self, payload: Payload) -> Flow {
        if let Some(seq) = payload.s {
            self.seq = Some(seq);
        }
        match payload.op {
            payload::DISPATCH => self.on_dispatch(payload.t.as_deref().unwrap_or_default(), payload.d),
            payload::HEARTBEAT => Flow::BeatNow,
            payload::HEARTBEAT_ACK => Flow::Acked,
            payload::RECONNECT => {
                info!("discord: the gateway asked to reconnect");
                Flow::End(Ending::Reconnect)
            }
            payload::INVALID_SESSION if payload.d == Value::Bool(true) && self.session.is_some() => {
                warn!("discord: the gateway invalidated the session; resuming");
                Flow::End(Ending::Reconnect)
            }
            payload::INVALID_SESSION => {
                warn!("discord: the gateway invalidated the session; identifying again");
                self.forget_session();
                Flow::End(Ending::NewSession)
            }
            _ => Flow::Continue,
        }
    }

    /// Reacts to the server closing the connection with `code`.
    pub fn on_close(&mut self, code: u16, reason: &str) -> Flow {
        match payload::close_verdict(code) {
            CloseVerdict::Resume => {
                info!("discord: the gateway closed the connection ({code} {reason}); reconnecting");
                Flow::End(Ending::Reconnect)
            }
            CloseVerdict::Reidentify => {
                info!("discord: the gateway closed the session ({code} {reason}); identifying again");
                self.forget_session();
                Flow::End(Ending::NewSession)
            }
            CloseVerdict::Fatal(meaning) => {
                Flow::End(Ending::Fatal(DiscordError::Fatal { code, reason: meaning.to_owned() }))
            }
        }
    }

    fn on_dispatch(&mut self, event: &str, data: Value) -> Flow {
        match event {
            "READY" => self.on_ready(data),
            "RESUMED" => {
                info!("discord: session resumed");
                self.backoff.reset();
            }
            "INTERACTION_CREATE" => match InteractionCreate::deserialize(&data) {
                Ok(interaction) => {
                    if let Some(message) = interaction.approval_answer() {
                        return Flow::Pressed(Box::new(message), (interaction.id, interaction.token));
                    }
                }
                Err(error) => warn!("discord: skipping an INTERACTION_CREATE that does not parse: {error}"),
            },
            "MESSAGE_CREATE" => match MessageCreate::deserialize(&data) {
                Ok(message) => return Flow::Deliver(Box::new(message)),
                Err(error) => warn!("discord: skipping a MESSAGE_CREATE that does not parse: {error}"),
            },
            _ => {}
        }
        Flow::Continue
    }

    fn on_ready(&mut self, data: Value) {
        let ready = match Ready::deserialize(&data) {
            Ok(ready) => ready,
            Err(error) => {
                warn!("discord: READY does not parse ({error}); the session cannot be resumed");
                return;
            }
        };
        info!("discord: connected as {} ({})", ready.user.username, ready.user.id);
        let resume_url = match &ready.resume_gateway_url {
            Some(url) => payload::resume_url(url, &self.gateway_url),
            None => self.gateway_url.clone(),
        };
        self.session = Some(Session { id: ready.session_id, resume_url });
        self.bot_id = Some(ready.user.id);
        self.backoff.reset();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn state() -> GatewayState {
        let backoff = Backoff::new(std::time::Duration::from_secs(1), std::time::Duration::from_secs(60));
        GatewayState::new("tok".into(), 1, "ws://g/?v=10&encoding=json".into(), backoff)
    }

    fn dispatch(event: &str, seq: u64, data: Value) -> Payload {
        Payload { op: payload::DISPATCH, d: data, s: Some(seq), t: Some(event.into()) }
    }

    fn op(op: u8, d: Value) -> Payload {
        Payload { op, d, s: None, t: None }
    }

    fn ready_state() -> GatewayState {
        let mut state = state();
        state.on_payload(dispatch(
            "READY",
            1,
            json!({"user": {"id": "99", "username": "bot"}, "session_id": "s1", "resume_gateway_url": "ws://r"}),
        ));
        state
    }

    #[test]
    fn ready_records_the_session_the_resume_url_and_the_bots_id() {
        let state = ready_state();
        assert_eq!(state.session, Some(Session { id: "s1".into(), resume_url: "ws://r/?v=10&encoding=json".into() }));
        assert_eq!(state.bot_id.as_deref(), Some("99"));
        assert_eq!(state.seq, Some(1));
        assert_eq!(state.connect_url(), "ws://r/?v=10&encoding=json");
        assert!(state.greeting().contains("\"op\":6"));
    }

    #[test]
    fn ready_and_resumed_start_the_waits_between_connections_over() {
        let mut state = state();
        let waits: Vec<u64> = (0..3).map(|_| state.backoff.next_wait().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4]);
        state.on_payload(dispatch("RESUMED", 2, Value::Null));
        assert_eq!(state.backoff.next_wait().as_secs(), 1);
        state.backoff.next_wait();
        let mut state = ready_state();
        assert_eq!(state.backoff.next_wait().as_secs(), 1);
    }

    #[test]
    fn before_ready_the_client_identifies_at_the_configured_url() {
        let state = state();
        assert_eq!(state.connect_url(), "ws://g/?v=10&encoding=json");
        assert!(state.greeting().contains("\"op\":2"));
    }

    #[test]
    fn a_message_create_is_delivered_and_advances_the_sequence() {
        let mut state = ready_state();
        let message =
            json!({"id": "5", "channel_id": "c", "author": {"id": "u", "username": "alice"}, "content": "hi"});
        let Flow::Deliver(message) = state.on_payload(dispatch("MESSAGE_CREATE", 8, message)) else {
            panic!("not delivered")
        };
        assert_eq!((message.id.as_str(), message.content.as_str()), ("5", "hi"));
        assert_eq!(state.seq, Some(8));
    }

    #[test]
    fn a_heartbeat_request_and_an_ack_are_told_apart() {
        let mut state = state();
        assert!(matches!(state.on_payload(op(payload::HEARTBEAT, Value::Null)), Flow::BeatNow));
        assert!(matches!(state.on_payload(op(payload::HEARTBEAT_ACK, Value::Null)), Flow::Acked));
    }

    #[test]
    fn a_resumable_invalid_session_reconnects_and_keeps_the_session() {
        let mut state = ready_state();
        assert!(matches!(state.on_payload(op(payload::INVALID_SESSION, json!(true))), Flow::End(Ending::Reconnect)));
        assert!(state.session.is_some());
    }

    #[test]
    fn a_final_invalid_session_forgets_the_session_and_identifies_anew() {
        let mut state = ready_state();
        assert!(matches!(state.on_payload(op(payload::INVALID_SESSION, json!(false))), Flow::End(Ending::NewSession)));
        assert_eq!((state.session.clone(), state.seq), (None, None));
        assert!(state.greeting().contains("\"op\":2"));
    }

    #[test]
    fn reconnect_keeps_the_session_and_an_auth_failure_is_fatal() {
        let mut state = ready_state();
        assert!(matches!(state.on_payload(op(payload::RECONNECT, Value::Null)), Flow::End(Ending::Reconnect)));
        assert!(state.session.is_some());
        assert!(matches!(state.on_close(4004, "Authentication failed."), Flow::End(Ending::Fatal(_))));
    }
}
