//! Building responses: JSON documents, event streams, and the OpenAI-style error for each way a
//! request can fail.

use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};
use oxibot_plugin::ChannelError;
use serde_json::Value;

use crate::body::ReplyBody;
use crate::delivery::DeliveryGuard;
use crate::openai;
use crate::request::RequestError;

/// Why a request got no answer from the agent; each becomes an HTTP error response.
#[derive(Debug, thiserror::Error)]
pub enum ApiFailure {
    /// The API key is missing or wrong.
    #[error("invalid or missing API key: send it as Authorization: Bearer <apiKey>")]
    Unauthorised,
    /// The `Host` names another server (DNS rebinding).
    #[error("this server answers only to its own address or a loopback name")]
    ForeignHost,
    /// A web page of another site sent the request.
    #[error("requests from other web sites are refused")]
    ForeignOrigin,
    /// A body that is not JSON (a plain form or text, which a web page can send without asking).
    #[error("the request body must be JSON: send Content-Type: application/json")]
    NotJson,
    /// No such endpoint.
    #[error("unknown endpoint {0}")]
    NotFound(String),
    /// The endpoint exists but not for this method.
    #[error("method {method} is not allowed for {path}")]
    MethodNotAllowed {
        /// The request's method.
        method: String,
        /// The request's path.
        path: String,
    },
    /// The body is not a usable chat-completion request.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The body is larger than the channel reads.
    #[error("the request body is larger than {0} bytes")]
    TooLarge(usize),
    /// The body did not arrive in time.
    #[error("the request body did not arrive within {0} seconds")]
    BodyTimeout(u64),
    /// The body could not be read.
    #[error("the request body could not be read: {0}")]
    Unreadable(String),
    /// The kernel did not take the message.
    #[error("the agent did not accept the message: {0}")]
    NotAccepted(#[from] ChannelError),
    /// No reply within the configured time.
    #[error("the agent did not reply within {0} seconds")]
    Timeout(u64),
    /// The channel is stopping; the reply will not come.
    #[error("the channel is shutting down")]
    ShuttingDown,
}

impl ApiFailure {
    /// The HTTP status for this failure.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiFailure::Unauthorised => StatusCode::UNAUTHORIZED,
            ApiFailure::ForeignHost | ApiFailure::ForeignOrigin => StatusCode::FORBIDDEN,
            ApiFailure::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiFailure::NotFound(_) => StatusCode::NOT_FOUND,
            ApiFailure::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiFailure::Request(_) | ApiFailure::Unreadable(_) => StatusCode::BAD_REQUEST,
            ApiFailure::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiFailure::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiFailure::NotAccepted(_) | ApiFailure::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            ApiFailure::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// OpenAI's error `code` for this failure, if it has one.
    pub fn code(&self) -> Option<&'static str> {
        self.kind_and_code().1
    }

    /// OpenAI's error `type` and `code` for this failure.
    fn kind_and_code(&self) -> (&'static str, Option<&'static str>) {
        match self {
            ApiFailure::Unauthorised => ("invalid_request_error", Some("invalid_api_key")),
            ApiFailure::ForeignHost | ApiFailure::ForeignOrigin => ("invalid_request_error", Some("forbidden")),
            ApiFailure::NotJson => ("invalid_request_error", Some("unsupported_media_type")),
            ApiFailure::NotFound(_) => ("invalid_request_error", Some("unknown_url")),
            ApiFailure::MethodNotAllowed { .. }
            | ApiFailure::Request(_)
            | ApiFailure::TooLarge(_)
            | ApiFailure::Unreadable(_) => ("invalid_request_error", None),
            ApiFailure::BodyTimeout(_) => ("invalid_request_error", Some("timeout")),
            ApiFailure::Timeout(_) => ("server_error", Some("timeout")),
            ApiFailure::NotAccepted(_) | ApiFailure::ShuttingDown => ("server_error", None),
        }
    }

    /// The OpenAI-style error body.
    pub fn body(&self) -> Value {
        let (kind, code) = self.kind_and_code();
        let param = match self {
            ApiFailure::Request(error) => error.param(),
            _ => None,
        };
        openai::error(&self.to_string(), kind, param, code)
    }

    /// The whole error response.
    pub fn response(&self) -> Response<ReplyBody> {
        json_response(self.status(), &self.body())
    }
}

/// A JSON document as the response.
pub fn json_response(status: StatusCode, document: &Value) -> Response<ReplyBody> {
    with_json_type(status, ReplyBody::whole(document.to_string()))
}

/// A JSON document whose delivery acks an outbound message.
pub fn guarded_json_response(document: &Value, guard: DeliveryGuard) -> Response<ReplyBody> {
    with_json_type(StatusCode::OK, ReplyBody::whole_guarded(document.to_string(), guard))
}

/// A stream of server-sent events.
pub fn event_stream_response(body: ReplyBody) -> Response<ReplyBody> {
    let mut response = Response::new(body);
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn with_json_type(status: StatusCode, body: ReplyBody) -> Response<ReplyBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_missing_key_is_a_401_with_openais_invalid_api_key_code() {
        let failure = ApiFailure::Unauthorised;
        assert_eq!(failure.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(failure.body()["error"]["code"], "invalid_api_key");
        assert_eq!(failure.body()["error"]["type"], "invalid_request_error");
    }

    #[test]
    fn a_bad_request_names_the_field_it_is_about() {
        let failure = ApiFailure::from(RequestError::NoUserMessage);
        assert_eq!(failure.status(), StatusCode::BAD_REQUEST);
        assert_eq!(failure.body()["error"]["param"], "messages");
    }

    #[test]
    fn a_timeout_is_a_504_saying_how_long_it_waited() {
        let failure = ApiFailure::Timeout(300);
        assert_eq!(failure.status(), StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(
            failure.body(),
            json!({"error": {"message": "the agent did not reply within 300 seconds", "type": "server_error", "param": null, "code": "timeout"}})
        );
    }
}
