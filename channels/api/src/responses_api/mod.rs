//! `POST /v1/responses`: OpenAI's Responses API, which current OpenAI clients use by default.
//! Like a chat completion, the request's last user input goes to its session and the reply
//! comes back: as one `response` object, or (`stream: true`) as the API's events —
//! `response.created`, `response.in_progress`, `response.output_item.added`,
//! `response.content_part.added`, `response.output_text.delta`…, `response.output_text.done`,
//! `response.content_part.done`, `response.output_item.done`, `response.completed` (or
//! `response.failed`).
//!
//! (Not to be confused with `crate::responses`, which builds HTTP responses.)

pub mod request;
pub mod shapes;

use hyper::body::Incoming;
use hyper::{Request, Response};
use oxibot_plugin::serving::fresh_id;
use serde_json::{Value, json};

use crate::app::App;
use crate::body::ReplyBody;
use crate::exchange::{self, read_request};
use crate::openai::{named_sse_event, unix_now};
use crate::responses::{ApiFailure, guarded_json_response};
use crate::stream::{self, EventFormat};
use crate::usage::TokenUsage;
use request::ResponsesRequest;
use shapes::{ResponseId, Status, event, output_text};

/// Answers one Responses API request.
pub async fn responses(app: &App, request: Request<Incoming>) -> Result<Response<ReplyBody>, ApiFailure> {
    let body = read_request(app, request).await?;
    let parsed = ResponsesRequest::parse(&body.bytes, body.session_header.as_deref())?;
    let mut exchange = exchange::start(app, &parsed.session_id, &parsed.text, parsed.stream).await?;
    let response = ResponseId {
        id: openai_id("resp"),
        item_id: openai_id("msg"),
        created_at: unix_now(),
        model: app.config.model.clone(),
    };
    if parsed.stream {
        return stream::respond(ResponseEvents { response, sequence: 0 }, exchange).await;
    }
    let reply = exchange.final_reply().await?;
    let document = response.response(Status::Completed, Some(&reply.content), Some(&reply.usage));
    Ok(guarded_json_response(&document, reply.guard))
}

/// A fresh id written as the Responses API writes its ids: `resp_…`, `msg_…`.
fn openai_id(prefix: &str) -> String {
    fresh_id(prefix).replacen('-', "_", 1)
}

/// A streamed response as the Responses API's events.
pub struct ResponseEvents {
    /// The response the events belong to.
    response: ResponseId,
    /// The next event's `sequence_number`.
    sequence: u64,
}

impl ResponseEvents {
    /// One event named `kind` with `fields`, numbered in order.
    fn next(&mut self, kind: &str, fields: Value) -> String {
        let data = event(kind, self.sequence, fields);
        self.sequence += 1;
        named_sse_event(kind, &data.to_string())
    }

    /// The text location fields plus `extra`.
    fn at_text(&self, extra: Value) -> Value {
        let mut fields = self.response.text_location();
        if let (Some(fields), Value::Object(extra)) = (fields.as_object_mut(), extra) {
            fields.extend(extra);
        }
        fields
    }
}

impl EventFormat for ResponseEvents {
    fn opening(&mut self) -> Vec<String> {
        let in_progress = self.response.response(Status::InProgress, None, None);
        let item = self.response.message(Status::InProgress, None);
        let part = self.at_text(json!({"part": output_text("")}));
        vec![
            self.next("response.created", json!({"response": in_progress})),
            self.next("response.in_progress", json!({"response": in_progress})),
            self.next("response.output_item.added", json!({"output_index": 0, "item": item})),
            self.next("response.content_part.added", part),
        ]
    }

    fn delta(&mut self, text: &str) -> String {
        let fields = self.at_text(json!({"delta": text, "logprobs": []}));
        self.next("response.output_text.delta", fields)
    }

    fn closing(&mut self, text: &str, usage: &TokenUsage) -> Vec<String> {
        let done = self.at_text(json!({"text": text, "logprobs": []}));
        let part = self.at_text(json!({"part": output_text(text)}));
        let item = self.response.message(Status::Completed, Some(text));
        let completed = self.response.response(Status::Completed, Some(text), Some(usage));
        vec![
            self.next("response.output_text.done", done),
            self.next("response.content_part.done", part),
            self.next("response.output_item.done", json!({"output_index": 0, "item": item})),
            self.next("response.completed", json!({"response": completed})),
        ]
    }

    fn failure(&mut self, failure: &ApiFailure) -> String {
        let mut failed = self.response.response(Status::Failed, None, None);
        failed["error"] = json!({"code": failure.code().unwrap_or("server_error"), "message": failure.to_string()});
        self.next("response.failed", json!({"response": failed}))
    }

    fn label(&self) -> &str {
        &self.response.id
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::delivery::testing::{Outcomes, recording};
    use crate::stream::tests::events_of;
    use crate::waiters::{FinalReply, Reply};

    fn events() -> ResponseEvents {
        let response =
            ResponseId { id: "resp_1".into(), item_id: "msg_1".into(), created_at: 1, model: "oxibot".into() };
        ResponseEvents { response, sequence: 0 }
    }

    /// An event's name and data.
    fn parse(event: &str) -> (String, Value) {
        let (name, data) = event.trim_end().split_once('\n').unwrap();
        (
            name.strip_prefix("event: ").unwrap().to_owned(),
            serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap(),
        )
    }

    #[tokio::test]
    async fn a_streamed_response_opens_sends_its_text_and_completes_with_the_usage() {
        let outcomes = Outcomes::default();
        let usage = TokenUsage { prompt: 12, completion: 5, cached: 3 };
        let replies = vec![
            Reply::Delta("Hel".into()),
            Reply::Final(FinalReply { content: "Hello".into(), usage, guard: recording(&outcomes) }),
        ];
        let written: Vec<(String, Value)> =
            events_of(events(), replies, &outcomes).await.iter().map(|e| parse(e)).collect();
        let names: Vec<&str> = written.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed"
            ]
        );
        for (index, (name, data)) in written.iter().enumerate() {
            assert_eq!(data["type"], name.as_str());
            assert_eq!(data["sequence_number"], index);
        }
        assert_eq!(written[4].1["delta"], "Hel");
        assert_eq!(written[5].1["delta"], "lo", "what the final reply adds comes as a last delta");
        assert_eq!(written[6].1["text"], "Hello");
        let completed = &written[9].1["response"];
        assert_eq!(completed["status"], "completed");
        assert_eq!(completed["output"][0]["content"][0]["text"], "Hello");
        assert_eq!(completed["usage"]["output_tokens"], 5);
        assert_eq!(*outcomes.lock().unwrap(), [Ok(())], "the reply is acked once response.completed is written");
    }

    #[test]
    fn a_failure_ends_the_stream_with_a_failed_response() {
        let (name, data) = parse(&events().failure(&ApiFailure::Timeout(300)));
        assert_eq!(name, "response.failed");
        assert_eq!(data["response"]["status"], "failed");
        assert_eq!(data["response"]["error"]["code"], "timeout");
    }
}
