//! What a plugin slot is doing (`SlotState`, published to callers and status), the message
//! that disables a plugin whose tool names a plugin of higher precedence took, and the one
//! that starts an idle plugin.

use actix::prelude::*;
use oxibot_proto::{Feature, PeerKind, ToolSpec};

use super::connection::Connection;

/// What a plugin slot is doing, published through a `watch` channel to callers and status.
#[derive(Clone)]
pub enum SlotState {
    /// Not started: its remembered tools are offered, and the first call starts it.
    Idle {
        /// Starts the plugin.
        wake: Recipient<Wake>,
        /// The name it announced when it last ran.
        announced: String,
    },
    /// The first instance is being started.
    Starting,
    /// Serving calls.
    Ready {
        /// Handle for making calls.
        conn: Connection,
        /// The process id.
        pid: u32,
        /// The tools from its manifest (none for a channel).
        tools: Vec<ToolSpec>,
        /// The kind it announced in `hello`.
        kind: PeerKind,
        /// The features it announced in `hello`.
        features: Vec<Feature>,
        /// The name it announced in `hello` (a plugin run by an interpreter is named after
        /// the interpreter until then).
        announced: String,
        /// The line about its state its manifest carried, if any.
        detail: Option<String>,
    },
    /// An instance died and a new one is being started.
    Restarting {
        /// Why the last instance ended.
        reason: String,
    },
    /// Given up on; calls fail at once with the reason.
    Failed {
        /// Why.
        reason: String,
    },
    /// Shut down by the host.
    Stopped,
}

impl SlotState {
    /// A one-word label: `idle`, `starting`, `running`, `restarting`, `failed`, `stopped`.
    pub fn label(&self) -> &'static str {
        match self {
            SlotState::Idle { .. } => "idle",
            SlotState::Starting => "starting",
            SlotState::Ready { .. } => "running",
            SlotState::Restarting { .. } => "restarting",
            SlotState::Failed { .. } => "failed",
            SlotState::Stopped => "stopped",
        }
    }

    /// Whether the state will not change without outside help (idle, ready, failed or stopped).
    pub fn is_settled(&self) -> bool {
        matches!(self, SlotState::Idle { .. } | SlotState::Ready { .. } | SlotState::Failed { .. } | SlotState::Stopped)
    }
}

/// Tells a plugin that a plugin of higher precedence took one of its tool names.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Evict {
    /// The clash, for `oxibot tools list`.
    pub reason: String,
}

/// Starts an idle plugin (its first call is waiting).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Wake;
