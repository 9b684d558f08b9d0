//! The oxibot plugin protocol: wire types and a byte-level codec.
//!
//! This crate is the specification of how the oxibot kernel talks to its plugin processes
//! (tools such as `oxibot-tool-fs`, chat channels such as `oxibot-channel-telegram`). It holds
//! types and a codec only: it opens no sockets, spawns nothing, and knows nothing of the
//! kernel. Everything a plugin author needs, in any language, is on this page.
//!
//! # Cargo features
//!
//! With the default features this crate depends on no async runtime: the codec works on byte
//! slices ([`encode`], [`FrameDecoder`]) and blocking readers ([`read_message`]).
//!
//! - `tokio`: the `framing` module, the async framing the kernel and the Rust plugin SDK share:
//!   a frame reader over any tokio `AsyncRead` and a writer task that batches queued frames.
//!   It still opens no socket and spawns nothing; the caller brings the stream.
//!
//! # Transport
//!
//! The kernel creates a private directory (mode `0700`), listens on a Unix-domain socket in it,
//! and only then starts the plugin executable with three environment variables:
//!
//! | variable | meaning |
//! |---|---|
//! | `OXIBOT_PLUGIN_SOCKET` | filesystem path of the socket to connect to |
//! | `OXIBOT_PLUGIN_TOKEN` | a one-time secret to present in `Hello` |
//! | `OXIBOT_KERNEL_PID` | the kernel's process id (for information) |
//! | `OXIBOT_CHANNEL_CONFIG` | channel plugins only: the JSON text of the channel's section of the kernel's config (absent means `{}`) |
//!
//! A plugin started without these variables was not started by the kernel and should print an
//! explanation and exit with a non-zero status. The plugin's stdout and stdin are not used by the
//! protocol; stderr is captured line by line into the kernel's log and the last lines are shown
//! when the plugin dies. The kernel removes the socket file once the plugin has connected, so a
//! socket path is good for exactly one connection.
//!
//! # Framing
//!
//! Each message is one frame: a 4-byte **big-endian unsigned length** `N`, then `N` bytes holding
//! exactly one MessagePack value. `N` counts the body only. A receiver refuses a frame whose
//! length is over its limit (16 MiB, [`DEFAULT_MAX_FRAME_LEN`], unless configured otherwise)
//! without reading or allocating the body, and closes the connection.
//!
//! The end of the stream between two frames is a normal close. The end of the stream inside a
//! frame, a body that is not valid MessagePack, or a body that is not a map with a string `type`
//! field is a protocol violation: the receiver closes the connection. The kernel then treats the
//! plugin as crashed (kills and restarts it). Arrays and maps nested 256 levels deep or more (the
//! message's own map counts) are refused as not valid, so decoding cannot exhaust a thread's stack.
//!
//! # Messages
//!
//! A message is a MessagePack **map with string keys** (named fields). The `type` key names the
//! message; the other keys are the fields listed below. Field order does not matter. Fields
//! marked optional may be absent (or `nil` where the type is optional).
//!
//! | `type` | direction | fields |
//! |---|---|---|
//! | `hello` | both, first | `protocol` str, `version` uint, `name` str, `kind` str, `features` [str] (optional), `token` str |
//! | `manifest` | plugin → kernel, second | `tools`: [ {`name` str, `description` str, `parameters` JSON-Schema map, `read_only` bool, `exclusive` bool, `timeout_secs` uint (optional)} ] |
//! | `call` | kernel → plugin | `id` uint, `tool` str, `arguments` map, `context` {`session_key`, `channel`, `chat_id`: str or nil; `workspace` str; `restrict_to_workspace` bool; `idempotency_key` str (optional: the call's journal key, one per call however often it is sent)} |
//! | `result` | plugin → kernel | `id` uint, `content` str, `is_error` bool |
//! | `cancel` | kernel → plugin | `id` uint |
//! | `log` | plugin → kernel | `level` str (`error`/`warn`/`info`/`debug`/`trace`), `message` str |
//! | `ping` | either | `nonce` uint; answered with `pong` carrying the same nonce |
//! | `pong` | either | `nonce` uint |
//! | `goodbye` | either | `reason` str; the sender closes the connection next |
//! | `inbound` | channel → kernel | `id` str, `channel` str, `sender_id` str, `chat_id` str, `content` str, `media` [str], `metadata` map |
//! | `inbound_accepted` | kernel → channel | `id` str (of the `inbound`) |
//! | `outbound` | kernel → channel | `id` uint, `chat_id` str, `content` str, `media` [str], `stream_id` uint (optional), `metadata` map |
//! | `delta` | kernel → channel | `stream_id` uint, `chat_id` str, `text` str (appended to the reply so far) |
//! | `delivery_ack` | channel → kernel | `id` uint (of the `outbound` or `approval_request`), `ok` bool, `error` str (optional), `permanent` bool (optional) |
//! | `approval_request` | kernel → channel | `id` uint, `chat_id` str, `code` str, `tool` str, `shown` str, `timeout_secs` uint, `text` str, `answers` [ {`label` str, `answer` str, `refuses` bool} ], `metadata` map |
//!
//! # Handshake
//!
//! 1. The plugin connects and sends `hello` with `protocol` = `"oxibot"`, `version` =
//!    [`PROTOCOL_VERSION`], its `name`, its `kind` (`"tool"` or `"channel"`) and the `token`
//!    from `OXIBOT_PLUGIN_TOKEN`.
//! 2. The kernel checks protocol, version and token. On a mismatch it sends `goodbye` with the
//!    reason and closes. Otherwise it answers with its own `hello` (`kind` = `"kernel"`, `name` =
//!    `"kernel"`, the same token).
//! 3. The plugin sends `manifest` (a channel plugin sends one with no tools).
//!
//! The whole handshake must finish within the kernel's handshake timeout (a few seconds), or the
//! plugin is killed.
//!
//! # Calls
//!
//! After the handshake the kernel sends `call`s at any time, several at once; each has an `id`
//! unique among calls in flight. The plugin answers each with exactly one `result` carrying the
//! same `id`, in any order. `content` is text for the language model: the tool's output, or when
//! `is_error` is true a message explaining what went wrong in words the model can act on.
//!
//! The kernel may send `cancel` for a call in flight (its caller went away, or the call ran past
//! its timeout). The plugin should stop the work; it may still send a `result`, which the kernel
//! ignores. A plugin that does not answer within the call's timeout is considered hung: it is
//! killed, every call in flight on it fails, and it is restarted.
//!
//! A tool plugin whose `hello` and `manifest` are fixed by its executable, arguments and
//! environment announces the `static_manifest` feature. The kernel may then keep them, keyed by
//! the identity of the executable (and of every argument that names a file), the arguments and
//! the environment, and next time register the tools without starting the plugin, starting it
//! on the first call. A plugin whose tools depend on anything else (a remote server, a file it
//! reads) must not announce it.
//!
//! Relative paths in arguments resolve against `context.workspace`. When
//! `context.restrict_to_workspace` is true the tool must refuse (with an error result) anything
//! that reaches outside the workspace.
//!
//! # Channels
//!
//! A channel plugin (`kind` = `"channel"`, executable `oxibot-channel-<name>`) bridges a chat
//! service. It announces the `streaming` feature in `hello` if it can show a reply while it is
//! being written, and sends a `manifest` with no tools (the kernel refuses a channel that offers
//! tools). After the handshake both sides send at any time:
//!
//! - The channel sends each message a user wrote as `inbound`, with an `id` of its choosing.
//!   The kernel answers `inbound_accepted` with that `id` once the message is persisted. Until
//!   then the channel must be able to deliver the message again: the kernel may restart (and
//!   with it the channel) before accepting it. A service with an acknowledged queue advances
//!   its cursor only after the acceptance (Telegram's `getUpdates` offset, for example).
//! - The kernel sends replies as `outbound`; the channel answers each with one `delivery_ack`
//!   carrying the same `id`, `ok` = false with an `error` when the service refused it.
//! - While a reply is being written the kernel may send `delta`s (only to a channel that
//!   announced `streaming`); the `outbound` that ends the reply carries the same `stream_id`
//!   and the whole text.
//! - To a channel that announced `tool_hints` (and `streaming`) the kernel also sends, while a
//!   reply is being written, an `outbound` per tool call the turn starts: `content` is a short
//!   hint (`read_file {"path": "notes.md"}`), `stream_id` that of the reply, and `metadata`
//!   `{"_tool_hint": true}`. The channel shows it apart from the reply and acknowledges it like
//!   any `outbound`; the kernel does not retry a hint.
//! - When a tool call waits for a person's approval, a channel that announced `approvals`
//!   gets an `approval_request`: the call (`tool`, and `shown`, the call as it will run), the
//!   `code`, the seconds until no answer counts as no, a `text` for a person, and the
//!   `answers` to offer as buttons. A pressed button is submitted as an `inbound` whose
//!   `content` is the answer's `answer` (`/approve CODE`, `/approve CODE always`,
//!   `/deny CODE`), from the person who pressed it, in the request's chat; the kernel takes it
//!   only from the person the turn answers. The channel acknowledges the request with a
//!   `delivery_ack` of its `id`. To a channel that did not announce `approvals` (every older
//!   one) the kernel sends the request as an `outbound` whose `content` is the `text` (it says
//!   to reply `/approve CODE` or `/deny CODE`) and whose `metadata` holds `approval`:
//!   `{code, tool, shown, timeout_secs}`.
//! - An `outbound` carries the inbound message's `metadata` back. The one that ends a model's
//!   turn adds `usage`: the tokens the turn's model calls used, as `prompt_tokens` (cached ones
//!   included), `completion_tokens`, `total_tokens` and `cached_tokens` (all uint).
//!
//! # Unknown things
//!
//! - A message whose `type` the receiver does not know is ignored ([`Message::Unknown`]).
//! - Fields the receiver does not know are ignored; absent optional fields take their defaults.
//! - Feature names and kinds the receiver does not know are kept as text and otherwise ignored
//!   ([`Feature::Other`], [`PeerKind::Other`]).
//! - A `result` or `cancel` for an id that is not in flight is ignored, and so are an
//!   `inbound_accepted` or a `delivery_ack` for an id the receiver does not know.
//! - A tool plugin that sends channel messages (`inbound`, `delivery_ack`) is ignored.
//!
//! # Versioning
//!
//! [`PROTOCOL_VERSION`] is an integer that is independent of any crate or release version. It is
//! bumped only when a change would make an older peer misread the wire: a field changes type or
//! meaning, a required field is added, or framing changes. Adding an optional field, a message
//! type that may be ignored, or a feature name does not bump it. Each version has a named
//! constant saying what it introduced, and the kernel refuses (with `goodbye`) a `hello` whose
//! version it does not speak.

