//! Streamed replies, whatever the API: the reply's deltas as server-sent events between the
//! events that open and close it ([`EventFormat`]: Chat Completions' chunks, the Responses
//! API's events), then whatever the final message adds to the deltas.
//!
//! The response starts when the first piece of the reply arrives, so a reply that never comes
//! is still answered with 504. From then on a task feeds the body; the request's place in its
//! session's queue lasts as long as that task.

use hyper::Response;
use hyper::body::Bytes;
use oxibot_plugin::warn;

use crate::body::{Piece, PieceSender, ReplyBody};
use crate::delivery::DeliveryGuard;
use crate::exchange::Exchange;
use crate::openai::missing_suffix;
use crate::responses::{ApiFailure, event_stream_response};
use crate::usage::TokenUsage;
use crate::waiters::{FinalReply, Reply};

/// The events of one API's streamed reply.
pub trait EventFormat: Send + 'static {
    /// The events before any text.
    fn opening(&mut self) -> Vec<String>;
    /// The event carrying a piece of text.
    fn delta(&mut self, text: &str) -> String;
    /// The events after the last piece: `text` is the whole text the client received, `usage`
    /// the tokens the turn used. The last one acknowledges the reply once written.
    fn closing(&mut self, text: &str, usage: &TokenUsage) -> Vec<String>;
    /// The event reporting a failure in place of the rest of the reply.
    fn failure(&mut self, failure: &ApiFailure) -> String;
    /// What the stream is called in log lines (its response id).
    fn label(&self) -> &str;
}

/// Waits for the reply to begin, then answers with an event stream that a task keeps feeding.
pub async fn respond<F: EventFormat>(format: F, mut exchange: Exchange) -> Result<Response<ReplyBody>, ApiFailure> {
    let first = exchange.next().await?;
    let (body, pieces) = ReplyBody::streamed();
    let writer = EventWriter { format, pieces, sent: String::new() };
    tokio::spawn(feed(writer, first, exchange));
    Ok(event_stream_response(body))
}

/// Turns replies into events until the final one, the deadline, or the client leaving.
async fn feed<F: EventFormat>(mut writer: EventWriter<F>, first: Reply, mut exchange: Exchange) {
    if !writer.open() {
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
        // The exchange (and with it the request's place in its queue) lives until here.
        reply = match exchange.next().await {
            Ok(next) => next,
            Err(failure) => return writer.fail(&failure),
        };
    }
}

/// Writes one reply's events into the response body.
struct EventWriter<F> {
    format: F,
    pieces: PieceSender,
    /// The text the deltas carried so far.
    sent: String,
}

impl<F: EventFormat> EventWriter<F> {
    /// The opening events; false once the client went away.
    fn open(&mut self) -> bool {
        self.format.opening().into_iter().all(|event| self.raw(event, None))
    }

    /// The event with a delta's text; false once the client went away.
    fn delta(&mut self, text: &str) -> bool {
        self.sent.push_str(text);
        let event = self.format.delta(text);
        self.raw(event, None)
    }

    /// What the final message adds to the deltas, then the closing events, the last of which
    /// acks the outbound message once written.
    fn finish(mut self, last: FinalReply) {
        let FinalReply { content, usage, guard } = last;
        if let Some(rest) = missing_suffix(&self.sent, &content) {
            self.delta(rest);
        } else if !content.starts_with(&self.sent) {
            warn!(
                "api: the final reply of {} does not continue its deltas; the client keeps the streamed text",
                self.format.label()
            );
        }
        let mut events = self.format.closing(&self.sent, &usage);
        let last = events.pop();
        for event in events {
            self.raw(event, None);
        }
        if let Some(event) = last {
            self.raw(event, Some(guard));
        }
    }

    /// An error event in place of the rest of the reply.
    fn fail(mut self, failure: &ApiFailure) {
        let event = self.format.failure(failure);
        self.raw(event, None);
    }

