//! The outbox: every reply on its way to a channel, in one place. A reply keeps one outbound
//! id for all its attempts (a channel whose service takes an idempotency key — Matrix's
//! transaction id — builds it from that id, so a retry never posts twice); the waits between
//! attempts grow to a cap for the configured window; a channel that comes back (`Ready`) wakes
//! its pending replies at once instead of after their wait. One chat's replies go out in the
//! order they were written: a reply waits while an earlier one to the same chat is pending.
//!
//! What is pending is also kept in an [`OutboxStore`] (the data dir's `outbox.jsonl`): a
//! reply is recorded before its first attempt and settled when delivered or given up, so a
//! kernel restart resends what was pending under the same id (issue 26).

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use tokio::sync::{oneshot, watch};

use super::outbox_store::{OutboxStore, Volatile};
use super::reply::Reply;

/// Waits between the first delivery attempts: 1 s, 2 s, 4 s; later waits double up to
/// [`DEFAULT_RETRY_CAP`].
pub const DEFAULT_RETRY_WAITS: [Duration; 3] = [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(4)];
/// The longest wait between two attempts.
pub const DEFAULT_RETRY_CAP: Duration = Duration::from_secs(5 * 60);

/// How long and how often a reply is retried.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// The waits after the first failed attempts, in order.
    pub waits: Vec<Duration>,
    /// Later waits double the previous one, up to this.
    pub cap: Duration,
    /// How long after its first attempt a reply is given up.
    pub window: Duration,
}

impl RetryPolicy {
    /// The default waits, retried for `window`.
    pub fn new(window: Duration) -> RetryPolicy {
        RetryPolicy { waits: DEFAULT_RETRY_WAITS.to_vec(), cap: DEFAULT_RETRY_CAP, window }
    }

    /// `waits` instead of the default ones (a test's short schedule): the last of them is also
    /// the cap, so the schedule stays as short as it was written.
    pub fn with_waits(self, waits: Vec<Duration>) -> RetryPolicy {
        let cap = waits.last().copied().unwrap_or(self.cap);
        RetryPolicy { waits, cap, ..self }
    }

    /// The wait after failed attempt number `failures` (1 for the first failure).
    pub fn wait_after(&self, failures: u32) -> Duration {
        let index = usize::try_from(failures.saturating_sub(1)).unwrap_or(usize::MAX);
        if let Some(wait) = self.waits.get(index) {
            return *wait;
        }
        let last = self.waits.last().copied().unwrap_or(Duration::from_secs(1));
        let doublings = u32::try_from(index + 1 - self.waits.len()).unwrap_or(u32::MAX).min(20);
        last.saturating_mul(1 << doublings).min(self.cap)
    }
}

/// One reply waiting to reach its chat: what to send, and how its attempts went.
#[derive(Debug, Clone)]
pub struct PendingDelivery {
    /// Its outbound id, the same for every attempt.
    pub id: u64,
    /// What to send where.
    pub reply: Reply,
    /// When the first attempt was made (by this run or an earlier one).
    pub since: SystemTime,
    /// Attempts that failed so far.
    pub failures: u32,
    /// Why the last attempt failed.
    pub last_error: String,
    /// The channel said no attempt can ever deliver it (its `DeliveryAck` was `permanent`).
    pub refused: bool,
}

/// An attempt waiting for its acknowledgement: the channel it went to, and who to tell.
type AckWaiter = (String, oneshot::Sender<Result<(), String>>);

/// Every reply not yet acknowledged, the attempts waiting for an acknowledgement, and the
/// channels' restarts. Lives on the actix system's thread, with the router.
pub struct Outbox {
    /// Keeps the pending replies across restarts.
    store: Box<dyn OutboxStore>,
    /// The replies not yet delivered, by outbound id.
    pending: RefCell<HashMap<u64, PendingDelivery>>,
    /// Attempts sent and waiting for their `DeliveryAck`: the channel, and who to tell.
    acks: RefCell<HashMap<u64, AckWaiter>>,
    /// A counter per channel, raised each time the channel is ready (after a restart too).
    ready: RefCell<HashMap<String, watch::Sender<u64>>>,
    /// A counter raised each time a pending reply fails an attempt or leaves the outbox.
    progress: watch::Sender<u64>,
}

