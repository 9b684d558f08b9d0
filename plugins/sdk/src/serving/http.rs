//! HTTP/1.1 for channels that answer local clients over HTTP (feature `http`): one connection
//! served with keep-alive and a deadline for each request's headers, its slot marked busy from
//! a request's arrival until the last byte of its response body is sent (a streamed reply keeps
//! its connection from being handed to a newcomer), and failures other than a client hanging
//! up logged under the channel's name.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;

use crate::serving::slots::{Busy, BusyMarker};

/// Serves the requests of one connection with `route` until the client closes it. Between
/// requests the connection is idle and may give its slot to a newcomer (see [`super::slots`]).
pub async fn serve_connection<B, R, F>(
    channel: &'static str,
    stream: TcpStream,
    header_timeout: Duration,
    slot: BusyMarker,
    route: R,
) where
    B: Body<Data = Bytes, Error = Infallible> + Unpin + Send + 'static,
    R: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
{
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |request| {
        let (route, busy) = (route.clone(), slot.busy());
        // The mark lives in the body, so a streamed reply keeps the slot until its end.
        async move { Ok::<_, Infallible>(ServedBody::wrap(route(request).await, busy)) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    if let Err(error) = connection.await
        && !error.is_incomplete_message()
    {
        crate::warn!("{channel}: a connection failed: {error}");
    }
}

/// A response body with the mark that keeps its connection's slot until the body is sent (or
/// dropped).
pub struct ServedBody<B> {
    body: B,
    /// Dropped with the body.
    _busy: Busy,
}

impl<B> ServedBody<B> {
    /// `response` with its body marked as being served.
    pub fn wrap(response: Response<B>, busy: Busy) -> Response<ServedBody<B>> {
        response.map(|body| ServedBody { body, _busy: busy })
    }
}

impl<B: Body<Data = Bytes, Error = Infallible> + Unpin> Body for ServedBody<B> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
