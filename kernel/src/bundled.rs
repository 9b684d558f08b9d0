//! The plugins built into the `oxibot` executable: the bundled tool plugins (`fs`, `shell`,
//! `web`, the MCP bridge) and the channels its `channel-<name>` features keep, each run in a
//! process of its own by starting the executable again as `oxibot __plugin <tool>` or
//! `oxibot __channel <name>`, or through a link named `oxibot-tool-<tool>` /
//! `oxibot-channel-<name>`.
//!
//! [`dispatch`] decides from the command line alone, before the kernel sets up anything (no
//! runtime, no logging, no argument parser): the plugin's entry sets up its own. The processes
//! share the one file's pages; each is still confined, scrubbed and restarted on its own by the
//! plugin host, as a separate executable was.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use serde_json::Value;

use crate::plugin::spec::{CHANNEL_ARG, CHANNEL_PREFIX, TOOL_ARG, TOOL_PREFIX};
use crate::plugin::{BUNDLED_CHANNELS, ChannelSpecError, PluginSpec};

/// A plugin's entry: runs it to its end in this process.
type Entry = fn() -> ExitCode;

/// The tool plugins built in, by name (`oxibot __plugin <name>`).
const TOOLS: &[(&str, Entry)] = &[
    ("fs", oxibot_tool_fs::run),
    ("shell", oxibot_tool_shell::run),
    ("web", oxibot_tool_web::run),
    (crate::plugin::mcp::MCP_BRIDGE, oxibot_tool_mcp::run),
];

/// The channels built in, by name (`oxibot __channel <name>`): those whose feature is on.
const CHANNELS: &[(&str, Entry)] = &[
    #[cfg(feature = "channel-a2a")]
    ("a2a", oxibot_channel_a2a::run),
    #[cfg(feature = "channel-api")]
    ("api", oxibot_channel_api::run),
    #[cfg(feature = "channel-dingtalk")]
    ("dingtalk", oxibot_channel_dingtalk::run),
    #[cfg(feature = "channel-discord")]
    ("discord", oxibot_channel_discord::run),
    #[cfg(feature = "channel-email")]
    ("email", oxibot_channel_email::run),
    #[cfg(feature = "channel-feishu")]
    ("feishu", oxibot_channel_feishu::run),
    #[cfg(feature = "channel-loopback")]
    ("loopback", oxibot_channel_loopback::run),
    #[cfg(feature = "channel-matrix")]
    ("matrix", oxibot_channel_matrix::run),
    #[cfg(feature = "channel-mattermost")]
    ("mattermost", oxibot_channel_mattermost::run),
    #[cfg(feature = "channel-qq")]
    ("qq", oxibot_channel_qq::run),
    #[cfg(feature = "channel-signal")]
    ("signal", oxibot_channel_signal::run),
    #[cfg(feature = "channel-slack")]
    ("slack", oxibot_channel_slack::run),
    #[cfg(feature = "channel-telegram")]
    ("telegram", oxibot_channel_telegram::run),
    #[cfg(feature = "channel-websocket")]
    ("websocket", oxibot_channel_websocket::run),
    #[cfg(feature = "channel-wecom")]
    ("wecom", oxibot_channel_wecom::run),
];

