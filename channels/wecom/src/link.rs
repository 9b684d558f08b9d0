//! The bot's side of the current long connection: commands go out on whichever connection is
//! subscribed, and each waits for WeCom's answer with the same `req_id`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

/// How long WeCom may take to answer a command.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a command did not go through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// No subscribed connection right now.
    #[error("no connection to wecom")]
    NotConnected,
    /// The connection ended before WeCom answered.
    #[error("the connection to wecom ended before it answered")]
    Closed,
    /// WeCom did not answer in time.
    #[error("wecom did not answer within {ANSWER_TIMEOUT:?}")]
    Timeout,
    /// WeCom refused the command.
    #[error("wecom refused it: errcode {errcode}, {errmsg}")]
    Refused {
        /// WeCom's error code.
        errcode: i64,
        /// WeCom's words.
        errmsg: String,
    },
}

/// The current connection's outgoing queue and the commands waiting for an answer; cheap to
/// clone, clones share both.
#[derive(Debug, Clone, Default)]
pub struct Link {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The subscribed connection's outgoing frames; `None` between connections.
    current: Option<UnboundedSender<String>>,
    /// Request id → who waits for its answer.
    waiting: HashMap<String, oneshot::Sender<Result<(), LinkError>>>,
}

impl Link {
    /// Makes `frames` (a subscribed connection's outgoing queue) the current one.
    pub fn attach(&self, frames: UnboundedSender<String>) {
        self.lock().current = Some(frames);
    }

    /// The connection ended: commands waiting for an answer fail, new ones wait for the next.
    pub fn detach(&self) {
        let mut inner = self.lock();
        inner.current = None;
        inner.waiting.clear();
    }

    /// Sends `frame` (a command with request id `req_id`) and waits for WeCom's answer.
    pub async fn request(&self, req_id: &str, frame: String) -> Result<(), LinkError> {
        let (answered, answer) = oneshot::channel();
        {
            let mut inner = self.lock();
            let Some(current) = inner.current.clone() else { return Err(LinkError::NotConnected) };
            inner.waiting.insert(req_id.to_owned(), answered);
            if current.send(frame).is_err() {
                inner.waiting.remove(req_id);
                return Err(LinkError::NotConnected);
            }
        }
        match tokio::time::timeout(ANSWER_TIMEOUT, answer).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(LinkError::Closed),
            Err(_) => {
                self.lock().waiting.remove(req_id);
                Err(LinkError::Timeout)
            }
        }
    }

    /// Sends `frame` without waiting for an answer; false when there is no connection.
    pub fn send(&self, frame: String) -> bool {
        self.lock().current.as_ref().is_some_and(|current| current.send(frame).is_ok())
    }

    /// Hands WeCom's answer to `req_id` to whoever waits for it.
    pub fn answered(&self, req_id: &str, errcode: i64, errmsg: &str) {
        let Some(waiter) = self.lock().waiting.remove(req_id) else { return };
        let outcome =
            if errcode == 0 { Ok(()) } else { Err(LinkError::Refused { errcode, errmsg: errmsg.to_owned() }) };
        let _ = waiter.send(outcome);
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_waits_for_the_answer_with_its_id() {
        let link = Link::default();
        assert_eq!(link.request("r0", "f0".into()).await, Err(LinkError::NotConnected));
        let (frames, mut sent) = tokio::sync::mpsc::unbounded_channel();
        link.attach(frames);
        let waiting = tokio::spawn({
            let link = link.clone();
            async move { link.request("r1", "f1".into()).await }
        });
        assert_eq!(sent.recv().await.unwrap(), "f1");
        link.answered("other", 0, "ok");
        link.answered("r1", 40058, "bad");
        assert_eq!(waiting.await.unwrap(), Err(LinkError::Refused { errcode: 40058, errmsg: "bad".into() }));
    }

    #[tokio::test]
    async fn a_detached_link_fails_the_requests_in_flight() {
        let link = Link::default();
        let (frames, mut sent) = tokio::sync::mpsc::unbounded_channel();
        link.attach(frames);
        let waiting = tokio::spawn({
            let link = link.clone();
            async move { link.request("r1", "f1".into()).await }
        });
        sent.recv().await.unwrap();
        link.detach();
        assert_eq!(waiting.await.unwrap(), Err(LinkError::Closed));
        assert!(!link.send("f2".into()));
    }
}