impl Default for Outbox {
    /// An outbox kept in memory only.
    fn default() -> Outbox {
        Outbox::new(Box::new(Volatile))
    }
}

impl Outbox {
    /// An empty outbox that keeps its pending replies in `store`.
    pub fn new(store: Box<dyn OutboxStore>) -> Outbox {
        Outbox {
            store,
            pending: RefCell::default(),
            acks: RefCell::default(),
            ready: RefCell::default(),
            progress: watch::channel(0).0,
        }
    }

    /// Where the pending replies are kept across restarts.
    pub fn store(&self) -> &dyn OutboxStore {
        self.store.as_ref()
    }

    /// Keeps `delivery` until [`Outbox::remove`].
    pub fn add(&self, delivery: PendingDelivery) {
        self.pending.borrow_mut().insert(delivery.id, delivery);
    }

    /// A copy of pending delivery `id`.
    pub fn get(&self, id: u64) -> Option<PendingDelivery> {
        self.pending.borrow().get(&id).cloned()
    }

    /// Notes a failed attempt of `id`; returns how many failed so far.
    pub fn failed(&self, id: u64, error: &str) -> u32 {
        let mut pending = self.pending.borrow_mut();
        let Some(delivery) = pending.get_mut(&id) else { return 0 };
        delivery.failures += 1;
        delivery.last_error = error.to_owned();
        let failures = delivery.failures;
        drop(pending);
        self.progress.send_modify(|count| *count += 1);
        failures
    }

    /// Forgets delivery `id` (delivered, or given up).
    pub fn remove(&self, id: u64) -> Option<PendingDelivery> {
        let removed = self.pending.borrow_mut().remove(&id);
        self.progress.send_modify(|count| *count += 1);
        removed
    }

    /// The earliest reply still pending for the chat of delivery `id` that was written before
    /// it, if any: `id` waits for it, so one chat reads its replies in order.
    pub fn earlier_in_chat(&self, id: u64) -> Option<PendingDelivery> {
        let pending = self.pending.borrow();
        let reply = &pending.get(&id)?.reply;
        pending
            .values()
            .filter(|other| other.id < id)
            .filter(|other| other.reply.channel == reply.channel && other.reply.chat_id == reply.chat_id)
            .min_by_key(|other| other.id)
            .cloned()
    }

    /// Tells when a pending reply next fails an attempt or leaves the outbox.
    pub fn watch_progress(&self) -> watch::Receiver<u64> {
        self.progress.subscribe()
    }

    /// How many replies wait to be delivered.
    pub fn pending(&self) -> usize {
        self.pending.borrow().len()
    }

    /// Waits for the acknowledgement of attempt `id` sent to `channel`.
    pub fn expect_ack(&self, id: u64, channel: &str) -> oneshot::Receiver<Result<(), String>> {
        let (tell, told) = oneshot::channel();
        self.acks.borrow_mut().insert(id, (channel.to_owned(), tell));
        told
    }

    /// Marks delivery `id` as one its channel refused for good: it is not retried.
    pub fn refused_for_good(&self, id: u64) {
        if let Some(delivery) = self.pending.borrow_mut().get_mut(&id) {
            delivery.refused = true;
        }
    }

    /// Stops waiting for the acknowledgement of `id`.
    pub fn forget_ack(&self, id: u64) {
        self.acks.borrow_mut().remove(&id);
    }

    /// A channel's `DeliveryAck` for `id`.
    pub fn acknowledged(&self, id: u64, outcome: Result<(), String>) {
        if let Some((_, tell)) = self.acks.borrow_mut().remove(&id) {
            let _ = tell.send(outcome);
        }
    }

