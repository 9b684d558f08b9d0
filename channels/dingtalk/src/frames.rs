//! The frames of DingTalk's Stream Mode WebSocket, and the answers it expects.
//!
//! Every frame from DingTalk is a JSON text: `specVersion`, `type` (`SYSTEM`, `EVENT` or
//! `CALLBACK`), `headers` (`messageId`, `topic`, `contentType`, `time`, …) and `data`, a JSON
//! document written as a string. Each frame is answered with `code`, `headers` (its
//! `messageId` and `contentType`), `message` and `data` (again a string): a `ping` with its own
//! data (the pong), a callback with `{"response": null}` once it is handled. A `disconnect`
//! says the server is about to close the connection; it needs no answer, only a new
//! connection.

use serde_json::{Value, json};

/// The topic of robot message callbacks, the one subscription this channel makes.
pub const BOT_MESSAGE_TOPIC: &str = "/v1.0/im/bot/messages/get";

/// One text frame from DingTalk.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// `SYSTEM`/`ping`: answer at once with the same data.
    Ping {
        /// The frame's `messageId`.
        message_id: String,
        /// The frame's `data`, as written (a JSON string, e.g. `{"opaque":"…"}`).
        data: String,
    },
    /// `SYSTEM`/`disconnect`: the server closes this connection soon; open a new one.
    Disconnect(String),
    /// A `CALLBACK` (or `EVENT`) frame: answered once handled.
    Callback {
        /// The frame's `messageId`, which the answer names.
        message_id: String,
        /// The frame's `topic`.
        topic: String,
        /// The frame's `data`, parsed (`null` when it was not JSON).
        data: Value,
    },
    /// Another `SYSTEM` frame with a message id: answered with OK and otherwise ignored.
    OtherSystem {
        /// The frame's `messageId`.
        message_id: String,
        /// The frame's `topic`.
        topic: String,
    },
    /// Anything else (not JSON, no message id).
    Unknown,
}

/// Reads a text frame.
pub fn parse(text: &str) -> Frame {
    let Ok(frame) = serde_json::from_str::<Value>(text) else { return Frame::Unknown };
    let headers = &frame["headers"];
    let header = |key: &str| headers[key].as_str().unwrap_or_default().to_owned();
    let (message_id, topic) = (header("messageId"), header("topic"));
    let data = frame["data"].as_str().unwrap_or_default();
    match frame["type"].as_str().unwrap_or_default() {
        "SYSTEM" if topic == "disconnect" => Frame::Disconnect(disconnect_reason(data)),
        _ if message_id.is_empty() => Frame::Unknown,
        "SYSTEM" if topic == "ping" => Frame::Ping { message_id, data: data.to_owned() },
        "SYSTEM" => Frame::OtherSystem { message_id, topic },
        "CALLBACK" | "EVENT" => {
            let data = serde_json::from_str(data).unwrap_or(Value::Null);
            Frame::Callback { message_id, topic, data }
        }
        _ => Frame::Unknown,
    }
}

/// The reason a `disconnect` gives, when its data names one.
fn disconnect_reason(data: &str) -> String {
    let data: Value = serde_json::from_str(data).unwrap_or(Value::Null);
    data["reason"].as_str().filter(|reason| !reason.is_empty()).unwrap_or("no reason given").to_owned()
}

/// The answer to a `ping`: its message id and its data back.
pub fn pong(message_id: &str, data: &str) -> String {
    answer(message_id, data)
}

/// The answer to a callback or another frame: handled.
pub fn ack(message_id: &str) -> String {
    answer(message_id, &json!({"response": null}).to_string())
}

fn answer(message_id: &str, data: &str) -> String {
    json!({
        "code": 200,
        "headers": {"contentType": "application/json", "messageId": message_id},
        "message": "OK",
        "data": data,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: &str, topic: &str, message_id: &str, data: &str) -> String {
        json!({"specVersion": "1.0", "type": kind, "data": data,
               "headers": {"appId": "a1", "connectionId": "c1", "contentType": "application/json", "messageId": message_id, "time": "1700000000000", "topic": topic}})
        .to_string()
    }

    #[test]
    fn pings_disconnects_and_callbacks_are_told_apart() {
        assert_eq!(
            parse(&frame("SYSTEM", "ping", "p1", r#"{"opaque":"x1"}"#)),
            Frame::Ping { message_id: "p1".into(), data: r#"{"opaque":"x1"}"#.into() }
        );
        assert_eq!(
            parse(&frame("SYSTEM", "disconnect", "d1", r#"{"reason":"rebalance"}"#)),
            Frame::Disconnect("rebalance".into())
        );
        assert_eq!(parse(&frame("SYSTEM", "disconnect", "d2", "")), Frame::Disconnect("no reason given".into()));
        let callback = parse(&frame("CALLBACK", BOT_MESSAGE_TOPIC, "m1", r#"{"msgId":"x"}"#));
        assert_eq!(
            callback,
            Frame::Callback { message_id: "m1".into(), topic: BOT_MESSAGE_TOPIC.into(), data: json!({"msgId": "x"}) }
        );
    }

    #[test]
    fn other_system_frames_and_garbage_are_not_mistaken_for_messages() {
        assert_eq!(
            parse(&frame("SYSTEM", "KEEPALIVE", "k1", "")),
            Frame::OtherSystem { message_id: "k1".into(), topic: "KEEPALIVE".into() }
        );
        assert_eq!(parse("not json"), Frame::Unknown);
        assert_eq!(parse(&frame("CALLBACK", BOT_MESSAGE_TOPIC, "", "{}")), Frame::Unknown);
        let Frame::Callback { data, .. } = parse(&frame("CALLBACK", BOT_MESSAGE_TOPIC, "m2", "{broken")) else {
            panic!("a callback with broken data is still a callback")
        };
        assert_eq!(data, Value::Null);
    }

    #[test]
    fn a_pong_carries_the_pings_id_and_data_and_an_ack_says_ok() {
        let pong: Value = serde_json::from_str(&pong("p1", r#"{"opaque":"x1"}"#)).unwrap();
        assert_eq!(
            pong,
            json!({"code": 200, "headers": {"contentType": "application/json", "messageId": "p1"}, "message": "OK", "data": "{\"opaque\":\"x1\"}"})
        );
        let ack: Value = serde_json::from_str(&ack("m1")).unwrap();
        assert_eq!((ack["code"].as_u64(), ack["headers"]["messageId"].as_str()), (Some(200), Some("m1")));
        assert_eq!(ack["data"], "{\"response\":null}");
    }
}
