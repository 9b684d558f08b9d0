//! What the host knows about a plugin before starting it: name, command line, environment.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use oxibot_proto::PeerKind;

/// File-name prefix of tool plugin executables.
pub const TOOL_PREFIX: &str = "oxibot-tool-";
/// File-name prefix of channel plugin executables.
pub const CHANNEL_PREFIX: &str = "oxibot-channel-";

/// Where a plugin was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// An `oxibot-tool-*` (or a configured `oxibot-channel-*`) executable next to the kernel
    /// binary.
    Bundled,
    /// An executable in the data dir's `plugins/` directory.
    PluginDir,
    /// A `plugins` entry in `config.json`.
    Config,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Bundled => "bundled",
            Origin::PluginDir => "plugins dir",
            Origin::Config => "config",
        })
    }
}

/// How to start one plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSpec {
    /// Short name used in logs, errors and `oxibot tools list` (e.g. `fs`).
    pub name: String,
    /// The executable.
    pub command: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
    /// Where it was found.
    pub origin: Origin,
}

impl PluginSpec {
    /// A spec for an executable with no arguments, named after the file.
    pub fn for_executable(command: PathBuf, origin: Origin) -> PluginSpec {
        let name = name_from_command(&command);
        PluginSpec { name, command, args: Vec::new(), env: BTreeMap::new(), origin }
    }

    /// The kind the executable's name suggests (`oxibot-channel-*` is a channel, anything
    /// else a tool), shown until the plugin announces its kind in `hello`.
    pub fn expected_kind(&self) -> PeerKind {
        let file = self.command.file_name().map(|f| f.to_string_lossy()).unwrap_or_default();
        if file.starts_with(CHANNEL_PREFIX) { PeerKind::Channel } else { PeerKind::Tool }
    }

    /// The command line as one string, for messages.
    pub fn command_line(&self) -> String {
        std::iter::once(self.command.display().to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `…/oxibot-tool-fs` → `fs`; `…/oxibot-channel-telegram` → `telegram`; `…/weather.py` →
/// `weather`.
pub fn name_from_command(command: &std::path::Path) -> String {
    let stem = command.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let short = stem.strip_prefix(TOOL_PREFIX).or_else(|| stem.strip_prefix(CHANNEL_PREFIX));
    short.map(str::to_owned).unwrap_or(stem)
}
