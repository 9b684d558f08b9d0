//! Unsolicited plugin → kernel events (a channel's inbound messages and delivery acks, and
//! every plugin's starts and deaths), queued for one subscriber: the gateway.

use std::sync::{Mutex, MutexGuard, PoisonError};

use oxibot_proto::{DeliveryAck, Feature, Inbound, PeerKind};
use tokio::sync::mpsc;

/// Events kept while nobody is subscribed; later ones are dropped with a warning.
pub const BACKLOG_LIMIT: usize = 1024;

/// Something a plugin did that nobody asked for.
///
/// For each plugin, `Ready` and `Down` alternate, starting with `Ready`: a `Down` follows only
/// a `Ready`, and no `Inbound` or `Delivery` of an instance comes after that instance's `Down`.
#[derive(Debug, Clone, PartialEq)]
pub enum PluginEvent {
    /// An instance finished its handshake and serves (after every start and restart).
    Ready {
        /// The plugin's name.
        plugin: String,
        /// The kind it announced in `hello`.
        kind: PeerKind,
        /// The features it announced in `hello` (a channel that streams has `Streaming`).
        features: Vec<Feature>,
    },
    /// A ready instance ended: it crashed, exited, hung, broke the protocol or was shut down.
    Down {
        /// The plugin's name.
        plugin: String,
        /// What happened, with the exit status.
        reason: String,
    },
    /// A channel received a message from a user; answer with `InboundAccepted` once it is
    /// persisted.
    Inbound {
        /// The channel plugin's name.
        plugin: String,
        /// The message.
        inbound: Inbound,
    },
    /// A channel reports whether an `Outbound` (or an `ApprovalRequest`) reached its chat
    /// service.
    Delivery {
        /// The channel plugin's name.
        plugin: String,
        /// The report.
        ack: DeliveryAck,
    },
}

/// Where events go: a backlog until someone subscribes, then that subscriber's queue.
enum Sink {
    /// Nobody listens yet (or the last subscriber went away); events wait here.
    Backlog(Vec<PluginEvent>),
    /// The current subscriber.
    Subscriber(mpsc::UnboundedSender<PluginEvent>),
}

/// The host's event queue, shared by every plugin actor and connection.
pub struct EventBus {
    /// Guarded so that a subscription and a concurrent emit cannot lose or reorder events.
    sink: Mutex<Sink>,
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus { sink: Mutex::new(Sink::Backlog(Vec::new())) }
    }
}

impl EventBus {
    /// Queues an event for the subscriber, or keeps it until there is one.
    pub fn emit(&self, event: PluginEvent) {
        let mut sink = self.lock();
        if let Sink::Subscriber(tx) = &*sink {
            match tx.send(event) {
                Ok(()) => return,
                Err(mpsc::error::SendError(event)) => {
                    // The subscriber went away; keep events for the next one.
                    *sink = Sink::Backlog(vec![event]);
                    return;
                }
            }
        }
        if let Sink::Backlog(backlog) = &mut *sink {
            if backlog.len() < BACKLOG_LIMIT {
                backlog.push(event);
            } else {
                tracing::warn!(?event, "no one is listening to plugin events; dropping one");
            }
        }
    }

    /// A new queue of events, starting with the backlog. It replaces the previous subscriber,
    /// whose queue ends.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<PluginEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut sink = self.lock();
        if let Sink::Backlog(backlog) = &mut *sink {
            for event in backlog.drain(..) {
                let _ = tx.send(event);
            }
        }
        *sink = Sink::Subscriber(tx);
        rx
    }

    fn lock(&self) -> MutexGuard<'_, Sink> {
        self.sink.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn down(plugin: &str) -> PluginEvent {
        PluginEvent::Down { plugin: plugin.to_owned(), reason: "test".to_owned() }
    }

    #[test]
    fn events_emitted_before_anyone_subscribes_are_delivered_first_in_order() {
        let bus = EventBus::default();
        bus.emit(down("a"));
        bus.emit(down("b"));
        let mut rx = bus.subscribe();
        bus.emit(down("c"));
        let seen: Vec<PluginEvent> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(seen, [down("a"), down("b"), down("c")]);
    }

    #[test]
    fn events_wait_for_the_next_subscriber_after_the_last_one_went_away() {
        let bus = EventBus::default();
        drop(bus.subscribe());
        bus.emit(down("a"));
        let mut rx = bus.subscribe();
        assert_eq!(rx.try_recv().ok(), Some(down("a")));
    }

    #[test]
    fn a_new_subscription_ends_the_previous_one() {
        let bus = EventBus::default();
        let mut first = bus.subscribe();
        let mut second = bus.subscribe();
        bus.emit(down("a"));
        assert!(matches!(first.try_recv(), Err(mpsc::error::TryRecvError::Disconnected)));
        assert_eq!(second.try_recv().ok(), Some(down("a")));
    }

    #[test]
    fn the_backlog_is_bounded() {
        let bus = EventBus::default();
        for _ in 0..BACKLOG_LIMIT + 10 {
            bus.emit(down("a"));
        }
        let mut rx = bus.subscribe();
        assert_eq!(std::iter::from_fn(|| rx.try_recv().ok()).count(), BACKLOG_LIMIT);
    }
}
