//! The shell tool plugin: the `exec` tool, which runs a shell command for the model.
//!
//! Every command runs under a *guardian*: this same binary re-executed in guardian mode
//! ([`guard`]) as the leader of a fresh process group. The guardian starts `sh -c COMMAND` in
//! that group and watches a pipe from the plugin; when the pipe closes (the plugin died, or it
//! abandoned the call) it kills the whole group. The plugin kills the group itself on timeout
//! and when a call is cancelled ([`process`]), so nothing a command started outlives it.
//!
//! Before running, a command is checked against a deny list of destructive commands and, when
//! the workspace is restricted, against paths leading outside it ([`policy`]). Output is
//! collected in bounded memory and shortened in the middle for the model ([`output`]).

pub mod exec;
pub mod group;
pub mod guard;
pub mod output;
pub mod policy;
pub mod process;
