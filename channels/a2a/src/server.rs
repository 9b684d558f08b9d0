//! The HTTP server: one task per connection (HTTP/1.1 with keep-alive), a short deadline for
//! each request's headers, and the routes: `GET /health`, the agent card, and JSON-RPC posted
//! to `/a2a` (or `/`) behind the key check ([`crate::admission`]).

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;

use hyper::body::{Body, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use oxibot_plugin::serving::http;
use oxibot_plugin::serving::slots::BusyMarker;
use serde_json::{Value, json};
use tokio::net::TcpStream;

use crate::admission::{Refusal, admit_call, same_site};
use crate::app::App;
use crate::body::{ReplyBody, json_response, unauthorised};
use crate::calls::call;
use crate::rpc::{self, RpcError};
use crate::wire::{CARD_PATH, RPC_PATH, agent_card};

/// Largest request body read.
const MAX_BODY_BYTES: usize = 4 << 20;

/// Serves the requests of one connection until the client closes it.
pub async fn serve_connection(stream: TcpStream, app: Arc<App>, slot: BusyMarker) {
    let header_timeout = app.config.header_timeout();
    let route = move |request| {
        let app = app.clone();
        async move { route(&app, request).await }
    };
    http::serve_connection("a2a", stream, header_timeout, slot, route).await;
}

/// Answers one request.
async fn route(app: &Arc<App>, request: Request<Incoming>) -> Response<ReplyBody> {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    match (path.as_str(), &method) {
        ("/health", &Method::GET) => json_response(StatusCode::OK, &json!({"status": "ok"})),
        (CARD_PATH, &Method::GET) => match same_site(&app.config, request.headers()) {
            Ok(()) => json_response(StatusCode::OK, &agent_card(&app.config)),
            Err(refusal) => refused(refusal),
        },
        (RPC_PATH | "/", &Method::POST) => {
            if let Err(refusal) = admit_call(&app.config, request.headers()) {
                return refused(refusal);
            }
            json_rpc(app, request).await
        }
        (CARD_PATH | "/health" | RPC_PATH | "/", _) => json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": format!("method {method} is not allowed for {path}")}),
        ),
        _ => json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": format!("unknown path {path}: the JSON-RPC endpoint is {RPC_PATH}, the card {CARD_PATH}")}),
        ),
    }
}

/// Reads the body as one JSON-RPC request and answers it.
async fn json_rpc(app: &Arc<App>, request: Request<Incoming>) -> Response<ReplyBody> {
    let body = match tokio::time::timeout(app.config.body_timeout(), read_body(request.into_body())).await {
        Ok(Ok(body)) => body,
        Ok(Err(error)) => return rpc_failure(StatusCode::BAD_REQUEST, &Value::Null, &error),
        Err(_) => {
            let late = RpcError::InvalidRequest("the request body did not arrive in time".to_owned());
            return rpc_failure(StatusCode::REQUEST_TIMEOUT, &Value::Null, &late);
        }
    };
    match rpc::parse_request(&body) {
        Ok(request) => call(app, request).await,
        Err((id, error)) => rpc_failure(StatusCode::OK, &id, &error),
    }
}

/// A refusal as a JSON-RPC error with the matching HTTP status.
fn refused(refusal: Refusal) -> Response<ReplyBody> {
    let document = rpc::error(&Value::Null, &RpcError::InvalidRequest(refusal.to_string()));
    match refusal {
        Refusal::Unauthorised => unauthorised(&document),
        Refusal::ForeignHost | Refusal::ForeignOrigin => json_response(StatusCode::FORBIDDEN, &document),
        Refusal::NotJson => json_response(StatusCode::UNSUPPORTED_MEDIA_TYPE, &document),
    }
}

fn rpc_failure(status: StatusCode, id: &Value, error: &RpcError) -> Response<ReplyBody> {
    json_response(status, &rpc::error(id, error))
}

/// The whole request body, refused past [`MAX_BODY_BYTES`].
async fn read_body(mut body: Incoming) -> Result<Vec<u8>, RpcError> {
    let too_large = || RpcError::InvalidRequest(format!("the request body is larger than {MAX_BODY_BYTES} bytes"));
    if body.size_hint().lower() > MAX_BODY_BYTES as u64 {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| RpcError::InvalidRequest(format!("the request body could not be read: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > MAX_BODY_BYTES {
                return Err(too_large());
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}
