//! Messages seen lately, so a message a service delivers more than once (a retry of an
//! unacknowledged delivery, or two events for one post) reaches the kernel only once, and every
//! delivery that brought it is acknowledged once the kernel has it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// How many messages a channel usually remembers; the oldest are forgotten first.
pub const REMEMBERED: usize = 1000;

/// What became of a message seen before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Never seen: submit it; its delivery is acknowledged when the kernel accepts it.
    New,
    /// Being submitted: this delivery is acknowledged along with the first one.
    InFlight,
    /// Already accepted by the kernel: acknowledge this delivery at once.
    Accepted,
}

/// Recently seen messages by inbound id, bounded, each with the deliveries (a service's
/// envelope or frame ids) waiting for its acceptance. Cheap to clone: clones share the list,
/// so the reader of a connection and the submitter can both hold it.
///
/// ```
/// use oxibot_plugin::chat::{RecentMessages, Seen};
///
/// let recent = RecentMessages::new(100);
/// assert_eq!(recent.arrived("msg-1", "frame-a"), Seen::New);
/// assert_eq!(recent.arrived("msg-1", "frame-b"), Seen::InFlight); // a retry while submitting
/// assert_eq!(recent.accepted("msg-1"), ["frame-a", "frame-b"]); // acknowledge both now
/// assert_eq!(recent.arrived("msg-1", "frame-c"), Seen::Accepted); // acknowledge at once
/// ```
#[derive(Debug, Clone)]
pub struct RecentMessages {
    inner: Arc<Mutex<Recent>>,
}

/// The list behind the lock.
#[derive(Debug)]
struct Recent {
    states: HashMap<String, State>,
    /// Ids in the order they were first seen.
    order: VecDeque<String>,
    capacity: usize,
}

/// The state of one remembered message.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Submitted; these deliveries wait for the kernel's acceptance.
    InFlight(Vec<String>),
    Accepted,
}

impl RecentMessages {
    /// Remembers at most `capacity` messages.
    pub fn new(capacity: usize) -> RecentMessages {
        let recent = Recent { states: HashMap::new(), order: VecDeque::new(), capacity: capacity.max(1) };
        RecentMessages { inner: Arc::new(Mutex::new(recent)) }
    }

    /// Notes that `delivery` brought the message `id`, and says what to do with it.
    pub fn arrived(&self, id: &str, delivery: &str) -> Seen {
        let mut recent = self.lock();
        match recent.states.get_mut(id) {
            Some(State::Accepted) => Seen::Accepted,
            Some(State::InFlight(deliveries)) => {
                deliveries.push(delivery.to_owned());
                Seen::InFlight
            }
            None => {
                recent.forget_oldest();
                recent.states.insert(id.to_owned(), State::InFlight(vec![delivery.to_owned()]));
                recent.order.push_back(id.to_owned());
                Seen::New
            }
        }
    }

    /// The kernel accepted `id`: returns the deliveries to acknowledge now.
    pub fn accepted(&self, id: &str) -> Vec<String> {
        let mut recent = self.lock();
        match recent.states.insert(id.to_owned(), State::Accepted) {
            Some(State::InFlight(deliveries)) => deliveries,
            Some(State::Accepted) => Vec::new(),
            None => {
                recent.order.push_back(id.to_owned());
                Vec::new()
            }
        }
    }

    /// The submission of `id` failed: forget it, so a redelivery submits it again.
    pub fn abandoned(&self, id: &str) {
        let mut recent = self.lock();
        if recent.states.remove(id).is_some() {
            recent.order.retain(|known| known != id);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Recent> {
        // A panic elsewhere while holding the lock leaves the list usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Recent {
    /// Makes room for one more message.
    fn forget_oldest(&mut self) {
        while self.order.len() >= self.capacity {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.states.remove(&oldest);
                }
                None => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_new_once_then_in_flight_then_accepted() {
        let recent = RecentMessages::new(10);
        assert_eq!(recent.arrived("C1:1.0", "env-1"), Seen::New);
        assert_eq!(recent.arrived("C1:1.0", "env-2"), Seen::InFlight);
        assert_eq!(recent.accepted("C1:1.0"), ["env-1", "env-2"]);
        assert_eq!(recent.arrived("C1:1.0", "env-3"), Seen::Accepted);
    }

    #[test]
    fn an_abandoned_message_is_new_again() {
        let recent = RecentMessages::new(10);
        recent.arrived("C1:1.0", "env-1");
        recent.abandoned("C1:1.0");
        assert_eq!(recent.arrived("C1:1.0", "env-2"), Seen::New);
    }

    #[test]
    fn the_oldest_messages_are_forgotten_past_the_capacity() {
        let recent = RecentMessages::new(2);
        for (id, delivery) in [("a", "1"), ("b", "2"), ("c", "3")] {
            recent.arrived(id, delivery);
            recent.accepted(id);
        }
        assert_eq!(recent.arrived("a", "4"), Seen::New);
        assert_eq!(recent.arrived("c", "5"), Seen::Accepted);
    }

    #[test]
    fn clones_share_one_list() {
        let recent = RecentMessages::new(10);
        let reader = recent.clone();
        assert_eq!(reader.arrived("m", "d1"), Seen::New);
        assert_eq!(recent.accepted("m"), ["d1"]);
        assert_eq!(reader.arrived("m", "d2"), Seen::Accepted);
    }
}