    /// Queues bytes for the body; a guard that cannot be queued acks the failure when dropped.
    fn raw(&mut self, text: String, guard: Option<DeliveryGuard>) -> bool {
        self.pieces.send(Piece { bytes: Bytes::from(text), guard }).is_ok()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use serde_json::Value;
    use tokio::sync::mpsc;
    use tokio::time::Instant;

    use super::*;
    use crate::completions::ChunkEvents;
    use crate::delivery::testing::{Outcomes, recording};
    use crate::openai::CompletionId;
    use crate::waiters::Waiters;

    fn chunks(include_usage: bool) -> ChunkEvents {
        ChunkEvents {
            completion: CompletionId { id: "chatcmpl-1".into(), created: 1, model: "oxibot".into() },
            include_usage,
        }
    }

    fn last(content: &str, outcomes: &Outcomes) -> Reply {
        Reply::Final(FinalReply { content: content.into(), usage: TokenUsage::default(), guard: recording(outcomes) })
    }

    /// Runs `feed` over the given replies with `format` and returns the events it wrote.
    pub(crate) async fn events_of<F: EventFormat>(format: F, replies: Vec<Reply>, outcomes: &Outcomes) -> Vec<String> {
        let waiters = Arc::new(Waiters::default());
        let (ticket, _) = waiters.register("s", "r1");
        let (tx, rx) = mpsc::unbounded_channel();
        let mut replies = replies.into_iter();
        let first = replies.next().unwrap();
        for reply in replies {
            tx.send(reply).unwrap();
        }
        let (body, pieces) = ReplyBody::streamed();
        let writer = EventWriter { format, pieces, sent: String::new() };
        let exchange = Exchange {
            _place_in_queue: ticket,
            replies: rx,
            deadline: Instant::now() + std::time::Duration::from_secs(5),
            timeout_secs: 5,
        };
        feed(writer, first, exchange).await;
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

    fn data_of(event: &str) -> Value {
        serde_json::from_str(event.strip_prefix("data: ").unwrap().trim()).unwrap()
    }

    fn delta_of(event: &str) -> Value {
        data_of(event)["choices"][0]["delta"].clone()
    }

    #[tokio::test]
    async fn deltas_become_chunks_between_the_role_and_the_stop_and_done() {
        let outcomes = Outcomes::default();
        let replies = vec![Reply::Delta("Hel".into()), Reply::Delta("lo".into()), last("Hello", &outcomes)];
        let written = events_of(chunks(false), replies, &outcomes).await;
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
        let replies = vec![Reply::Delta("Hel".into()), last("Hello!", &outcomes)];
        let written = events_of(chunks(false), replies, &outcomes).await;
        assert_eq!(delta_of(&written[2])["content"], "lo!");
        assert_eq!(written.len(), 5);
    }

    #[tokio::test]
    async fn a_reply_without_deltas_is_sent_as_one_chunk() {
        let outcomes = Outcomes::default();
        let written = events_of(chunks(false), vec![last("Whole", &outcomes)], &outcomes).await;
        assert_eq!(delta_of(&written[1])["content"], "Whole");
        assert_eq!(written.len(), 4);
    }

    #[tokio::test]
    async fn with_include_usage_a_chunk_without_choices_carries_the_usage_before_done() {
        let outcomes = Outcomes::default();
        let usage = TokenUsage { prompt: 12, completion: 5, cached: 3 };
        let reply = Reply::Final(FinalReply { content: "Hi".into(), usage, guard: recording(&outcomes) });
        let written = events_of(chunks(true), vec![reply], &outcomes).await;
        assert_eq!(written.len(), 5, "{written:?}");
        let usage_chunk = data_of(&written[3]);
        assert_eq!(usage_chunk["choices"], serde_json::json!([]));
        assert_eq!(usage_chunk["usage"]["prompt_tokens"], 12);
        assert_eq!(usage_chunk["usage"]["completion_tokens"], 5);
        assert_eq!(usage_chunk["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
        assert_eq!(written[4], "data: [DONE]\n\n");
        assert_eq!(*outcomes.lock().unwrap(), [Ok(())]);
    }
}
