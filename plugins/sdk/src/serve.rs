//! The plugin side of a connection: handshake, then calls served concurrently until close.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use interprocess::local_socket::tokio::{prelude::*, Stream};
use interprocess::local_socket::{GenericFilePath, ToFsName};
use oxibot_proto::{
    Call, DecodeError, Feature, FrameDecoder, Goodbye, Hello, Manifest, Message, PeerKind,
    ToolResult, DEFAULT_MAX_FRAME_LEN, PROTOCOL_NAME, PROTOCOL_VERSION,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, Notify};
use tokio::task::AbortHandle;

use crate::launch::LaunchEnv;
use crate::tool::{Handler, Plugin};

/// Exit status after a tool panicked (EX_SOFTWARE).
const PANIC_EXIT: u8 = 70;
/// Exit status when the plugin could not start or the kernel refused it.
const REFUSED_EXIT: u8 = 2;
/// How long queued results get to reach the kernel before the process exits anyway.
const FLUSH_GRACE: Duration = Duration::from_secs(1);

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
enum ServeError {
    #[error("cannot connect to the kernel at {path}: {source}")]
    Connect { path: String, source: std::io::Error },
    #[error("the kernel refused this plugin: {0}")]
    Refused(String),
    #[error("the kernel closed the connection during the handshake")]
    ClosedDuringHandshake,
    #[error("the kernel speaks protocol {protocol} version {version}, this plugin speaks {PROTOCOL_NAME} version {PROTOCOL_VERSION}")]
    VersionMismatch { protocol: String, version: u32 },
    #[error("connection to the kernel failed: {0}")]
    Wire(#[from] DecodeError),
}

/// How serving ended without an error.
enum Outcome {
    /// The kernel closed the connection or said goodbye.
    Closed,
    /// A tool panicked; its error was reported and the process should exit.
    Panicked,
}

/// What the writer task is asked to do.
enum Outgoing {
    /// Write one encoded frame.
    Frame(Vec<u8>),
    /// Everything queued before this has been written; stop.
    Close,
}

pub(crate) fn run(plugin: Plugin) -> ExitCode {
    let env = match LaunchEnv::from_env(&plugin.name) {
        Ok(env) => env,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(REFUSED_EXIT);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(REFUSED_EXIT);
        }
    };
    let name = plugin.name.clone();
    let outcome = runtime.block_on(serve(plugin, env));
    // Handlers stuck in blocking code must not keep the process alive after the kernel left.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match outcome {
        Ok(Outcome::Closed) => ExitCode::SUCCESS,
        Ok(Outcome::Panicked) => ExitCode::from(PANIC_EXIT),
        Err(error) => {
            eprintln!("{name}: {error}");
            ExitCode::from(REFUSED_EXIT)
        }
    }
}

async fn serve(plugin: Plugin, env: LaunchEnv) -> Result<Outcome, ServeError> {
    let stream = connect(&env).await?;
    let (outgoing, queue) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_frames(stream.clone(), queue));
    let mut reader = FrameReader::new(stream);

    let mut hello = Hello::new(plugin.name.clone(), PeerKind::Tool, env.token);
    hello.features = vec![Feature::Cancel];
    send(&outgoing, &Message::Hello(hello));
    await_kernel_hello(&mut reader).await?;
    send(&outgoing, &Message::Manifest(Manifest { tools: plugin.tools }));

    let calls = Calls {
        handlers: Arc::new(plugin.handlers),
        in_flight: Arc::default(),
        outgoing: outgoing.clone(),
        panicked: Arc::new(Notify::new()),
    };
    let outcome = serve_calls(&mut reader, &calls).await;
    let _ = outgoing.send(Outgoing::Close);
    let _ = tokio::time::timeout(FLUSH_GRACE, writer).await;
    outcome
}

