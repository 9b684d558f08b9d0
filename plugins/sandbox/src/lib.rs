//! An OS sandbox for oxibot's plugin processes and for the commands `exec` runs.
//!
//! A [`Policy`] lists what a process may still reach once it is confined: paths it may read and
//! write, paths it may only read, paths it may read and execute, and whether it may use TCP.
//! [`apply`] confines the *calling* process (and everything it starts afterwards) with
//! Landlock: the filesystem outside the policy becomes unreachable, and where the kernel offers
//! scoping (Landlock ABI 6 and newer) the process can no longer signal processes outside its
//! sandbox nor connect to abstract unix sockets created outside it. A confinement is permanent:
//! nothing in the process can lift it, and every child inherits it. [`detect`] says what the
//! running kernel offers, for status reports and for refusing early.
//!
//! A policy travels between processes as command-line arguments ([`Policy::to_args`],
//! [`Policy::from_args`]): the kernel hands one to its launcher, the shell plugin to its
//! guardian.
//!
//! [`Policy::system`] is the baseline every confined oxibot process gets: system directories
//! to read and execute, `/etc`, `/proc` and `/sys` to read, and a few harmless devices. It never
//! includes the user's home directory or oxibot's data directory; see [`system`].
//!
//! What this crate is **not**:
//! - not a container: no namespaces, no seccomp filter, no resource limits. Landlock (up to ABI
//!   7, what this crate targets) does not mediate `connect()` to *pathname* unix sockets, UDP, or
//!   reading a file through a descriptor opened before confinement;
//! - not a fallback: when Landlock is missing [`apply`] fails with
//!   [`SandboxError::Unavailable`] and confines nothing. Callers decide whether to refuse (the
//!   shell plugin does) or to go on unconfined (the plugin launcher does, and says so);
//! - not a policy store: it does not know oxibot's config; callers build the policy.
//!
//! For tests, the environment variable [`DISABLE_VAR`] (`OXIBOT_SANDBOX_DISABLE=1`) makes
//! [`detect`] and [`apply`] behave as on a kernel without Landlock. It can only turn the sandbox
//! off entirely, which makes `exec` refuse; it never widens a policy.

mod error;
mod landlock;
mod policy;
mod privileges;
pub mod program;
pub mod system;

pub use error::SandboxError;
pub use landlock::{DISABLE_VAR, Status, Support, apply, detect};
pub use policy::{ARGS_MARKER, Policy};
pub use privileges::drop_capabilities;

/// Environment variable in which the kernel tells a confined plugin which extra paths its
/// sandbox grants (its `allowPaths`), as a `PATH`-like list, so the plugin can grant them again
/// to what it confines further (the shell plugin to the commands it runs).
pub const ALLOW_PATHS_VAR: &str = "OXIBOT_SANDBOX_ALLOW_PATHS";
