//! Sending one reply until its channel acknowledges it: recorded in the outbox's store before
//! its first attempt, attempts under one outbound id (the same after a kernel restart, which
//! resends what was left pending), waits from the [`RetryPolicy`] cut short when the channel
//! becomes ready again, one chat's replies in the order they were written, and a final failure logged and handed to the session without waiting
//! for it (the session may be busy with the very turn that sent the reply: nothing waits on a
//! session from inside its turn); the model reads it on the session's next turn.

use std::rc::Rc;
use std::time::{Duration, SystemTime};

use oxibot_proto::{Message, Outbound};
use tokio::sync::oneshot;

use super::Router;
use super::outbox::{PendingDelivery, RetryPolicy};
use super::outbox_store::StoredDelivery;
use super::reply::Reply;
use crate::session::SessionKey;

/// How long a channel has to acknowledge one delivery attempt.
const ACK_TIMEOUT: Duration = Duration::from_secs(30);

impl Router {
    /// Starts delivering `reply` in the background; the receiver tells how its first attempt
    /// went. The reply is recorded in the outbox's store before that attempt (a crash from
    /// then on resends it at the next start). A failed first attempt is retried (see
    /// [`RetryPolicy`]) until it is delivered or given up.
    pub(super) fn start_delivery(self: &Rc<Self>, reply: Reply) -> oneshot::Receiver<Result<(), String>> {
        let (first, first_rx) = oneshot::channel();
        let id = self.fresh_id();
        let since = SystemTime::now();
        let recorded = self.outbox.store().record_pending(&StoredDelivery::of(id, &reply, since));
        self.outbox.add(PendingDelivery { id, reply, since, failures: 0, last_error: String::new(), refused: false });
        let router = self.clone();
        actix::spawn(async move {
            if let Ok(Err(error)) = recorded.await {
                tracing::warn!(%error, "a reply goes out without being kept for a restart");
            }
            router.deliver_pending(id, Some(first)).await;
        });
        first_rx
    }

    /// Resends the replies a previous run left pending, under their own outbound ids, within
    /// what is left of their retry window (gateway start, once the channels are up).
    pub fn resend_left_pending(self: &Rc<Self>) {
        for stored in self.outbox.store().left_pending() {
            let id = stored.id;
            // New ids stay above the old ones, even if the clock went back.
            self.last_id.set(self.last_id.get().max(id));
            tracing::info!(channel = %stored.channel, chat_id = %stored.chat_id, id, "resending a reply a previous run left pending");
            let (reply, since) = (stored.reply(), stored.since());
            self.outbox.add(PendingDelivery {
                id,
                reply,
                since,
                failures: 0,
                last_error: String::new(),
                refused: false,
            });
            let router = self.clone();
            actix::spawn(async move { router.deliver_pending(id, None).await });
        }
    }

    /// Delivers `reply` and waits for its first attempt: the caller is told at once whether the
    /// channel took it; retries go on in the background.
    pub(super) async fn deliver(self: &Rc<Self>, reply: Reply) -> Result<(), String> {
        self.start_delivery(reply).await.unwrap_or_else(|_| Err("the delivery was dropped".to_owned()))
    }

