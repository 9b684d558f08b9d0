//! The SDK for writing oxibot tool and channel plugins in Rust.
//!
//! A tool plugin is an executable named `oxibot-tool-<name>` that the kernel starts, connected
//! to it over a local socket (see the `oxibot-proto` crate docs for the wire protocol). This
//! crate does the protocol: the handshake, the manifest, running calls concurrently,
//! cancellation, and turning a panic into an error result followed by a clean exit. A plugin
//! only declares its tools and writes one async function per tool:
//!
//! ```no_run
//! use oxibot_plugin::{parse_args, CallContext, Plugin, Tool, ToolError};
//! use serde_json::{json, Value};
//!
//! #[derive(serde::Deserialize)]
//! struct Args { text: String }
//!
//! async fn shout(_ctx: CallContext, args: Value) -> Result<String, ToolError> {
//!     let args: Args = parse_args(args)?;
//!     Ok(args.text.to_uppercase())
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
//!     Plugin::new("shout")
//!         .tool(Tool::new("shout", "Repeat text in capitals", schema).read_only(), shout)
//!         .run()
//! }
//! ```
//!
//! A channel plugin (`oxibot-channel-<name>`, bridging a chat service) is written with
//! [`ChannelPlugin`] and a [`ChannelHandle`]; see the [`channel`] module. What chat channels
//! share beyond the protocol (splitting long replies, reconnect backoff, the typing indicator,
//! escaping, config sections) is the [`chat`] kit.
//!
//! Plugins log with [`error!`], [`warn!`], [`info!`] and [`debug!`] (the [`log`] module): the
//! kernel writes each line into its own log at the line's level.
//!
//! What this crate is not: it has no kernel types and no actor system, and it never decides
//! policy for a tool (the workspace restriction is applied by the tool through [`workspace`]).

pub mod beneath;
pub mod channel;
pub mod chat;
mod launch;
mod link;
pub mod log;
mod queue;
mod serve;
pub mod serving;
mod tool;
pub mod util;
pub mod workspace;

pub use channel::{ChannelError, ChannelEvent, ChannelHandle, ChannelPlugin, ServiceOutcome};
pub use launch::{LaunchEnv, LaunchError};
pub use oxibot_proto::{ApprovalAnswer, ApprovalRequest, CallContext, Delta, Inbound, Outbound};
pub use tool::{Plugin, Tool, ToolError, ToolOutput, parse_args};
