//! Acknowledging a service's deliveries on whichever socket connection is current, so an
//! acknowledgement that becomes due after a reconnect still reaches the service.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc::UnboundedSender;

use super::Acknowledge;

/// The outgoing text queue of the current connection, and how the service's acknowledgement
/// of a delivery is written; cheap to clone.
#[derive(Clone)]
pub struct AckLine {
    current: Arc<Mutex<Option<UnboundedSender<String>>>>,
    /// The acknowledgement frame of a delivery, from its key.
    frame: fn(&str) -> String,
}

impl AckLine {
    /// A line without a connection yet, acknowledging a delivery with `frame(key)`.
    pub fn new(frame: fn(&str) -> String) -> AckLine {
        AckLine { current: Arc::default(), frame }
    }

    /// Makes `frames` (a new connection's outgoing queue) the current one.
    pub fn attach(&self, frames: UnboundedSender<String>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(frames);
    }
}

impl Acknowledge for AckLine {
    /// Queues the acknowledgement of delivery `key`; false when no connection takes it (the
    /// service then delivers it again, and it is acknowledged at once).
    fn ack(&self, key: &str) -> bool {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.as_ref().is_some_and(|frames| frames.send((self.frame)(key)).is_ok())
    }
}

impl fmt::Debug for AckLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AckLine").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_go_to_the_latest_connection_and_fail_without_one() {
        let line = AckLine::new(|key| format!("ack {key}"));
        assert!(!line.ack("m0"));
        let (old, mut old_frames) = tokio::sync::mpsc::unbounded_channel();
        let (new, mut new_frames) = tokio::sync::mpsc::unbounded_channel();
        line.attach(old);
        line.attach(new);
        assert!(line.ack("m1"));
        assert_eq!(new_frames.try_recv().unwrap(), "ack m1");
        assert!(old_frames.try_recv().is_err());
        drop(new_frames);
        assert!(!line.ack("m2"));
    }
}
