//! The promise to ack an outbound message exactly once: ok when its text was handed to the HTTP
//! client, an error when the guard is dropped first (the client went away, the request timed
//! out, or no request was waiting).

use std::fmt;

use oxibot_plugin::ChannelHandle;

/// What the guard reports when it is dropped unsettled.
const GONE: &str = "the HTTP client went away before the reply was written";

/// Reports an outcome to the kernel.
type Acker = Box<dyn FnOnce(Result<(), String>) + Send>;

/// Reports a failure no retry can mend (the kernel then gives the message up at once).
type Refuser = Box<dyn FnOnce(String) + Send>;

/// Acks one outbound message exactly once.
pub struct DeliveryGuard {
    acker: Option<Acker>,
    refuser: Option<Refuser>,
}

impl DeliveryGuard {
    /// A guard that acks outbound message `id` through `channel`.
    pub fn for_outbound(channel: ChannelHandle, id: u64) -> DeliveryGuard {
        let refusing = channel.clone();
        let mut guard = DeliveryGuard::new(move |outcome| {
            let _ = channel.ack(id, outcome);
        });
        guard.refuser = Some(Box::new(move |reason| {
            let _ = refusing.refuse(id, reason);
        }));
        guard
    }

    /// A guard that reports to `acker`.
    pub fn new(acker: impl FnOnce(Result<(), String>) + Send + 'static) -> DeliveryGuard {
        DeliveryGuard { acker: Some(Box::new(acker)), refuser: None }
    }

    /// The reply can never be delivered, for `reason`: nobody waits for it any more, and a
    /// later request must not receive it in place of its own answer.
    pub fn refused(mut self, reason: String) {
        let refuser = self.refuser.take();
        match (refuser, self.acker.take()) {
            (Some(refuse), Some(_)) => refuse(reason),
            (None, Some(ack)) => ack(Err(reason)),
            (_, None) => {}
        }
    }

    /// The reply reached the HTTP client.
    pub fn delivered(mut self) {
        self.settle(Ok(()));
    }

    fn settle(&mut self, outcome: Result<(), String>) {
        if let Some(acker) = self.acker.take() {
            acker(outcome);
        }
    }
}

impl Drop for DeliveryGuard {
    fn drop(&mut self) {
        self.settle(Err(GONE.to_owned()));
    }
}

impl fmt::Debug for DeliveryGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeliveryGuard").field("settled", &self.acker.is_none()).finish()
    }
}

#[cfg(test)]
pub mod testing {
    //! Guards that record their outcome, for tests.
    use std::sync::{Arc, Mutex};

    use super::DeliveryGuard;

    /// The outcomes reported so far.
    pub type Outcomes = Arc<Mutex<Vec<Result<(), String>>>>;

    /// A guard recording into `outcomes`.
    pub fn recording(outcomes: &Outcomes) -> DeliveryGuard {
        let outcomes = outcomes.clone();
        DeliveryGuard::new(move |outcome| {
            outcomes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(outcome)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::testing::{Outcomes, recording};

    #[test]
    fn a_guard_acks_once_with_the_outcome_it_was_settled_with() {
        let outcomes = Outcomes::default();
        recording(&outcomes).delivered();
        recording(&outcomes).refused("no request".into());
        assert_eq!(*outcomes.lock().unwrap(), [Ok(()), Err("no request".into())]);
    }

    #[test]
    fn a_dropped_guard_acks_that_the_client_went_away() {
        let outcomes = Outcomes::default();
        drop(recording(&outcomes));
        assert_eq!(*outcomes.lock().unwrap(), [Err(super::GONE.to_owned())]);
    }
}
