//! A tool plugin's side of the connection: handshake, then calls served concurrently until
//! close.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use oxibot_proto::{Call, Feature, Goodbye, Hello, Manifest, Message, PeerKind, ToolResult};
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use crate::launch::LaunchEnv;
use crate::link::{self, FrameReader, Link, PANIC_EXIT, Sender, ServeError};
use crate::tool::{Handler, Plugin};

/// How serving ended without an error.
enum Outcome {
    /// The kernel closed the connection or said goodbye.
    Closed,
    /// A tool panicked; its error was reported and the process should exit.
    Panicked,
}

impl Plugin {
    /// Connects to the kernel and serves calls until the kernel hangs up.
    ///
    /// Exit codes: 0 after a normal close, 2 when not started by the kernel or refused by it,
    /// 70 after a tool panicked (the panic was reported as that call's error first).
    pub fn run(self) -> ExitCode {
        run(self)
    }
}

fn run(plugin: Plugin) -> ExitCode {
    let name = plugin.name.clone();
    link::run_main(&name, |env| serve(plugin, env))
}

async fn serve(plugin: Plugin, env: LaunchEnv) -> Result<ExitCode, ServeError> {
    let mut hello = Hello::new(plugin.name.clone(), PeerKind::Tool, env.token.clone());
    hello.features = vec![Feature::Cancel];
    if plugin.static_manifest {
        hello.features.push(Feature::StaticManifest);
    }
    let mut link = Link::open(&env, hello, Manifest { tools: plugin.tools, detail: plugin.detail }).await?;
    let calls = Calls {
        handlers: Arc::new(plugin.handlers),
        in_flight: Arc::default(),
        outgoing: link.outgoing.clone(),
        panicked: Arc::new(Notify::new()),
    };
    let outcome = serve_calls(&mut link.reader, &calls).await;
    link.close().await;
    match outcome? {
        Outcome::Closed => Ok(ExitCode::SUCCESS),
        Outcome::Panicked => Ok(ExitCode::from(PANIC_EXIT)),
    }
}

async fn serve_calls(reader: &mut FrameReader, calls: &Calls) -> Result<Outcome, ServeError> {
    loop {
        let message = tokio::select! {
            message = reader.next() => message?,
            () = calls.panicked.notified() => return Ok(Outcome::Panicked),
        };
        match message {
            None | Some(Message::Goodbye(_)) => return Ok(Outcome::Closed),
            Some(Message::Call(call)) => calls.start(call),
            Some(Message::Cancel(cancel)) => calls.cancel(cancel.id),
            Some(Message::Ping(ping)) => send(&calls.outgoing, &Message::Pong(ping)),
            Some(_) => {}
        }
    }
}

/// The calls this plugin is running.
struct Calls {
    /// Tool name → the function that runs it.
    handlers: Arc<HashMap<String, Handler>>,
    /// Call id → the task running it, so `Cancel` can abort it.
    in_flight: Arc<Mutex<HashMap<u64, AbortHandle>>>,
    /// Frames for the writer task.
    outgoing: Sender,
    /// Signalled once a handler panicked, to end the serve loop.
    panicked: Arc<Notify>,
}

impl Calls {
    fn start(&self, call: Call) {
        let Some(handler) = self.handlers.get(&call.tool).cloned() else {
            let known: Vec<&str> = self.handlers.keys().map(String::as_str).collect();
            let content =
                format!("Error: this plugin has no tool named '{}' (it has: {})", call.tool, known.join(", "));
            send(&self.outgoing, &Message::Result(ToolResult { id: call.id, content, is_error: true }));
            return;
        };
        let id = call.id;
        let in_flight = self.in_flight.clone();
        let outgoing = self.outgoing.clone();
        let panicked = self.panicked.clone();
        // Hold the lock across the spawn so a fast call cannot finish and remove its entry
        // before the entry is inserted.
        let mut map = lock(&self.in_flight);
        let task = tokio::spawn(async move {
            let outcome = AssertUnwindSafe(handler(call.context, call.arguments)).catch_unwind().await;
            lock(&in_flight).remove(&id);
            let result = match outcome {
                Ok(Ok(content)) => ToolResult { id, content, is_error: false },
                Ok(Err(error)) => ToolResult { id, content: error.to_string(), is_error: true },
                Err(payload) => {
                    let reason = link::panic_message(payload.as_ref());
                    send(
                        &outgoing,
                        &Message::Result(ToolResult {
                            id,
                            content: format!("Error: the tool crashed ({reason}); the plugin is restarting, try again"),
                            is_error: true,
                        }),
                    );
                    send(&outgoing, &Message::Goodbye(Goodbye { reason: format!("tool panicked: {reason}") }));
                    panicked.notify_one();
                    return;
                }
            };
            send(&outgoing, &Message::Result(result));
        });
        map.insert(id, task.abort_handle());
    }

    fn cancel(&self, id: u64) {
        if let Some(task) = lock(&self.in_flight).remove(&id) {
            task.abort();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned map only means a task panicked while holding it; the map itself is intact.
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Encodes and queues a message; a message too large for a frame becomes an error result.
fn send(outgoing: &Sender, message: &Message) {
    if let Err(error) = link::queue_message(outgoing, message)
        && let Message::Result(result) = message
    {
        let content =
            format!("Error: the tool's output could not be sent ({error}); ask for less, e.g. with offset/limit");
        send(outgoing, &Message::Result(ToolResult { id: result.id, content, is_error: true }));
    }
}
