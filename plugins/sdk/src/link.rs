//! The plugin's end of the kernel connection, shared by tool and channel plugins: the process
//! entry (runtime and exit codes), connecting and the hello exchange. Frames are read and
//! written with `oxibot_proto::framing`.

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use interprocess::local_socket::tokio::{Stream, prelude::*};
use interprocess::local_socket::{GenericFilePath, ToFsName};
pub(crate) use oxibot_proto::encode;
pub(crate) use oxibot_proto::framing::Outgoing;
use oxibot_proto::framing::{Shared, write_frames};
use oxibot_proto::{DecodeError, Hello, Manifest, Message, PROTOCOL_NAME, PROTOCOL_VERSION};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::launch::LaunchEnv;
pub(crate) use crate::queue::{Sender, queue_message};

/// Exit status after the plugin's own code panicked (EX_SOFTWARE).
pub(crate) const PANIC_EXIT: u8 = 70;
/// Exit status when the plugin could not start or the kernel refused it.
pub(crate) const REFUSED_EXIT: u8 = 2;
/// How long queued messages get to reach the kernel before the process exits anyway.
const FLUSH_GRACE: Duration = Duration::from_secs(1);

/// Why a plugin stopped with an error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    #[error("cannot connect to the kernel at {path}: {source}")]
    Connect { path: String, source: std::io::Error },
    #[error("the kernel refused this plugin: {0}")]
    Refused(String),
    #[error("the kernel closed the connection during the handshake")]
    ClosedDuringHandshake,
    #[error(
        "the kernel speaks protocol {protocol} version {version}, this plugin speaks {PROTOCOL_NAME} version {PROTOCOL_VERSION}"
    )]
    VersionMismatch { protocol: String, version: u32 },
    #[error("connection to the kernel failed: {0}")]
    Wire(#[from] DecodeError),
    #[error("{0}")]
    Launch(#[from] crate::launch::LaunchError),
}

/// Reads the launch environment, runs `serve` on a small runtime, and maps the outcome to the
/// process's exit status (errors are printed to stderr, which the kernel logs).
pub(crate) fn run_main<F, Fut>(name: &str, serve: F) -> ExitCode
where
    F: FnOnce(LaunchEnv) -> Fut,
    Fut: Future<Output = Result<ExitCode, ServeError>>,
{
    let env = match LaunchEnv::from_env(name) {
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
    let outcome = runtime.block_on(serve(env));
    // Code stuck in blocking calls must not keep the process alive after the kernel left.
    runtime.shutdown_timeout(Duration::from_millis(100));
    outcome.unwrap_or_else(|error| {
        crate::error!("{name}: {error}");
        ExitCode::from(REFUSED_EXIT)
    })
}

/// A connection to the kernel that passed the handshake.
pub(crate) struct Link {
    /// Messages from the kernel, after its `hello`.
    pub(crate) reader: FrameReader,
    /// Frames for the kernel.
    pub(crate) outgoing: Sender,
    /// The writer task; awaited (bounded) on close so queued frames go out.
    writer: JoinHandle<()>,
}

impl Link {
    /// Connects, sends `hello`, waits for the kernel's, and sends `manifest`.
    pub(crate) async fn open(env: &LaunchEnv, hello: Hello, manifest: Manifest) -> Result<Link, ServeError> {
        let stream = connect(env).await?;
        let (outgoing, queue) = mpsc::unbounded_channel();
        let writer = tokio::spawn(write_frames(Shared(stream.clone()), queue));
        let mut reader = FrameReader::new(Shared(stream));
        let _ = queue_message(&outgoing, &Message::Hello(hello));
        await_kernel_hello(&mut reader).await?;
        let _ = queue_message(&outgoing, &Message::Manifest(manifest));
        crate::log::attach(outgoing.clone());
        Ok(Link { reader, outgoing, writer })
    }

    /// Flushes what is queued (bounded by a grace period) and closes the connection.
    pub(crate) async fn close(self) {
        crate::log::detach();
        let _ = self.outgoing.send(Outgoing::Close);
        let _ = tokio::time::timeout(FLUSH_GRACE, self.writer).await;
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic".to_owned()
    }
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

/// Reads whole messages from the connection; `None` when the kernel closed it between frames.
pub(crate) type FrameReader = oxibot_proto::framing::FrameReader<Shared<Stream>>;
