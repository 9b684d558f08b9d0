//! Errors of the plugin host, each naming the plugin and what happened to it.

use std::time::Duration;

/// Why a tool call through the plugin host failed.
///
/// Every variant names the plugin (where one is involved) so a log line or a tool error shown
/// to the model says which process misbehaved.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PluginError {
    /// No plugin offers a tool of that name.
    #[error("unknown tool '{tool}'{hint}")]
    UnknownTool {
        /// The name asked for.
        tool: String,
        /// " (did you mean 'x'?)" or a list of known tools; may be empty.
        hint: String,
    },
    /// The plugin process closed its connection, exited or was killed while calls were in
    /// flight (or was found dead when a call arrived).
    #[error("plugin '{plugin}' closed unexpectedly ({cause}); exit status: {status}{}", stderr_suffix(.stderr_tail))]
    PluginClosed {
        /// The plugin's name.
        plugin: String,
        /// What the kernel saw first: end of stream, a protocol violation, a hang, …
        cause: String,
        /// The exit status as text (`exit code 3`, `signal 9 (SIGKILL)`, `still running`).
        status: String,
        /// The last lines the plugin wrote to stderr.
        stderr_tail: Vec<String>,
    },
    /// The call did not finish within its timeout; the plugin is treated as hung.
    #[error("tool '{tool}' of plugin '{plugin}' did not answer within {}; the plugin was restarted", seconds(*after))]
    Timeout {
        /// The plugin's name.
        plugin: String,
        /// The tool that was called.
        tool: String,
        /// The timeout that expired.
        after: Duration,
    },
    /// The plugin was restarted too often and is no longer started.
    #[error("plugin '{plugin}' has failed and is not restarted any more: {reason}")]
    Failed {
        /// The plugin's name.
        plugin: String,
        /// Why it was given up on.
        reason: String,
    },
    /// The plugin did not become ready in time (it is starting or restarting).
    #[error("plugin '{plugin}' is not ready ({state}) after waiting {}s", waited.as_secs_f64())]
    NotReady {
        /// The plugin's name.
        plugin: String,
        /// Its state when the wait ended.
        state: String,
        /// How long the call waited.
        waited: Duration,
    },
    /// The arguments could not be encoded into a frame (for example, over the size limit).
    #[error("cannot send the call to plugin '{plugin}': {reason}")]
    Encode {
        /// The plugin's name.
        plugin: String,
        /// What the encoder said.
        reason: String,
    },
    /// The host is shutting down.
    #[error("the plugin host is shutting down")]
    ShuttingDown,
    /// A plugin of that name already runs in this host.
    #[error("a plugin named '{plugin}' is already running")]
    AlreadyRunning {
        /// The name asked for.
        plugin: String,
    },
    /// No plugin of that name runs in this host.
    #[error("no plugin named '{plugin}'")]
    UnknownPlugin {
        /// The name asked for.
        plugin: String,
    },
    /// The plugin is starting, restarting, failed or stopped; a message for it was not sent.
    #[error("plugin '{plugin}' is not running ({state}); try again once it is ready")]
    NotRunning {
        /// The plugin's name.
        plugin: String,
        /// Its state: `starting`, `restarting`, `failed` or `stopped`.
        state: String,
    },
    /// A message that only channels take was addressed to another kind of plugin.
    #[error("plugin '{plugin}' is a {kind} plugin, not a channel")]
    NotAChannel {
        /// The plugin's name.
        plugin: String,
        /// The kind it announced.
        kind: String,
    },
    /// The message is not one the kernel sends to a channel.
    #[error("a '{message}' message cannot be sent to channel '{plugin}' (only outbound, delta and inbound_accepted)")]
    NotForChannel {
        /// The channel's name.
        plugin: String,
        /// The message's `type`.
        message: String,
    },
}

fn stderr_suffix(tail: &[String]) -> String {
    if tail.is_empty() {
        return String::new();
    }
    format!("; last stderr lines:\n{}", tail.join("\n"))
}

/// Why a bundled channel plugin cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum ChannelSpecError {
    /// The name could not be part of an executable's file name.
    #[error("'{0}' is not a valid channel name (use letters, digits, '-' and '_')")]
    InvalidName(String),
    /// No channel of that name is bundled with oxibot.
    #[error("channel '{0}' is not one oxibot has (it has: {list})", list = crate::claims::BUNDLED_CHANNELS.join(", "))]
    Unknown(String),
    /// The channel is bundled with oxibot, but this executable was built without it.
    #[error("this oxibot was built without the {0} channel (cargo feature channel-{0} of oxibot-kernel)")]
    NotBuiltIn(String),
}

/// Why a plugin instance could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The private socket directory or the listener could not be created.
    #[error("cannot create the plugin socket {path}: {source}")]
    Listen {
        /// The socket path.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The process could not be spawned.
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The process exited before finishing the handshake.
    #[error("exited during the handshake ({status}){}", stderr_suffix(.stderr_tail))]
    ExitedEarly {
        /// The exit status as text.
        status: String,
        /// The last stderr lines.
        stderr_tail: Vec<String>,
    },
    /// The handshake did not complete in time.
    #[error("no handshake within {}", seconds(*.0))]
    HandshakeTimeout(Duration),
    /// The plugin broke the handshake rules (garbage, wrong message order, early close).
    #[error("{0}")]
    Handshake(String),
    /// The plugin closed the connection before the handshake completed.
    #[error("closed the connection during the handshake")]
    ClosedEarly,
    /// The kernel refused the plugin's `hello` (wrong protocol, version, token or kind).
    #[error("refused: {0}")]
    Refused(String),
}

/// A duration as a person reads it: milliseconds below a second, else seconds with at most one
/// decimal (`40ms`, `2.5s`, `5s`), never the nanoseconds left of a deadline (`4.999997136s`).
pub(crate) fn seconds(duration: Duration) -> String {
    let tenths = (duration.as_secs_f64() * 10.0).round();
    if duration < Duration::from_millis(950) {
        format!("{}ms", duration.as_millis())
    } else if tenths % 10.0 == 0.0 {
        format!("{}s", tenths / 10.0)
    } else {
        format!("{:.1}s", tenths / 10.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_errors_read_as_a_person_would_write_them() {
        assert_eq!(seconds(Duration::from_nanos(4_999_997_136)), "5s");
        assert_eq!(seconds(Duration::from_millis(2_500)), "2.5s");
        assert_eq!(seconds(Duration::from_secs(120)), "120s");
        assert_eq!(seconds(Duration::from_millis(40)), "40ms");
    }
}
