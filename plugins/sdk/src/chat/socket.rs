//! A chat service's WebSocket, kept up: [`open`] connects within a time limit, [`drive`] runs
//! one open connection (frames in, queued frames out, a ping at a steady pace, silence counted
//! as a drop), and [`reconnect`] connects again after each end with growing waits.
//! Behind the `websocket` feature, so tool plugins do not build a WebSocket client.

use std::future::Future;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::Backoff;

/// An open WebSocket to a chat service.
pub type WebSocket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long opening a socket may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a closing handshake may take before the socket is just dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The connection or the WebSocket handshake failed.
    #[error("cannot connect the websocket: {0}")]
    WebSocket(#[from] tokio_tungstenite::tungstenite::Error),
    /// No answer in time.
    #[error("cannot connect the websocket: no answer within {0:?}")]
    Timeout(Duration),
}

/// Opens a WebSocket at `url`, giving up after `timeout`.
pub async fn open(url: &str, timeout: Duration) -> Result<WebSocket, OpenError> {
    let connecting = tokio_tungstenite::connect_async(url);
    let (socket, _) = tokio::time::timeout(timeout, connecting).await.map_err(|_| OpenError::Timeout(timeout))??;
    Ok(socket)
}

/// How one open socket is kept alive.
#[derive(Debug, Clone, Copy)]
pub struct Keepalive {
    /// How often a ping goes out.
    pub every: Duration,
    /// A socket silent for this long (not even a pong) is considered dead.
    pub silence_limit: Duration,
}

impl Keepalive {
    /// A ping every 30 s; 90 s of silence is a drop.
    pub const DEFAULT: Keepalive = Keepalive { every: Duration::from_secs(30), silence_limit: Duration::from_secs(90) };
}

/// What [`drive`] needs besides the socket.
pub struct Drive<'a> {
    /// The service's name, for the reason of a close (`closed by slack (…)`).
    pub service: &'a str,
    /// The ping pace and the silence allowed.
    pub keepalive: Keepalive,
    /// Text frames to send (answers, acknowledgements, replies), if the channel sends any.
    pub outgoing: Option<&'a mut UnboundedReceiver<String>>,
    /// The ping to send; `None`: a WebSocket ping.
    pub ping: Option<&'a (dyn Fn() -> String + Send + Sync)>,
}

/// Runs an open socket until it drops or `on_text` ends it: each text frame goes to
/// `on_text` (`Some` ends the connection with that value), queued frames are sent, a ping goes
/// out at the keepalive's pace. Frames still queued at the end go out before the socket is
/// closed. `Err` is why the socket dropped.
pub async fn drive<E>(
    mut socket: WebSocket,
    options: Drive<'_>,
    mut on_text: impl FnMut(&str) -> Option<E>,
) -> Result<E, String> {
    let Drive { service, keepalive, mut outgoing, ping } = options;
    let mut pings = tokio::time::interval_at(Instant::now() + keepalive.every, keepalive.every);
    let mut last_heard = Instant::now();
    let ending = loop {
        tokio::select! {
            incoming = socket.next() => {
                last_heard = Instant::now();
                let text = match incoming {
                    Some(Ok(WsMessage::Text(text))) => text,
                    Some(Ok(WsMessage::Close(frame))) => break Err(format!("closed by {service} ({frame:?})")),
                    Some(Ok(_)) => continue,
                    Some(Err(error)) => break Err(error.to_string()),
                    None => break Err("closed".to_owned()),
                };
                if let Some(ending) = on_text(text.as_str()) {
                    break Ok(ending);
                }
            }
            Some(frame) = next_queued(&mut outgoing) => {
                if let Err(error) = socket.send(WsMessage::Text(frame.into())).await {
                    break Err(error.to_string());
                }
            }
            _ = pings.tick() => {
                if last_heard.elapsed() > keepalive.silence_limit {
                    break Err(format!("nothing heard for {:?}", keepalive.silence_limit));
                }
                let ping = ping.map_or_else(|| WsMessage::Ping(Default::default()), |ping| WsMessage::Text(ping().into()));
                if let Err(error) = socket.send(ping).await {
                    break Err(error.to_string());
                }
            }
        }
    };
    // Answers already queued (pongs, acknowledgements) still go out before the close.
    if let Some(queue) = outgoing {
        while let Ok(frame) = queue.try_recv() {
            if socket.send(WsMessage::Text(frame.into())).await.is_err() {
                break;
            }
        }
    }
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, SinkExt::close(&mut socket)).await;
    ending
}

/// The next frame queued for the socket; never, when the channel queues none.
async fn next_queued(outgoing: &mut Option<&mut UnboundedReceiver<String>>) -> Option<String> {
    match outgoing {
        Some(queue) => queue.recv().await,
        None => std::future::pending().await,
    }
}

/// What one connection came to, as [`reconnect`] sees it.
#[derive(Debug)]
pub enum Next<T> {
    /// The service asked for a new connection: made at once when this one lasted, else after
    /// a wait. The reason is logged.
    Refresh(String),
    /// The connection failed or dropped: a new one after a wait. The reason is logged.
    Retry(String),
    /// No new connection: [`reconnect`] returns this.
    Stop(T),
}

/// Runs `connection` again and again, waiting `backoff`'s growing waits between attempts,
/// until it says [`Next::Stop`]. A connection that lasted `steady` worked: the waits start
/// over.
pub async fn reconnect<T, F>(mut backoff: Backoff, steady: Duration, mut connection: impl FnMut() -> F) -> T
where
    F: Future<Output = Next<T>>,
{
    loop {
        let started = Instant::now();
        let next = connection().await;
        let lasted = started.elapsed() >= steady;
        if lasted {
            backoff.reset();
        }
        match next {
            Next::Stop(value) => return value,
            Next::Refresh(reason) => {
                crate::info!("{reason}");
                if lasted {
                    continue;
                }
            }
            Next::Retry(reason) => crate::warn!("{reason}"),
        }
        let wait = backoff.next_wait();
        crate::info!("connecting again in {wait:?}");
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_refresh_after_a_steady_connection_connects_again_at_once_and_a_drop_waits() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        let steady = Duration::from_secs(10);
        let attempts = std::cell::RefCell::new(Vec::new());
        let start = Instant::now();
        let stopped = reconnect(backoff, steady, || async {
            let count = {
                let mut attempts = attempts.borrow_mut();
                attempts.push(start.elapsed().as_secs());
                attempts.len()
            };
            match count {
                1 => {
                    tokio::time::sleep(steady).await;
                    Next::Refresh("asked for a new connection".to_owned())
                }
                2 | 3 => Next::Retry("dropped".to_owned()),
                _ => Next::Stop("refused"),
            }
        })
        .await;
        assert_eq!(stopped, "refused");
        assert_eq!(attempts.into_inner(), [0, 10, 11, 13]);
    }

    #[tokio::test]
    async fn a_socket_that_does_not_answer_in_time_fails_with_the_time_waited() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/", listener.local_addr().unwrap());
        let error = open(&url, Duration::from_millis(50)).await.unwrap_err();
        assert!(matches!(error, OpenError::Timeout(_)), "{error}");
        drop(listener);
    }
}
