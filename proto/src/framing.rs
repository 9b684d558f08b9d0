//! Async framing over tokio byte streams (feature `tokio`): a frame reader built on
//! [`FrameDecoder`] and a writer task that batches queued frames, shared by the kernel and the
//! plugin SDK.
//!
//! Nothing here opens a socket or spawns a task: the caller brings a connected stream and runs
//! [`write_frames`] where it likes.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::mpsc;

use crate::{DEFAULT_MAX_FRAME_LEN, DecodeError, FrameDecoder, Message};

/// Bytes asked of the stream per read.
const READ_CHUNK: usize = 16 * 1024;
/// Initial capacity of the writer's batch buffer.
const BATCH_CAPACITY: usize = 8 * 1024;

/// Reads whole messages from a byte stream.
///
/// Bytes that arrive behind a message stay buffered for the next call, so one reader can be
/// handed on (from a handshake to a connection's reader task) without losing any.
#[derive(Debug)]
pub struct FrameReader<R> {
    /// Where the bytes come from.
    stream: R,
    /// Bytes received but not yet decoded.
    decoder: FrameDecoder,
    /// Read buffer.
    chunk: Box<[u8]>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader over `stream` with the default frame limit ([`DEFAULT_MAX_FRAME_LEN`]).
    pub fn new(stream: R) -> FrameReader<R> {
        FrameReader::with_max_len(stream, DEFAULT_MAX_FRAME_LEN)
    }

    /// A reader over `stream` that refuses frame bodies over `max_len` bytes.
    pub fn with_max_len(stream: R, max_len: usize) -> FrameReader<R> {
        FrameReader { stream, decoder: FrameDecoder::new(max_len), chunk: vec![0; READ_CHUNK].into_boxed_slice() }
    }

    /// The next message, or `None` when the stream ended cleanly between two frames.
    ///
    /// The end of the stream inside a frame is [`DecodeError::Truncated`]. After any error the
    /// stream is out of sync and must be dropped.
    pub async fn next(&mut self) -> Result<Option<Message>, DecodeError> {
        loop {
            if let Some(message) = self.decoder.next_message()? {
                return Ok(Some(message));
            }
            let read = self.stream.read(&mut self.chunk).await?;
            if read == 0 {
                self.decoder.finish()?;
                return Ok(None);
            }
            self.decoder.extend(&self.chunk[..read]);
        }
    }
}

/// What the writer task is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// Write one encoded frame (see [`crate::encode`]).
    Frame(Vec<u8>),
    /// Write everything queued before this, then stop.
    Close,
}

/// Writes queued frames until the queue closes, [`Outgoing::Close`] arrives, or a write fails,
/// coalescing whatever is queued at the moment into one write.
///
/// Frames go out in the order they were queued. A failed write ends the task quietly: the
/// reader on the same connection is the one that reports a dead peer.
pub async fn write_frames<W: AsyncWrite + Unpin>(mut stream: W, mut queue: mpsc::UnboundedReceiver<Outgoing>) {
    let mut batch = Vec::with_capacity(BATCH_CAPACITY);
    while let Some(first) = queue.recv().await {
        let mut closing = false;
        let mut next = Some(first);
        while let Some(item) = next {
            match item {
                Outgoing::Frame(frame) => batch.extend_from_slice(&frame),
                Outgoing::Close => {
                    closing = true;
                    break;
                }
            }
            next = queue.try_recv().ok();
        }
        let written = stream.write_all(&batch).await.and(stream.flush().await);
        if written.is_err() || closing {
            return;
        }
        batch.clear();
    }
}

/// A stream shared by a reader and a writer through an [`Arc`], for stream types that read
/// and write through a shared reference (as Unix sockets do): `&S` must implement
/// [`AsyncRead`] and [`AsyncWrite`].
#[derive(Debug)]
pub struct Shared<S>(pub Arc<S>);

impl<S> Clone for Shared<S> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<S> AsyncRead for Shared<S>
where
    for<'a> &'a S: AsyncRead,
{
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self.0).poll_read(cx, buf)
    }
}

