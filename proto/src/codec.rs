//! Framing: a 4-byte big-endian length prefix followed by one MessagePack value.

use std::io::{self, Read};

use serde::Deserialize;

use crate::Message;

/// Bytes in the length prefix.
pub const HEADER_LEN: usize = 4;

/// The largest frame body accepted by default (16 MiB).
pub const DEFAULT_MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// Why a frame could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// serde refused the value.
    #[error("cannot encode message: {0}")]
    Serialize(#[from] rmp_serde::encode::Error),
    /// The encoded body is larger than the frame limit.
    #[error("encoded message is {len} bytes, over the {max}-byte frame limit")]
    Oversize {
        /// Length of the encoded body.
        len: usize,
        /// The limit in force.
        max: usize,
    },
}

/// Why bytes could not be decoded into a message.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The length prefix announces more than the frame limit; nothing was allocated for it.
    #[error("frame of {len} bytes is over the {max}-byte limit")]
    Oversize {
        /// The announced body length.
        len: usize,
        /// The limit in force.
        max: usize,
    },
    /// The stream ended in the middle of a frame.
    #[error("stream ended inside a frame ({got} of {expected} bytes)")]
    Truncated {
        /// Bytes the frame needed (prefix included).
        expected: usize,
        /// Bytes that arrived.
        got: usize,
    },
    /// The body is not a MessagePack message of this protocol.
    #[error("malformed frame: {0}")]
    Malformed(#[from] rmp_serde::decode::Error),
    /// Reading from the underlying stream failed.
    #[error("read failed: {0}")]
    Io(#[from] io::Error),
}

/// Encodes `message` as one frame (prefix and body) appended to `out`.
pub fn encode_into(message: &Message, out: &mut Vec<u8>, max_len: usize) -> Result<(), EncodeError> {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    if let Err(error) = rmp_serde::encode::write_named(out, message) {
        out.truncate(start);
        return Err(error.into());
    }
    let len = out.len() - start - HEADER_LEN;
    if len > max_len {
        out.truncate(start);
        return Err(EncodeError::Oversize { len, max: max_len });
    }
    let prefix = u32::try_from(len).map_err(|_| EncodeError::Oversize { len, max: max_len })?;
    out[start..start + HEADER_LEN].copy_from_slice(&prefix.to_be_bytes());
    Ok(())
}

/// Encodes `message` as one frame with the default size limit.
pub fn encode(message: &Message) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(64);
    encode_into(message, &mut out, DEFAULT_MAX_FRAME_LEN)?;
    Ok(out)
}

/// Reads the body length from a prefix, refusing lengths over `max_len`.
pub fn body_len(prefix: [u8; HEADER_LEN], max_len: usize) -> Result<usize, DecodeError> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len > max_len {
        return Err(DecodeError::Oversize { len, max: max_len });
    }
    Ok(len)
}

/// A body whose MessagePack arrays and maps nest this many levels deep (the message's own map
/// counts) is malformed.
///
/// Decoding recurses once per level, and rmp-serde's own limit (1024) overflows a 2 MiB thread
/// stack in a debug build at about 550 levels: a plugin could crash the kernel with a 1 KiB frame.
/// 256 is twice serde_json's limit, so any value parsed from JSON fits inside a message.
const MAX_DEPTH: usize = 256;

/// Decodes one frame body (without its prefix).
pub fn decode_body(body: &[u8]) -> Result<Message, DecodeError> {
    let mut deserializer = rmp_serde::Deserializer::from_read_ref(body);
    deserializer.set_max_depth(MAX_DEPTH);
    Ok(Message::deserialize(&mut deserializer)?)
}

/// Reads one message from a blocking reader.
///
/// Returns `Ok(None)` on a clean end of stream (no byte of a next frame arrived), and
/// [`DecodeError::Truncated`] when the stream ends inside a frame.
pub fn read_message<R: Read>(reader: &mut R, max_len: usize) -> Result<Option<Message>, DecodeError> {
    let mut prefix = [0; HEADER_LEN];
    let got = read_full(reader, &mut prefix)?;
    if got == 0 {
        return Ok(None);
    }
    if got < HEADER_LEN {
        return Err(DecodeError::Truncated { expected: HEADER_LEN, got });
    }
    let len = body_len(prefix, max_len)?;
    let mut body = vec![0; len];
    let got = read_full(reader, &mut body)?;
    if got < len {
        return Err(DecodeError::Truncated { expected: HEADER_LEN + len, got: HEADER_LEN + got });
    }
    decode_body(&body).map(Some)
}

/// Fills `buf` unless the stream ends first; returns how many bytes arrived.
fn read_full<R: Read>(reader: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

/// Sans-IO incremental decoder: feed it whatever bytes arrived, take out whole messages.
///
/// The async `framing::FrameReader` (feature `tokio`) feeds it what each read returned with
/// [`FrameDecoder::extend`] and then calls [`FrameDecoder::next_message`] until it yields `None`.
#[derive(Debug)]
pub struct FrameDecoder {
    /// Received bytes; `buf[start..]` is not yet consumed.
    buf: Vec<u8>,
    /// Where the unconsumed bytes begin, so consuming a frame does not move memory.
    start: usize,
    /// Largest body accepted.
    max_len: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new(DEFAULT_MAX_FRAME_LEN)
    }
}

impl FrameDecoder {
    /// A decoder that refuses bodies over `max_len` bytes.
    pub fn new(max_len: usize) -> FrameDecoder {
        FrameDecoder { buf: Vec::with_capacity(8 * 1024), start: 0, max_len }
    }

    /// Appends received bytes.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.compact();
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet returned as messages.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Takes the next whole message, or `Ok(None)` when more bytes are needed.
    ///
    /// An oversize prefix is an error as soon as the prefix is complete, before the body is
    /// buffered. After an error the stream is out of sync and must be dropped.
    pub fn next_message(&mut self) -> Result<Option<Message>, DecodeError> {
        let pending = &self.buf[self.start..];
        let Some(prefix) = pending.first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let len = body_len(*prefix, self.max_len)?;
        let Some(body) = pending.get(HEADER_LEN..HEADER_LEN + len) else {
            return Ok(None);
        };
        let message = decode_body(body);
        self.start += HEADER_LEN + len;
        message.map(Some)
    }

    /// Checks the state at end of stream: leftover bytes mean the last frame was cut off.
    pub fn finish(&self) -> Result<(), DecodeError> {
        let got = self.buffered();
        if got == 0 {
            return Ok(());
        }
        let pending = &self.buf[self.start..];
        let expected = match pending.first_chunk::<HEADER_LEN>() {
            Some(prefix) => HEADER_LEN + u32::from_be_bytes(*prefix) as usize,
            None => HEADER_LEN,
        };
        Err(DecodeError::Truncated { expected, got })
    }

    /// Drops consumed bytes so the buffer does not grow without bound.
    fn compact(&mut self) {
        if self.start == 0 {
            return;
        }
        if self.start == self.buf.len() {
            self.buf.clear();
        } else {
            self.buf.drain(..self.start);
        }
        self.start = 0;
    }
}
