//! `oxibot-channel-api`: a channel plugin serving an OpenAI-compatible HTTP API, so any OpenAI
//! client can talk to the agent.
//!
//! Config (`channels.api`): `host` (default `127.0.0.1`), `port` (default `18791`), `apiKey`
//! (required whatever the host: `oxibot gateway` passes the one it keeps in
//! `<data dir>/local-secrets.json` when the config sets none), `model` (the name reported,
//! default `oxibot`), `timeoutSecs` (how long a reply may take, default 300),
//! `headerTimeoutSecs` (how long a client may take to send a request's headers, default 5; the
//! connection is closed after), `bodyTimeoutSecs` (its body, default 30; 408 after) and
//! `maxConnections` (default 256). Connections share those slots fairly: when all are taken,
//! the oldest one not being served (still sending its headers, or idle between requests)
//! is closed for a newcomer, so one local process's slow connections cannot starve others.
//!
//! Every request but `GET /health` passes [`admission`]: a `Host` that is the configured
//! host, a loopback name or an address literal (403 otherwise: DNS rebinding), no `Origin`
//! but the server's own (403: another site's page), `Authorization: Bearer <apiKey>` (401),
//! and a `POST` body sent as `application/json` (415: a text or form post, which a web page
//! can send without a preflight).
//!
//! Endpoints: `GET /health`, `GET /v1/models`, `POST /v1/chat/completions` (whole or
//! `stream: true`, with a last chunk carrying the usage when `stream_options.include_usage`
//! is set) and `POST /v1/responses` (the Responses API, whole or streamed as its events). A
//! request's session is its `session_id`, else the `X-Session-Id` header, else (Responses)
//! its `conversation`, else its `user`, else `default`; it becomes the inbound message's
//! `chat_id`. Only the last user message is sent: the kernel keeps each session's history.
//! `usage` reports the tokens the turn's model calls used, taken from the `usage` the kernel
//! puts in the reply's metadata (zeros for a command's reply). Inbound messages carry
//! `sender_id` `api` and metadata `is_group` (false), `request_id` (the inbound id),
//! `stream` and `authenticated` (true: the key was checked, so the gateway asks for no
//! pairing code). A reply goes to the request whose `request_id` its metadata names, else to the
//! session's oldest waiting request. An outbound message marked `_progress` in its metadata
//! (a progress note, not a reply) is acked and not shown.

mod admission;
mod app;
mod body;
mod completions;
mod config;
mod delivery;
mod exchange;
mod openai;
mod request;
mod responses;
mod responses_api;
mod server;
mod stream;
mod usage;
mod waiters;

use std::process::ExitCode;
use std::sync::Arc;

use oxibot_plugin::info;
use oxibot_plugin::serving::{self, StartError};
use oxibot_plugin::{ChannelEvent, ChannelHandle, ChannelPlugin, Outbound};
use serde_json::Value;

use crate::app::App;
use crate::config::{Config, ConfigError};
use crate::delivery::DeliveryGuard;
use crate::server::serve_connection;
use crate::waiters::Waiters;

/// Serves the api channel to the kernel that started this process; the entry `oxibot __channel api` runs.
pub fn run() -> ExitCode {
    ChannelPlugin::new("api").streaming().run(serve)
}

async fn serve(channel: ChannelHandle) -> Result<(), StartError<ConfigError>> {
    let (config, listener) = serving::start::<Config>(&channel).await?;
    info!("api: serving the OpenAI-compatible API on http://{}:{}/v1", config.host, config.port);
    let waiters = Arc::new(Waiters::default());
    let app = Arc::new(App { channel: channel.clone(), waiters: waiters.clone(), config, started: openai::unix_now() });
    let limit = app.config.max_connections;
    tokio::spawn(serving::accept_forever("api", listener, limit, move |stream, slot| {
        serve_connection(stream, app.clone(), slot.marker())
    }));
    while let Some(event) = channel.next_event().await {
        match event {
            ChannelEvent::Delta(delta) => {
                waiters.deliver_delta(delta);
            }
            ChannelEvent::Outbound(outbound) => deliver_outbound(&channel, &waiters, outbound),
            // Never sent: the channel does not announce approvals (requests come as outbounds).
            ChannelEvent::Approval(_) => {}
        }
    }
    Ok(())
}

/// Hands a reply to its waiting request; a progress note is acked and dropped.
fn deliver_outbound(channel: &ChannelHandle, waiters: &Waiters, outbound: Outbound) {
    let guard = DeliveryGuard::for_outbound(channel.clone(), outbound.id);
    if outbound.metadata.get("_progress").and_then(Value::as_bool) == Some(true) {
        guard.delivered();
        return;
    }
    waiters.deliver_final(outbound, guard);
}
