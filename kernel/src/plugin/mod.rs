//! The plugin host: discovers, starts, supervises and calls out-of-process tool plugins.
//!
//! Code map: [`discover`] finds plugins; [`host::PluginHost`] starts one
//! [`actor::PluginActor`] per plugin and routes calls through the [`registry`];
//! an actor's instance listens in the [`rundir`], spawns the [`process`], runs the
//! [`handshake`] and then serves calls over a [`connection`]; [`policy`] decides restarts.

pub mod actor;
pub mod connection;
pub mod discover;
pub mod error;
pub mod handshake;
pub mod host;
pub mod policy;
pub mod process;
pub mod registry;
pub mod rundir;
pub mod spec;
pub mod wire;

pub use actor::SlotState;
pub use discover::{discover, PluginSources};
pub use error::{PluginError, StartError};
pub use host::{HostConfig, PluginHost, PluginStatus};
pub use policy::RestartPolicy;
pub use spec::{Origin, PluginSpec};