async fn connect(env: &LaunchEnv) -> Result<Arc<Stream>, ServeError> {
    let path = env.socket.display().to_string();
    let name = env
        .socket
        .as_path()
        .to_fs_name::<GenericFilePath>()
        .map_err(|source| ServeError::Connect { path: path.clone(), source })?;
    let stream = Stream::connect(name).await.map_err(|source| ServeError::Connect { path, source })?;
    Ok(Arc::new(stream))
}

async fn await_kernel_hello(reader: &mut FrameReader) -> Result<(), ServeError> {
    loop {
        match reader.next().await? {
            Some(Message::Hello(hello)) if hello.protocol == PROTOCOL_NAME && hello.version == PROTOCOL_VERSION => {
                return Ok(());
            }
            Some(Message::Hello(hello)) => {
                return Err(ServeError::VersionMismatch { protocol: hello.protocol, version: hello.version });
            }
            Some(Message::Goodbye(goodbye)) => return Err(ServeError::Refused(goodbye.reason)),
            Some(_) => continue,
            None => return Err(ServeError::ClosedDuringHandshake),
        }
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
    outgoing: mpsc::UnboundedSender<Outgoing>,
    /// Signalled once a handler panicked, to end the serve loop.
    panicked: Arc<Notify>,
}

impl Calls {
    fn start(&self, call: Call) {
        let Some(handler) = self.handlers.get(&call.tool).cloned() else {
            let known: Vec<&str> = self.handlers.keys().map(String::as_str).collect();
            let content = format!("Error: this plugin has no tool named '{}' (it has: {})", call.tool, known.join(", "));
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
                    let reason = panic_message(payload.as_ref());
                    send(&outgoing, &Message::Result(ToolResult { id, content: format!("Error: the tool crashed ({reason}); the plugin is restarting, try again"), is_error: true }));
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

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic".to_owned()
    }
}

/// Encodes and queues a message; a message too large for a frame becomes an error result.
fn send(outgoing: &mpsc::UnboundedSender<Outgoing>, message: &Message) {
    let mut frame = Vec::new();
    match oxibot_proto::encode_into(message, &mut frame, DEFAULT_MAX_FRAME_LEN) {
        Ok(()) => {
            let _ = outgoing.send(Outgoing::Frame(frame));
        }
        Err(error) => {
            if let Message::Result(result) = message {
                let content = format!("Error: the tool's output could not be sent ({error}); ask for less, e.g. with offset/limit");
                send(outgoing, &Message::Result(ToolResult { id: result.id, content, is_error: true }));
            }
        }
    }
}

/// Writes queued frames, coalescing whatever is queued into one write.
async fn write_frames(stream: Arc<Stream>, mut queue: mpsc::UnboundedReceiver<Outgoing>) {
    let mut batch = Vec::with_capacity(8 * 1024);
    while let Some(first) = queue.recv().await {
        let mut closing = false;
        let mut next = Some(first);
        while let Some(item) = next {
            match item {
                Outgoing::Frame(frame) => batch.extend_from_slice(&frame),
                Outgoing::Close => {
                    closing = true;
                    break;
                }
            }
            next = queue.try_recv().ok();
        }
        if (&*stream).write_all(&batch).await.is_err() || closing {
            return;
        }
        batch.clear();
    }
}

/// Reads whole messages from the connection.
struct FrameReader {
    stream: Arc<Stream>,
    decoder: FrameDecoder,
    chunk: Box<[u8]>,
}

impl FrameReader {
    fn new(stream: Arc<Stream>) -> FrameReader {
        FrameReader { stream, decoder: FrameDecoder::default(), chunk: vec![0; 16 * 1024].into_boxed_slice() }
    }

    /// The next message, or `None` when the kernel closed the connection between frames.
    async fn next(&mut self) -> Result<Option<Message>, DecodeError> {
        loop {
            if let Some(message) = self.decoder.next_message()? {
                return Ok(Some(message));
            }
            let read = (&*self.stream).read(&mut self.chunk).await?;
            if read == 0 {
                self.decoder.finish()?;
                return Ok(None);
            }
            self.decoder.extend(&self.chunk[..read]);
        }
    }
}