    /// Attempts pending delivery `id` until it is delivered or given up.
    async fn deliver_pending(&self, id: u64, mut first: Option<oneshot::Sender<Result<(), String>>>) {
        loop {
            self.wait_for_earlier_replies(id, &mut first).await;
            let Some(delivery) = self.outbox.get(id) else { return };
            let mut ready = self.outbox.watch_ready(&delivery.reply.channel);
            ready.mark_unchanged();
            let outcome = self.attempt(&delivery).await;
            if let Some(first) = first.take() {
                let _ = first.send(outcome.clone());
            }
            let error = match outcome {
                Ok(()) => return self.delivered(id),
                Err(error) => error,
            };
            let failures = self.outbox.failed(id, &error);
            if !self.accepting.get() {
                // Kept in the store: the next start resends it.
                self.outbox.remove(id);
                tracing::info!(channel = %delivery.reply.channel, %error, "the gateway is shutting down; the reply is resent at the next start");
                return;
            }
            let policy = self.retry_policy();
            let delivery = self.outbox.get(id).unwrap_or(delivery);
            if let Some(reason) = self.give_up_reason(&delivery, &policy) {
                return self.given_up(id, &reason);
            }
            let wait = policy.wait_after(failures);
            tracing::warn!(channel = %delivery.reply.channel, chat_id = %delivery.reply.chat_id, %error, retry_in = ?wait, "delivery failed; retrying");
            // A channel that comes back is tried at once.
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = ready.changed() => tracing::info!(channel = %delivery.reply.channel, "channel ready again; retrying its delivery"),
            }
        }
    }

    /// Waits while a reply written earlier to the same chat is pending, so the chat reads its
    /// replies in order. Whoever waits for the first attempt is told at once when that earlier
    /// reply is being retried (it may take minutes), rather than kept waiting.
    async fn wait_for_earlier_replies(&self, id: u64, first: &mut Option<oneshot::Sender<Result<(), String>>>) {
        let mut progress = self.outbox.watch_progress();
        loop {
            progress.mark_unchanged();
            let Some(earlier) = self.outbox.earlier_in_chat(id) else { return };
            if earlier.failures > 0
                && let Some(first) = first.take()
            {
                let error = format!(
                    "it waits behind an earlier reply to this chat, which is being retried ({})",
                    earlier.last_error_or_unknown()
                );
                let _ = first.send(Err(error));
            }
            if progress.changed().await.is_err() {
                return;
            }
        }
    }

    /// Sends one attempt and waits for its acknowledgement.
    async fn attempt(&self, delivery: &PendingDelivery) -> Result<(), String> {
        if let Some(relay) = self.relay_elsewhere(&delivery.reply.channel) {
            // Another kernel runs the channel: stored for it, the reply is its to deliver.
            let outbound = Outbound {
                id: delivery.id,
                chat_id: delivery.reply.chat_id.clone(),
                content: delivery.reply.content.clone(),
                media: delivery.reply.media.clone(),
                stream_id: None,
                metadata: delivery.reply.metadata.clone(),
            };
            return relay.publish_outbound(&delivery.reply.channel, &outbound).await;
        }
        let message = self.approval_request(delivery.id, &delivery.reply).unwrap_or_else(|| {
            Message::Outbound(Outbound {
                id: delivery.id,
                chat_id: delivery.reply.chat_id.clone(),
                content: delivery.reply.content.clone(),
                media: delivery.reply.media.clone(),
                stream_id: delivery.reply.stream_id,
                metadata: delivery.reply.metadata.clone(),
            })
        });
        self.send_for_ack(&delivery.reply.channel, delivery.id, message).await
    }

    /// Sends `message` (outbound id `id`) to `channel` and waits for its acknowledgement.
    pub(super) async fn send_for_ack(&self, channel: &str, id: u64, message: Message) -> Result<(), String> {
        let acked = self.outbox.expect_ack(id, channel);
        if let Err(error) = self.host().send(channel, message) {
            self.outbox.forget_ack(id);
            return Err(error.to_string());
        }
        match tokio::time::timeout(ACK_TIMEOUT, acked).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err("the channel went away".to_owned()),
            Err(_) => {
                self.outbox.forget_ack(id);
                Err("no acknowledgement in time".to_owned())
            }
        }
    }

    /// Why a failed delivery is not tried again, if it is not.
    fn give_up_reason(&self, delivery: &PendingDelivery, policy: &RetryPolicy) -> Option<String> {
        if delivery.refused {
            return Some(format!("{}; the channel says no retry can deliver it", delivery.last_error_or_unknown()));
        }
        if !self.serves(&delivery.reply.channel) {
            return Some(format!("the channel '{}' no longer runs", delivery.reply.channel));
        }
        (delivery.since.elapsed().unwrap_or_default() >= policy.window).then(|| delivery.last_error_or_unknown())
    }

    fn delivered(&self, id: u64) {
        let Some(delivery) = self.outbox.remove(id) else { return };
        self.outbox.store().record_settled(id);
        if delivery.failures > 0 {
            tracing::info!(channel = %delivery.reply.channel, chat_id = %delivery.reply.chat_id, attempts = delivery.failures + 1, "delivered after retrying");
            if let Some(key) = &delivery.reply.record_late_in {
                self.manager.record_sent(key, &delivery.reply.content);
            }
        }
    }

    /// A delivery that failed for good: logged, and noted in its session (which tells the
    /// model on its next turn) without waiting for the session.
    fn given_up(&self, id: u64, reason: &str) {
        let Some(delivery) = self.outbox.remove(id) else { return };
        self.outbox.store().record_settled(id);
        let (channel, chat_id) = (&delivery.reply.channel, &delivery.reply.chat_id);
        let attempts = delivery.failures;
        tracing::error!(%channel, %chat_id, error = %reason, attempts, "delivery failed for good");
        self.manager.record_undelivered(SessionKey::new(channel, chat_id), &delivery.reply.content, reason);
    }
}

impl PendingDelivery {
    fn last_error_or_unknown(&self) -> String {
        if self.last_error.is_empty() { "delivery failed".to_owned() } else { self.last_error.clone() }
    }
}
