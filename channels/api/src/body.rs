//! The body of every response: a whole JSON document, or a stream of server-sent events fed by
//! a task. Either may carry a [`DeliveryGuard`], settled when hyper takes the bytes it rides
//! with, or failed when the body is dropped first (the client went away).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::body::{Body, Bytes, Frame, SizeHint};
use tokio::sync::mpsc;

use crate::delivery::DeliveryGuard;

/// A piece of a streamed body.
#[derive(Debug)]
pub struct Piece {
    /// The bytes to write.
    pub bytes: Bytes,
    /// Acked once hyper took the bytes.
    pub guard: Option<DeliveryGuard>,
}

/// Where a streaming task sends its pieces; sending fails once the client went away.
pub type PieceSender = mpsc::UnboundedSender<Piece>;

/// A response body.
#[derive(Debug)]
pub enum ReplyBody {
    /// All bytes at once (`Content-Length` is known).
    Whole {
        /// The bytes, until hyper took them.
        bytes: Option<Bytes>,
        /// Acked once hyper took the bytes.
        guard: Option<DeliveryGuard>,
    },
    /// Pieces as a task produces them, until it drops its sender.
    Streamed(mpsc::UnboundedReceiver<Piece>),
}

impl ReplyBody {
    /// A whole body.
    pub fn whole(bytes: impl Into<Bytes>) -> ReplyBody {
        ReplyBody::Whole { bytes: Some(bytes.into()), guard: None }
    }

    /// A whole body whose delivery `guard` acks.
    pub fn whole_guarded(bytes: impl Into<Bytes>, guard: DeliveryGuard) -> ReplyBody {
        ReplyBody::Whole { bytes: Some(bytes.into()), guard: Some(guard) }
    }

    /// A streamed body and the sender that feeds it.
    pub fn streamed() -> (ReplyBody, PieceSender) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (ReplyBody::Streamed(receiver), sender)
    }
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let bytes = match self.get_mut() {
            ReplyBody::Whole { bytes, guard } => {
                if let Some(guard) = guard.take() {
                    guard.delivered();
                }
                bytes.take()
            }
            ReplyBody::Streamed(pieces) => match pieces.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => None,
                Poll::Ready(Some(piece)) => {
                    if let Some(guard) = piece.guard {
                        guard.delivered();
                    }
                    Some(piece.bytes)
                }
            },
        };
        Poll::Ready(bytes.map(|bytes| Ok(Frame::data(bytes))))
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ReplyBody::Whole { bytes: None, .. })
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ReplyBody::Whole { bytes, .. } => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |bytes| bytes.len() as u64))
            }
            ReplyBody::Streamed(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::future::poll_fn;

    use super::*;
    use crate::delivery::testing::{Outcomes, recording};

    async fn next(body: &mut ReplyBody) -> Option<Bytes> {
        poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await.map(|frame| frame.unwrap().into_data().unwrap())
    }

    #[tokio::test]
    async fn a_whole_body_yields_its_bytes_once_and_acks_when_they_are_taken() {
        let outcomes = Outcomes::default();
        let mut body = ReplyBody::whole_guarded("{}", recording(&outcomes));
        assert_eq!(body.size_hint().exact(), Some(2));
        assert!(outcomes.lock().unwrap().is_empty());
        assert_eq!(next(&mut body).await.as_deref(), Some(&b"{}"[..]));
        assert_eq!(*outcomes.lock().unwrap(), [Ok(())]);
        assert!(body.is_end_stream());
        assert_eq!(next(&mut body).await, None);
    }

    #[tokio::test]
    async fn a_streamed_body_acks_with_the_piece_that_carries_the_guard_and_ends_with_its_sender() {
        let outcomes = Outcomes::default();
        let (mut body, sender) = ReplyBody::streamed();
        sender.send(Piece { bytes: Bytes::from("a"), guard: None }).unwrap();
        sender.send(Piece { bytes: Bytes::from("b"), guard: Some(recording(&outcomes)) }).unwrap();
        drop(sender);
        assert_eq!(next(&mut body).await.as_deref(), Some(&b"a"[..]));
        assert!(outcomes.lock().unwrap().is_empty());
        assert_eq!(next(&mut body).await.as_deref(), Some(&b"b"[..]));
        assert_eq!(*outcomes.lock().unwrap(), [Ok(())]);
        assert_eq!(next(&mut body).await, None);
    }

    #[test]
    fn a_body_dropped_before_its_bytes_were_taken_acks_an_error() {
        let outcomes = Outcomes::default();
        drop(ReplyBody::whole_guarded("{}", recording(&outcomes)));
        assert!(outcomes.lock().unwrap()[0].is_err());
    }
}
