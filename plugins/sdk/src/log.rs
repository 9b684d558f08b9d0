//! The plugin's leveled log: [`error!`](crate::error), [`warn!`](crate::warn),
//! [`info!`](crate::info) and [`debug!`](crate::debug).
//!
//! While the plugin is connected, a line goes to the kernel as the protocol's `log` message,
//! which the kernel writes into its own log at the line's level. Before the connection is up
//! (reading the config in `main`) and after it is gone, the line goes to stderr with its level
//! in front (`warn: …`); the kernel reads that prefix from a plugin's stderr and logs the line
//! at that level too.

use std::fmt;
use std::sync::Mutex;

use oxibot_proto::{Log, Message};

use crate::queue::{Sender, queue_message};

/// How much a log line matters; the names are the protocol's `level` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Something failed that the plugin cannot work around.
    Error,
    /// Something went wrong and the plugin carries on (a retry, a dropped message).
    Warn,
    /// What the plugin is doing: connected, reconnecting, a message ignored.
    Info,
    /// Details for tracking a problem down.
    Debug,
}

impl Level {
    /// The protocol's name of the level, also the stderr prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

/// The queue to the kernel while the plugin is connected; stderr is used without it.
static KERNEL: Mutex<Option<Sender>> = Mutex::new(None);

/// Sends later lines to the kernel through `outgoing` (called once the handshake is done).
pub(crate) fn attach(outgoing: Sender) {
    *kernel() = Some(outgoing);
}

/// Sends later lines to stderr again (called when the connection closes).
pub(crate) fn detach() {
    *kernel() = None;
}

fn kernel() -> std::sync::MutexGuard<'static, Option<Sender>> {
    // A panic while holding the lock left nothing half-written: the option is replaced whole.
    KERNEL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Writes one line at `level`: to the kernel when connected, else to stderr with its level in
/// front. The macros call this; call it directly when the level is chosen at run time.
pub fn write(level: Level, args: fmt::Arguments<'_>) {
    let message = args.to_string();
    let sent = kernel().as_ref().is_some_and(|outgoing| {
        let log = Message::Log(Log { level: level.as_str().to_owned(), message: message.clone() });
        queue_message(outgoing, &log).is_ok() && !outgoing.is_closed()
    });
    if !sent {
        eprintln!("{}: {message}", level.as_str());
    }
}

/// Logs a line at error level, with `format!` arguments.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => { $crate::log::write($crate::log::Level::Error, format_args!($($arg)+)) };
}

/// Logs a line at warn level, with `format!` arguments.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => { $crate::log::write($crate::log::Level::Warn, format_args!($($arg)+)) };
}

/// Logs a line at info level, with `format!` arguments.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => { $crate::log::write($crate::log::Level::Info, format_args!($($arg)+)) };
}

/// Logs a line at debug level, with `format!` arguments.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => { $crate::log::write($crate::log::Level::Debug, format_args!($($arg)+)) };
}

#[cfg(test)]
mod tests {
    use oxibot_proto::framing::Outgoing;
    use tokio::sync::mpsc;

    use super::*;

    #[test]
    fn a_line_reaches_the_kernel_as_a_log_message_with_its_level() {
        let (outgoing, mut queue) = mpsc::unbounded_channel();
        attach(outgoing);
        crate::warn!("disk {} full", "almost");
        detach();
        let log = Message::Log(Log { level: "warn".into(), message: "disk almost full".into() });
        let expected = Outgoing::Frame(oxibot_proto::encode(&log).unwrap());
        // Other tests of this process may log meanwhile; this line must be among what came.
        let queued: Vec<Outgoing> = std::iter::from_fn(|| queue.try_recv().ok()).collect();
        assert!(queued.contains(&expected), "the warning was not queued");
    }
}
