//! `oxibot acp`: the assistant as an Agent Client Protocol agent, which an editor (Zed, …)
//! runs as a subprocess and talks to in JSON-RPC 2.0 over stdio, one message per line.
//!
//! What the editor may call (protocol version 1):
//! - `initialize`: the protocol version and capabilities (`loadSession`, text and embedded
//!   resources in prompts; no authentication);
//! - `session/new` (`cwd`): a new oxibot session `acp:<random>` whose workspace is `cwd`
//!   (one kernel per workspace, its plugins confined there as usual, see [`kernels`]);
//! - `session/load` (`sessionId`, `cwd`): an existing session of that workspace, any channel's
//!   (`cli:direct`, `acp:…`), its history replayed as `session/update`s before the answer;
//! - `session/prompt`: one turn, streamed as `session/update`s (reply chunks, tool calls
//!   with status and locations, see [`prompt`]) and answered with its `stopReason`;
//! - `session/cancel` (a notification): the session's `/stop`; the prompt answers `cancelled`.
//!
//! What oxibot calls on the editor: `session/update` notifications, and
//! `session/request_permission` when the approval policy (`tools.approval`) holds a call for
//! a person's yes ([`approver`]). A line that is no JSON-RPC message, an unknown method and
//! an unknown session id get JSON-RPC errors; stdout carries nothing else (logs go to stderr).

mod approver;
mod kernels;
mod prompt;
mod rpc;
mod updates;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;

use anyhow::Context as _;
use oxibot_kernel::session::SessionKey;
use oxibot_kernel::turn::approval::shown::turn_id;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

use super::CommonArgs;
use kernels::{Kernel, Kernels};
use rpc::{Incoming, Outbox, RpcError};

/// The ACP protocol version spoken.
const PROTOCOL_VERSION: u64 = 1;

