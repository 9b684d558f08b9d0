//! The JSON-RPC methods: `SendMessage` submits the message to the session its contextId
//! names and answers with the task once it ended (or at once when the client asks);
//! `SendStreamingMessage` streams the task, its reply's pieces and its final state;
//! `GetTask` reads a task; `CancelTask` sends `/stop` to the task's session.

use std::sync::Arc;
use std::time::Duration;

use hyper::{Response, StatusCode};
use oxibot_plugin::serving::fresh_id;
use oxibot_plugin::{ChannelError, warn};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, timeout_at};

use crate::app::App;
use crate::body::{ReplyBody, event_stream, json_response, sse_event};
use crate::rpc::{self, Method, RpcError, RpcRequest};
use crate::tasks::TaskEvent;
use crate::wire::{self, SendParams, TaskState};

/// The `sender_id` of every inbound message: the key, not the remote agent, is the identity.
const SENDER_ID: &str = "a2a";

/// Answers one JSON-RPC request (errors too go back with status 200, as JSON-RPC has it).
pub async fn call(app: &Arc<App>, request: RpcRequest) -> Response<ReplyBody> {
    let id = request.id.clone();
    let answered = match Method::parse(&request.method) {
        None => Err(RpcError::MethodNotFound(request.method.clone())),
        Some(Method::Send) => send(app, &request.params).await,
        Some(Method::Stream) => return stream(app, id, &request.params).await,
        Some(Method::GetTask) => get_task(app, &request.params),
        Some(Method::CancelTask) => cancel_task(app, &request.params).await,
    };
    match answered {
        Ok(result) => json_response(StatusCode::OK, &rpc::result(&id, result)),
        Err(error) => json_response(StatusCode::OK, &rpc::error(&id, &error)),
    }
}

/// A task whose message the kernel accepted.
struct Started {
    task_id: String,
    context_id: String,
    events: mpsc::UnboundedReceiver<TaskEvent>,
    deadline: Instant,
}

/// Records the task and submits its message to the kernel.
async fn start(app: &App, send: SendParams, stream: bool) -> Result<Started, RpcError> {
    let deadline = Instant::now() + app.config.timeout();
    let context_id = send.context_id.unwrap_or_else(|| fresh_id("ctx"));
    let (task_id, request_id) = (fresh_id("task"), fresh_id("a2a"));
    let mut message = send.message;
    message["contextId"] = json!(context_id);
    message["taskId"] = json!(task_id);
    app.tasks.create(&task_id, &context_id, &request_id, message);
    let events = app.tasks.watch(&task_id).ok_or_else(|| RpcError::Internal("the task vanished".to_owned()))?;
    let mut inbound = app.channel.inbound(&request_id, SENDER_ID, &context_id, &send.text);
    // Every call that reaches here presented a key.
    inbound.metadata = json!({"is_group": false, "request_id": request_id, "stream": stream, "authenticated": true});
    let refused = |why: String| {
        app.tasks.fail(&task_id, &why);
        RpcError::Internal(why)
    };
    match timeout_at(deadline, app.channel.submit(inbound)).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(refused(format!("the agent did not accept the message: {error}"))),
        Err(_) => return Err(refused("the agent did not accept the message in time".to_owned())),
    }
    app.tasks.working(&task_id);
    Ok(Started { task_id, context_id, events, deadline })
}

impl Started {
    /// The next event of the task; past the deadline the task fails, which ends it.
    async fn next(&mut self, app: &App) -> Option<TaskEvent> {
        match timeout_at(self.deadline, self.events.recv()).await {
            Ok(event) => event,
            Err(_) => {
                let why = format!("the agent did not reply within {} seconds", app.config.timeout_secs);
                app.tasks.fail(&self.task_id, &why);
                self.events.recv().await
            }
        }
    }
}

/// `SendMessage`.
async fn send(app: &Arc<App>, params: &Value) -> Result<Value, RpcError> {
    let params = wire::send_params(params)?;
    let immediately = params.return_immediately;
    let mut started = start(app, params, false).await?;
    if !immediately {
        while let Some(event) = started.next(app).await {
            if matches!(event, TaskEvent::Ended { .. }) {
                break;
            }
        }
    }
    Ok(json!({"task": task_snapshot(app, &started.task_id, None)?}))
}

/// `SendStreamingMessage`: the task, then its reply's pieces as artifact updates, then the
/// final status. A failure before the task exists is a plain JSON-RPC error.
async fn stream(app: &Arc<App>, id: Value, params: &Value) -> Response<ReplyBody> {
    let started = match wire::send_params(params) {
        Ok(params) => start(app, params, true).await,
        Err(error) => Err(error),
    };
    let started = match started {
        Ok(started) => started,
        Err(error) => return json_response(StatusCode::OK, &rpc::error(&id, &error)),
    };
    let (response, events) = event_stream();
    let app = Arc::clone(app);
    tokio::spawn(async move { feed(&app, id, started, &events).await });
    response
}

