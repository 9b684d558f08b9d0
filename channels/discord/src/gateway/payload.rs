//! Gateway payloads on the wire: `{"op", "d", "s", "t"}` JSON, the opcodes the channel uses and
//! the payloads it sends.

use serde::Deserialize;
use serde_json::{Value, json};

/// An event was dispatched (`t` names it). Receive.
pub const DISPATCH: u8 = 0;
/// Keep the connection alive; also the server asking for one right now. Send and receive.
pub const HEARTBEAT: u8 = 1;
/// Start a new session. Send.
pub const IDENTIFY: u8 = 2;
/// Resume a dropped session. Send.
pub const RESUME: u8 = 6;
/// The server asks the client to reconnect and resume. Receive.
pub const RECONNECT: u8 = 7;
/// The session is invalid; `d` says whether it may be resumed. Receive.
pub const INVALID_SESSION: u8 = 9;
/// The first payload after connecting, with the heartbeat interval. Receive.
pub const HELLO: u8 = 10;
/// The server received a heartbeat. Receive.
pub const HEARTBEAT_ACK: u8 = 11;

/// One payload received from the Gateway.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Payload {
    /// The opcode.
    pub op: u8,
    /// The data, whose shape depends on `op` and `t`.
    #[serde(default)]
    pub d: Value,
    /// The sequence number of a dispatch, for heartbeats and resuming.
    #[serde(default)]
    pub s: Option<u64>,
    /// The event name of a dispatch.
    #[serde(default)]
    pub t: Option<String>,
}

impl Payload {
    /// Parses one text frame; `None` when it is not a payload.
    pub fn parse(text: &str) -> Option<Payload> {
        serde_json::from_str(text).ok()
    }
}

/// The IDENTIFY payload opening a new session.
pub fn identify(token: &str, intents: u64) -> String {
    let properties = json!({"os": std::env::consts::OS, "browser": "oxibot", "device": "oxibot"});
    json!({"op": IDENTIFY, "d": {"token": token, "intents": intents, "properties": properties}}).to_string()
}

/// The RESUME payload picking a session up after the last event seen.
pub fn resume(token: &str, session_id: &str, seq: Option<u64>) -> String {
    json!({"op": RESUME, "d": {"token": token, "session_id": session_id, "seq": seq}}).to_string()
}

/// A heartbeat carrying the last sequence number seen (`null` before the first dispatch).
pub fn heartbeat(seq: Option<u64>) -> String {
    json!({"op": HEARTBEAT, "d": seq}).to_string()
}

/// What a close code from Discord means for the next connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseVerdict {
    /// Reconnect and resume the session.
    Resume,
    /// Reconnect with a new session.
    Reidentify,
    /// Do not reconnect: the config must change first.
    Fatal(&'static str),
}

/// Sorts a close code into what to do next.
pub fn close_verdict(code: u16) -> CloseVerdict {
    match code {
        4004 => CloseVerdict::Fatal("authentication failed: the token is wrong"),
        4010 => CloseVerdict::Fatal("invalid shard"),
        4011 => CloseVerdict::Fatal("sharding required"),
        4012 => CloseVerdict::Fatal("invalid API version"),
        4013 => CloseVerdict::Fatal("invalid intents"),
        4014 => CloseVerdict::Fatal(
            "disallowed intents: enable the message content intent for the bot in the developer portal",
        ),
        4007 | 4009 => CloseVerdict::Reidentify,
        _ => CloseVerdict::Resume,
    }
}

/// Where to resume: Discord's `resume_gateway_url` with the query of the configured URL
/// (Discord sends it without `v` and `encoding`).
pub fn resume_url(resume_gateway_url: &str, gateway_url: &str) -> String {
    if resume_gateway_url.contains('?') {
        return resume_gateway_url.to_owned();
    }
    match gateway_url.split_once('?') {
        Some((_, query)) => format!("{}/?{query}", resume_gateway_url.trim_end_matches('/')),
        None => resume_gateway_url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identify_carries_the_token_intents_and_properties() {
        let sent: Value = serde_json::from_str(&identify("tok", 37377)).unwrap();
        assert_eq!(sent["op"], 2);
        assert_eq!(sent["d"]["token"], "tok");
        assert_eq!(sent["d"]["intents"], 37377);
        assert_eq!(sent["d"]["properties"]["browser"], "oxibot");
    }

    #[test]
    fn resume_and_heartbeat_carry_the_last_sequence_number() {
        let sent: Value = serde_json::from_str(&resume("tok", "sess", Some(7))).unwrap();
        assert_eq!(sent, json!({"op": 6, "d": {"token": "tok", "session_id": "sess", "seq": 7}}));
        assert_eq!(serde_json::from_str::<Value>(&heartbeat(None)).unwrap(), json!({"op": 1, "d": null}));
        assert_eq!(serde_json::from_str::<Value>(&heartbeat(Some(3))).unwrap(), json!({"op": 1, "d": 3}));
    }

    #[test]
    fn a_payload_without_data_or_sequence_still_parses() {
        let payload = Payload::parse(r#"{"op":11}"#).unwrap();
        assert_eq!((payload.op, payload.s, payload.t), (HEARTBEAT_ACK, None, None));
        assert!(Payload::parse("not json").is_none());
    }

    #[test]
    fn bad_tokens_and_intents_are_fatal_while_other_closes_resume() {
        assert!(matches!(close_verdict(4004), CloseVerdict::Fatal(_)));
        assert!(matches!(close_verdict(4014), CloseVerdict::Fatal(_)));
        assert_eq!(close_verdict(4009), CloseVerdict::Reidentify);
        assert_eq!(close_verdict(4000), CloseVerdict::Resume);
        assert_eq!(close_verdict(1006), CloseVerdict::Resume);
    }

    #[test]
    fn the_resume_url_gets_the_configured_query() {
        let configured = "wss://gateway.discord.gg/?v=10&encoding=json";
        assert_eq!(resume_url("wss://r.discord.gg", configured), "wss://r.discord.gg/?v=10&encoding=json");
        assert_eq!(resume_url("wss://r.discord.gg/", configured), "wss://r.discord.gg/?v=10&encoding=json");
        assert_eq!(resume_url("ws://h/?v=9", configured), "ws://h/?v=9");
    }
}
