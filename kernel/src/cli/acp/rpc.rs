//! JSON-RPC 2.0 over stdio for `oxibot acp`: one JSON object per line each way; what came in
//! (a request, a notification, or the client's response to one of our requests), what goes
//! out (through [`Outbox`], the one writer of stdout), and the errors a client is told.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio::sync::{mpsc, oneshot};

/// The line was not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON was not a JSON-RPC request.
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The parameters are missing, of the wrong type, or name an unknown session.
pub const INVALID_PARAMS: i64 = -32602;
/// The kernel failed to do what was asked.
pub const INTERNAL_ERROR: i64 = -32603;

/// An error answer to a request.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC error code.
    pub code: i64,
    /// What went wrong, for a person.
    pub message: String,
}

impl RpcError {
    /// Bad or missing parameters (an unknown session id among them).
    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError { code: INVALID_PARAMS, message: message.into() }
    }

    /// The kernel could not do it.
    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError { code: INTERNAL_ERROR, message: message.into() }
    }
}

/// One line read from the client.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// A call that wants an answer under `id`.
    Request { id: Value, method: String, params: Value },
    /// A call that wants none.
    Notification { method: String, params: Value },
    /// The client's answer to one of our requests: its result or its error.
    Response { id: Value, outcome: Result<Value, Value> },
    /// A line that is no JSON-RPC message; answered with this error (under the id, if any).
    Invalid { id: Value, error: RpcError },
}

/// Reads one line as a JSON-RPC message.
pub fn parse(line: &str) -> Incoming {
    let message: Value = match serde_json::from_str(line) {
        Ok(message) => message,
        Err(error) => {
            let error = RpcError { code: PARSE_ERROR, message: format!("not JSON: {error}") };
            return Incoming::Invalid { id: Value::Null, error };
        }
    };
    let id = message.get("id").cloned();
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    match (message.get("method").and_then(Value::as_str), id) {
        (Some(method), Some(id)) => Incoming::Request { id, method: method.to_owned(), params },
        (Some(method), None) => Incoming::Notification { method: method.to_owned(), params },
        (None, Some(id)) if message.get("result").is_some() || message.get("error").is_some() => {
            let outcome = match message.get("error") {
                Some(error) => Err(error.clone()),
                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            Incoming::Response { id, outcome }
        }
        (None, id) => {
            let message = "a JSON-RPC request needs a \"method\" (and an \"id\" to be answered)".to_owned();
            Incoming::Invalid { id: id.unwrap_or(Value::Null), error: RpcError { code: INVALID_REQUEST, message } }
        }
    }
}

/// What the writer task is given.
enum Write {
    /// A message to write as one line.
    Line(Value),
    /// Everything before was written: say so and stop.
    Finish(oneshot::Sender<()>),
}

/// Where the client's response to one of our requests goes.
type Waiting = oneshot::Sender<Result<Value, Value>>;

/// Everything written to the client, in order, and the requests we wait on. Cheap to clone.
#[derive(Clone)]
pub struct Outbox {
    /// Lines for the writer task, which alone writes stdout (so messages never interleave).
    lines: mpsc::UnboundedSender<Write>,
    /// Our requests to the client waiting for its response, by id.
    waiting: Rc<RefCell<HashMap<u64, Waiting>>>,
    /// The id of our next request.
    next_id: Rc<RefCell<u64>>,
    /// Set once the client closed stdin: our requests fail at once.
    closed: Rc<Cell<bool>>,
}

impl Outbox {
    /// An outbox whose lines go to stdout through a task of the running system.
    pub fn to_stdout() -> Outbox {
        let (lines, mut receiver) = mpsc::unbounded_channel::<Write>();
        actix::spawn(async move {
            let mut stdout = tokio::io::stdout();
            while let Some(write) = receiver.recv().await {
                let message = match write {
                    Write::Line(message) => message,
                    Write::Finish(done) => {
                        let _ = done.send(());
                        break;
                    }
                };
                let mut line = message.to_string();
                line.push('\n');
                if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                    break;
                }
            }
        });
        Outbox { lines, waiting: Rc::default(), next_id: Rc::new(RefCell::new(0)), closed: Rc::default() }
    }

    fn send(&self, message: Value) {
        // The writer ends only when stdout is gone; then nobody can read the message anyway.
        let _ = self.lines.send(Write::Line(message));
    }

    /// Fails every request waiting for the client, and every later one: it closed stdin, so
    /// no answer comes.
    pub fn finish_requests(&self) {
        self.closed.set(true);
        self.waiting.borrow_mut().clear();
    }

    /// Waits until everything sent so far is written, and stops the writer.
    pub async fn finish(&self) {
        let (done, written) = oneshot::channel();
        if self.lines.send(Write::Finish(done)).is_ok() {
            let _ = written.await;
        }
    }

    /// Answers request `id` with its result or its error.
    pub fn answer(&self, id: Value, outcome: Result<Value, RpcError>) {
        match outcome {
            Ok(result) => self.send(json!({"jsonrpc": "2.0", "id": id, "result": result})),
            Err(error) => self.send(json!({
                "jsonrpc": "2.0", "id": id, "error": {"code": error.code, "message": error.message}
            })),
        }
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and waits for the client's response (an error when it never comes).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, Value> {
        if self.closed.get() {
            return Err(json!({"message": "the client closed stdin"}));
        }
        let id = {
            let mut next = self.next_id.borrow_mut();
            *next += 1;
            *next
        };
        let (reply, response) = oneshot::channel();
        self.waiting.borrow_mut().insert(id, reply);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        response.await.unwrap_or_else(|_| Err(json!({"message": "the client went away"})))
    }

    /// Hands the client's response to the request waiting for it; an unknown id is logged.
    pub fn resolve(&self, id: &Value, outcome: Result<Value, Value>) {
        let waiting = id.as_u64().and_then(|id| self.waiting.borrow_mut().remove(&id));
        match waiting {
            Some(reply) => {
                let _ = reply.send(outcome);
            }
            None => tracing::warn!(%id, "a response to no request of ours"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_as_requests_notifications_responses_or_errors() {
        let request = parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#);
        assert_eq!(
            request,
            Incoming::Request { id: json!(1), method: "initialize".into(), params: json!({"protocolVersion": 1}) }
        );
        let notification = parse(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"a"}}"#);
        assert!(matches!(notification, Incoming::Notification { method, .. } if method == "session/cancel"));
        let response = parse(r#"{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"cancelled"}}}"#);
        assert!(matches!(response, Incoming::Response { outcome: Ok(_), .. }));
        let Incoming::Invalid { error, .. } = parse("{not json") else { panic!("garbage was read") };
        assert_eq!(error.code, PARSE_ERROR);
        let Incoming::Invalid { id, error } = parse(r#"{"jsonrpc":"2.0","id":7}"#) else { panic!("no method") };
        assert_eq!((id, error.code), (json!(7), INVALID_REQUEST));
    }
}
