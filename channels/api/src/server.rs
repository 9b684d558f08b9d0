//! The HTTP server: one task per connection (HTTP/1.1 with keep-alive), routing, and the API
//! key check.

use std::convert::Infallible;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::AUTHORIZATION;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;
use tokio::net::TcpStream;

use crate::app::App;
use crate::body::ReplyBody;
use crate::completions::chat_completions;
use crate::config::Config;
use crate::openai::model_list;
use crate::responses::{ApiFailure, json_response};
use crate::responses_api::responses;

/// Serves the requests of one connection until the client closes it.
pub async fn serve_connection(stream: TcpStream, app: Arc<App>) {
    let _ = stream.set_nodelay(true);
    let header_timeout = app.config.body_timeout();
    let service = service_fn(move |request| {
        let app = app.clone();
        async move { Ok::<_, Infallible>(route(&app, request).await) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    if let Err(error) = connection.await {
        if !error.is_incomplete_message() {
            eprintln!("api: a connection failed: {error}");
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
    if !authorised(&app.config, request.headers()) {
        return Err(ApiFailure::Unauthorised);
    }
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

/// Whether the request carries the configured API key (always true without one).
pub fn authorised(config: &Config, headers: &HeaderMap) -> bool {
    let Some(key) = &config.api_key else { return true };
    let presented = headers.get(AUTHORIZATION).and_then(|value| value.to_str().ok()).and_then(bearer);
    presented.is_some_and(|given| same_secret(given, key))
}

/// The credentials of a `Bearer` authorization header (the scheme is case-insensitive).
fn bearer(header: &str) -> Option<&str> {
    let (scheme, credentials) = header.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| credentials.trim())
}

/// Compares secrets without stopping at the first difference.
fn same_secret(given: &str, expected: &str) -> bool {
    let (given, expected) = (given.as_bytes(), expected.as_bytes());
    let differences = given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    given.len() == expected.len() && differences == 0
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;

    use super::*;

    fn headers(authorization: Option<&'static str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = authorization {
            headers.insert(AUTHORIZATION, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn without_a_key_configured_every_request_is_authorised() {
        assert!(authorised(&Config::default(), &headers(None)));
    }

    #[test]
    fn with_a_key_only_the_matching_bearer_token_is_authorised() {
        let config = Config { api_key: Some("sk-test".into()), ..Config::default() };
        assert!(authorised(&config, &headers(Some("Bearer sk-test"))));
        assert!(authorised(&config, &headers(Some("bearer  sk-test "))));
        assert!(!authorised(&config, &headers(None)));
        assert!(!authorised(&config, &headers(Some("Bearer sk-tes"))));
        assert!(!authorised(&config, &headers(Some("Basic sk-test"))));
        assert!(!authorised(&config, &headers(Some("sk-test"))));
    }
}
