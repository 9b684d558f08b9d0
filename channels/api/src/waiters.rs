//! HTTP requests waiting for their reply, per session, in the order they were submitted.
//!
//! The kernel answers the messages of one session in order, so the reply to a session goes to
//! its oldest waiting request. Two things make the match exact when available: an outbound
//! message whose metadata carries the `request_id` the inbound was sent with goes to that
//! request (and to no other, so a reply arriving after its request timed out is refused rather
//! than handed to the next one); and the deltas and final message of a streamed reply stay with
//! the request that received the stream's first delta.
//!
//! The table is behind a plain mutex held only for short, non-async updates.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use oxibot_plugin::{Delta, Outbound};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::delivery::DeliveryGuard;
use crate::usage::TokenUsage;

/// Something for a waiting request.
#[derive(Debug)]
pub enum Reply {
    /// A piece of the reply being written.
    Delta(String),
    /// The whole reply; its guard acks the outbound message.
    Final(FinalReply),
}

/// The whole reply to a request.
#[derive(Debug)]
pub struct FinalReply {
    /// The reply's full text.
    pub content: String,
    /// The tokens the turn used (zero when the kernel sent none).
    pub usage: TokenUsage,
    /// Acks the outbound message once the text reached the client (or failed to).
    pub guard: DeliveryGuard,
}

/// The waiting requests of every session.
#[derive(Default)]
pub struct Waiters {
    chats: Mutex<HashMap<String, VecDeque<Slot>>>,
}

/// One waiting request.
struct Slot {
    /// The inbound id the request was submitted under.
    request_id: String,
    /// The stream whose deltas this request receives, once one started.
    stream_id: Option<u64>,
    /// Where its replies go.
    replies: mpsc::UnboundedSender<Reply>,
}

/// A request's place in its session's queue; it leaves the queue when dropped.
pub struct Ticket {
    waiters: Arc<Waiters>,
    chat_id: String,
    request_id: String,
}

impl Waiters {
    /// Queues a request for a reply in `chat_id`; the replies arrive on the receiver until the
    /// ticket is dropped.
    pub fn register(self: &Arc<Self>, chat_id: &str, request_id: &str) -> (Ticket, mpsc::UnboundedReceiver<Reply>) {
        let (replies, receiver) = mpsc::unbounded_channel();
        let slot = Slot { request_id: request_id.to_owned(), stream_id: None, replies };
        self.lock().entry(chat_id.to_owned()).or_default().push_back(slot);
        let ticket = Ticket { waiters: self.clone(), chat_id: chat_id.to_owned(), request_id: request_id.to_owned() };
        (ticket, receiver)
    }

    /// Hands a delta to the request receiving its stream, or to the oldest request whose reply
    /// has not started; returns whether some request took it.
    pub fn deliver_delta(&self, delta: Delta) -> bool {
        let mut chats = self.lock();
        let Some(queue) = chats.get_mut(&delta.chat_id) else { return false };
        let owner = queue
            .iter()
            .position(|slot| slot.stream_id == Some(delta.stream_id))
            .or_else(|| queue.iter().position(|slot| slot.stream_id.is_none()));
        let Some(slot) = owner.and_then(|index| queue.get_mut(index)) else { return false };
        slot.stream_id = Some(delta.stream_id);
        slot.replies.send(Reply::Delta(delta.text)).is_ok()
    }

    /// Hands a reply to the request it answers; refuses it for good when none is waiting.
    pub fn deliver_final(&self, outbound: Outbound, guard: DeliveryGuard) {
        let request_id = outbound.metadata.get("request_id").and_then(Value::as_str);
        match self.claim(&outbound.chat_id, outbound.stream_id, request_id) {
            // A request that went away in the meantime drops the reply, and its guard acks that.
            Some(replies) => {
                let usage = TokenUsage::from_metadata(&outbound.metadata);
                let _ = replies.send(Reply::Final(FinalReply { content: outbound.content, usage, guard }));
            }
            // Retrying would hand this reply to a later request in place of its own answer.
            None => guard.refused(format!("no request is waiting for a reply in session {}", outbound.chat_id)),
        }
    }

    /// Removes and returns the request a final reply belongs to.
    fn claim(
        &self,
        chat_id: &str,
        stream_id: Option<u64>,
        request_id: Option<&str>,
    ) -> Option<mpsc::UnboundedSender<Reply>> {
        let mut chats = self.lock();
        let queue = chats.get_mut(chat_id)?;
        let index = match request_id {
            Some(id) => queue.iter().position(|slot| slot.request_id == id)?,
            None => in_order_owner(queue, stream_id)?,
        };
        let slot = queue.remove(index)?;
        if queue.is_empty() {
            chats.remove(chat_id);
        }
        Some(slot.replies)
    }

    /// How many requests wait in `chat_id`.
    #[cfg(test)]
    fn waiting(&self, chat_id: &str) -> usize {
        self.lock().get(chat_id).map_or(0, VecDeque::len)
    }

