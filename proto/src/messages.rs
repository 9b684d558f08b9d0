//! The messages exchanged between the kernel and a plugin, and their parts.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Declares [`Message`] with each variant's wire name written once: the name becomes the
/// variant's serde tag and what [`Message::type_name`] returns, so the two cannot disagree.
/// The macro adds the `Unknown` catch-all itself.
macro_rules! messages {
    (
        $(#[$enum_meta:meta])*
        pub enum Message {
            $( $(#[$meta:meta])* $tag:literal => $variant:ident($body:ty), )*
        }
    ) => {
        $(#[$enum_meta])*
        pub enum Message {
            $( $(#[$meta])* #[serde(rename = $tag)] $variant($body), )*
            /// A message type this build does not know. Never sent; receivers ignore it.
            #[serde(other, rename = "unknown")]
            Unknown,
        }

        impl Message {
            /// The `type` this message has on the wire, e.g. `"delivery_ack"`.
            ///
            /// [`Message::Unknown`] gives `"unknown"`, the tag it would be written with; the
            /// `type` it arrived with is not kept.
            pub fn type_name(&self) -> &'static str {
                match self {
                    $( Message::$variant(_) => $tag, )*
                    Message::Unknown => "unknown",
                }
            }
        }
    };
}

messages! {
    /// Every message on the wire. The `type` field of the MessagePack map names the variant.
    ///
    /// A receiver that meets a `type` it does not know decodes it as [`Message::Unknown`] and
    /// ignores it; unknown fields inside a known message are ignored as well.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "type")]
    pub enum Message {
        /// First message in each direction. Plugin → kernel, then kernel → plugin.
        "hello" => Hello(Hello),
        /// The tools a plugin offers. Plugin → kernel, once, right after the kernel's `Hello`.
        "manifest" => Manifest(Manifest),
        /// Run one tool. Kernel → plugin.
        "call" => Call(Call),
        /// The outcome of a call. Plugin → kernel, exactly once per `Call`.
        "result" => Result(ToolResult),
        /// Stop working on a call. Kernel → plugin. A late `Result` for it is ignored.
        "cancel" => Cancel(Cancel),
        /// A log line for the kernel's log. Plugin → kernel.
        "log" => Log(Log),
        /// Liveness probe. Either direction; the receiver answers with `Pong` and the same nonce.
        "ping" => Ping(Ping),
        /// Answer to `Ping`. Either direction.
        "pong" => Pong(Ping),
        /// The sender is about to close the connection. Either direction.
        "goodbye" => Goodbye(Goodbye),
        /// A chat message a user sent. Channel plugin → kernel.
        "inbound" => Inbound(Inbound),
        /// The kernel has persisted an inbound message. Kernel → channel plugin.
        "inbound_accepted" => InboundAccepted(InboundAccepted),
        /// A message to deliver to a chat. Kernel → channel plugin.
        "outbound" => Outbound(Outbound),
        /// A piece of a reply being streamed. Kernel → channel plugin.
        "delta" => Delta(Delta),
        /// Whether an outbound message was delivered. Channel plugin → kernel.
        "delivery_ack" => DeliveryAck(DeliveryAck),
        /// A tool call waiting for a person's yes. Kernel → a channel plugin that announced
        /// `approvals`; answered with `DeliveryAck` like an `Outbound`.
        "approval_request" => ApprovalRequest(ApprovalRequest),
    }
}

/// The first message each way: who is speaking, which protocol, and the one-time token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Always [`crate::PROTOCOL_NAME`].
    pub protocol: String,
    /// The wire version the sender speaks, see [`crate::PROTOCOL_VERSION`].
    pub version: u32,
    /// The plugin's name (for the kernel's `Hello`: `"kernel"`).
    pub name: String,
    /// What the sender is.
    pub kind: PeerKind,
    /// Optional capabilities; a receiver ignores entries it does not know.
    #[serde(default)]
    pub features: Vec<Feature>,
    /// The one-time token the kernel handed the process in `OXIBOT_PLUGIN_TOKEN`.
    /// The kernel echoes it back in its own `Hello`.
    #[serde(default)]
    pub token: String,
}

/// The role of a peer on a connection.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum PeerKind {
    /// The oxibot kernel.
    Kernel,
    /// A tool plugin: answers `Call`s.
    Tool,
    /// A channel plugin: bridges a chat service.
    Channel,
    /// A kind this build does not know, kept by name.
    Other(String),
}

/// An optional capability announced in `Hello`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Feature {
    /// The plugin stops work when it receives `Cancel`.
    Cancel,
    /// The channel renders `Delta` messages as a live, growing reply.
    Streaming,
    /// The tool plugin's `hello` and `manifest` depend only on its executable, its arguments
    /// and its environment, so the kernel may remember them and start the plugin on its first
    /// call instead of at startup.
    StaticManifest,
    /// The channel shows tool hints: `Outbound`s whose metadata has `_tool_hint: true`, sent
    /// while the reply with their `stream_id` is being written.
    ToolHints,
    /// The channel takes approval requests as [`ApprovalRequest`] messages (and draws its
    /// answers as buttons); without it they arrive as an `Outbound` telling the person to
    /// reply `/approve CODE`.
    Approvals,
    /// A feature this build does not know, kept by name and otherwise ignored.
    Other(String),
}

macro_rules! string_enum {
    ($ty:ident { $($variant:ident => $text:literal),* $(,)? }) => {
        impl From<String> for $ty {
            fn from(text: String) -> Self {
                match text.as_str() {
                    $($text => $ty::$variant,)*
                    _ => $ty::Other(text),
                }
            }
        }
        impl From<$ty> for String {
            fn from(value: $ty) -> String {
                match value {
                    $($ty::$variant => $text.to_owned(),)*
                    $ty::Other(text) => text,
                }
            }
        }
    };
}

string_enum!(PeerKind { Kernel => "kernel", Tool => "tool", Channel => "channel" });
string_enum!(Feature {
    Cancel => "cancel",
    Streaming => "streaming",
    StaticManifest => "static_manifest",
    ToolHints => "tool_hints",
    Approvals => "approvals",
});

/// The list of tools a plugin offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Manifest {
    /// One entry per tool; names are unique across all plugins of a kernel.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// One line about the plugin's state that `oxibot tools list` shows next to it (the MCP
    /// bridge: the MCP revision it negotiated with its server). Absent: nothing to say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One tool as the model sees it, plus scheduling hints for the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The function name the model calls, e.g. `read_file`.
    pub name: String,
    /// What the tool does, shown to the model.
    pub description: String,
    /// JSON Schema (an `object` schema) for the arguments.
    pub parameters: Value,
    /// The tool only reads; calls may run in parallel with other read-only calls.
    #[serde(default)]
    pub read_only: bool,
    /// The tool must run alone (no other tool call of the same turn at the same time).
    #[serde(default)]
    pub exclusive: bool,
    /// How long the kernel waits for a result before it cancels the call and treats the
    /// plugin as hung. Absent: the kernel's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

/// A request to run one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// Chosen by the kernel, unique among the calls in flight on this connection.
    pub id: u64,
    /// A tool name from the plugin's manifest.
    pub tool: String,
    /// The arguments the model gave, as a map (already parsed from the model's JSON).
    pub arguments: Value,
    /// Where and for whom the call runs.
    #[serde(default)]
    pub context: CallContext,
}

/// Where a call runs and on whose behalf.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallContext {
    /// The session (`channel:chat_id`) the call belongs to, if any.
    #[serde(default)]
    pub session_key: Option<String>,
    /// The channel the turn came from, e.g. `cli` or `telegram`.
    #[serde(default)]
    pub channel: Option<String>,
    /// The chat within that channel.
    #[serde(default)]
    pub chat_id: Option<String>,
    /// Absolute path of the workspace; relative paths resolve against it.
    #[serde(default)]
    pub workspace: String,
    /// When true, the tool must not touch anything outside `workspace`.
    #[serde(default = "default_true")]
    pub restrict_to_workspace: bool,
    /// The call's key in the kernel's turn journal (`<turn>.<step>.<index>`): the same for
    /// every attempt of one call, so a tool that can de-duplicate a side effect keys it by
    /// this. Absent for calls outside a session's turn; a plugin that does not know the
    /// field ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

fn default_true() -> bool {
    true
}

impl Default for CallContext {
    /// No session, no workspace, and the restriction on (the safe default).
    fn default() -> Self {
        CallContext {
            session_key: None,
            channel: None,
            chat_id: None,
            workspace: String::new(),
            restrict_to_workspace: true,
            idempotency_key: None,
        }
    }
}

/// The outcome of one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The `id` of the `Call` this answers.
    pub id: u64,
    /// Text for the model: the output, or the error message when `is_error` is set.
    pub content: String,
    /// The tool failed; `content` says why in words the model can act on.
    #[serde(default)]
    pub is_error: bool,
}

