//! `oxibot-channel-websocket`: a channel plugin serving a WebSocket endpoint, so a browser page
//! or a script can chat with the agent.
//!
//! Config (`channels.websocket`): `host` (default `127.0.0.1`), `port` (default `18792`),
//! `path` (default `/ws`) and `token`, which is required whatever the host: `oxibot gateway`
//! passes the one it keeps in `<data dir>/local-secrets.json` when the config sets none.
//! Clients present it as `?token=` or `Authorization: Bearer`; a client without it gets an
//! `error` frame and a close with code 1008. An upgrade whose `Host` is not the configured
//! host, a loopback name or an address literal (DNS rebinding), or whose `Origin` is not the
//! server's own (a page of another site), is refused with 403 before the token is read.
//! Connections share [`serving::DEFAULT_MAX_CONNECTIONS`] slots fairly: one not yet upgraded
//! gives its slot up to a newcomer when all are taken.
//!
//! A client joins a chat with `?chat_id=` (default: a fresh chat per connection) and may name
//! itself with `?client_id=` (default: a fresh id); both are announced in the first frame,
//! `{"type":"ready","chat_id":…}`. Every client of a chat receives its replies, and while one
//! is written, a `tool_hint` frame for each tool it calls. The frames are
//! listed in [`frames`]. Inbound messages carry `sender_id` = the client id and metadata
//! `is_group` (false), `client_id`, `message_id` (the client's id for the message, or null) and
//! `authenticated` (true: the token was checked).
//! An outbound message for a chat with no connected client is acked with an error.

mod admission;
mod config;
mod connection;
mod frames;
mod rooms;

use std::process::ExitCode;
use std::sync::Arc;

use oxibot_plugin::channel::TOOL_HINT_KEY;
use oxibot_plugin::chat::approval::APPROVAL_KEY;
use oxibot_plugin::info;
use oxibot_plugin::serving::{self, StartError};
use oxibot_plugin::{ChannelEvent, ChannelHandle, ChannelPlugin};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

use crate::config::{Config, ConfigError};
use crate::connection::{Server, serve_connection};
use crate::frames::ServerFrame;
use crate::rooms::Rooms;

/// Serves the websocket channel to the kernel that started this process; the entry `oxibot __channel websocket` runs.
pub fn run() -> ExitCode {
    ChannelPlugin::new("websocket").streaming().tool_hints().run(serve)
}

async fn serve(channel: ChannelHandle) -> Result<(), StartError<ConfigError>> {
    let (config, listener) = serving::start::<Config>(&channel).await?;
    info!("websocket: listening on ws://{}:{}{}", config.host, config.port, config.path);
    let server = Arc::new(Server { channel: channel.clone(), rooms: Rooms::default(), config });
    let shared = server.clone();
    tokio::spawn(serving::accept_forever(
        "websocket",
        listener,
        serving::DEFAULT_MAX_CONNECTIONS,
        move |stream, slot| serve_connection(stream, shared.clone(), slot.marker()),
    ));
    while let Some(event) = channel.next_event().await {
        deliver(&channel, &server.rooms, event);
    }
    Ok(())
}

/// Sends one kernel event to the clients of its chat; acks an outbound message.
fn deliver(channel: &ChannelHandle, rooms: &Rooms, event: ChannelEvent) {
    match event {
        ChannelEvent::Outbound(outbound) => {
            let approval = outbound.metadata.get(APPROVAL_KEY);
            let field = |name: &str| approval.and_then(|a| a.get(name)).and_then(Value::as_str);
            let frame = if outbound.metadata.get(TOOL_HINT_KEY).and_then(Value::as_bool) == Some(true) {
                ServerFrame::ToolHint { text: &outbound.content, stream_id: outbound.stream_id }
            } else if let (Some(code), Some(tool), Some(shown)) = (field("code"), field("tool"), field("shown")) {
                ServerFrame::Approval { code, tool, shown, text: &outbound.content }
            } else {
                ServerFrame::Message { text: &outbound.content, stream_id: outbound.stream_id }
            };
            let reached = rooms.broadcast(&outbound.chat_id, &Message::text(frame.to_json()));
            let outcome =
                if reached > 0 { Ok(()) } else { Err(format!("no client is connected to chat {}", outbound.chat_id)) };
            let _ = channel.ack(outbound.id, outcome);
        }
        ChannelEvent::Delta(delta) => {
            let frame = ServerFrame::Delta { text: &delta.text, stream_id: delta.stream_id };
            rooms.broadcast(&delta.chat_id, &Message::text(frame.to_json()));
        }
        // Never sent: the channel does not announce approvals (requests come as outbounds).
        ChannelEvent::Approval(_) => {}
    }
}
