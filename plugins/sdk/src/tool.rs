//! Declaring tools: [`Plugin`], [`Tool`], handler functions and their errors.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use oxibot_proto::{CallContext, ToolSpec};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What a tool returns: text for the model, or an error the model can read.
pub type ToolOutput = Result<String, ToolError>;

/// A tool failure, phrased for the language model that made the call.
///
/// The message should say what went wrong and, where possible, what to do instead
/// ("file not found: notes.md; use list_dir to see what exists"). It is sent as the result's
/// content prefixed with `Error: `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    message: String,
}

impl ToolError {
    /// An error with the given message.
    pub fn new(message: impl Into<String>) -> ToolError {
        ToolError { message: message.into() }
    }

    /// The message without the `Error: ` prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error: {}", self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<String> for ToolError {
    fn from(message: String) -> ToolError {
        ToolError::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> ToolError {
        ToolError::new(message)
    }
}

/// Parses a call's arguments into `T`, with an error that tells the model what was wrong.
pub fn parse_args<T: DeserializeOwned>(arguments: Value) -> Result<T, ToolError> {
    serde_json::from_value(arguments).map_err(|e| ToolError::new(format!("invalid arguments: {e}")))
}

/// The boxed future a handler returns.
pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = ToolOutput> + Send>>;

/// A type-erased tool handler.
pub(crate) type Handler = Arc<dyn Fn(CallContext, Value) -> HandlerFuture + Send + Sync>;

/// One tool: what the model sees, plus hints for the kernel's scheduler.
#[derive(Debug, Clone)]
pub struct Tool {
    pub(crate) spec: ToolSpec,
}

impl Tool {
    /// A tool with a name, a description for the model, and a JSON Schema for its arguments.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Tool {
        Tool {
            spec: ToolSpec {
                name: name.into(),
                description: description.into(),
                parameters,
                read_only: false,
                exclusive: false,
                timeout_secs: None,
            },
        }
    }

    /// Marks the tool as only reading, so the kernel may run it alongside other readers.
    pub fn read_only(mut self) -> Tool {
        self.spec.read_only = true;
        self
    }

    /// Marks the tool as needing to run alone within a turn (e.g. `exec`).
    pub fn exclusive(mut self) -> Tool {
        self.spec.exclusive = true;
        self
    }

    /// Sets how long the kernel waits for this tool before treating the plugin as hung.
    pub fn timeout_secs(mut self, secs: u64) -> Tool {
        self.spec.timeout_secs = Some(secs);
        self
    }
}

/// A plugin under construction: its name and its tools.
pub struct Plugin {
    pub(crate) name: String,
    pub(crate) tools: Vec<ToolSpec>,
    pub(crate) handlers: HashMap<String, Handler>,
    /// Announce `static_manifest`: the kernel may start the plugin on its first call.
    pub(crate) static_manifest: bool,
    /// One line about the plugin's state for `oxibot tools list` ([`Plugin::detail`]).
    pub(crate) detail: Option<String>,
}

impl Plugin {
    /// A plugin with no tools yet; `name` appears in the kernel's logs and `oxibot tools list`.
    pub fn new(name: impl Into<String>) -> Plugin {
        Plugin { name: name.into(), tools: Vec::new(), handlers: HashMap::new(), static_manifest: false, detail: None }
    }

    /// Sends one line about the plugin's state with the manifest; `oxibot tools list` shows it
    /// next to the plugin (the MCP bridge says which MCP revision its server speaks).
    pub fn detail(mut self, line: impl Into<String>) -> Plugin {
        self.detail = Some(line.into());
        self
    }

    /// Says the tools never change for the same executable, arguments and environment (no
    /// description built from a file or a server), so the kernel may remember the manifest
    /// and start this plugin only when one of its tools is first called.
    pub fn static_manifest(mut self) -> Plugin {
        self.static_manifest = true;
        self
    }

    /// Adds a tool and the async function that runs it.
    pub fn tool<F, Fut>(mut self, tool: Tool, handler: F) -> Plugin
    where
        F: Fn(CallContext, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolOutput> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |ctx, args| Box::pin(handler(ctx, args)));
        self.handlers.insert(tool.spec.name.clone(), handler);
        self.tools.push(tool.spec);
        self
    }
}
