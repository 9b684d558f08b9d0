//! Frame I/O over a plugin's local socket: the async framing of `oxibot_proto::framing` (a
//! frame reader and a batching writer task) applied to the kernel's socket type, and how a
//! message is named in error messages.

use interprocess::local_socket::tokio::Stream;
use oxibot_proto::Message;
pub use oxibot_proto::framing::{Outgoing, Shared, write_frames};

/// Reads whole messages from a plugin connection.
///
/// The handshake and the connection's reader task share one of these, so bytes that arrive
/// right behind the manifest are not lost.
pub type FrameReader = oxibot_proto::framing::FrameReader<Shared<Stream>>;

/// How an error message names `message`: its wire `type`, or `an unknown message` for one
/// this build does not know.
pub fn describe(message: &Message) -> &'static str {
    match message {
        Message::Unknown => "an unknown message",
        known => known.type_name(),
    }
}
