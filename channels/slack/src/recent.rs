//! Messages seen lately, so a redelivered envelope (Slack retries unacknowledged ones, and sends
//! both `message` and `app_mention` for one post) reaches the kernel only once.

use std::collections::{HashMap, VecDeque};

/// How many messages are remembered; the oldest are forgotten first.
pub const REMEMBERED: usize = 1000;

/// What became of a message seen before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Never seen: submit it; its envelope is acked when the kernel accepts it.
    New,
    /// Being submitted: this envelope is acked along with the first one.
    InFlight,
    /// Already accepted by the kernel: ack this envelope at once.
    Accepted,
}

/// The state of one remembered message.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Submitted; these envelopes wait for the kernel's acceptance.
    InFlight(Vec<String>),
    Accepted,
}

/// Recently seen messages by inbound id, bounded.
#[derive(Debug)]
pub struct RecentMessages {
    states: HashMap<String, State>,
    /// Ids in the order they were first seen.
    order: VecDeque<String>,
    capacity: usize,
}

impl RecentMessages {
    /// Remembers at most `capacity` messages.
    pub fn new(capacity: usize) -> RecentMessages {
        RecentMessages { states: HashMap::new(), order: VecDeque::new(), capacity: capacity.max(1) }
    }

    /// Notes that `envelope` brought the message `id`, and says what to do with it.
    pub fn arrived(&mut self, id: &str, envelope: &str) -> Seen {
        match self.states.get_mut(id) {
            Some(State::Accepted) => Seen::Accepted,
            Some(State::InFlight(envelopes)) => {
                envelopes.push(envelope.to_owned());
                Seen::InFlight
            }
            None => {
                self.forget_oldest();
                self.states.insert(id.to_owned(), State::InFlight(vec![envelope.to_owned()]));
                self.order.push_back(id.to_owned());
                Seen::New
            }
        }
    }

    /// The kernel accepted `id`: returns the envelopes to ack now.
    pub fn accepted(&mut self, id: &str) -> Vec<String> {
        match self.states.insert(id.to_owned(), State::Accepted) {
            Some(State::InFlight(envelopes)) => envelopes,
            Some(State::Accepted) => Vec::new(),
            None => {
                self.order.push_back(id.to_owned());
                Vec::new()
            }
        }
    }

    /// The submission of `id` failed: forget it, so a redelivery submits it again.
    pub fn abandoned(&mut self, id: &str) {
        if self.states.remove(id).is_some() {
            self.order.retain(|known| known != id);
        }
    }

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
        let mut recent = RecentMessages::new(10);
        assert_eq!(recent.arrived("C1:1.0", "env-1"), Seen::New);
        assert_eq!(recent.arrived("C1:1.0", "env-2"), Seen::InFlight);
        assert_eq!(recent.accepted("C1:1.0"), ["env-1", "env-2"]);
        assert_eq!(recent.arrived("C1:1.0", "env-3"), Seen::Accepted);
    }

    #[test]
    fn an_abandoned_message_is_new_again() {
        let mut recent = RecentMessages::new(10);
        recent.arrived("C1:1.0", "env-1");
        recent.abandoned("C1:1.0");
        assert_eq!(recent.arrived("C1:1.0", "env-2"), Seen::New);
    }

    #[test]
    fn the_oldest_messages_are_forgotten_past_the_capacity() {
        let mut recent = RecentMessages::new(2);
        for (id, envelope) in [("a", "1"), ("b", "2"), ("c", "3")] {
            recent.arrived(id, envelope);
            recent.accepted(id);
        }
        assert_eq!(recent.arrived("a", "4"), Seen::New);
        assert_eq!(recent.arrived("c", "5"), Seen::Accepted);
    }
}
