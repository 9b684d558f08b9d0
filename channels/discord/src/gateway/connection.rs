//! One Gateway connection: connect, wait for HELLO, identify or resume, then beat the heart and
//! hand on dispatches until the connection ends.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use oxibot_plugin::chat::jitter;
use oxibot_plugin::{info, warn};
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

use super::Incoming;
use super::heartbeat::{Beat, Heartbeat};
use super::payload::{self, Payload};
use super::state::{Ending, Flow, GatewayState};

/// The WebSocket to the Gateway.
type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long connecting (TCP, TLS, WebSocket upgrade) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the server may take to say HELLO.
const HELLO_TIMEOUT: Duration = Duration::from_secs(20);
/// How long closing our side may take before the socket is simply dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);
/// A close code that is not 1000/1001, so Discord keeps the session resumable.
const CLOSE_TO_RESUME: u16 = 4000;

/// Runs one connection to its end.
pub async fn run(state: &mut GatewayState, incoming: &UnboundedSender<Incoming>) -> Ending {
    let url = state.connect_url().to_owned();
    let mut socket = match timeout(CONNECT_TIMEOUT, connect_async(url.as_str())).await {
        Ok(Ok((socket, _response))) => socket,
        Ok(Err(error)) => {
            warn!("discord: cannot connect to the gateway at {url}: {error}");
            return Ending::Reconnect;
        }
        Err(_) => {
            warn!("discord: connecting to the gateway at {url} timed out");
            return Ending::Reconnect;
        }
    };
    let interval = match await_hello(&mut socket, state).await {
        Ok(interval) => interval,
        Err(ending) => return ending,
    };
    if let Err(error) = socket.send(Frame::text(state.greeting())).await {
        warn!("discord: the gateway connection failed while greeting: {error}");
        return Ending::Reconnect;
    }
    let ending = converse(&mut socket, state, incoming, interval).await;
    close(&mut socket, &ending).await;
    ending
}

/// Reads frames until HELLO and returns its heartbeat interval.
async fn await_hello(socket: &mut Socket, state: &mut GatewayState) -> Result<Duration, Ending> {
    let deadline = Instant::now() + HELLO_TIMEOUT;
    loop {
        let frame = match timeout(deadline.saturating_duration_since(Instant::now()), socket.next()).await {
            Ok(frame) => frame,
            Err(_) => {
                warn!("discord: the gateway sent no HELLO within {HELLO_TIMEOUT:?}");
                return Err(Ending::Reconnect);
            }
        };
        let payload = match frame {
            Some(Ok(Frame::Text(text))) => Payload::parse(text.as_str()),
            other => match on_frame(state, other) {
                Flow::End(ending) => return Err(ending),
                _ => None,
            },
        };
        if let Some(payload) = payload.filter(|p| p.op == payload::HELLO) {
            let millis = payload.d["heartbeat_interval"].as_u64().unwrap_or(41_250).max(1);
            return Ok(Duration::from_millis(millis));
        }
    }
}

/// The heart of the connection: beats on schedule and routes every frame.
async fn converse(
    socket: &mut Socket,
    state: &mut GatewayState,
    incoming: &UnboundedSender<Incoming>,
    interval: Duration,
) -> Ending {
    let mut heart = Heartbeat::start(interval, jitter(), Instant::now());
    loop {
        let flow = tokio::select! {
            () = sleep_until(heart.due()) => match heart.beat(Instant::now()) {
                Beat::Send => Flow::BeatNow,
                Beat::Zombie => {
                    warn!("discord: no heartbeat ack since the last beat; the connection is dead, reconnecting");
                    Flow::End(Ending::Reconnect)
                }
            },
            frame = socket.next() => on_frame(state, frame),
        };
        match flow {
            Flow::Continue => {}
            Flow::Acked => heart.acknowledged(),
            Flow::BeatNow => {
                if let Err(error) = socket.send(Frame::text(payload::heartbeat(state.seq))).await {
                    warn!("discord: cannot send a heartbeat: {error}; reconnecting");
                    return Ending::Reconnect;
                }
            }
            Flow::Deliver(message) => {
                let bot_id = state.bot_id.clone().unwrap_or_default();
                if incoming.send(Incoming { message: *message, bot_id, pressed: None }).is_err() {
                    return Ending::Stopped;
                }
            }
            Flow::Pressed(message, interaction) => {
                let bot_id = state.bot_id.clone().unwrap_or_default();
                if incoming.send(Incoming { message: *message, bot_id, pressed: Some(interaction) }).is_err() {
                    return Ending::Stopped;
                }
            }
            Flow::End(ending) => return ending,
        }
    }
}

/// What one frame (or the end of the stream) means.
fn on_frame(state: &mut GatewayState, frame: Option<Result<Frame, tokio_tungstenite::tungstenite::Error>>) -> Flow {
    match frame {
        Some(Ok(Frame::Text(text))) => match Payload::parse(text.as_str()) {
            Some(payload) => state.on_payload(payload),
            None => Flow::Continue,
        },
        Some(Ok(Frame::Close(Some(close)))) => state.on_close(u16::from(close.code), close.reason.as_str()),
        Some(Ok(Frame::Close(None))) | None => {
            info!("discord: the gateway connection closed; reconnecting");
            Flow::End(Ending::Reconnect)
        }
        Some(Ok(_)) => Flow::Continue,
        Some(Err(error)) => {
            warn!("discord: the gateway connection failed: {error}; reconnecting");
            Flow::End(Ending::Reconnect)
        }
    }
}

/// Closes our side, with a code that keeps the session resumable unless a new one follows.
async fn close(socket: &mut Socket, ending: &Ending) {
    let code = match ending {
        Ending::NewSession | Ending::Stopped => CloseCode::Normal,
        Ending::Reconnect | Ending::Fatal(_) => CloseCode::from(CLOSE_TO_RESUME),
    };
    let frame = CloseFrame { code, reason: "".into() };
    let _ = timeout(CLOSE_TIMEOUT, socket.close(Some(frame))).await;
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    use super::*;

    #[tokio::test]
    async fn a_wss_url_is_dialled_over_tls_with_the_ring_provider_and_system_roots() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut first = [0u8; 1];
            socket.read_exact(&mut first).await.unwrap();
            first[0]
        });
        let dialled = connect_async(format!("wss://localhost:{port}/?v=10&encoding=json")).await;
        assert!(dialled.is_err(), "the fake server speaks no TLS");
        assert_eq!(server.await.unwrap(), 0x16, "the client opened with a TLS handshake record");
    }
}
