//! The HTTP server: one task per connection (HTTP/1.1 with keep-alive), a short deadline for
//! each request's headers, the connection's slot marked busy while a request is served, and
//! routing behind the admission checks ([`crate::admission`]).

use std::convert::Infallible;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use oxibot_plugin::serving::slots::BusyMarker;
use oxibot_plugin::warn;
use serde_json::json;
use tokio::net::TcpStream;

use crate::admission::admit;
use crate::app::App;
use crate::body::{ReplyBody, ServedBody};
use crate::completions::chat_completions;
use crate::openai::model_list;
use crate::responses::{ApiFailure, json_response};
use crate::responses_api::responses;

/// Serves the requests of one connection until the client closes it. Between requests the
/// connection is idle and may give its slot to a newcomer (see `serving::slots`).
pub async fn serve_connection(stream: TcpStream, app: Arc<App>, slot: BusyMarker) {
    let _ = stream.set_nodelay(true);
    let header_timeout = app.config.header_timeout();
    let service = service_fn(move |request| {
        let (app, busy) = (app.clone(), slot.busy());
        // The guard lives in the body, so a streamed reply keeps the slot until its end.
        async move { Ok::<_, Infallible>(ServedBody::wrap(route(&app, request).await, busy)) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    if let Err(error) = connection.await {
        if !error.is_incomplete_message() {
            warn!("api: a connection failed: {error}");
        }
    }
}

/// Answers one request.
async fn route(app: &App, request: Request<Incoming>) -> Response<ReplyBody> {
    match respond(app, request).await {
        Ok(response) => response,
        Err(failure) => failure.response(),
    }
}

async fn respond(app: &App, request: Request<Incoming>) -> Result<Response<ReplyBody>, ApiFailure> {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    // Health stays open so a supervisor can probe without the key.
    if path == "/health" {
        return only(&method, &Method::GET, &path).map(|()| json_response(StatusCode::OK, &json!({"status": "ok"})));
    }
    admit(&app.config, &method, request.headers())?;
    match path.as_str() {
        "/v1/models" => only(&method, &Method::GET, &path)
            .map(|()| json_response(StatusCode::OK, &model_list(&app.config.model, app.started))),
        "/v1/chat/completions" => {
            only(&method, &Method::POST, &path)?;
            chat_completions(app, request).await
        }
        "/v1/responses" => {
            only(&method, &Method::POST, &path)?;
            responses(app, request).await
        }
        _ => Err(ApiFailure::NotFound(path)),
    }
}

/// Refuses any method but `allowed`.
fn only(method: &Method, allowed: &Method, path: &str) -> Result<(), ApiFailure> {
    if method == allowed {
        Ok(())
    } else {
        Err(ApiFailure::MethodNotAllowed { method: method.to_string(), path: path.to_owned() })
    }
}
