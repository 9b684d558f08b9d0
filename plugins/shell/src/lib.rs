//! The shell tool plugin: the `exec` tool, which runs a shell command for the model.
//!
//! Every command runs under a *guardian*: this same binary re-executed in guardian mode
//! ([`guard`]) as the leader of a fresh process group and a child subreaper. The guardian starts
//! `sh -c COMMAND` and watches a pipe from the plugin; when the pipe closes (the plugin died, or
//! it gave up on the call: timeout or cancellation, see [`process`]) it kills every process the
//! command started, even those that left the group or lost their parent ([`tree`]), so nothing
//! a command started outlives it.
//!
//! While the workspace is restricted the command runs in an OS sandbox ([`sandbox`] plans it,
//! [`plan`] carries it as arguments): where user namespaces work, a container built by
//! [`contain`] (guardian → `__contain` → the container's PID 1 `__init` → `__confine` → `sh`),
//! else Landlock alone; in both [`confine`] applies the limits, Landlock, and the seccomp filter
//! right before `sh`. The command can reach the workspace (the assistant's own state in it
//! read-only in a container), a private temporary directory and the system's programs, and
//! nothing of the user's home or oxibot's data directory. Without Landlock, restricted calls are
//! refused. Before running, a command is also
//! checked against a deny list of destructive commands and, when restricted, against literal
//! paths leading outside the workspace ([`policy`]): a friendly first answer, not the boundary.
//! Output is collected in bounded memory and shortened in the middle for the model
//! ([`output`]).

pub mod confine;
pub mod contain;
mod entry;
pub mod exec;
mod exit_code;
pub mod group;
pub mod guard;
pub mod output;
pub mod plan;
pub mod policy;
pub mod process;
pub mod sandbox;
pub mod tree;

pub use entry::{is_own_mode, run};
