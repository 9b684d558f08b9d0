//! Response bodies: a whole JSON document, or server-sent events a task writes while the
//! task it streams runs.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::body::{Body, Bytes, Frame, SizeHint};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};
use serde_json::Value;
use tokio::sync::mpsc;

/// A response body.
#[derive(Debug)]
pub enum ReplyBody {
    /// All bytes at once.
    Whole(Option<Bytes>),
    /// Events as a task writes them, until it drops its sender.
    Events(mpsc::UnboundedReceiver<Bytes>),
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let bytes = match self.get_mut() {
            ReplyBody::Whole(bytes) => bytes.take(),
            ReplyBody::Events(events) => match events.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(bytes) => bytes,
            },
        };
        Poll::Ready(bytes.map(|bytes| Ok(Frame::data(bytes))))
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ReplyBody::Whole(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ReplyBody::Whole(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            ReplyBody::Events(_) => SizeHint::default(),
        }
    }
}

/// A JSON document as the response.
pub fn json_response(status: StatusCode, document: &Value) -> Response<ReplyBody> {
    let mut response = Response::new(ReplyBody::Whole(Some(Bytes::from(document.to_string()))));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A 401 asking for a bearer key, with `document` saying why.
pub fn unauthorised(document: &Value) -> Response<ReplyBody> {
    let mut response = json_response(StatusCode::UNAUTHORIZED, document);
    response.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// An event stream and the sender that feeds it.
pub fn event_stream() -> (Response<ReplyBody>, mpsc::UnboundedSender<Bytes>) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let mut response = Response::new(ReplyBody::Events(receiver));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    (response, sender)
}

/// One server-sent event carrying `data`.
pub fn sse_event(data: &Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}