/// Asks a plugin to abandon a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cancel {
    /// The `id` of the call to abandon.
    pub id: u64,
}

/// A log line forwarded into the kernel's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Log {
    /// One of `error`, `warn`, `info`, `debug`, `trace`; anything else counts as `info`.
    pub level: String,
    /// The text of the line.
    pub message: String,
}

/// Body of `Ping` and `Pong`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ping {
    /// Copied from the `Ping` into its `Pong`.
    pub nonce: u64,
}

/// Announces that the sender closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Goodbye {
    /// Why, in words for a log.
    #[serde(default)]
    pub reason: String,
}

/// A message a chat user sent, as a channel plugin received it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inbound {
    /// Chosen by the channel; echoed in `InboundAccepted`. Until that arrives the channel
    /// must be ready to deliver the message again (for example after a kernel restart).
    pub id: String,
    /// The channel's name, e.g. `telegram`.
    pub channel: String,
    /// Who sent it, as the chat service identifies them.
    pub sender_id: String,
    /// The conversation it belongs to.
    pub chat_id: String,
    /// The text.
    pub content: String,
    /// Local paths of downloaded attachments.
    #[serde(default)]
    pub media: Vec<String>,
    /// Channel-specific extras (message ids, thread ids, whether it is a group chat, …).
    #[serde(default)]
    pub metadata: Value,
}

