//! Which connections belong to which chat, so a reply reaches every client of its chat.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// Where frames for one connection are queued; its writer task drains the queue.
pub type FrameQueue = mpsc::UnboundedSender<Message>;

/// The connections of every chat. Cheap to clone; clones share the table.
#[derive(Clone, Default)]
pub struct Rooms(Arc<Mutex<HashMap<String, Vec<Member>>>>);

/// One connection in a chat.
struct Member {
    /// Tells the connection apart from others of the same chat.
    number: u64,
    /// Its outgoing frames.
    queue: FrameQueue,
}

/// A connection's place in a chat; leaving the chat when dropped.
pub struct Membership {
    rooms: Rooms,
    chat_id: String,
    number: u64,
}

impl Rooms {
    /// Adds a connection to `chat_id` until the returned membership is dropped.
    pub fn join(&self, chat_id: &str, queue: FrameQueue) -> Membership {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let number = NEXT.fetch_add(1, Ordering::Relaxed);
        self.lock().entry(chat_id.to_owned()).or_default().push(Member { number, queue });
        Membership { rooms: self.clone(), chat_id: chat_id.to_owned(), number }
    }

    /// Queues `frame` for every connection of `chat_id`; returns how many took it.
    pub fn broadcast(&self, chat_id: &str, frame: &Message) -> usize {
        let mut rooms = self.lock();
        let Some(members) = rooms.get_mut(chat_id) else { return 0 };
        members.retain(|member| member.queue.send(frame.clone()).is_ok());
        let reached = members.len();
        if reached == 0 {
            rooms.remove(chat_id);
        }
        reached
    }

    fn leave(&self, chat_id: &str, number: u64) {
        let mut rooms = self.lock();
        if let Some(members) = rooms.get_mut(chat_id) {
            members.retain(|member| member.number != number);
            if members.is_empty() {
                rooms.remove(chat_id);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Vec<Member>>> {
        // A poisoned lock only means a thread panicked while holding it; the table is intact.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.rooms.leave(&self.chat_id, self.number);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_frame_reaches_every_connection_of_its_chat_and_no_other() {
        let rooms = Rooms::default();
        let (a, mut a_rx) = mpsc::unbounded_channel();
        let (b, mut b_rx) = mpsc::unbounded_channel();
        let (c, mut c_rx) = mpsc::unbounded_channel();
        let _memberships = (rooms.join("chat-1", a), rooms.join("chat-1", b), rooms.join("chat-2", c));
        assert_eq!(rooms.broadcast("chat-1", &Message::text("hi")), 2);
        assert_eq!(a_rx.try_recv().unwrap(), Message::text("hi"));
        assert_eq!(b_rx.try_recv().unwrap(), Message::text("hi"));
        assert!(c_rx.try_recv().is_err());
    }

    #[test]
    fn a_dropped_membership_leaves_the_chat() {
        let rooms = Rooms::default();
        let (a, _a_rx) = mpsc::unbounded_channel();
        let membership = rooms.join("chat-1", a);
        drop(membership);
        assert_eq!(rooms.broadcast("chat-1", &Message::text("hi")), 0);
        assert!(rooms.lock().is_empty());
    }

    #[test]
    fn a_connection_whose_writer_is_gone_does_not_count_as_reached() {
        let rooms = Rooms::default();
        let (a, a_rx) = mpsc::unbounded_channel();
        let _membership = rooms.join("chat-1", a);
        drop(a_rx);
        assert_eq!(rooms.broadcast("chat-1", &Message::text("hi")), 0);
    }
}
