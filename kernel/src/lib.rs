//! The oxibot kernel: configuration, the plugin host, and (in later parts) the session,
//! runner and memory actors. The `oxibot` binary in `main.rs` is a thin shell over it.

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
