//! What the host knows about a plugin before starting it: name, command line, environment.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// Where a plugin was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// An `oxibot-tool-*` executable next to the kernel binary.
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

    /// The command line as one string, for messages.
    pub fn command_line(&self) -> String {
        std::iter::once(self.command.display().to_string()).chain(self.args.iter().cloned()).collect::<Vec<_>>().join(" ")
    }
}

/// `…/oxibot-tool-fs` → `fs`; `…/weather.py` → `weather`.
pub fn name_from_command(command: &std::path::Path) -> String {
    let stem = command.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    stem.strip_prefix("oxibot-tool-").map(str::to_owned).unwrap_or(stem)
}
