//! Streamed completions: the reply's deltas as `chat.completion.chunk` server-sent events, then
//! whatever the final message adds, a stop chunk and `[DONE]`.
//!
//! The response starts when the first piece of the reply arrives, so a reply that never comes
//! is still answered with 504. From then on a task feeds the body; the request's place in its
//! session's queue lasts as long as that task.

use hyper::Response;
use hyper::body::Bytes;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};

use crate::body::{Piece, PieceSender, ReplyBody};
use crate::delivery::DeliveryGuard;
use crate::openai::{self, CompletionId, SSE_DONE, missing_suffix};
use crate::responses::{ApiFailure, event_stream_response};
use crate::waiters::{FinalReply, Reply, Ticket};

/// Waits for the reply to begin, then answers with an event stream that a task keeps feeding.
pub async fn respond(
    completion: CompletionId,
    ticket: Ticket,
    mut replies: mpsc::UnboundedReceiver<Reply>,
    deadline: Instant,
    timeout_secs: u64,
) -> Result<Response<ReplyBody>, ApiFailure> {
    let first = match timeout_at(deadline, replies.recv()).await {
        Ok(Some(reply)) => reply,
        Ok(None) => return Err(ApiFailure::ShuttingDown),
        Err(_) => return Err(ApiFailure::Timeout(timeout_secs)),
    };
    let (body, pieces) = ReplyBody::streamed();
    let writer = EventWriter { completion, pieces, sent: String::new() };
    tokio::spawn(feed(writer, first, replies, ticket, deadline, timeout_secs));
    Ok(event_stream_response(body))
}

/// Turns replies into events until the final one, the deadline, or the client leaving.
async fn feed(
    mut writer: EventWriter,
    first: Reply,
    mut replies: mpsc::UnboundedReceiver<Reply>,
    ticket: Ticket,
    deadline: Instant,
    timeout_secs: u64,
) {
    let _place_in_queue = ticket;
    if !writer.role() {
        return;
    }
    let mut reply = first;
    loop {
        match reply {
            Reply::Delta(text) => {
                if !writer.delta(&text) {
                    return;
                }
            }
            Reply::Final(last) => return writer.finish(last),
        }
        reply = match timeout_at(deadline, replies.recv()).await {
            Ok(Some(next)) => next,
            Ok(None) => return writer.fail(&ApiFailure::ShuttingDown),
            Err(_) => return writer.fail(&ApiFailure::Timeout(timeout_secs)),
        };
    }
}

/// Writes one completion's events into the response body.
struct EventWriter {
    completion: CompletionId,
    pieces: PieceSender,
    /// The text the deltas carried so far.
    sent: String,
}

impl EventWriter {
    /// The first chunk, naming the assistant's role; false once the client went away.
    fn role(&mut self) -> bool {
        self.event(&self.completion.role_chunk().to_string(), None)
    }

    /// A chunk with a delta's text; false once the client went away.
    fn delta(&mut self, text: &str) -> bool {
        self.sent.push_str(text);
        self.event(&self.completion.content_chunk(text).to_string(), None)
    }

    /// What the final message adds to the deltas, the stop chunk, and `[DONE]`, which acks the
    /// outbound message once written.
    fn finish(mut self, last: FinalReply) {
        let FinalReply { content, guard } = last;
        if let Some(rest) = missing_suffix(&self.sent, &content) {
            let chunk = self.completion.content_chunk(rest).to_string();
            self.event(&chunk, None);
        } else if !content.starts_with(&self.sent) {
            eprintln!(
                "api: the final reply of {} does not continue its deltas; the client keeps the streamed text",
                self.completion.id
            );
        }
        self.event(&self.completion.stop_chunk().to_string(), None);
        self.raw(SSE_DONE.into(), Some(guard));
    }

    /// An error event in place of the rest of the reply.
    fn fail(mut self, failure: &ApiFailure) {
        self.event(&failure.body().to_string(), None);
    }