/// Confirms that an inbound message is safely persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundAccepted {
    /// The `id` of the `Inbound`.
    pub id: String,
}

/// A message for a chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outbound {
    /// Chosen by the kernel; echoed in `DeliveryAck`.
    pub id: u64,
    /// The chat to send to.
    pub chat_id: String,
    /// The text (Markdown; the channel renders it for its service).
    pub content: String,
    /// Local paths of files to attach.
    #[serde(default)]
    pub media: Vec<String>,
    /// When set, the final form of the reply streamed as `Delta`s with this `stream_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_id: Option<u64>,
    /// Channel-specific extras copied from the inbound message (thread to reply in, …).
    ///
    /// To a channel that did not announce `approvals`, an approval request (a tool call
    /// waiting for the person's yes) is an `Outbound` whose metadata holds `approval`:
    /// `{"code", "tool", "shown", "timeout_secs"}`; its `content` already tells the person to
    /// reply `/approve CODE`, `/approve CODE always` or `/deny CODE`, so a channel that knows
    /// nothing of approvals still shows a request a person can answer.
    #[serde(default)]
    pub metadata: Value,
}

/// A tool call waiting for a person's yes, sent to a channel that announced `approvals`.
///
/// The channel shows `text` (or its own rendering of `tool` and `shown`) with one button per
/// entry of `answers`. When a person presses one, the channel submits the entry's `answer`
/// as an ordinary `Inbound` from that person in that chat: the kernel checks who answered
/// exactly as it checks a typed `/approve CODE`, so a button grants nothing a typed reply
/// could not. The channel acknowledges the request with a `DeliveryAck` of its `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// Chosen by the kernel from the same ids as `Outbound`s; echoed in `DeliveryAck`.
    pub id: u64,
    /// The chat to ask in.
    pub chat_id: String,
    /// The code that answers the request (8 letters and digits).
    pub code: String,
    /// The tool the model wants to call.
    pub tool: String,
    /// The call as it will run, whole (for `exec`: the command as `sh -c` gets it, its
    /// directory and whether the sandbox is on).
    pub shown: String,
    /// Seconds until no answer counts as a denial.
    pub timeout_secs: u64,
    /// The whole request for a person, typed answers included (what a channel without
    /// buttons shows).
    pub text: String,
    /// The answers a person may give: one button each.
    pub answers: Vec<ApprovalAnswer>,
    /// Channel-specific extras copied from the message that started the turn (thread, …).
    #[serde(default)]
    pub metadata: Value,
}

/// One answer to an [`ApprovalRequest`]: a button's label and what pressing it submits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalAnswer {
    /// The button's label (`Approve`, `Always`, `Deny`).
    pub label: String,
    /// The text the channel submits as the presser's `Inbound` (`/approve CODE`, …).
    pub answer: String,
    /// True for the answer that refuses (a channel that colours buttons marks it dangerous).
    #[serde(default)]
    pub refuses: bool,
}

/// A piece of a reply that is still being written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delta {
    /// Identifies the reply; all deltas of one reply share it.
    pub stream_id: u64,
    /// The chat to show it in.
    pub chat_id: String,
    /// Text to append to what was sent so far.
    pub text: String,
}

/// Reports whether an `Outbound` reached the chat service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryAck {
    /// The `id` of the `Outbound`.
    pub id: u64,
    /// True when the service accepted the message.
    pub ok: bool,
    /// Why it failed, when `ok` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// True when a failure is final: no later attempt can deliver this message (an HTTP
    /// reply nobody waits for any more), so the kernel does not retry it. Added in a
    /// compatible way: older peers leave it out, and it reads as false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub permanent: bool,
}
