//! Waiting without guessing how long things take: poll a condition until it holds and fail only
//! after a generous deadline, or poll a future exactly once to see what it did synchronously.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

/// How long a test waits for something that should happen before it fails. Generous on
/// purpose: a busy machine must not fail a correct test, and a passing test never waits it out.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// How often a condition is checked.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// Checks `condition` every few milliseconds (without blocking the runtime) until it holds;
/// panics naming `what` once [`DEADLINE`] has passed.
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "timed out after {DEADLINE:?} waiting until {what}");
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Awaits `work`, panicking naming `what` when it takes longer than [`DEADLINE`].
pub async fn within_deadline<T>(what: &str, work: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, work).await.unwrap_or_else(|_| panic!("timed out after {DEADLINE:?}: {what}"))
}

/// Polls `future` once, so whatever it does before its first await point has happened (a call
/// queues its frame on the first poll, for example); returns what the poll gave.
pub async fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *future).poll(cx))).await
}

/// Runs `future` to completion on a fresh single-threaded runtime with timers and I/O, for
/// synchronous tests that drive async helpers.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}
