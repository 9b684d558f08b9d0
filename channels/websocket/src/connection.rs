//! One client connection: the upgrade, the `ready` frame, reading the client's frames, and
//! submitting its messages to the kernel one at a time, in order.

use oxibot_plugin::serving::fresh_id;
use oxibot_plugin::serving::slots::BusyMarker;
use oxibot_plugin::warn;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use oxibot_plugin::ChannelHandle;
use serde_json::json;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};

use crate::admission::{Admission, Refusal, UpgradeRequest, admit};
use crate::config::Config;
use crate::frames::{ClientFrame, FrameError, ServerFrame, parse_client_frame};
use crate::rooms::{FrameQueue, Rooms};

/// Largest message a client may send (a chat message, not a file transfer).
const MAX_MESSAGE_BYTES: usize = 1 << 20;
/// How long an unauthorised client gets to answer the close before the socket is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// What every connection needs: the kernel, the chats, the settings.
pub struct Server {
    /// The connection to the kernel.
    pub channel: ChannelHandle,
    /// The connections of every chat.
    pub rooms: Rooms,
    /// The channel's settings.
    pub config: Config,
}

type Socket = WebSocketStream<TcpStream>;

/// A message read from the client, waiting to be submitted.
struct Pending {
    text: String,
    /// The client's id for it, if it gave one.
    client_message_id: Option<String>,
}

/// Who is on the other end of a connection.
#[derive(Clone)]
struct Peer {
    chat_id: String,
    client_id: String,
}

/// Serves one TCP connection from upgrade to close. Until a client with the token is
/// upgraded, the connection's slot may go to a newcomer (see `serving::slots`).
pub async fn serve_connection(stream: TcpStream, server: Arc<Server>, slot: BusyMarker) {
    let Some((socket, admission)) = upgrade(stream, &server.config).await else { return };
    let (sink, frames) = socket.split();
    if !admission.authorised {
        refuse_unauthorised(sink, frames).await;
        return;
    }
    let _in_chat = slot.busy();
    let peer = Peer {
        chat_id: admission.chat_id.unwrap_or_else(|| fresh_id("chat")),
        client_id: admission.client_id.unwrap_or_else(|| fresh_id("client")),
    };
    let (queue, outgoing) = mpsc::unbounded_channel();
    tokio::spawn(write_frames(sink, outgoing));
    send(&queue, &ServerFrame::Ready { chat_id: &peer.chat_id });
    let membership = server.rooms.join(&peer.chat_id, queue.clone());
    let (pending_tx, pending_rx) = mpsc::unbounded_channel();
    tokio::spawn(submit_in_order(server.channel.clone(), peer, pending_rx, queue.clone()));
    read_frames(frames, &queue, &pending_tx).await;
    // Messages already read are still submitted; the writer ends once every queue is dropped.
    drop(membership);
}

/// Performs the WebSocket handshake, refusing requests for other paths or with bad ids.
// The callback's error type is tungstenite's HTTP response; its size is not ours to choose.
#[allow(clippy::result_large_err)]
async fn upgrade(stream: TcpStream, config: &Config) -> Option<(Socket, Admission)> {
    let mut admission = None;
    let callback = |request: &Request, response: Response| {
        let text = |name: header::HeaderName| request.headers().get(name).and_then(|value| value.to_str().ok());
        let upgrade = UpgradeRequest {
            path: request.uri().path(),
            query: request.uri().query(),
            host: text(header::HOST),
            origin: text(header::ORIGIN),
            authorization: text(header::AUTHORIZATION),
        };
        match admit(&upgrade, config) {
            Ok(admitted) => {
                admission = Some(admitted);
                Ok(response)
            }
            Err(refusal) => Err(refusal_response(&refusal)),
        }
    };
    let settings =
        WebSocketConfig::default().max_message_size(Some(MAX_MESSAGE_BYTES)).max_frame_size(Some(MAX_MESSAGE_BYTES));
    match tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(settings)).await {
        Ok(socket) => admission.map(|admitted| (socket, admitted)),
        Err(error) => {
            warn!("websocket: a connection failed its handshake: {error}");
            None
        }
    }
}

