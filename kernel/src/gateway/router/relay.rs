//! Messages and replies between kernels (cluster mode): a [`Relay`] carries a channel's message
//! from the kernel that runs the channel to the kernel that owns its session, and a reply back
//! to the kernel that runs its channel. The router asks it only for the channels it relays (run
//! on one kernel at a time); without a relay (one host) nothing here runs.
//!
//! The kernel that runs the channel publishes the message and acknowledges it to the channel
//! once the relay stored it ([`Router::relay_inbound`]); the session's owner takes it
//! ([`Router::turn_relayed`]) and tells the relay it is handled once the session's inbox holds
//! it; the reply, published under its outbound id, is sent by the channel's kernel
//! ([`Router::deliver_relayed`]), which tells the relay it is handled once the channel
//! acknowledged it, and skips an id it delivered already (a reply that came again).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use oxibot_proto::{Inbound, Message, Outbound};
use tokio::sync::oneshot;

use super::Router;
use crate::agent::ChannelOrigin;
use crate::session::SessionKey;

/// A relay's answer: done, or why not.
pub type Relaying = Pin<Box<dyn Future<Output = Result<(), String>>>>;

/// How many relayed replies' ids a kernel remembers as delivered.
const DELIVERED_KEPT: usize = 4096;

/// Where messages and replies go between kernels.
pub trait Relay {
    /// Whether `channel`'s messages and replies go through the relay.
    fn relays(&self, channel: &str) -> bool;
    /// Whether this kernel runs `channel`'s plugin now.
    fn runs_here(&self, channel: &str) -> bool;
    /// Stores `inbound` of `channel` for the owner of its session; resolves once stored.
    fn publish_inbound(&self, channel: &str, inbound: &Inbound) -> Relaying;
    /// Stores `outbound` for the kernel running `channel`; resolves once stored.
    fn publish_outbound(&self, channel: &str, outbound: &Outbound) -> Relaying;
}

impl Router {
    /// Relays through `relay` from now on (cluster mode).
    pub fn relay_through(&self, relay: Rc<dyn Relay>) {
        *self.relay.borrow_mut() = Some(relay);
    }

    /// The relay, when `channel`'s messages go through it.
    pub(super) fn relay_for(&self, channel: &str) -> Option<Rc<dyn Relay>> {
        self.relay.borrow().as_ref().filter(|relay| relay.relays(channel)).cloned()
    }

    /// The relay, when a reply to `channel` goes through it: the channel runs on another kernel.
    pub(super) fn relay_elsewhere(&self, channel: &str) -> Option<Rc<dyn Relay>> {
        self.relay_for(channel).filter(|relay| !relay.runs_here(channel))
    }

    /// Hands an allowed message to the relay and acknowledges it to its channel once stored;
    /// left unacknowledged (the channel delivers it again) when it cannot be.
    pub(super) async fn relay_inbound(&self, relay: Rc<dyn Relay>, channel: &str, inbound: &Inbound) {
        match relay.publish_inbound(channel, inbound).await {
            Ok(()) => self.accept(channel, &inbound.id),
            Err(error) => {
                tracing::warn!(%channel, %error, "cannot pass a message on to the cluster; the channel may deliver it again")
            }
        }
    }

    /// Runs the turn of a message the relay brought to this kernel (it owns the session):
    /// `done` hears `true` once the session's inbox holds it; the reply goes out as any.
    pub async fn turn_relayed(self: Rc<Self>, channel: String, inbound: Inbound, done: oneshot::Sender<bool>) {
        self.in_flight.set(self.in_flight.get() + 1);
        self.after_resume().await;
        let key = SessionKey::new(&channel, &inbound.chat_id);
        let (persisted, persisted_rx) = oneshot::channel();
        actix::spawn(async move {
            let _ = done.send(persisted_rx.await.is_ok());
        });
        let origin = ChannelOrigin {
            inbound_id: inbound.id.clone(),
            metadata: inbound.metadata.clone(),
            sender_id: inbound.sender_id.clone(),
        };
        let (events, stream_id) = self.stream_to(&channel, &inbound.chat_id, None);
        let reply = self.manager.send_from_channel(&key, &inbound.content, origin, persisted, events).await;
        self.deliver_reply(&channel, &inbound.chat_id, reply, stream_id, inbound.metadata).await;
        self.in_flight.set(self.in_flight.get() - 1);
    }

    /// Sends a reply another kernel wrote through `channel`, which runs here; `true` once the
    /// channel acknowledged it (or did before: the same id is not sent twice).
    pub async fn deliver_relayed(&self, channel: &str, outbound: Outbound) -> bool {
        if self.relayed.borrow().contains(&outbound.id) {
            tracing::debug!(%channel, id = outbound.id, "a relayed reply came again; delivered already");
            return true;
        }
        let id = outbound.id;
        match self.send_for_ack(channel, id, Message::Outbound(outbound)).await {
            Ok(()) => {
                let mut relayed = self.relayed.borrow_mut();
                relayed.push_back(id);
                if relayed.len() > DELIVERED_KEPT {
                    relayed.pop_front();
                }
                true
            }
            Err(error) => {
                tracing::warn!(%channel, id, %error, "a relayed reply was not delivered; it comes again");
                false
            }
        }
    }
}

/// Replies relayed and delivered, oldest first.
pub type Delivered = VecDeque<u64>;
