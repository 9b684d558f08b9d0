//! The frames of Mattermost's WebSocket: the reply to the `authentication_challenge` the
//! channel sends first, the `hello` event naming the connection (to resume it later), and
//! events with their sequence numbers, of which `posted` carries a post as a JSON string.

use serde_json::{Value, json};

/// One text frame from the server.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// The answer to an action the channel sent: `{"status": "OK", "seq_reply": n}`.
    Reply {
        /// Which action it answers.
        seq_reply: u64,
        /// Whether it worked.
        ok: bool,
        /// Why not, when it did not.
        error: String,
    },
    /// `hello`: the connection is ready; its id resumes it after a drop.
    Hello {
        /// The event's sequence number.
        seq: u64,
        /// The connection id (`connection_id` of the event's data), when the server gave one.
        connection_id: Option<String>,
    },
    /// `posted`: a new post.
    Posted {
        /// The event's sequence number.
        seq: u64,
        /// The post.
        post: Value,
        /// `O` (public), `P` (private), `D` (direct), `G` (group message).
        channel_type: String,
        /// The team of the channel, when the broadcast names it.
        team_id: String,
    },
    /// Any other event (typing, status changes, …).
    Other {
        /// The event's sequence number.
        seq: u64,
    },
    /// Not a frame Mattermost sends.
    Unknown,
}

/// Reads a text frame.
pub fn parse(text: &str) -> Frame {
    let Ok(frame) = serde_json::from_str::<Value>(text) else { return Frame::Unknown };
    if let Some(seq_reply) = frame["seq_reply"].as_u64() {
        let ok = frame["status"] == "OK";
        let error = frame["error"]["message"].as_str().or(frame["error"]["id"].as_str()).unwrap_or_default();
        return Frame::Reply { seq_reply, ok, error: error.to_owned() };
    }
    let (Some(event), Some(seq)) = (frame["event"].as_str(), frame["seq"].as_u64()) else { return Frame::Unknown };
    let data = &frame["data"];
    match event {
        "hello" => {
            let connection_id = data["connection_id"].as_str().filter(|id| !id.is_empty()).map(str::to_owned);
            Frame::Hello { seq, connection_id }
        }
        "posted" => {
            // The post is a JSON document inside a string (older servers: an object).
            let post = match &data["post"] {
                Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
                other => other.clone(),
            };
            let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
            let team = [&frame["broadcast"]["team_id"], &data["team_id"]].into_iter().map(text).find(|t| !t.is_empty());
            Frame::Posted { seq, post, channel_type: text(&data["channel_type"]), team_id: team.unwrap_or_default() }
        }
        _ => Frame::Other { seq },
    }
}

/// The `authentication_challenge` action, sent as action `seq`.
pub fn authentication_challenge(seq: u64, token: &str) -> String {
    json!({"seq": seq, "action": "authentication_challenge", "data": {"token": token}}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_hellos_and_posts_are_told_apart() {
        assert_eq!(
            parse(r#"{"status":"OK","seq_reply":1}"#),
            Frame::Reply { seq_reply: 1, ok: true, error: String::new() }
        );
        assert_eq!(
            parse(
                r#"{"status":"FAIL","seq_reply":1,"error":{"id":"api.web_socket_router.not_authenticated.app_error","message":"not authenticated"}}"#
            ),
            Frame::Reply { seq_reply: 1, ok: false, error: "not authenticated".into() }
        );
        assert_eq!(
            parse(r#"{"event":"hello","data":{"connection_id":"c1","server_version":"9"},"broadcast":{},"seq":0}"#),
            Frame::Hello { seq: 0, connection_id: Some("c1".into()) }
        );
        let posted = parse(
            r#"{"event":"posted","data":{"channel_type":"O","post":"{\"id\":\"p1\",\"message\":\"hi\"}"},"broadcast":{"channel_id":"c1","team_id":"t1"},"seq":3}"#,
        );
        assert_eq!(
            posted,
            Frame::Posted {
                seq: 3,
                post: json!({"id": "p1", "message": "hi"}),
                channel_type: "O".into(),
                team_id: "t1".into()
            }
        );
        assert_eq!(parse(r#"{"event":"typing","data":{},"broadcast":{},"seq":4}"#), Frame::Other { seq: 4 });
        assert_eq!(parse("garbage"), Frame::Unknown);
    }

    #[test]
    fn the_challenge_carries_the_token() {
        let challenge: Value = serde_json::from_str(&authentication_challenge(1, "tok")).unwrap();
        assert_eq!(challenge, json!({"seq": 1, "action": "authentication_challenge", "data": {"token": "tok"}}));
    }
}
