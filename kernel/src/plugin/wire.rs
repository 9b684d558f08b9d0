//! Frame I/O over a plugin's local socket: a buffered frame reader and a batching writer task.

use std::sync::Arc;

use interprocess::local_socket::tokio::Stream;
use oxibot_proto::{DecodeError, FrameDecoder, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// Reads whole messages from a plugin connection.
///
/// The handshake and the connection's reader task share one of these, so bytes that arrive
/// right behind the manifest are not lost.
#[derive(Debug)]
pub struct FrameReader {
    /// The connection (shared with the writer).
    stream: Arc<Stream>,
    /// Bytes received but not yet decoded.
    decoder: FrameDecoder,
    /// Read buffer.
    chunk: Box<[u8]>,
}

impl FrameReader {
    /// A reader over `stream` with the default frame limit.
    pub fn new(stream: Arc<Stream>) -> FrameReader {
        FrameReader { stream, decoder: FrameDecoder::default(), chunk: vec![0; 16 * 1024].into_boxed_slice() }
    }

    /// The next message, or `None` at a clean end of stream.
    pub async fn next(&mut self) -> Result<Option<Message>, DecodeError> {
        loop {
            if let Some(message) = self.decoder.next_message()? {
                return Ok(Some(message));
            }
            let read = (&*self.stream).read(&mut self.chunk).await?;
            if read == 0 {
                self.decoder.finish()?;
                return Ok(None);
            }
            self.decoder.extend(&self.chunk[..read]);
        }
    }
}

/// Encodes a message into a frame, or says why it cannot be sent.
pub fn frame(message: &Message) -> Result<Vec<u8>, oxibot_proto::EncodeError> {
    let mut out = Vec::with_capacity(128);
    oxibot_proto::encode_into(message, &mut out, oxibot_proto::DEFAULT_MAX_FRAME_LEN)?;
    Ok(out)
}

/// Writes queued frames until the queue closes or the socket fails, coalescing whatever is
/// queued at the moment into one write.
pub async fn write_frames(stream: Arc<Stream>, mut queue: mpsc::UnboundedReceiver<Vec<u8>>) {
    let mut batch = Vec::with_capacity(8 * 1024);
    while let Some(first) = queue.recv().await {
        batch.extend_from_slice(&first);
        while let Ok(more) = queue.try_recv() {
            batch.extend_from_slice(&more);
        }
        if (&*stream).write_all(&batch).await.is_err() {
            return;
        }
        batch.clear();
    }
}

/// The `type` a message has on the wire (`an unknown message` for one this build does not know).
pub fn type_name(message: &Message) -> &'static str {
    match message {
        Message::Hello(_) => "hello",
        Message::Manifest(_) => "manifest",
        Message::Call(_) => "call",
        Message::Result(_) => "result",
        Message::Cancel(_) => "cancel",
        Message::Log(_) => "log",
        Message::Ping(_) => "ping",
        Message::Pong(_) => "pong",
        Message::Goodbye(_) => "goodbye",
        Message::Inbound(_) => "inbound",
        Message::InboundAccepted(_) => "inbound_accepted",
        Message::Outbound(_) => "outbound",
        Message::Delta(_) => "delta",
        Message::DeliveryAck(_) => "delivery_ack",
        Message::Unknown => "an unknown message",
    }
}
