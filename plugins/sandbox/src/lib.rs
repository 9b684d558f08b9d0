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
//! Landlock alone (up to ABI 7, what this crate targets) does not mediate UDP, TCP Fast Open or
//! MPTCP, `connect()` to *pathname* unix sockets, the key ring, System V IPC, `chmod`, `utime`
//! or `setxattr`, nor reading other processes' `/proc` entries. So `exec` commands also run in
//! a **container** built from the pieces here, each applied by the process it confines:
//! - [`namespaces`]: new user, mount, PID, IPC, UTS and (with the network off) network
//!   namespaces; the command runs as the user again in a nested user namespace;
//! - [`mounts`]: a root made only of the policy's paths (read-only, except what it may
//!   write, and the assistant's own state read-only inside the workspace), a private `/tmp`,
//!   a new `/proc`; no home directory, no data directory, no `/run`;
//! - [`seccomp`]: a filter refusing what reaches outside (key ring, SysV IPC, `ptrace`, `bpf`,
//!   mounts, new namespaces, socket families the policy does not allow);
//! - [`limits`]: `RLIMIT_NPROC`, `RLIMIT_FSIZE`, `RLIMIT_AS`.
//!
//! Landlock stays on top. The plugin launcher uses [`namespaces::enter_plugin`]: a plugin is PID 1
//! of its own PID namespace, so everything it starts dies with it.
//!
//! ## Why these crates
//! The workspace forbids `unsafe` code, so the system calls come from crates with safe
//! wrappers: `nix` (MIT, already in the lock through `rustyline`) for `unshare`, `mount`,
//! `pivot_root` and `sethostname` (rustix 1.x marks `unshare` unsafe), and `seccompiler`
//! (rust-vmm's, Apache-2.0 or BSD-3-Clause, pure Rust, only `libc`) to compile and apply the
//! seccomp filter. Rejected: `hakoniwa` (a complete container runtime, but LGPL-3.0 with a
//! linking exception, not a permissive licence, and its seccomp needs the C libseccomp),
//! `birdcage` (GPL-3.0), `extrasafe` (its `Isolate` runs a Rust closure registered at `main` in
//! a re-executed child of its own making, which would sit beside, not inside, the shell
//! plugin's guardian → confine chain; its seccomp layer is `seccompiler` with more on top), and
//! Debian's `bubblewrap` (an outside program most machines lack, and one more process per
//! command). The steps are small and each runs where it must: the namespaces in a process
//! that has just been executed (the kernel refuses a new user namespace to a threaded one),
//! the root and `/proc` in the new PID namespace's first process, and the seccomp filter,
//! Landlock and the limits in the last step before `sh`.
//!
//! What this crate is **not**:
//! - not a process manager: it confines the calling process; the shell plugin's guardian and
//!   the kernel's launcher decide which process runs what;
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
pub mod lifetime;
pub mod limits;
pub mod mounts;
pub mod namespaces;
mod policy;
mod privileges;
pub mod program;
pub mod seccomp;
pub mod system;

pub use error::SandboxError;
pub use landlock::{DISABLE_VAR, Status, Support, apply, detect};
pub use policy::{ARGS_MARKER, Policy};
pub use privileges::drop_capabilities;

/// Environment variable in which the kernel tells a confined plugin which extra paths its
/// sandbox grants (its `allowPaths`), as a `PATH`-like list, so the plugin can grant them again
/// to what it confines further (the shell plugin to the commands it runs).
pub const ALLOW_PATHS_VAR: &str = "OXIBOT_SANDBOX_ALLOW_PATHS";
