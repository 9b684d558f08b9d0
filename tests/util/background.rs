//! A test server running on its own thread and tokio runtime, stopped and joined when dropped,
//! so in-process tests and tests that spawn binaries use the fakes alike.

use std::future::Future;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

/// A running server future; dropping it stops the future and joins the thread.
pub struct BackgroundServer {
    /// Ends the server future.
    shutdown: Option<oneshot::Sender<()>>,
    /// The server's thread.
    thread: Option<JoinHandle<()>>,
}

impl BackgroundServer {
    /// Runs the future `serve` makes (inside the new runtime, so it may register listeners
    /// with it) on a thread named `name`.
    pub fn start<F, Fut>(name: &str, serve: F) -> BackgroundServer
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let (shutdown, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                runtime.block_on(async move {
                    tokio::select! {
                        _ = stopped => {}
                        () = serve() => {}
                    }
                });
            })
            .unwrap();
        BackgroundServer { shutdown: Some(shutdown), thread: Some(thread) }
    }
}

impl Drop for BackgroundServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
