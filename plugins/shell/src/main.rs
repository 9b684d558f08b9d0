//! Entry point of `oxibot-tool-shell`: guardian or confine mode when asked for, the plugin
//! otherwise.

use std::ffi::OsString;
use std::process::ExitCode;

use oxibot_plugin::Plugin;
use oxibot_tool_shell::{confine, contain, exec, guard};

fn main() -> ExitCode {
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