    fn event(&mut self, data: &str, guard: Option<DeliveryGuard>) -> bool {
        self.raw(openai::sse_event(data), guard)
    }

    /// Queues bytes for the body; a guard that cannot be queued acks the failure when dropped.
    fn raw(&mut self, text: String, guard: Option<DeliveryGuard>) -> bool {
        self.pieces.send(Piece { bytes: Bytes::from(text), guard }).is_ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use serde_json::Value;

    use super::*;
    use crate::delivery::testing::{Outcomes, recording};
    use crate::waiters::Waiters;

    fn completion() -> CompletionId {
        CompletionId { id: "chatcmpl-1".into(), created: 1, model: "oxibot".into() }
    }

    /// Runs `feed` over the given replies and returns the events it wrote.
    async fn events(replies: Vec<Reply>, outcomes: &Outcomes) -> Vec<String> {
        let waiters = Arc::new(Waiters::default());
        let (ticket, _) = waiters.register("s", "r1");
        let (tx, rx) = mpsc::unbounded_channel();
        let mut replies = replies.into_iter();
        let first = replies.next().unwrap();
        for reply in replies {
            tx.send(reply).unwrap();
        }
        let (body, pieces) = ReplyBody::streamed();
        let writer = EventWriter { completion: completion(), pieces, sent: String::new() };
        feed(writer, first, rx, ticket, Instant::now() + std::time::Duration::from_secs(5), 5).await;
        let ReplyBody::Streamed(mut receiver) = body else { panic!("a streamed body") };
        let mut written = Vec::new();
        while let Ok(piece) = receiver.try_recv() {
            if let Some(guard) = piece.guard {
                guard.delivered();
            }
            written.push(String::from_utf8(piece.bytes.to_vec()).unwrap());
        }
        assert!(outcomes.lock().unwrap().iter().all(Result::is_ok));
        written
    }

    fn delta_of(event: &str) -> Value {
        let json: Value = serde_json::from_str(event.strip_prefix("data: ").unwrap().trim()).unwrap();
        json["choices"][0]["delta"].clone()
    }

    #[tokio::test]
    async fn deltas_become_chunks_between_the_role_and_the_stop_and_done() {
        let outcomes = Outcomes::default();
        let replies = vec![
            Reply::Delta("Hel".into()),
            Reply::Delta("lo".into()),
            Reply::Final(FinalReply { content: "Hello".into(), guard: recording(&outcomes) }),
        ];
        let written = events(replies, &outcomes).await;
        assert_eq!(written.len(), 5, "{written:?}");
        assert_eq!(delta_of(&written[0]), serde_json::json!({"role": "assistant"}));
        assert_eq!(delta_of(&written[1])["content"], "Hel");
        assert_eq!(delta_of(&written[2])["content"], "lo");
        assert!(written[3].contains(r#""finish_reason":"stop""#));
        assert_eq!(written[4], "data: [DONE]\n\n");
        assert_eq!(*outcomes.lock().unwrap(), [Ok(())]);
    }

    #[tokio::test]
    async fn text_the_deltas_did_not_carry_is_sent_before_the_stop() {
        let outcomes = Outcomes::default();
        let replies = vec![
            Reply::Delta("Hel".into()),
            Reply::Final(FinalReply { content: "Hello!".into(), guard: recording(&outcomes) }),
        ];
        let written = events(replies, &outcomes).await;
        assert_eq!(delta_of(&written[2])["content"], "lo!");
        assert_eq!(written.len(), 5);
    }

    #[tokio::test]
    async fn a_reply_without_deltas_is_sent_as_one_chunk() {
        let outcomes = Outcomes::default();
        let written =
            events(vec![Reply::Final(FinalReply { content: "Whole".into(), guard: recording(&outcomes) })], &outcomes)
                .await;
        assert_eq!(delta_of(&written[1])["content"], "Whole");
        assert_eq!(written.len(), 4);
    }
}
