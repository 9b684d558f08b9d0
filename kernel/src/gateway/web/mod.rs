//! The gateway's HTTP server on `gateway.host:gateway.port`: `GET /health` for monitors, and
//! the web UI under `/` — the page and its assets ([`assets`], embedded in the binary), the
//! JSON API ([`api`]) and the chat socket `/ws` ([`proxy`], passed through to the `websocket`
//! channel). [`auth::Guard`] decides who may use the UI (a secret on loopback too, signed in
//! with [`login`] codes); [`http`] is the small HTTP/1.1 both
//! speak (one request per connection). Everything runs on the gateway's actix thread; file and
//! git work goes to blocking threads.

pub mod api;
pub mod assets;
pub mod auth;
pub mod http;
pub mod login;
pub mod proxy;

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use tokio::net::{TcpListener, TcpStream};

use super::health::{self, HealthSource};
use super::router::Router;
use crate::cron::actor::CronActor;
use crate::cron::handle::CronHandle;
use crate::services::Services;
use auth::Guard;
use http::{Request, Response, read_request};
use proxy::ChatTarget;

/// How long a client has to send its whole request.
const REQUEST_TIME_LIMIT: Duration = Duration::from_secs(30);

/// What the web UI reads and changes.
pub struct WebUi {
    /// Sessions, workspace, plugin host, usage.
    pub services: Arc<Services>,
    /// The router, for the websocket channel the chat goes through.
    pub router: Rc<Router>,
    /// Who may use the UI.
    pub guard: Guard,
    /// The scheduled jobs.
    pub cron: CronHandle,
    /// The workspace's scheduler, when this gateway runs it (for "run now").
    pub scheduler: Option<Addr<CronActor>>,
    /// In cluster mode, the cluster as `/health` shows it (this node, the NATS connection,
    /// the sessions it owns, the scheduler's leader), for the health page.
    pub cluster: Option<Rc<dyn Fn() -> serde_json::Value>>,
}

impl WebUi {
    /// The `websocket` channel the chat goes through, as the config says now (a config edit
    /// may enable, disable or move it), when it is enabled.
    pub fn chat(&self) -> Option<ChatTarget> {
        self.router.channel_section("websocket").as_ref().map(ChatTarget::from_section)
    }
}

/// Serves `/health` always and the UI when `ui` is given, until the task is dropped.
pub async fn serve(listener: TcpListener, health: HealthSource, ui: Option<WebUi>) {
    let (health, ui) = (Rc::new(health), ui.map(Rc::new));
    loop {
        let Ok((socket, _)) = listener.accept().await else { continue };
        let (health, ui) = (health.clone(), ui.clone());
        actix::spawn(async move {
            if let Err(error) = answer(socket, &health, ui.as_deref()).await {
                tracing::debug!(%error, "web request failed");
            }
        });
    }
}

/// Reads one request and answers it.
async fn answer(mut socket: TcpStream, health: &HealthSource, ui: Option<&WebUi>) -> std::io::Result<()> {
    let request = match tokio::time::timeout(REQUEST_TIME_LIMIT, read_request(&mut socket)).await {
        Ok(Ok(Some(request))) => request,
        Ok(Ok(None)) | Err(_) => return Ok(()),
        Ok(Err(error)) => return Response::error(400, error).write_to(&mut socket).await,
    };
    if request.method == "GET" && (request.path == "/health" || request.path == "/health/") {
        let (status, report) = health::current(health);
        return Response::json(status, &report).write_to(&mut socket).await;
    }
    let Some(ui) = ui else {
        return Response::error(404, "not found; try GET /health").write_to(&mut socket).await;
    };
    if let Err(refusal) = ui.guard.admit(&request) {
        return refusal.write_to(&mut socket).await;
    }
    if request.path == "/ws" {
        return proxy::forward(socket, &request, ui.chat().as_ref()).await;
    }
    route(ui, &request).await.write_to(&mut socket).await
}

/// The page, its assets and the API.
async fn route(ui: &WebUi, request: &Request) -> Response {
    if request.path.starts_with("/api/") {
        return api::handle(ui, request).await;
    }
    if request.method != "GET" && request.method != "HEAD" {
        return Response::error(405, "method not allowed");
    }
    match assets::find(&request.path) {
        Some(asset) => Response::bytes(200, asset.content_type, asset.body.to_vec()),
        None => Response::error(404, "not found"),
    }
}

/// The address to print for people: a wildcard address is reached on this machine's own.
pub fn url(host: &str, port: u16) -> String {
    let host = match host {
        "0.0.0.0" | "" => "127.0.0.1",
        "::" => "[::1]",
        other if other.contains(':') && !other.starts_with('[') => return format!("http://[{other}]:{port}/"),
        other => other,
    };
    format!("http://{host}:{port}/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_url_reaches_a_wildcard_address_through_loopback() {
        assert_eq!(url("127.0.0.1", 18790), "http://127.0.0.1:18790/");
        assert_eq!(url("0.0.0.0", 8080), "http://127.0.0.1:8080/");
        assert_eq!(url("::", 1), "http://[::1]:1/");
        assert_eq!(url("fe80::1", 1), "http://[fe80::1]:1/");
        assert_eq!(url("example.lan", 1), "http://example.lan:1/");
    }
}
