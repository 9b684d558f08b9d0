//! The Socket Mode frames Slack sends over the WebSocket, and the acknowledgement it expects
//! for each envelope.

use serde_json::{Value, json};

/// One text frame from Slack.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// `{"type":"hello"}`: the connection is ready.
    Hello,
    /// `{"type":"disconnect"}`: open a new connection; the reason is for logs.
    Disconnect(String),
    /// An Events API envelope.
    Event {
        /// Acknowledge with this id.
        envelope_id: String,
        /// 0 for the first delivery, more for Slack's retries.
        retry_attempt: u64,
        /// The event callback: `event`, `event_id`, `team_id`, ….
        payload: Value,
    },
    /// An interaction (a button pressed): only an approval button's answer is taken.
    Interaction {
        /// Acknowledge with this id.
        envelope_id: String,
        /// The interaction: `type` (`block_actions`), `user`, `channel`, `message`, `actions`.
        payload: Value,
    },
    /// Another envelope (slash command, …): acknowledged and otherwise ignored.
    OtherEnvelope(String),
    /// Anything else.
    Unknown,
}

/// Reads a text frame.
pub fn parse(text: &str) -> Frame {
    let Ok(frame) = serde_json::from_str::<Value>(text) else { return Frame::Unknown };
    let envelope_id = frame["envelope_id"].as_str().filter(|id| !id.is_empty()).map(str::to_owned);
    match (frame["type"].as_str().unwrap_or_default(), envelope_id) {
        ("hello", _) => Frame::Hello,
        ("disconnect", _) => Frame::Disconnect(frame["reason"].as_str().unwrap_or("unknown").to_owned()),
        ("events_api", Some(envelope_id)) => Frame::Event {
            envelope_id,
            retry_attempt: frame["retry_attempt"].as_u64().unwrap_or(0),
            payload: frame["payload"].clone(),
        },
        ("interactive", Some(envelope_id)) => Frame::Interaction { envelope_id, payload: frame["payload"].clone() },
        (_, Some(envelope_id)) => Frame::OtherEnvelope(envelope_id),
        _ => Frame::Unknown,
    }
}

/// The acknowledgement of an envelope.
pub fn ack(envelope_id: &str) -> String {
    json!({"envelope_id": envelope_id}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_disconnect_and_events_are_told_apart() {
        assert_eq!(parse(r#"{"type":"hello","num_connections":1}"#), Frame::Hello);
        assert_eq!(
            parse(r#"{"type":"disconnect","reason":"refresh_requested"}"#),
            Frame::Disconnect("refresh_requested".into())
        );
        let event = parse(
            r#"{"type":"events_api","envelope_id":"e1","retry_attempt":1,"payload":{"event":{"type":"message"}}}"#,
        );
        assert_eq!(
            event,
            Frame::Event { envelope_id: "e1".into(), retry_attempt: 1, payload: json!({"event": {"type": "message"}}) }
        );
    }

    #[test]
    fn other_envelopes_are_only_acknowledged_and_garbage_is_unknown() {
        assert_eq!(
            parse(r#"{"type":"slash_commands","envelope_id":"e2","payload":{}}"#),
            Frame::OtherEnvelope("e2".into())
        );
        assert_eq!(parse("not json"), Frame::Unknown);
        assert_eq!(parse(r#"{"type":"events_api"}"#), Frame::Unknown);
    }

    #[test]
    fn an_ack_names_only_the_envelope() {
        assert_eq!(ack("e1"), r#"{"envelope_id":"e1"}"#);
    }
}