/// Runs the agent until the editor closes stdin.
pub fn run(common: &CommonArgs) -> anyhow::Result<ExitCode> {
    let common = common.clone();
    actix::System::new().block_on(async move {
        let agent = Rc::new(Agent::new(common));
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Some(line) = lines.next_line().await.context("cannot read stdin")? {
            if !line.trim().is_empty() {
                agent.clone().receive(&line);
            }
        }
        agent.finish().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// The agent's state: where messages go, the kernels, and the sessions this editor opened.
struct Agent {
    /// The one writer of stdout.
    outbox: Outbox,
    /// One kernel per workspace.
    kernels: Kernels,
    /// The sessions opened (new or loaded), by id (the oxibot session key), with their kernel.
    sessions: RefCell<HashMap<String, Rc<Kernel>>>,
    /// Prompts run so far (each prompt's tool call ids are its own).
    prompts: Cell<u64>,
    /// The requests being handled, so that the last ones are answered before the end.
    handling: RefCell<Vec<tokio::task::JoinHandle<()>>>,
}

impl Agent {
    fn new(common: CommonArgs) -> Agent {
        Agent {
            outbox: Outbox::to_stdout(),
            kernels: Kernels::new(common),
            sessions: RefCell::default(),
            prompts: Cell::new(0),
            handling: RefCell::default(),
        }
    }

    /// The one way out, once the editor closed stdin: running turns are stopped (nobody reads
    /// them any more), the requests still running are answered (permission requests count as
    /// refused), everything is written, the plugins stop.
    async fn finish(&self) {
        for (id, kernel) in self.sessions.borrow().iter() {
            kernel.manager.stop(id.as_str());
        }
        self.outbox.finish_requests();
        let handling = std::mem::take(&mut *self.handling.borrow_mut());
        for request in handling {
            let _ = request.await;
        }
        self.outbox.finish().await;
        self.kernels.shutdown().await;
    }

    /// Handles one line: requests run as tasks of their own, so a prompt never holds up the
    /// `session/cancel` or the permission answer that follows it.
    fn receive(self: Rc<Self>, line: &str) {
        match rpc::parse(line) {
            Incoming::Request { id, method, params } => {
                let agent = self.clone();
                let request = actix::spawn(async move {
                    let outcome = agent.call(&method, params).await;
                    agent.outbox.answer(id, outcome);
                });
                let mut handling = self.handling.borrow_mut();
                handling.retain(|request| !request.is_finished());
                handling.push(request);
            }
            Incoming::Notification { method, params } => self.notified(&method, &params),
            Incoming::Response { id, outcome } => self.outbox.resolve(&id, outcome),
            Incoming::Invalid { id, error } => self.outbox.answer(id, Err(error)),
        }
    }

    async fn call(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        match method {
            "initialize" => Ok(initialized()),
            "authenticate" => Ok(json!({})),
            "session/new" => self.new_session(&params).await,
            "session/load" => self.load_session(&params).await,
            "session/prompt" => self.prompt(&params).await,
            _ => Err(RpcError {
                code: rpc::METHOD_NOT_FOUND,
                message: format!("no method {method:?} in oxibot's ACP agent"),
            }),
        }
    }

    fn notified(&self, method: &str, params: &Value) {
        if method != "session/cancel" {
            tracing::info!(method, "ignoring an unknown notification");
            return;
        }
        let Ok((key, kernel)) = self.session(params) else {
            tracing::warn!(%params, "session/cancel of an unknown session");
            return;
        };
        // The kernel's own `/stop`: the running turn and the session's helpers.
        let (events, _) = tokio::sync::mpsc::unbounded_channel();
        actix::spawn(async move {
            let _ = kernel.manager.send(key, "/stop", events).await;
        });
    }

    async fn new_session(&self, params: &Value) -> Result<Value, RpcError> {
        let kernel = self.kernel_for(params).await?;
        let key = SessionKey::new("acp", &turn_id()[..12]);
        self.sessions.borrow_mut().insert(key.as_str().to_owned(), kernel);
        Ok(json!({"sessionId": key.as_str()}))
    }

    async fn load_session(&self, params: &Value) -> Result<Value, RpcError> {
        let id = params["sessionId"].as_str().ok_or_else(|| RpcError::invalid_params("\"sessionId\" is missing"))?;
        let key = SessionKey::parse(id).ok_or_else(|| {
            RpcError::invalid_params(format!("unknown session id {id:?}: oxibot's are `channel:chat_id`"))
        })?;
        let kernel = self.kernel_for(params).await?;
        let services = kernel.services();
        let loaded =
            services.session_files().load(key.as_str()).map_err(|error| RpcError::internal(error.to_string()))?;
        if loaded.session.messages.is_empty() {
            let workspace = services.workspace().display();
            return Err(RpcError::invalid_params(format!("unknown session id {id:?}: no such session in {workspace}")));
        }
        for update in updates::replay(&loaded.session.messages, services.workspace()) {
            self.outbox.notify("session/update", json!({"sessionId": id, "update": update}));
        }
        self.sessions.borrow_mut().insert(id.to_owned(), kernel);
        Ok(json!({}))
    }

    async fn prompt(&self, params: &Value) -> Result<Value, RpcError> {
        let (key, kernel) = self.session(params)?;
        let text = prompt::text_of(&params["prompt"])?;
        let number = self.prompts.get() + 1;
        self.prompts.set(number);
        prompt::run(&self.outbox, kernel, key, &text, number).await
    }

    /// The session named by `sessionId`, opened by this editor.
    fn session(&self, params: &Value) -> Result<(SessionKey, Rc<Kernel>), RpcError> {
        let id = params["sessionId"].as_str().ok_or_else(|| RpcError::invalid_params("\"sessionId\" is missing"))?;
        match self.sessions.borrow().get(id) {
            Some(kernel) => Ok((SessionKey::from_text(id), kernel.clone())),
            None => Err(RpcError::invalid_params(format!(
                "unknown session id {id:?}: open it with session/new or session/load first"
            ))),
        }
    }

    /// The kernel of the workspace `cwd` names (an absolute directory).
    async fn kernel_for(&self, params: &Value) -> Result<Rc<Kernel>, RpcError> {
        let cwd = params["cwd"].as_str().ok_or_else(|| RpcError::invalid_params("\"cwd\" is missing"))?;
        let workspace = workspace_of(cwd)?;
        self.kernels
            .for_workspace(&workspace)
            .await
            .map_err(|error| RpcError::internal(format!("cannot start oxibot in {cwd}: {error:#}")))
    }
}

/// The workspace of a session: its `cwd`, which must be an existing absolute directory.
fn workspace_of(cwd: &str) -> Result<PathBuf, RpcError> {
    let path = Path::new(cwd);
    if !path.is_absolute() {
        return Err(RpcError::invalid_params(format!("\"cwd\" must be an absolute path, got {cwd:?}")));
    }
    if !path.is_dir() {
        return Err(RpcError::invalid_params(format!("\"cwd\" {cwd} is not a directory")));
    }
    Ok(path.to_path_buf())
}

/// The answer to `initialize`.
fn initialized() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": false, "sse": false},
        },
        "authMethods": [],
        "agentInfo": {"name": "oxibot", "title": "oxibot", "version": env!("OXIBOT_VERSION")},
    })
}
