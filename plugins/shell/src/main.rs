//! Entry point of `oxibot-tool-shell`: guardian mode when asked for, the plugin otherwise.

use std::ffi::OsString;
use std::process::ExitCode;

use oxibot_plugin::Plugin;
use oxibot_tool_shell::{exec, guard};

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    // Guardian mode must be decided before anything plugin-related runs.
    if let Some(rest) = guard::guard_args(&args) {
        return guard::run(rest);
    }
    Plugin::new("shell").tool(exec::tool(), exec::handle).run()
}
