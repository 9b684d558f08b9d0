//! `oxibot mcp serve`: the assistant as an MCP server, over stdio (the default: an MCP client
//! starts `oxibot mcp serve` as its server process) or streamable HTTP (`--http ADDR`, always
//! behind a bearer key). The kernel is set up as for `oxibot agent -m`: the plugin host, the
//! session manager and the built-in tools, so a `chat` call runs a real turn.
//!
//! The HTTP key: `OXIBOT_MCP_KEY` when set, else the `mcp` entry of
//! `<data dir>/local-secrets.json`, made on first use (shown once on stderr), as the gateway
//! does for the `api` channel.

mod assistant;
mod http;
mod protocol;
mod stdio;

use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;

use anyhow::Context as _;
use oxibot_kernel::agent::SessionManager;
use oxibot_kernel::automation::{Reach, builtin_tools};
use oxibot_kernel::gateway::local_secrets::{LocalSecrets, Surface};
use oxibot_kernel::paths;
use oxibot_kernel::provider::Provider;
use oxibot_kernel::services::Services;
use tokio::signal::unix::SignalKind;

use super::CommonArgs;
use super::agent::with_retry_override;
use super::kernel::Setup;
use assistant::Assistant;

/// The environment variable that sets the HTTP key.
pub const KEY_VAR: &str = "OXIBOT_MCP_KEY";

/// Options of `oxibot mcp serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Serve streamable HTTP on this address instead of stdio.
    pub http: Option<String>,
    /// The session `chat` talks in when a call names none.
    pub session: String,
}

/// Runs the server until stdin closes (stdio) or SIGTERM/Ctrl-C (HTTP).
pub fn serve(common: &CommonArgs, options: ServeOptions) -> anyhow::Result<ExitCode> {
    let setup = Setup::load(common)?;
    let provider = with_retry_override(
        Provider::from_config(&setup.settings.config.llm()).context("cannot use the configured model")?,
    )?;
    let key = match &options.http {
        Some(_) => Some(http_key()?),
        None => None,
    };
    actix::System::new().block_on(async move {
        let host = setup.start_host()?;
        host.wait_settled(setup.startup_wait()).await;
        let services =
            Services::new(setup.settings.clone(), setup.workspace.clone(), &paths::data_dir(), provider, host, true)
                .with_nanobot_sessions(setup.nanobot_sessions())
                .with_background_consolidation(true);
        let services = Arc::new(services);
        let manager = Rc::new(SessionManager::new(services.clone()));
        let reach = Reach { dispatcher: None, channels: false, extra: manager.memory().tools() };
        services.install_builtins(builtin_tools(&services, reach));
        let assistant = Rc::new(Assistant::new(manager, options.session.clone()));
        let served = match (&options.http, key) {
            (Some(address), Some((key, hint))) => serve_http(address, assistant, key, hint).await,
            _ => stdio::serve(assistant).await,
        };
        services.host().shutdown().await;
        served.map(|()| ExitCode::SUCCESS)
    })
}

/// Serves HTTP on `address` until SIGTERM or Ctrl-C.
async fn serve_http(address: &str, assistant: Rc<Assistant>, key: String, hint: http::KeyHint) -> anyhow::Result<()> {
    let listener =
        tokio::net::TcpListener::bind(address).await.with_context(|| format!("cannot listen on {address}"))?;
    let bound = listener.local_addr().context("cannot read the bound address")?;
    eprintln!("oxibot MCP server listening on http://{bound}{}", http::ENDPOINT);
    let mut terminate = tokio::signal::unix::signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    tokio::select! {
        served = http::serve(listener, assistant, key, hint) => served,
        _ = terminate.recv() => Ok(()),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// The key HTTP clients must present, and where it is kept (for the 401's message).
fn http_key() -> anyhow::Result<(String, http::KeyHint)> {
    if let Some(key) = std::env::var(KEY_VAR).ok().filter(|key| !key.trim().is_empty()) {
        return Ok((key.trim().to_owned(), http::KeyHint(format!("the key is in {KEY_VAR}"))));
    }
    let secrets = LocalSecrets::new(&paths::data_dir());
    let (key, created) = secrets.get_or_create(Surface::Mcp).context("cannot read or make the MCP key")?;
    let place = format!("the key is \"{}\" in {}", Surface::Mcp.key(), secrets.path().display());
    if created {
        eprintln!("Made a key for MCP clients (kept in {}): {key}", secrets.path().display());
    } else {
        eprintln!("MCP clients authenticate with Authorization: Bearer <key>; {place}");
    }
    Ok((key, http::KeyHint(place)))
}