    /// `channel`'s plugin is gone: its attempts waiting for an acknowledgement fail now (they
    /// are retried once it is ready again) instead of at the acknowledgement timeout.
    pub fn channel_down(&self, channel: &str, reason: &str) {
        let gone: Vec<u64> = self.acks.borrow().iter().filter(|(_, (c, _))| c == channel).map(|(id, _)| *id).collect();
        for id in gone {
            self.acknowledged(id, Err(format!("the channel went away ({reason})")));
        }
    }

    /// `channel` is ready (started or restarted): wakes its pending deliveries.
    pub fn channel_ready(&self, channel: &str) {
        self.ready_sender(channel).send_modify(|count| *count += 1);
    }

    /// Tells when `channel` is next ready.
    pub fn watch_ready(&self, channel: &str) -> watch::Receiver<u64> {
        self.ready_sender(channel).subscribe()
    }

    fn ready_sender(&self, channel: &str) -> watch::Sender<u64> {
        self.ready.borrow_mut().entry(channel.to_owned()).or_insert_with(|| watch::channel(0).0).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seconds(list: &[u64]) -> Vec<Duration> {
        list.iter().copied().map(Duration::from_secs).collect()
    }

    #[test]
    fn the_default_waits_double_after_the_first_three_up_to_five_minutes() {
        let policy = RetryPolicy::new(Duration::from_secs(3600));
        let waits: Vec<Duration> = (1..=12).map(|n| policy.wait_after(n)).collect();
        assert_eq!(waits, seconds(&[1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]));
        assert_eq!(policy.wait_after(u32::MAX), DEFAULT_RETRY_CAP);
    }

    #[test]
    fn a_short_schedule_repeats_its_last_wait() {
        let policy = RetryPolicy::new(Duration::from_secs(60)).with_waits(seconds(&[1, 3]));
        let waits: Vec<Duration> = (1..=4).map(|n| policy.wait_after(n)).collect();
        assert_eq!(waits, seconds(&[1, 3, 3, 3]));
    }

    #[test]
    fn a_channel_going_down_fails_only_its_own_attempts() {
        let outbox = Outbox::default();
        let mut matrix = outbox.expect_ack(1, "matrix");
        let mut email = outbox.expect_ack(2, "email");
        outbox.channel_down("matrix", "killed");
        assert!(matches!(matrix.try_recv(), Ok(Err(error)) if error.contains("killed")));
        assert!(email.try_recv().is_err(), "the other channel's attempt still waits");
    }

    fn pending(id: u64, chat_id: &str) -> PendingDelivery {
        let reply = Reply::new("matrix", chat_id, format!("reply {id}"), None, serde_json::Value::Null);
        PendingDelivery { id, reply, since: SystemTime::now(), failures: 0, last_error: String::new(), refused: false }
    }

    #[test]
    fn a_reply_waits_only_for_earlier_replies_to_its_own_chat() {
        let outbox = Outbox::default();
        for (id, chat) in [(1, "a"), (2, "b"), (3, "a"), (4, "a")] {
            outbox.add(pending(id, chat));
        }
        assert_eq!(outbox.earlier_in_chat(4).map(|d| d.id), Some(1));
        assert_eq!(outbox.earlier_in_chat(2).map(|d| d.id), None, "chat b has nothing before it");
        let mut progress = outbox.watch_progress();
        progress.mark_unchanged();
        outbox.remove(1);
        assert!(progress.has_changed().unwrap_or(false), "a reply leaving wakes the ones behind it");
        assert_eq!(outbox.earlier_in_chat(4).map(|d| d.id), Some(3));
        assert_eq!(outbox.earlier_in_chat(3).map(|d| d.id), None);
    }

    #[test]
    fn a_ready_channel_wakes_whoever_watches_it() {
        let outbox = Outbox::default();
        let mut watcher = outbox.watch_ready("matrix");
        watcher.mark_unchanged();
        outbox.channel_ready("matrix");
        assert!(watcher.has_changed().unwrap_or(false));
    }
}
