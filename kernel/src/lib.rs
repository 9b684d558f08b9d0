//! The oxibot kernel: configuration, the plugin host, the session and runner actors (over the
//! LLM client of the `oxibot-llm` crate, re-exported as `provider` and `message`), scheduled
//! jobs, memory (consolidation, Dream, git) and the gateway. The `oxibot` binary in `main.rs`
//! is a thin shell over it.
//!
//! The modules form a ladder; each may import only those on lower rungs (ARCHITECTURE.md
//! lists the rungs, and a test in `tests/integration/layering.rs` enforces them):
//!
//! 1. `fsutil`, `watch` — no kernel imports beyond each other;
//! 2. `plugin`, `launcher`, `paths` — the plugin host: the `oxibot-host` crate, re-exported; it
//!    imports no kernel module at all;
//! 3. `config`;
//! 4. `session`, `history`, `usage`, `plugin_specs`, `bundled` — stores, the plugin specs the
//!    config asks for, the plugins built into the executable;
//! 5. `context` — the system prompt; `settings` — the config's typed sections, one snapshot;
//! 6. `turn` — the LLM ↔ tools loop;
//! 7. `cron` — scheduled jobs: their file, the scheduler, the `cron` tool;
//! 8. `services` — what every actor above shares; `cluster` — cluster mode over NATS JetStream
//!    (session ownership, the fenced session store, the scheduler's election);
//! 9. `memory` — consolidation, Dream, git; `automation` — the kernel acting on its own;
//! 10. `agent` — sessions and commands;
//! 11. `gateway` — the daemon serving channels;
//! 12. `import` — bringing a nanobot data dir over;
//! 13. `cli` (in the binary) — the edge.

pub use oxibot_host as plugin;
pub use oxibot_host::{launcher, paths};

pub mod agent;
pub mod automation;
pub mod budget;
pub mod bundled;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod config;
pub mod context;
pub mod cron;
pub mod fsutil;
pub mod gateway;
pub mod history;
pub mod import;
pub mod memory;
pub mod meter;
pub mod plugin_specs;
pub mod services;
pub mod session;
pub mod settings;
pub mod telemetry;
#[cfg(test)]
mod testing;
pub mod turn;
pub mod usage;
pub mod watch;

/// The LLM client, a crate of its own so it cannot reach the kernel's conversations.
pub use oxibot_llm as provider;
/// Chat messages, as the LLM client carries them and the sessions keep them.
pub use oxibot_llm::message;