mod codec;
#[cfg(feature = "tokio")]
pub mod framing;
mod messages;
#[cfg(test)]
mod tests;

pub use codec::{
    DEFAULT_MAX_FRAME_LEN, DecodeError, EncodeError, FrameDecoder, HEADER_LEN, body_len, decode_body, encode,
    encode_into, read_message,
};
pub use messages::{
    ApprovalAnswer, ApprovalRequest, Call, CallContext, Cancel, DeliveryAck, Delta, Feature, Goodbye, Hello, Inbound,
    InboundAccepted, Log, Manifest, Message, Outbound, PeerKind, Ping, ToolResult, ToolSpec,
};

/// Environment variable through which the kernel passes the socket path to a plugin.
pub const ENV_SOCKET: &str = "OXIBOT_PLUGIN_SOCKET";
/// Environment variable through which the kernel passes the one-time token to a plugin.
pub const ENV_TOKEN: &str = "OXIBOT_PLUGIN_TOKEN";
/// Environment variable through which the kernel passes its process id to a plugin.
pub const ENV_KERNEL_PID: &str = "OXIBOT_KERNEL_PID";
/// Environment variable through which the kernel passes a channel plugin the JSON text of its
/// config section; a channel started without it behaves as if it held `{}`.
pub const ENV_CHANNEL_CONFIG: &str = "OXIBOT_CHANNEL_CONFIG";
/// Environment variable through which the kernel passes a bundled tool plugin that needs
/// settings (today `web`) the JSON text of them; see that plugin's docs for the shape.
pub const ENV_TOOL_CONFIG: &str = "OXIBOT_TOOL_CONFIG";

