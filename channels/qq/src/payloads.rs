//! The gateway's JSON payloads: `{"op": …, "d": …, "s": …, "t": …}`.
//!
//! QQ opens with Hello (op 10, the heartbeat interval); the bot answers with Identify (op 2:
//! its token and intents) or, to continue a session after a drop, Resume (op 6: session id and
//! the last sequence number handled). Dispatches (op 0) carry a sequence number `s` and an
//! event `t` (`READY`, `RESUMED`, `C2C_MESSAGE_CREATE`, `GROUP_AT_MESSAGE_CREATE`, …). The bot
//! sends Heartbeat (op 1, the last sequence number) every interval; QQ answers with Heartbeat
//! ACK (op 11). Reconnect (op 7) asks for a new connection that resumes; Invalid Session
//! (op 9) means the session is gone and the bot must identify again.

use serde_json::{Value, json};

/// The events of one-to-one (C2C) messages and group messages that mention the bot
/// (`GROUP_AND_C2C_EVENT`, 1 << 25).
pub const INTENTS: u64 = 1 << 25;

/// A payload from the gateway.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// op 10: the heartbeat interval, in milliseconds.
    Hello { heartbeat_interval: u64 },
    /// op 0: an event with its sequence number.
    Dispatch { seq: Option<u64>, event: String, data: Value },
    /// op 11.
    HeartbeatAck,
    /// op 1: QQ asks for a heartbeat now.
    HeartbeatRequest,
    /// op 7: connect again and resume.
    Reconnect,
    /// op 9: the session cannot be resumed.
    InvalidSession,
    /// Anything else; ignored.
    Unknown,
}

/// Reads a text frame.
pub fn parse(text: &str) -> Payload {
    let Ok(payload) = serde_json::from_str::<Value>(text) else { return Payload::Unknown };
    let data = payload.get("d").cloned().unwrap_or(Value::Null);
    match payload["op"].as_u64() {
        Some(0) => Payload::Dispatch {
            seq: payload["s"].as_u64(),
            event: payload["t"].as_str().unwrap_or_default().to_owned(),
            data,
        },
        Some(1) => Payload::HeartbeatRequest,
        Some(7) => Payload::Reconnect,
        Some(9) => Payload::InvalidSession,
        Some(10) => Payload::Hello { heartbeat_interval: data["heartbeat_interval"].as_u64().unwrap_or(45_000) },
        Some(11) => Payload::HeartbeatAck,
        _ => Payload::Unknown,
    }
}

/// Identify: start a session with `token` (the access token).
pub fn identify(token: &str) -> String {
    let properties = json!({"$os": std::env::consts::OS, "$browser": "oxibot", "$device": "oxibot"});
    json!({"op": 2, "d": {"token": format!("QQBot {token}"), "intents": INTENTS, "shard": [0, 1], "properties": properties}})
        .to_string()
}

/// Resume: continue session `session_id` after sequence number `seq`.
pub fn resume(token: &str, session_id: &str, seq: u64) -> String {
    json!({"op": 6, "d": {"token": format!("QQBot {token}"), "session_id": session_id, "seq": seq}}).to_string()
}

/// Heartbeat: the last sequence number handled, `null` before any.
pub fn heartbeat(seq: Option<u64>) -> String {
    json!({"op": 1, "d": seq}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_told_apart_by_their_op_code() {
        assert_eq!(
            parse(r#"{"op":10,"d":{"heartbeat_interval":41250}}"#),
            Payload::Hello { heartbeat_interval: 41250 }
        );
        let dispatch = parse(r#"{"op":0,"s":3,"t":"READY","d":{"session_id":"s1"}}"#);
        assert_eq!(
            dispatch,
            Payload::Dispatch { seq: Some(3), event: "READY".into(), data: json!({"session_id": "s1"}) }
        );
        assert_eq!(parse(r#"{"op":11}"#), Payload::HeartbeatAck);
        assert_eq!(parse(r#"{"op":9,"d":false}"#), Payload::InvalidSession);
        assert_eq!(parse(r#"{"op":7}"#), Payload::Reconnect);
        assert_eq!(parse("{}"), Payload::Unknown);
    }

    #[test]
    fn identify_resume_and_heartbeat_carry_what_qq_expects() {
        let identify: Value = serde_json::from_str(&identify("tok")).unwrap();
        assert_eq!((identify["op"].as_u64(), identify["d"]["token"].as_str()), (Some(2), Some("QQBot tok")));
        assert_eq!(identify["d"]["intents"], INTENTS);
        let resume: Value = serde_json::from_str(&resume("tok", "s1", 7)).unwrap();
        assert_eq!(resume, json!({"op": 6, "d": {"token": "QQBot tok", "session_id": "s1", "seq": 7}}));
        assert_eq!(serde_json::from_str::<Value>(&heartbeat(None)).unwrap(), json!({"op": 1, "d": null}));
        assert_eq!(serde_json::from_str::<Value>(&heartbeat(Some(4))).unwrap(), json!({"op": 1, "d": 4}));
    }
}
