//! Entry point of the shell plugin (`oxibot __plugin shell`, linked into the `oxibot`
//! executable): guardian or confine mode when asked for, the plugin otherwise.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::{confine, contain, exec, guard};
use oxibot_plugin::Plugin;

/// Runs the shell plugin, or the guardian, confine or container mode its arguments ask for;
/// the entry `oxibot __plugin shell` (and the modes' `oxibot __guard …`) runs.
pub fn run() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    // Guardian and confine modes must be decided before anything plugin-related runs.
    if let Some(rest) = confine::confine_args(&args) {
        return confine::run(rest);
    }
    if let Some((mode, rest)) = contain::contain_args(&args) {
        return contain::run(mode, rest);
    }
    if let Some(rest) = guard::guard_args(&args) {
        return guard::run(rest);
    }
    Plugin::new("shell").static_manifest().tool(exec::tool(), exec::handle).run()
}

/// Whether the command line `args` asks for one of the modes the plugin starts its own
/// executable in (`__guard`, `__confine`, `__contain`, `__init`, the namespace probe): the
/// `oxibot` executable hands those to [`run`] before anything else.
pub fn is_own_mode(args: &[OsString]) -> bool {
    confine::confine_args(args).is_some() || contain::contain_args(args).is_some() || guard::guard_args(args).is_some()
}