/// The HTTP answer to a refused upgrade request.
fn refusal_response(refusal: &Refusal) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(json!({"error": refusal.to_string()}).to_string()));
    *response.status_mut() = match refusal {
        Refusal::WrongPath => StatusCode::NOT_FOUND,
        Refusal::BadParameter(_) => StatusCode::BAD_REQUEST,
        Refusal::ForeignHost | Refusal::ForeignOrigin => StatusCode::FORBIDDEN,
    };
    response
}

/// Tells the client it lacks the token and closes with 1008 (policy violation).
async fn refuse_unauthorised(mut sink: SplitSink<Socket, Message>, mut frames: SplitStream<Socket>) {
    let error = ServerFrame::Error { error: "not authorised: present the token as ?token= or Authorization: Bearer" };
    let close = CloseFrame { code: CloseCode::Policy, reason: "not authorised".into() };
    let _ = sink.send(Message::text(error.to_json())).await;
    let _ = sink.send(Message::Close(Some(close))).await;
    // Wait briefly for the client's close so the socket ends cleanly.
    let _ = tokio::time::timeout(CLOSE_GRACE, async { while let Some(Ok(_)) = frames.next().await {} }).await;
}

/// Reads the client's frames until it closes or the connection fails.
async fn read_frames(mut frames: SplitStream<Socket>, queue: &FrameQueue, pending: &mpsc::UnboundedSender<Pending>) {
    while let Some(frame) = frames.next().await {
        match frame {
            Ok(Message::Text(text)) => match parse_client_frame(&text) {
                Ok(ClientFrame::Message { text, id }) => {
                    let _ = pending.send(Pending { text, client_message_id: id });
                }
                Ok(ClientFrame::Ping) => send(queue, &ServerFrame::Pong),
                Err(error) => send(queue, &ServerFrame::Error { error: &error.to_string() }),
            },
            Ok(Message::Binary(_)) => send(queue, &ServerFrame::Error { error: &FrameError::Binary.to_string() }),
            Ok(Message::Close(_)) => break,
            // tungstenite answers WebSocket pings by itself.
            Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => {}
            Err(error) => {
                warn!("websocket: a connection failed: {error}");
                break;
            }
        }
    }
}

/// Submits the connection's messages one at a time, each after the previous one was
/// accepted, answering each with `accepted` or `error`.
async fn submit_in_order(
    channel: ChannelHandle,
    peer: Peer,
    mut pending: mpsc::UnboundedReceiver<Pending>,
    queue: FrameQueue,
) {
    while let Some(message) = pending.recv().await {
        let inbound_id = match &message.client_message_id {
            // Stable for a client that sends a message again, e.g. after reconnecting.
            Some(id) => format!("{}/{}/{id}", peer.chat_id, peer.client_id),
            None => fresh_id("ws"),
        };
        let mut inbound =
            channel.inbound(inbound_id.clone(), peer.client_id.clone(), peer.chat_id.clone(), message.text);
        inbound.metadata = json!({"is_group": false, "client_id": peer.client_id, "message_id": message.client_message_id, "authenticated": true});
        match channel.submit(inbound).await {
            Ok(()) => {
                send(&queue, &ServerFrame::Accepted { id: message.client_message_id.as_deref().unwrap_or(&inbound_id) })
            }
            Err(error) => {
                send(&queue, &ServerFrame::Error { error: &format!("the message was not accepted: {error}") });
                return;
            }
        }
    }
}

/// Writes queued frames to the client until every queue handle is gone or the client left.
async fn write_frames(mut sink: SplitSink<Socket, Message>, mut outgoing: mpsc::UnboundedReceiver<Message>) {
    while let Some(frame) = outgoing.recv().await {
        if sink.send(frame).await.is_err() {
            return;
        }
    }
    let _ = sink.close().await;
}

/// Queues a frame for this connection; a connection that is gone is ignored.
fn send(queue: &FrameQueue, frame: &ServerFrame<'_>) {
    let _ = queue.send(Message::text(frame.to_json()));
}
