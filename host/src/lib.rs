//! The plugin host: discovers, starts, supervises and talks to out-of-process tool and
//! channel plugins. A crate of its own, below the kernel: it knows plugins, specs and calls,
//! never turns, sessions or the config file, and the compiler keeps it so (the kernel
//! re-exports it as `oxibot_kernel::plugin`).
//!
//! Code map: [`discover`] finds plugins (and builds channel specs); [`host::PluginHost`]
//! starts one [`actor::PluginActor`] per plugin and routes calls through the [`registry`];
//! an actor's instance listens in the [`rundir`], spawns the [`process`], runs the
//! [`handshake`] and then serves calls over a [`connection`]; [`policy`] decides restarts;
//! [`mcp`] turns `tools.mcpServers` entries into specs of the MCP bridge plugin;
//! [`manifest_cache`] remembers the tools of plugins that announce `static_manifest`, which
//! then start on their first call; [`claims`] says which tool names a plugin may not take
//! (built-ins, bundled tools without `replaces`) and caps a tool's description and schema;
//! [`broken`] remembers plugins that failed to start, so the next commands skip them.
//! Channel messages and lifecycle changes reach the gateway through [`events`]. A confined
//! plugin gets a harmless copy of the user's git identity from [`gitconfig`]. Every plugin
//! starts through the [`launcher`], which ties it to the kernel's life and confines it;
//! [`paths`] says where the data dir is, and [`fsutil`] replaces files whole.

pub mod actor;
pub mod broken;
pub mod claims;
pub mod connection;
pub mod discover;
pub mod environment;
pub mod error;
pub mod events;
pub mod fsutil;
pub mod gitconfig;
pub mod handshake;
pub mod host;
pub mod launcher;
pub mod manifest_cache;
pub mod mcp;
pub mod paths;
pub mod policy;
pub mod process;
pub mod registry;
pub mod rundir;
pub mod shared;
pub mod slot;
pub mod spec;
pub mod wire;

pub use broken::BrokenPlugins;
pub use claims::{BUNDLED_CHANNELS, BUNDLED_TOOLS, ReservedNames};
pub use discover::{PluginSources, channel_spec, configure_web, discover};
pub use error::{ChannelSpecError, PluginError, StartError};
pub use events::PluginEvent;
pub use host::{PluginHost, PluginStatus};
pub use manifest_cache::ManifestCache;
pub use policy::RestartPolicy;
pub use shared::HostConfig;
pub use slot::SlotState;
pub use spec::{Confinement, Origin, PluginSpec, Program};
