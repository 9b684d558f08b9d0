//! Blocking framed I/O on the kernel connection: one reader, a shared locked writer.

use std::io::{self, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, PoisonError};

use oxibot_proto::{DEFAULT_MAX_FRAME_LEN, DecodeError, Message};

/// A body that is not MessagePack: `0xc1` is the one byte MessagePack never uses.
const GARBAGE_BODY: &[u8] = b"\xc1 this is not messagepack \xc1";

/// What the oversize action announces: 64 MiB, four times the default frame limit.
const OVERSIZE_LEN: u32 = 64 * 1024 * 1024;

/// The read half of the connection; only the main loop reads.
pub struct Reader {
    inner: BufReader<UnixStream>,
}

impl Reader {
    /// The next message, `Ok(None)` on a clean end of stream.
    pub fn next(&mut self) -> Result<Option<Message>, DecodeError> {
        oxibot_proto::read_message(&mut self.inner, DEFAULT_MAX_FRAME_LEN)
    }
}

/// The write half, shared by every thread that answers a call.
///
/// Each frame is written whole under the lock, so frames from concurrent calls never interleave.
#[derive(Clone)]
pub struct Writer {
    inner: Arc<Mutex<UnixStream>>,
}

impl Writer {
    /// Encodes and writes one message. A failed write means the kernel has gone; the reader
    /// sees the end of the stream and the process exits, so the error is only reported.
    pub fn send(&self, message: &Message) {
        match oxibot_proto::encode(message) {
            Ok(frame) => self.send_raw(&frame),
            Err(error) => eprintln!("stress: cannot encode a message: {error}"),
        }
    }

    /// Writes bytes as they are, framed or not.
    pub fn send_raw(&self, bytes: &[u8]) {
        // A poisoned lock only means another thread panicked mid-write; the socket is usable.
        let mut stream = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(error) = stream.write_all(bytes).and_then(|()| stream.flush()) {
            eprintln!("stress: write to the kernel failed: {error}");
        }
    }
}

/// Splits a connected stream into its reader and its shared writer.
pub fn split(stream: UnixStream) -> io::Result<(Reader, Writer)> {
    let read_half = stream.try_clone()?;
    Ok((Reader { inner: BufReader::new(read_half) }, Writer { inner: Arc::new(Mutex::new(stream)) }))
}

/// A frame with a correct length prefix around a body that is not MessagePack.
pub fn garbage_frame() -> Vec<u8> {
    let mut frame = Vec::with_capacity(4 + GARBAGE_BODY.len());
    frame.extend_from_slice(&u32::try_from(GARBAGE_BODY.len()).unwrap_or(u32::MAX).to_be_bytes());
    frame.extend_from_slice(GARBAGE_BODY);
    frame
}

/// A length prefix announcing a 64 MiB body, followed by only a few bytes of it.
pub fn oversize_start() -> Vec<u8> {
    let mut frame = OVERSIZE_LEN.to_be_bytes().to_vec();
    frame.extend_from_slice(b"\x85\xa4type");
    frame
}
