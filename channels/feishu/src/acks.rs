//! Answering event frames on whichever long connection is current, once the kernel has their
//! message, so an answer that becomes due after a reconnect still reaches Feishu. An event
//! frame is answered by sending it back with a result, so the frames waiting for theirs are
//! kept here until then.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use oxibot_plugin::chat::Acknowledge;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

use crate::pbbp2::Frame;

/// How many frames may wait for their answer; past that the oldest is dropped (Feishu then
/// pushes its event again).
const HELD: usize = 1000;

/// The current connection's outgoing queue and the frames waiting for an answer; cheap to
/// clone.
#[derive(Debug, Clone, Default)]
pub struct AckLine {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The outgoing queue of the current connection.
    current: Option<UnboundedSender<Vec<u8>>>,
    /// Frame key → the frame and when it arrived.
    held: HashMap<String, (Frame, Instant)>,
}

impl AckLine {
    /// Makes `frames` (a new connection's outgoing queue) the current one.
    pub fn attach(&self, frames: UnboundedSender<Vec<u8>>) {
        self.lock().current = Some(frames);
    }

    /// Keeps `frame` until [`AckLine::ack`] of `key`.
    pub fn hold(&self, key: &str, frame: Frame) {
        let mut inner = self.lock();
        if inner.held.len() >= HELD {
            let oldest = inner.held.iter().min_by_key(|(_, (_, at))| *at).map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                inner.held.remove(&oldest);
            }
        }
        inner.held.insert(key.to_owned(), (frame, Instant::now()));
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves the state usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Acknowledge for AckLine {
    /// Answers the frame held as `key` with success; false when it is not held or no
    /// connection takes the answer (Feishu then pushes the event again).
    fn ack(&self, key: &str) -> bool {
        let mut inner = self.lock();
        let Some((frame, arrived)) = inner.held.remove(key) else { return false };
        let answer = frame.answer(200, arrived.elapsed().as_millis()).encode();
        inner.current.as_ref().is_some_and(|queue| queue.send(answer).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pbbp2::DATA;

    fn event(id: &str) -> Frame {
        Frame { method: DATA, headers: vec![("message_id".into(), id.into())], ..Frame::default() }
    }

    #[test]
    fn a_held_frame_is_answered_once_on_the_latest_connection() {
        let line = AckLine::default();
        line.hold("f1", event("f1"));
        assert!(!line.ack("f1"), "no connection yet");
        line.hold("f1", event("f1"));
        let (old, mut old_frames) = tokio::sync::mpsc::unbounded_channel();
        let (new, mut new_frames) = tokio::sync::mpsc::unbounded_channel();
        line.attach(old);
        line.attach(new);
        assert!(line.ack("f1"));
        let answer = Frame::decode(&new_frames.try_recv().unwrap()).unwrap();
        assert_eq!(answer.header("message_id"), Some("f1"));
        assert!(answer.header("biz_rt").is_some());
        assert!(old_frames.try_recv().is_err());
        assert!(!line.ack("f1"), "answered twice");
    }
}
