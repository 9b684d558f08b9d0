//! The signal-cli daemon's HTTP interface: `GET /api/v1/check` (is it up), `POST /api/v1/rpc`
//! (JSON-RPC 2.0 calls such as `send`) and `GET /api/v1/events` (the server-sent events of
//! received messages).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use oxibot_plugin::util::error_chain;
use serde_json::{Value, json};

/// How long to wait for a TCP connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an RPC call may take (sending to a large group takes a while).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a request to the daemon failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DaemonError {
    /// The HTTP client could not be built.
    #[error("cannot set up the http client: {0}")]
    Setup(String),
    /// No answer: the daemon is not running, or not there.
    #[error("{what}: the signal-cli daemon does not answer: {reason}")]
    Network {
        /// The request, e.g. `send`.
        what: String,
        /// What went wrong, with its causes.
        reason: String,
    },
    /// An HTTP status other than 2xx.
    #[error("{what}: http status {status}")]
    Status {
        /// The request.
        what: String,
        /// The status code.
        status: u16,
    },
    /// A JSON-RPC error answer.
    #[error("{what}: signal-cli answered error {code}: {message}")]
    Rpc {
        /// The method called.
        what: String,
        /// The JSON-RPC error code.
        code: i64,
        /// signal-cli's explanation.
        message: String,
    },
    /// The answer was not the JSON signal-cli sends.
    #[error("{what}: unexpected answer: {reason}")]
    Malformed {
        /// The request.
        what: String,
        /// What was wrong with it.
        reason: String,
    },
}

/// A client of one daemon; cheap to clone.
#[derive(Debug, Clone)]
pub struct Daemon {
    /// The pooled HTTP client (no overall timeout: the event stream lasts).
    http: reqwest::Client,
    /// E.g. `http://localhost:8080`.
    base: String,
    /// The id of the next JSON-RPC request.
    next_id: Arc<AtomicU64>,
}

impl Daemon {
    /// A client of the daemon at `base`.
    pub fn new(base: &str) -> Result<Daemon, DaemonError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|error| DaemonError::Setup(error_chain(&error)))?;
        Ok(Daemon { http, base: base.trim_end_matches('/').to_owned(), next_id: Arc::new(AtomicU64::new(1)) })
    }

    /// `GET /api/v1/check`.
    pub async fn check(&self) -> Result<(), DaemonError> {
        let response = self
            .http
            .get(format!("{}/api/v1/check", self.base))
            .timeout(CALL_TIMEOUT)
            .send()
            .await
            .map_err(|error| network("check", &error))?;
        status("check", response).map(drop)
    }

    /// `GET /api/v1/events`: the open event stream.
    pub async fn events(&self) -> Result<reqwest::Response, DaemonError> {
        let response = self
            .http
            .get(format!("{}/api/v1/events", self.base))
            .header("accept", "text/event-stream")
            .send()
            .await
            .map_err(|error| network("events", &error))?;
        status("events", response)
    }

    /// Calls `method` with `params`; returns its `result`.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, DaemonError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let request = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": id});
        let response = self
            .http
            .post(format!("{}/api/v1/rpc", self.base))
            .timeout(CALL_TIMEOUT)
            .json(&request)
            .send()
            .await
            .map_err(|error| network(method, &error))?;
        let answer: Value = status(method, response)?
            .json()
            .await
            .map_err(|error| DaemonError::Malformed { what: method.to_owned(), reason: error_chain(&error) })?;
        if let Some(error) = answer.get("error").filter(|error| !error.is_null()) {
            let message = error["message"].as_str().unwrap_or("unknown error").to_owned();
            return Err(DaemonError::Rpc {
                what: method.to_owned(),
                code: error["code"].as_i64().unwrap_or(0),
                message,
            });
        }
        Ok(answer["result"].clone())
    }
}

fn network(what: &str, error: &reqwest::Error) -> DaemonError {
    DaemonError::Network { what: what.to_owned(), reason: error_chain(error) }
}

fn status(what: &str, response: reqwest::Response) -> Result<reqwest::Response, DaemonError> {
    if response.status().is_success() {
        Ok(response)
    } else {
        Err(DaemonError::Status { what: what.to_owned(), status: response.status().as_u16() })
    }
}
