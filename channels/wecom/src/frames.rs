//! The JSON frames of WeCom's AI bot long connection: every frame has a `cmd`, `headers.req_id`
//! and a `body`; WeCom answers each command of the bot with a frame carrying the same `req_id`
//! and an `errcode` (0 for success).
//!
//! The bot sends `aibot_subscribe` (its id and secret) first, then `ping` every 30 seconds;
//! WeCom pushes `aibot_msg_callback` (a user's message) and `aibot_event_callback` (entering a
//! chat, or `disconnected_event` when another connection took the bot over). A message is
//! answered with `aibot_respond_msg` on the callback's `req_id` (a `stream` reply, updated by
//! sending it again with the same stream id until `finish`), an `enter_chat` event with
//! `aibot_respond_welcome_msg`; `aibot_send_msg` sends to a chat unasked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// A frame from WeCom.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A user's message, to be answered on `req_id`.
    Message { req_id: String, body: Value },
    /// An event (`body.event.eventtype`), to be answered on `req_id` where it takes an answer.
    Event { req_id: String, body: Value },
    /// WeCom's answer to a command of the bot.
    Answer { req_id: String, errcode: i64, errmsg: String },
    /// Anything else; ignored.
    Unknown,
}

/// Reads a text frame; what is not JSON or has no known shape is [`Frame::Unknown`].
pub fn parse(text: &str) -> Frame {
    let Ok(frame) = serde_json::from_str::<Value>(text) else { return Frame::Unknown };
    let req_id = frame["headers"]["req_id"].as_str().unwrap_or_default().to_owned();
    let body = frame.get("body").cloned().unwrap_or(Value::Null);
    match frame["cmd"].as_str() {
        Some("aibot_msg_callback") => Frame::Message { req_id, body },
        Some("aibot_event_callback") => Frame::Event { req_id, body },
        _ if !req_id.is_empty() && frame.get("errcode").is_some() => Frame::Answer {
            req_id,
            errcode: frame["errcode"].as_i64().unwrap_or(-1),
            errmsg: frame["errmsg"].as_str().unwrap_or_default().to_owned(),
        },
        _ => Frame::Unknown,
    }
}

/// A fresh request id: `<prefix>_<milliseconds>_<counter>`, unique within the process.
pub fn request_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let millis = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis());
    format!("{prefix}_{millis}_{}", COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// One command frame.
fn command(cmd: &str, req_id: &str, body: Option<Value>) -> String {
    let mut frame = json!({"cmd": cmd, "headers": {"req_id": req_id}});
    if let Some(body) = body {
        frame["body"] = body;
    }
    frame.to_string()
}

/// Subscribes the bot: the first frame on a connection.
pub fn subscribe(req_id: &str, bot_id: &str, secret: &str) -> String {
    command("aibot_subscribe", req_id, Some(json!({"bot_id": bot_id, "secret": secret})))
}

/// The heartbeat.
pub fn ping(req_id: &str) -> String {
    command("ping", req_id, None)
}

/// A stream reply to the message of callback `req_id`: `content` is all of it so far.
pub fn respond_stream(req_id: &str, stream_id: &str, content: &str, finish: bool) -> String {
    let body = json!({"msgtype": "stream", "stream": {"id": stream_id, "finish": finish, "content": content}});
    command("aibot_respond_msg", req_id, Some(body))
}

/// The welcome text answering the `enter_chat` event of callback `req_id`.
pub fn respond_welcome(req_id: &str, text: &str) -> String {
    command("aibot_respond_welcome_msg", req_id, Some(json!({"msgtype": "text", "text": {"content": text}})))
}

/// A Markdown message to chat `chat_id`, unasked.
pub fn send_markdown(req_id: &str, chat_id: &str, content: &str) -> String {
    let body = json!({"chatid": chat_id, "msgtype": "markdown", "markdown": {"content": content}});
    command("aibot_send_msg", req_id, Some(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callbacks_events_and_answers_are_told_apart() {
        let message = r#"{"cmd":"aibot_msg_callback","headers":{"req_id":"r1"},"body":{"msgid":"m1"}}"#;
        assert_eq!(parse(message), Frame::Message { req_id: "r1".into(), body: json!({"msgid": "m1"}) });
        let event = r#"{"cmd":"aibot_event_callback","headers":{"req_id":"r2"},"body":{"event":{}}}"#;
        assert!(matches!(parse(event), Frame::Event { req_id, .. } if req_id == "r2"));
        let answer = r#"{"headers":{"req_id":"ping_1"},"errcode":0,"errmsg":"ok"}"#;
        assert_eq!(parse(answer), Frame::Answer { req_id: "ping_1".into(), errcode: 0, errmsg: "ok".into() });
        assert_eq!(parse("not json"), Frame::Unknown);
        assert_eq!(parse(r#"{"cmd":"something_new","headers":{"req_id":"r3"}}"#), Frame::Unknown);
    }

    #[test]
    fn commands_carry_their_request_id_and_body() {
        let frame: Value = serde_json::from_str(&respond_stream("r1", "s1", "hi", true)).unwrap();
        assert_eq!(
            frame,
            json!({"cmd": "aibot_respond_msg", "headers": {"req_id": "r1"},
                   "body": {"msgtype": "stream", "stream": {"id": "s1", "finish": true, "content": "hi"}}})
        );
        let frame: Value = serde_json::from_str(&ping("ping_1")).unwrap();
        assert_eq!(frame, json!({"cmd": "ping", "headers": {"req_id": "ping_1"}}));
    }

    #[test]
    fn request_ids_are_unique_and_keep_their_prefix() {
        let (first, second) = (request_id("ping"), request_id("ping"));
        assert_ne!(first, second);
        assert!(first.starts_with("ping_"));
    }
}