/// Writes a streamed task's events until it ends or the client leaves (the task goes on).
async fn feed(app: &App, id: Value, mut started: Started, out: &mpsc::UnboundedSender<hyper::body::Bytes>) {
    let write = |result: Value| out.send(sse_event(&rpc::result(&id, result))).is_ok();
    let Ok(task) = task_snapshot(app, &started.task_id, None) else { return };
    if !write(json!({"task": task})) {
        return;
    }
    let (task_id, context_id) = (started.task_id.clone(), started.context_id.clone());
    let mut sent = String::new();
    while let Some(event) = started.next(app).await {
        match event {
            TaskEvent::Delta(text) => {
                if !write(wire::artifact_update(&task_id, &context_id, &text, !sent.is_empty())) {
                    return;
                }
                sent.push_str(&text);
            }
            TaskEvent::Ended { state, text } => {
                let rest = text.strip_prefix(sent.as_str()).unwrap_or(&text);
                if state == TaskState::Completed && !rest.is_empty() {
                    write(wire::artifact_update(&task_id, &context_id, rest, !sent.is_empty()));
                }
                let message = (!text.is_empty()).then(|| wire::agent_message(&task_id, &context_id, &text));
                write(wire::status_update(&task_id, &context_id, state, message));
                return;
            }
        }
    }
}

/// `GetTask`.
fn get_task(app: &App, params: &Value) -> Result<Value, RpcError> {
    let task_id = wire::task_id(params)?;
    let history_length = params.get("historyLength").and_then(Value::as_u64).map(|n| n as usize);
    task_snapshot(app, &task_id, history_length)
}

/// `CancelTask`: the task is canceled at once and `/stop` goes to its session, which stops
/// the session's running turn; until the kernel says it stopped something, `/stop` is sent
/// again while the task's turn is not over (a cancel right after the message can come before
/// its turn started).
async fn cancel_task(app: &Arc<App>, params: &Value) -> Result<Value, RpcError> {
    let task_id = wire::task_id(params)?;
    let context_id = app.tasks.cancel(&task_id)?;
    let said = send_stop(app, &context_id).await.map_err(|error| {
        warn!("a2a: the /stop for task {task_id} did not reach the agent: {error}");
        RpcError::Internal(format!("the stop did not reach the agent: {error}"))
    })?;
    tokio::spawn(stop_until_stopped(Arc::clone(app), task_id.clone(), context_id, said));
    task_snapshot(app, &task_id, None)
}

/// What the kernel answers `/stop` with when no turn runs (`SessionManager::stop_everything`).
const NOTHING_RUNNING: &str = "Nothing is running.";
/// How often `/stop` is sent for one cancel at most, and the pause between two.
const STOP_ATTEMPTS: u32 = 40;
const STOP_PAUSE: Duration = Duration::from_millis(250);

/// Sends `/stop` to session `context_id`; the receiver gets the kernel's answer.
async fn send_stop(app: &App, context_id: &str) -> Result<oneshot::Receiver<String>, ChannelError> {
    let stop_id = fresh_id("a2a-stop");
    let said = app.tasks.control(&stop_id);
    let mut stop = app.channel.inbound(&stop_id, SENDER_ID, context_id, "/stop");
    stop.metadata = json!({"is_group": false, "request_id": stop_id, "authenticated": true});
    app.channel.submit(stop).await?;
    Ok(said)
}

/// Sends `/stop` again while the kernel says nothing ran and the task's turn is not over.
async fn stop_until_stopped(app: Arc<App>, task_id: String, context_id: String, mut said: oneshot::Receiver<String>) {
    for _ in 0..STOP_ATTEMPTS {
        let answer = tokio::time::timeout(Duration::from_secs(10), &mut said).await;
        let nothing_ran = matches!(&answer, Ok(Ok(text)) if text.trim() == NOTHING_RUNNING);
        if !nothing_ran || app.tasks.turn_over(&task_id) {
            return;
        }
        tokio::time::sleep(STOP_PAUSE).await;
        if app.tasks.turn_over(&task_id) {
            return;
        }
        match send_stop(&app, &context_id).await {
            Ok(next) => said = next,
            Err(_) => return,
        }
    }
}

fn task_snapshot(app: &App, task_id: &str, history_length: Option<usize>) -> Result<Value, RpcError> {
    app.tasks.snapshot(task_id, history_length).ok_or_else(|| RpcError::TaskNotFound(task_id.to_owned()))
}
