//! The MCP bridge plugin: serves the tools of one MCP server as oxibot tools.
//!
//! The kernel starts one `oxibot-tool-mcp` process per `tools.mcpServers` entry, named
//! `mcp-<server>`, with the entry as the user wrote it in `OXIBOT_MCP_CONFIG`, validated here
//! ([`config`]). The bridge connects to the server over stdio or streamable HTTP with the
//! `rmcp` client, or over the legacy HTTP+SSE transport with its own client ([`sse`], on the
//! event-stream parser in [`event_stream`]) ([`bridge`]), lists its tools, and offers each as
//! `mcp_<server>_<tool>` ([`naming`]) with its input schema made fit for function calling
//! ([`schema`]); results become text ([`render`]), images saved to the media directory
//! ([`media`]).
//!
//! When the server goes away the bridge exits non-zero, so the kernel's plugin host restarts
//! it (and with it the server) with backoff, like any crashed plugin.
//!
//! What this crate is not: an MCP server, nor a client of MCP resources or prompts; only tools
//! are bridged.

pub mod bridge;
pub mod config;
mod entry;
pub mod event_stream;
pub mod media;
pub mod naming;
pub mod render;
pub mod schema;
pub mod sse;

pub use entry::run;
