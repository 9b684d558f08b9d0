//! The HTTP server: one task per connection (HTTP/1.1 with keep-alive), a short deadline for
//! each request's headers, the connection's slot marked busy while a request is served, and
//! routing behind the admission checks ([`crate::admission`]).

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use oxibot_plugin::serving::http;
use oxibot_plugin::serving::slots::BusyMarker;
use serde_json::json;
use tokio::net::TcpStream;

use crate::admission::admit;
use crate::app::App;
use crate::body::ReplyBody;
use crate::completions::chat_completions;
use crate::openai::model_list;
use crate::responses::{ApiFailure, json_response};
use crate::responses_api::responses;

/// Serves the requests of one connection until the client closes it. Between requests the
/// connection is idle and may give its slot to a newcomer (see `serving::slots`).
pub async fn serve_connection(stream: TcpStream, app: Arc<App>, slot: BusyMarker) {
    let header_timeout = app.config.header_timeout();
    let route = move |request| {
        let app = app.clone();
        async move { route(&app, request).await }
    };
    http::serve_connection("api", stream, header_timeout, slot, route).await;
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