impl<S> AsyncWrite for Shared<S>
where
    for<'a> &'a S: AsyncWrite,
{
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut &*self.0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self.0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::io::duplex;

    use super::*;
    use crate::tests::samples;
    use crate::{Ping, encode};

    fn frame(message: &Message) -> Vec<u8> {
        encode(message).unwrap()
    }

    fn ping(nonce: u64) -> Message {
        Message::Ping(Ping { nonce })
    }

    #[tokio::test]
    async fn every_message_round_trips_through_the_writer_and_the_reader() {
        let (near, far) = duplex(64);
        let (queue, frames) = mpsc::unbounded_channel();
        let writer = tokio::spawn(write_frames(near, frames));
        for (_, message) in samples() {
            queue.send(Outgoing::Frame(frame(&message))).unwrap();
        }
        drop(queue);
        let mut reader = FrameReader::new(far);
        for (name, message) in samples() {
            assert_eq!(reader.next().await.unwrap(), Some(message), "{name} changed on the way through");
        }
        writer.await.unwrap();
        assert_eq!(reader.next().await.unwrap(), None, "the writer closed the stream after the queue");
    }

    #[tokio::test]
    async fn clean_end_of_stream_between_frames_yields_none() {
        let mut empty = FrameReader::new(&[][..]);
        assert_eq!(empty.next().await.unwrap(), None);
        let bytes = frame(&ping(1));
        let mut one = FrameReader::new(bytes.as_slice());
        assert_eq!(one.next().await.unwrap(), Some(ping(1)));
        assert_eq!(one.next().await.unwrap(), None);
    }

    #[tokio::test]
    async fn stream_ending_inside_a_frame_is_a_truncation_error() {
        let bytes = frame(&ping(1));
        for cut in 1..bytes.len() {
            let mut reader = FrameReader::new(&bytes[..cut]);
            let error = reader.next().await.unwrap_err();
            assert!(matches!(error, DecodeError::Truncated { .. }), "cut at {cut}: {error}");
        }
    }

    #[tokio::test]
    async fn garbage_body_is_a_decode_error() {
        let mut garbage = 4u32.to_be_bytes().to_vec();
        garbage.extend_from_slice(&[0xc1, 0xff, 0x00, 0x13]);
        let error = FrameReader::new(garbage.as_slice()).next().await.unwrap_err();
        assert!(matches!(error, DecodeError::Malformed(_)), "{error}");
    }

    #[tokio::test]
    async fn oversize_prefix_is_refused_before_the_body_arrives() {
        let (mut near, far) = duplex(64);
        near.write_all(&2048u32.to_be_bytes()).await.unwrap();
        // The stream stays open and no body follows: the reader must not wait for one.
        let error = FrameReader::with_max_len(far, 1024).next().await.unwrap_err();
        assert!(matches!(error, DecodeError::Oversize { len: 2048, max: 1024 }), "{error}");
    }

    #[tokio::test]
    async fn frames_split_across_reads_and_frames_sharing_a_read_are_all_delivered() {
        let mut bytes = Vec::new();
        for nonce in 0..5 {
            bytes.extend_from_slice(&frame(&ping(nonce)));
        }
        // A one-byte pipe hands the reader every frame a byte at a time.
        let (mut near, far) = duplex(1);
        let feeder = tokio::spawn(async move { near.write_all(&bytes).await.unwrap() });
        let mut reader = FrameReader::new(far);
        for nonce in 0..5 {
            assert_eq!(reader.next().await.unwrap(), Some(ping(nonce)));
        }
        feeder.await.unwrap();
        // All five frames in one read: each is returned in turn.
        let mut together = Vec::new();
        for nonce in 0..5 {
            together.extend_from_slice(&frame(&ping(nonce)));
        }
        let mut reader = FrameReader::new(together.as_slice());
        for nonce in 0..5 {
            assert_eq!(reader.next().await.unwrap(), Some(ping(nonce)));
        }
        assert_eq!(reader.next().await.unwrap(), None);
    }

    #[tokio::test]
    async fn close_writes_what_was_queued_before_it_and_nothing_after() {
        let (near, far) = duplex(1024);
        let (queue, frames) = mpsc::unbounded_channel();
        queue.send(Outgoing::Frame(frame(&ping(1)))).unwrap();
        queue.send(Outgoing::Frame(frame(&ping(2)))).unwrap();
        queue.send(Outgoing::Close).unwrap();
        queue.send(Outgoing::Frame(frame(&ping(3)))).unwrap();
        write_frames(near, frames).await;
        let mut reader = FrameReader::new(far);
        assert_eq!(reader.next().await.unwrap(), Some(ping(1)));
        assert_eq!(reader.next().await.unwrap(), Some(ping(2)));
        assert_eq!(reader.next().await.unwrap(), None, "the writer stopped at close and dropped the stream");
    }

    #[tokio::test]
    async fn frames_queued_together_go_out_in_one_write() {
        let pipe = Arc::new(Pipe::default());
        let (queue, frames) = mpsc::unbounded_channel();
        for nonce in 0..3 {
            queue.send(Outgoing::Frame(frame(&ping(nonce)))).unwrap();
        }
        drop(queue);
        write_frames(Shared(pipe.clone()), frames).await;
        let writes = pipe.writes.lock().unwrap().clone();
        assert_eq!(writes.len(), 1, "three queued frames, one write: {writes:?}");
        assert_eq!(writes[0].len(), 3 * frame(&ping(0)).len());
    }

    #[tokio::test]
    async fn a_shared_stream_is_read_and_written_through_its_shared_reference() {
        let pipe = Arc::new(Pipe::default());
        let (queue, frames) = mpsc::unbounded_channel();
        queue.send(Outgoing::Frame(frame(&ping(7)))).unwrap();
        queue.send(Outgoing::Close).unwrap();
        write_frames(Shared(pipe.clone()), frames).await;
        let mut reader = FrameReader::new(Shared(pipe));
        assert_eq!(reader.next().await.unwrap(), Some(ping(7)));
        assert_eq!(reader.next().await.unwrap(), None);
    }

    /// An in-memory stream that reads and writes through `&Pipe`, like a Unix socket, and
    /// remembers each write; reads take what was written and end when nothing is left.
    #[derive(Default)]
    struct Pipe {
        writes: Mutex<Vec<Vec<u8>>>,
        unread: Mutex<Vec<u8>>,
    }

    impl AsyncRead for &Pipe {
        fn poll_read(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
            let mut unread = self.unread.lock().unwrap();
            let n = unread.len().min(buf.remaining());
            buf.put_slice(&unread[..n]);
            unread.drain(..n);
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for &Pipe {
        fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            self.writes.lock().unwrap().push(buf.to_vec());
            self.unread.lock().unwrap().extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }
}
