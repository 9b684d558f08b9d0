//! The "typing…" indicator shown while a reply is being written. Chat services show it for a
//! few seconds only, so a task renews it until the reply is sent, for a couple of minutes at
//! most; [`Typing`] keeps one such task per chat.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::task::AbortHandle;
use tokio::time::Instant;

/// A task that calls `show` every `every` until it is stopped or dropped, for `give_up_after`
/// at most, and no more once `show` fails (`show` reports its own failure).
#[derive(Debug)]
pub struct TypingLoop {
    /// The renewing task; aborted when the loop is stopped or dropped.
    task: AbortHandle,
}

impl TypingLoop {
    /// Starts the task (on the current Tokio runtime); the first `show` is at once.
    pub fn spawn<F, Fut, E>(every: Duration, give_up_after: Duration, mut show: F) -> TypingLoop
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
    {
        let task = tokio::spawn(async move {
            let until = Instant::now() + give_up_after;
            while Instant::now() < until {
                if show().await.is_err() {
                    return;
                }
                tokio::time::sleep(every).await;
            }
        });
        TypingLoop { task: task.abort_handle() }
    }

    /// Stops renewing the indicator (the service hides it by itself a few seconds later).
    pub fn stop(self) {}
}

impl Drop for TypingLoop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The chats where the indicator shows, each renewed by its own [`TypingLoop`]. Cheap to
/// clone; every clone sees the same chats.
#[derive(Debug, Clone)]
pub struct Typing {
    /// How often the indicator is renewed.
    every: Duration,
    /// How long it is kept up when no reply comes.
    give_up_after: Duration,
    /// Chat id → the loop renewing its indicator.
    active: Arc<Mutex<HashMap<String, TypingLoop>>>,
}

impl Typing {
    /// No chat shows the indicator yet; each one started is renewed every `every`, for
    /// `give_up_after` at most.
    pub fn new(every: Duration, give_up_after: Duration) -> Typing {
        Typing { every, give_up_after, active: Arc::default() }
    }

    /// Shows the indicator in `chat` with `show` until [`Typing::stop`], replacing the loop
    /// already running there.
    pub fn start<F, Fut, E>(&self, chat: &str, show: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
    {
        let renewing = TypingLoop::spawn(self.every, self.give_up_after, show);
        self.lock().insert(chat.to_owned(), renewing);
    }

    /// Stops the indicator in `chat`, if it shows.
    pub fn stop(&self, chat: &str) {
        self.lock().remove(chat);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, TypingLoop>> {
        // A poisoned lock only means a thread panicked while holding it; the map is intact.
        self.active.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
// Time is paused in these tests: sleeps advance the clock at once, so the counts are exact.
mod tests {
    use std::future::{Ready, ready};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A `show` that counts its calls and fails from call `fail_at` on.
    fn counting(calls: &Arc<AtomicUsize>, fail_at: usize) -> impl FnMut() -> Ready<Result<(), ()>> + use<> {
        let calls = calls.clone();
        move || {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            ready(if n >= fail_at { Err(()) } else { Ok(()) })
        }
    }

    fn count(calls: &Arc<AtomicUsize>) -> usize {
        calls.load(Ordering::SeqCst)
    }

    #[tokio::test(start_paused = true)]
    async fn the_indicator_is_renewed_every_period_until_the_time_limit() {
        let calls = Arc::new(AtomicUsize::new(0));
        let _renewing = TypingLoop::spawn(Duration::from_millis(10), Duration::from_millis(100), counting(&calls, 99));
        tokio::time::sleep(Duration::from_millis(400)).await;
        let shown = count(&calls);
        assert_eq!(shown, 10, "shown at 0, 10, … 90 ms");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(count(&calls), shown, "renewed after the time limit");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_show_ends_the_loop() {
        let calls = Arc::new(AtomicUsize::new(0));
        let _renewing = TypingLoop::spawn(Duration::from_millis(1), Duration::from_secs(120), counting(&calls, 2));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(count(&calls), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_loop_shows_nothing_more() {
        let calls = Arc::new(AtomicUsize::new(0));
        let renewing = TypingLoop::spawn(Duration::from_millis(1), Duration::from_secs(120), counting(&calls, 999));
        tokio::time::sleep(Duration::from_millis(20)).await;
        renewing.stop();
        let shown = count(&calls);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(shown >= 1);
        assert_eq!(count(&calls), shown);
    }

    #[tokio::test(start_paused = true)]
    async fn each_chat_has_its_own_indicator_and_a_restart_replaces_the_running_one() {
        let typing = Typing::new(Duration::from_secs(3600), Duration::from_secs(7200));
        let (first, second) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        typing.start("c1", counting(&first, 99));
        typing.start("c2", counting(&second, 99));
        tokio::time::sleep(Duration::from_millis(10)).await;
        typing.start("c1", counting(&first, 99));
        typing.stop("c2");
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!((count(&first), count(&second)), (2, 1));
        assert_eq!(typing.lock().len(), 1, "c2 is still shown");
        typing.stop("c1");
        assert!(typing.lock().is_empty());
    }
}