    fn forget(&self, chat_id: &str, request_id: &str) {
        let mut chats = self.lock();
        if let Some(queue) = chats.get_mut(chat_id) {
            queue.retain(|slot| slot.request_id != request_id);
            if queue.is_empty() {
                chats.remove(chat_id);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, VecDeque<Slot>>> {
        // A poisoned lock only means a thread panicked while holding it; the table is intact.
        self.chats.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Without a request id: the request receiving the stream, else the oldest one whose reply
/// has not started, else the oldest.
fn in_order_owner(queue: &VecDeque<Slot>, stream_id: Option<u64>) -> Option<usize> {
    let streaming = stream_id.and_then(|id| queue.iter().position(|slot| slot.stream_id == Some(id)));
    let unstarted = || queue.iter().position(|slot| slot.stream_id.is_none());
    let oldest = || (!queue.is_empty()).then_some(0);
    streaming.or_else(unstarted).or_else(oldest)
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.waiters.forget(&self.chat_id, &self.request_id);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;
    use crate::delivery::testing::{Outcomes, recording};

    fn outbound(chat_id: &str, content: &str, stream_id: Option<u64>, metadata: Value) -> Outbound {
        Outbound { id: 1, chat_id: chat_id.into(), content: content.into(), media: vec![], stream_id, metadata }
    }

    fn delta(chat_id: &str, stream_id: u64, text: &str) -> Delta {
        Delta { stream_id, chat_id: chat_id.into(), text: text.into() }
    }

    fn final_text(receiver: &mut mpsc::UnboundedReceiver<Reply>) -> String {
        match receiver.try_recv().unwrap() {
            Reply::Final(reply) => {
                let content = reply.content.clone();
                reply.guard.delivered();
                content
            }
            other => panic!("expected a final reply, got {other:?}"),
        }
    }

    #[test]
    fn replies_in_one_session_go_to_the_requests_in_the_order_they_were_registered() {
        let waiters = Arc::new(Waiters::default());
        let outcomes = Outcomes::default();
        let (_first, mut first) = waiters.register("s", "r1");
        let (_second, mut second) = waiters.register("s", "r2");
        waiters.deliver_final(outbound("s", "one", None, json!({})), recording(&outcomes));
        waiters.deliver_final(outbound("s", "two", None, json!({})), recording(&outcomes));
        assert_eq!(final_text(&mut first), "one");
        assert_eq!(final_text(&mut second), "two");
        assert_eq!(waiters.waiting("s"), 0);
    }

    #[test]
    fn a_final_reply_carries_the_token_counts_of_its_metadata() {
        let waiters = Arc::new(Waiters::default());
        let outcomes = Outcomes::default();
        let (_ticket, mut replies) = waiters.register("s", "r1");
        let metadata = json!({"usage": {"prompt_tokens": 12, "completion_tokens": 5, "cached_tokens": 3}});
        waiters.deliver_final(outbound("s", "hi", None, metadata), recording(&outcomes));
        let Ok(Reply::Final(reply)) = replies.try_recv() else { panic!("no final reply") };
        assert_eq!(reply.usage, TokenUsage { prompt: 12, completion: 5, cached: 3 });
        reply.guard.delivered();
    }

    #[test]
    fn a_request_id_in_the_metadata_picks_its_request_whatever_the_order() {
        let waiters = Arc::new(Waiters::default());
        let outcomes = Outcomes::default();
        let (_first, mut first) = waiters.register("s", "r1");
        let (_second, mut second) = waiters.register("s", "r2");
        waiters.deliver_final(outbound("s", "for two", None, json!({"request_id": "r2"})), recording(&outcomes));
        assert_eq!(final_text(&mut second), "for two");
        assert!(first.try_recv().is_err());
    }

    #[test]
    fn a_late_reply_for_a_request_that_left_is_refused_not_given_to_the_next() {
        let waiters = Arc::new(Waiters::default());
        let outcomes = Outcomes::default();
        let (gone, _gone_replies) = waiters.register("s", "r1");
        let (_next, mut next) = waiters.register("s", "r2");
        drop(gone);
        waiters.deliver_final(outbound("s", "late", None, json!({"request_id": "r1"})), recording(&outcomes));
        assert!(next.try_recv().is_err());
        assert_eq!(*outcomes.lock().unwrap(), [Err("no request is waiting for a reply in session s".to_owned())]);
    }

    #[test]
    fn a_reply_for_a_session_nobody_waits_in_is_acked_with_an_error() {
        let waiters = Waiters::default();
        let outcomes = Outcomes::default();
        waiters.deliver_final(outbound("nobody", "hello?", None, json!({})), recording(&outcomes));
        assert_eq!(outcomes.lock().unwrap().len(), 1);
        assert!(outcomes.lock().unwrap()[0].is_err());
    }

    #[test]
    fn a_stream_stays_with_the_request_that_got_its_first_delta() {
        let waiters = Arc::new(Waiters::default());
        let outcomes = Outcomes::default();
        let (_first, mut first) = waiters.register("s", "r1");
        let (_second, mut second) = waiters.register("s", "r2");
        assert!(waiters.deliver_delta(delta("s", 7, "He")));
        assert!(waiters.deliver_delta(delta("s", 8, "Ot")));
        assert!(waiters.deliver_delta(delta("s", 7, "llo")));
        waiters.deliver_final(outbound("s", "Other", Some(8), json!({})), recording(&outcomes));
        assert!(matches!(first.try_recv().unwrap(), Reply::Delta(text) if text == "He"));
        assert!(matches!(first.try_recv().unwrap(), Reply::Delta(text) if text == "llo"));
        assert!(matches!(second.try_recv().unwrap(), Reply::Delta(text) if text == "Ot"));
        assert_eq!(final_text(&mut second), "Other");
        assert_eq!(waiters.waiting("s"), 1);
    }

    #[test]
    fn a_delta_for_a_session_nobody_waits_in_is_dropped() {
        let waiters = Waiters::default();
        assert!(!waiters.deliver_delta(delta("s", 1, "x")));
    }

    #[test]
    fn a_reply_whose_request_went_away_meanwhile_is_acked_with_an_error() {
        let waiters = Arc::new(Waiters::default());
        let outcomes = Outcomes::default();
        let (_ticket, replies) = waiters.register("s", "r1");
        drop(replies);
        waiters.deliver_final(outbound("s", "lost", None, json!({})), recording(&outcomes));
        assert!(outcomes.lock().unwrap()[0].as_ref().is_err_and(|e| e.contains("went away")));
    }
}