/// Environment variable through which the kernel passes the MCP bridge plugin
/// (`oxibot-tool-mcp`) the JSON config of the one MCP server it serves: that server's
/// `tools.mcpServers` entry exactly as the user wrote it (`${VAR}`s expanded), unknown keys
/// included; the bridge validates it.
pub const ENV_MCP_CONFIG: &str = "OXIBOT_MCP_CONFIG";
/// Environment variable through which the kernel passes the MCP bridge plugin the name of the
/// server it serves (its key in `tools.mcpServers`).
pub const ENV_MCP_SERVER: &str = "OXIBOT_MCP_SERVER";
/// Environment variable through which the kernel passes a tool plugin that saves files for the
/// model (today the MCP bridge, for images in results) the directory to save them in:
/// `<data dir>/media/<plugin name>`. The kernel creates it, and a confined plugin may write there.
pub const ENV_MEDIA_DIR: &str = "OXIBOT_MEDIA_DIR";

/// The protocol name sent in every `Hello`.
pub const PROTOCOL_NAME: &str = "oxibot";

/// Version 1: hello/manifest handshake, multiplexed tool calls with cancel, channel messages.
pub const PROTOCOL_VERSION_INITIAL: u32 = 1;

/// The wire version this build speaks.
pub const PROTOCOL_VERSION: u32 = PROTOCOL_VERSION_INITIAL;

impl Hello {
    /// A `Hello` of this protocol version.
    pub fn new(name: impl Into<String>, kind: PeerKind, token: impl Into<String>) -> Hello {
        Hello {
            protocol: PROTOCOL_NAME.to_owned(),
            version: PROTOCOL_VERSION,
            name: name.into(),
            kind,
            features: Vec::new(),
            token: token.into(),
        }
    }
}
