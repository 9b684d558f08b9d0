//! The queue of frames to the kernel: what the connection's writer drains, and how a message
//! is put on it.

use oxibot_proto::framing::Outgoing;
use oxibot_proto::{EncodeError, Message, encode};
use tokio::sync::mpsc;

/// Where frames for the kernel are queued.
pub(crate) type Sender = mpsc::UnboundedSender<Outgoing>;

/// Encodes a message and queues it; fails when it does not fit in a frame. A closed queue
/// (the connection is gone) is not an error here: the reader notices that.
pub(crate) fn queue_message(outgoing: &Sender, message: &Message) -> Result<(), EncodeError> {
    let _ = outgoing.send(Outgoing::Frame(encode(message)?));
    Ok(())
}
