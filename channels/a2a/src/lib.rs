//! `oxibot-channel-a2a`: a channel plugin serving the A2A protocol (v1.0, JSON-RPC binding), so
//! other agents can talk to this one.
//!
//! Config (`channels.a2a`): `enabled`, `keys` (required: the bearer keys callers present, at
//! least one, on loopback too), `host` (default `127.0.0.1`), `port` (default `18793`), `url`
//! (the base URL the card advertises, default `http://<host>:<port>`), `name` and
//! `description` (the card's), `timeoutSecs` (how long a message may wait for its reply,
//! default 300; its task fails after), `headerTimeoutSecs`, `bodyTimeoutSecs`,
//! `maxConnections`.
//!
//! Routes: `GET /.well-known/agent-card.json` (the agent card; no key, it names none),
//! `GET /health`, and JSON-RPC 2.0 posted to `/a2a` (or `/`) with `Authorization: Bearer
//! <key>` (401 otherwise), a `Host` that is this server's (403: DNS rebinding), no other
//! site's `Origin` (403) and a JSON body (415). Methods: `SendMessage`,
//! `SendStreamingMessage` (server-sent events), `GetTask`, `CancelTask`, and the older names
//! `message/send`, `message/stream`, `tasks/get`, `tasks/cancel` for the same.
//!
//! One A2A `contextId` is one oxibot session (`a2a:<contextId>`); a message without one starts
//! a new session and the task names it. Each message is a task whose reply becomes its
//! artifact and final status message. Canceling a task sends `/stop` to its session. Tasks
//! live in memory (the last thousand); the conversation itself is in the session, as for any
//! channel. Inbound messages carry `sender_id` `a2a` and metadata `request_id`, `stream` and
//! `authenticated` (true: the key was checked, so the gateway asks for no pairing code).

mod admission;
mod app;
mod body;
mod calls;
mod config;
mod rpc;
mod server;
mod tasks;
mod wire;

use std::process::ExitCode;
use std::sync::Arc;

use oxibot_plugin::info;
use oxibot_plugin::serving::{self, StartError};
use oxibot_plugin::{ChannelEvent, ChannelHandle, ChannelPlugin, Outbound};
use serde_json::Value;

use crate::app::App;
use crate::config::{Config, ConfigError};
use crate::server::serve_connection;
use crate::tasks::Tasks;

/// Serves the a2a channel to the kernel that started this process; the entry `oxibot __channel a2a` runs.
pub fn run() -> ExitCode {
    ChannelPlugin::new("a2a").streaming().run(serve)
}

async fn serve(channel: ChannelHandle) -> Result<(), StartError<ConfigError>> {
    let (config, listener) = serving::start::<Config>(&channel).await?;
    info!("a2a: serving A2A at {}{}", config.base_url(), wire::RPC_PATH);
    let app = Arc::new(App { channel: channel.clone(), tasks: Tasks::default(), config });
    let limit = app.config.max_connections;
    let serving = Arc::clone(&app);
    tokio::spawn(serving::accept_forever("a2a", listener, limit, move |stream, slot| {
        serve_connection(stream, serving.clone(), slot.marker())
    }));
    while let Some(event) = channel.next_event().await {
        match event {
            ChannelEvent::Delta(delta) => {
                app.tasks.delta(&delta.chat_id, delta.stream_id, &delta.text);
            }
            ChannelEvent::Outbound(outbound) => deliver(&app, outbound),
            // Not announced: approvals reach an A2A caller as text with their code.
            ChannelEvent::Approval(_) => {}
        }
    }
    Ok(())
}

/// Hands a reply to its task (the task keeps it for `GetTask`, so it is delivered); a
/// progress note is acked and dropped; a reply no task or cancel sent is refused for good.
fn deliver(app: &App, outbound: Outbound) {
    if outbound.metadata.get("_progress").and_then(Value::as_bool) == Some(true) {
        let _ = app.channel.ack(outbound.id, Ok(()));
        return;
    }
    let request_id = outbound.metadata.get("request_id").and_then(Value::as_str).unwrap_or_default();
    if app.tasks.reply(request_id, &outbound.content) {
        let _ = app.channel.ack(outbound.id, Ok(()));
    } else {
        let _ = app.channel.refuse(outbound.id, format!("no A2A task is waiting for a reply in {}", outbound.chat_id));
    }
}