/// What the command line `args` (program name first) asks this executable to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role<'a> {
    /// The kernel: the `oxibot` command.
    Kernel,
    /// The bundled tool plugin of this name.
    Tool(&'a str),
    /// The bundled channel of this name.
    Channel(&'a str),
    /// A mode the shell plugin starts its own executable in (`__guard`, `__confine`, …).
    ShellMode,
}

/// The role `args` asks for: a link's name (`oxibot-tool-fs`) first, then `__plugin <tool>` /
/// `__channel <name>`, then the shell plugin's own modes; the kernel otherwise.
pub fn role(args: &[OsString]) -> Role<'_> {
    let program = args.first().and_then(|arg| Path::new(arg).file_name()).and_then(|name| name.to_str());
    if let Some(tool) = program.and_then(|name| name.strip_prefix(TOOL_PREFIX)) {
        return Role::Tool(tool);
    }
    if let Some(channel) = program.and_then(|name| name.strip_prefix(CHANNEL_PREFIX)) {
        return Role::Channel(channel);
    }
    match (args.get(1).and_then(|arg| arg.to_str()), args.get(2).and_then(|arg| arg.to_str())) {
        (Some(TOOL_ARG), Some(tool)) => Role::Tool(tool),
        (Some(CHANNEL_ARG), Some(channel)) => Role::Channel(channel),
        _ if oxibot_tool_shell::is_own_mode(args) => Role::ShellMode,
        _ => Role::Kernel,
    }
}

/// Runs the plugin the command line asks for and returns its exit status, or `None` when this
/// process is the kernel. A plugin or channel this executable does not have ends with exit
/// status 127 and a line on stderr that names it.
pub fn dispatch() -> Option<ExitCode> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let (table, name, kind) = match role(&args) {
        Role::Kernel => return None,
        Role::ShellMode => return Some(oxibot_tool_shell::run()),
        Role::Tool(name) => (TOOLS, name, "tool plugin"),
        Role::Channel(name) => (CHANNELS, name, "channel"),
    };
    match table.iter().find(|(known, _)| *known == name) {
        Some((_, run)) => Some(run()),
        None if kind == "channel" && BUNDLED_CHANNELS.contains(&name) => {
            eprintln!("oxibot: {}", ChannelSpecError::NotBuiltIn(name.to_owned()));
            Some(ExitCode::from(127))
        }
        None => {
            eprintln!("oxibot: there is no bundled {kind} named '{name}'");
            Some(ExitCode::from(127))
        }
    }
}

/// The channels this executable was built with.
pub fn built_in_channels() -> impl Iterator<Item = &'static str> {
    CHANNELS.iter().map(|(name, _)| *name)
}

/// The spec of the channel `name` run by the kernel's executable `kernel` (see
/// `plugin::channel_spec`), or [`ChannelSpecError::NotBuiltIn`] when this executable was built
/// without it.
pub fn channel_spec(kernel: &Path, name: &str, config: &Value) -> Result<PluginSpec, ChannelSpecError> {
    let spec = crate::plugin::channel_spec(kernel, name, config)?;
    if !built_in_channels().any(|built| built == name) {
        return Err(ChannelSpecError::NotBuiltIn(name.to_owned()));
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> Vec<OsString> {
        line.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_link_name_or_the_dispatch_arguments_pick_the_plugin_and_anything_else_is_the_kernel() {
        assert_eq!(role(&args(&["/usr/bin/oxibot-tool-fs"])), Role::Tool("fs"));
        assert_eq!(role(&args(&["oxibot-channel-slack", "x"])), Role::Channel("slack"));
        assert_eq!(role(&args(&["/usr/bin/oxibot", "__plugin", "web"])), Role::Tool("web"));
        assert_eq!(role(&args(&["oxibot", "__channel", "api"])), Role::Channel("api"));
        assert_eq!(role(&args(&["/proc/self/exe", "__guard", "--", "sh"])), Role::ShellMode);
        assert_eq!(role(&args(&["oxibot", "agent", "-m", "__plugin"])), Role::Kernel);
        assert_eq!(role(&args(&["oxibot", "__plugin"])), Role::Kernel);
        assert_eq!(role(&args(&["oxibot"])), Role::Kernel);
    }

    #[test]
    fn every_channel_built_in_is_a_bundled_one_and_every_bundled_tool_is_built_in() {
        assert!(built_in_channels().all(|name| BUNDLED_CHANNELS.contains(&name)));
        for (tool, _) in crate::plugin::BUNDLED_TOOLS {
            assert!(TOOLS.iter().any(|(name, _)| name == tool), "{tool}");
        }
    }
}
