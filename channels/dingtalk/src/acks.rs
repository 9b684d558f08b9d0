//! Answering callbacks on whichever Stream connection is current, so an acknowledgement that
//! becomes due after a reconnect still reaches DingTalk.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc::UnboundedSender;

use crate::frames;

/// The outgoing frame queue of the current connection; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct AckLine {
    current: Arc<Mutex<Option<UnboundedSender<String>>>>,
}

impl AckLine {
    /// Makes `frames` (a new connection's outgoing queue) the current one.
    pub fn attach(&self, frames: UnboundedSender<String>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(frames);
    }

    /// Queues the acknowledgement of frame `message_id`; false when no connection takes it
    /// (DingTalk then delivers the callback again, and it is acknowledged at once).
    pub fn ack(&self, message_id: &str) -> bool {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.as_ref().is_some_and(|queue| queue.send(frames::ack(message_id)).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_go_to_the_latest_connection_and_fail_without_one() {
        let line = AckLine::default();
        assert!(!line.ack("m0"));
        let (old, mut old_frames) = tokio::sync::mpsc::unbounded_channel();
        let (new, mut new_frames) = tokio::sync::mpsc::unbounded_channel();
        line.attach(old);
        line.attach(new);
        assert!(line.ack("m1"));
        assert_eq!(new_frames.try_recv().unwrap(), frames::ack("m1"));
        assert!(old_frames.try_recv().is_err());
        drop(new_frames);
        assert!(!line.ack("m2"));
    }
}
