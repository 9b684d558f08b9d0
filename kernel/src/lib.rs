//! The oxibot kernel: configuration, the plugin host, LLM providers, the session and runner
//! actors, memory (consolidation, Dream, git) and the gateway. The `oxibot` binary in
//! `main.rs` is a thin shell over it.

pub mod agent;
pub mod config;
pub mod context;
pub mod fsutil;
pub mod gateway;
pub mod launcher;
pub mod memory;
pub mod message;
pub mod paths;
pub mod plugin;
pub mod provider;
pub mod session;
