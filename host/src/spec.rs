//! What the host knows about a plugin before starting it: name, command line, environment, and
//! the sandbox the launcher confines it to ([`Confinement`], [`PluginSpec::sandbox_policy`]).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use oxibot_proto::{ENV_CHANNEL_CONFIG, ENV_MEDIA_DIR, PeerKind};
use oxibot_sandbox::Policy;
use serde_json::Value;

/// File-name prefix of tool plugin executables.
pub const TOOL_PREFIX: &str = "oxibot-tool-";
/// File-name prefix of channel plugin executables.
pub const CHANNEL_PREFIX: &str = "oxibot-channel-";
/// The argument that makes the `oxibot` executable run one of the tool plugins built into it:
/// `oxibot __plugin fs` runs what a link named `oxibot-tool-fs` runs.
pub const TOOL_ARG: &str = "__plugin";
/// The argument that makes the `oxibot` executable run one of the channels built into it:
/// `oxibot __channel telegram` runs what a link named `oxibot-channel-telegram` runs.
pub const CHANNEL_ARG: &str = "__channel";

/// Where a plugin was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A tool plugin (or a configured channel) built into the kernel's own executable, run as
    /// `oxibot __plugin <name>` (`oxibot __channel <name>`).
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
    /// The sandbox the launcher applies before the plugin starts.
    pub confinement: Confinement,
    /// Tool names of bundled plugins this one takes over (`replaces` of its config entry);
    /// any other bundled or built-in name it offers is refused.
    pub replaces: Vec<String>,
    /// How long the plugin may take to complete its handshake; the host's handshake timeout
    /// when `None`. The MCP bridge gets longer: it starts and initializes its server first.
    pub startup_timeout: Option<Duration>,
}

/// How the launcher confines a plugin while the workspace restriction is on.
///
/// Every confined plugin may read and execute the system's programs (see
/// `oxibot_sandbox::Policy::system`) and its own program, and read and write a private
/// temporary directory. A tool plugin (bundled or third-party) may also read and write the
/// workspace; a channel plugin gets its media directory instead (`mediaDir` in its config, else
/// `<data dir>/media/<name>`). Neither reaches the rest of the data directory (config, API
/// keys, sessions, plugins) or the home directory. Both get the paths of `allow_paths`
/// read-write. A third-party plugin whose program or interpreter lives in the home directory
/// (say `~/.pyenv/shims/python3`) also gets that tree (`~/.pyenv`) to read and execute, and one
/// installed under a prefix (`/srv/venv/bin/python`) that prefix (`/srv/venv`), symbolic links
/// followed (see `oxibot_sandbox::program::allow_program`). A tool plugin that saves files for
/// the model (`OXIBOT_MEDIA_DIR` in its environment, the MCP bridge) may write that directory,
/// and each of its [`Confinement::programs`] gets what a third-party plugin's program gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    /// The workspace when the restriction is on; `None` starts the plugin unconfined.
    pub workspace: Option<PathBuf>,
    /// Extra paths the plugin may read and write: `allowPaths` of its `plugins` entry (or of
    /// its channel section).
    pub allow_paths: Vec<PathBuf>,
    /// Programs the plugin starts itself and that must run inside its sandbox: the MCP
    /// bridge's stdio server.
    pub programs: Vec<Program>,
}

/// A program a plugin starts, as its config names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Program {
    /// The executable, a path or a name looked up on `search_path`.
    pub command: PathBuf,
    /// Its arguments (absolute paths to existing files among them are granted read).
    pub args: Vec<String>,
    /// The `PATH` it is looked up on.
    pub search_path: Option<OsString>,
    /// Its working directory, against which relative script arguments are found.
    pub cwd: Option<PathBuf>,
}

impl PluginSpec {
    /// A spec for an executable with no arguments, named after the file.
    pub fn for_executable(command: PathBuf, origin: Origin) -> PluginSpec {
        let name = name_from_command(&command);
        PluginSpec {
            name,
            command,
            args: Vec::new(),
            env: BTreeMap::new(),
            origin,
            confinement: Confinement::default(),
            replaces: Vec::new(),
            startup_timeout: None,
        }
    }

    /// A spec for the plugin `name` built into the kernel's executable `kernel`: a tool runs as
    /// `kernel __plugin <name>`, a channel as `kernel __channel <name>`.
    pub fn bundled(kernel: &Path, kind: &PeerKind, name: &str) -> PluginSpec {
        let arg = if *kind == PeerKind::Channel { CHANNEL_ARG } else { TOOL_ARG };
        PluginSpec {
            name: name.to_owned(),
            args: vec![arg.to_owned(), name.to_owned()],
            ..PluginSpec::for_executable(kernel.to_path_buf(), Origin::Bundled)
        }
    }

    /// The name the plugin's program goes by: its file name, or for a plugin built into the
    /// kernel the name of its link (`oxibot __plugin fs` → `oxibot-tool-fs`).
    pub fn program_name(&self) -> String {
        match self.args.as_slice() {
            [arg, name, ..] if arg == TOOL_ARG => format!("{TOOL_PREFIX}{name}"),
            [arg, name, ..] if arg == CHANNEL_ARG => format!("{CHANNEL_PREFIX}{name}"),
            _ => self.command.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
        }
    }

    /// The same spec, confined to `workspace` (`Some` while the restriction is on) or not.
    pub fn confined_to(mut self, workspace: Option<&Path>) -> PluginSpec {
        self.confinement.workspace = workspace.map(Path::to_path_buf);
        self
    }

    /// Whether the launcher must confine the plugin.
    pub fn is_confined(&self) -> bool {
        self.confinement.workspace.is_some()
    }

    /// The directory a plugin saves files in: for a channel, `mediaDir` of its config section,
    /// else `<data dir>/media/<name>`; for a tool, `OXIBOT_MEDIA_DIR` of its environment (the
    /// MCP bridge's), else `None`.
    pub fn media_dir(&self) -> Option<PathBuf> {
        if self.expected_kind() != PeerKind::Channel {
            return self.env.get(ENV_MEDIA_DIR).map(PathBuf::from).filter(|dir| dir.is_absolute());
        }
        let configured =
            self.channel_setting(&["mediaDir", "media_dir"]).and_then(|value| value.as_str().map(str::to_owned));
        Some(match configured.filter(|dir| !dir.is_empty()) {
            Some(dir) => crate::paths::expand_tilde(Path::new(&dir)),
            None => crate::paths::data_dir().join("media").join(&self.name),
        })
    }

    /// Every extra read-write path: `allow_paths`, and a channel config's `allowPaths`.
    pub fn extra_paths(&self) -> Vec<PathBuf> {
        let from_channel = self.channel_setting(&["allowPaths", "allow_paths"]).and_then(|value| match value {
            Value::Array(items) => Some(items),
            _ => None,
        });
        let from_channel = from_channel.into_iter().flatten().filter_map(|item| item.as_str().map(str::to_owned));
        let from_channel = from_channel.map(|path| crate::paths::expand_tilde(Path::new(&path)));
        self.confinement.allow_paths.iter().cloned().chain(from_channel).filter(|path| path.is_absolute()).collect()
    }

    /// The sandbox policy of this plugin, with `tmp` as its private temporary directory;
    /// `None` when it is not confined. See [`Confinement`].
    pub fn sandbox_policy(&self, tmp: &Path) -> Option<Policy> {
        let workspace = self.confinement.workspace.as_ref()?;
        let mut policy = Policy::system();
        let search_path = self.env.get("PATH").map(std::ffi::OsString::from).or_else(|| std::env::var_os("PATH"));
        if let Some(search_path) = &search_path {
            policy.allow_public_search_path(search_path);
        }
        let third_party = self.origin != Origin::Bundled;
        oxibot_sandbox::program::allow_program(
            &mut policy,
            &self.command,
            &self.args,
            search_path.as_deref().map(OsStr::new),
            third_party,
        );
        for program in &self.confinement.programs {
            let search_path = program.search_path.as_deref().or(search_path.as_deref().map(OsStr::new));
            if let Some(search_path) = program.search_path.as_deref() {
                policy.allow_public_search_path(search_path);
            }
            let args = absolute_args(&program.args, program.cwd.as_deref());
            oxibot_sandbox::program::allow_program(&mut policy, &program.command, &args, search_path, true);
        }
        policy.allow_read_write(tmp);
        if let Some(media) = self.media_dir() {
            policy.allow_read_write(media);
        }
        if self.expected_kind() == PeerKind::Tool {
            policy.allow_read_write(workspace);
        }
        for path in self.extra_paths() {
            policy.allow_read_write(path);
        }
        Some(policy)
    }

    /// A key of the channel config section passed in `OXIBOT_CHANNEL_CONFIG`, under any of
    /// `names`.
    fn channel_setting(&self, names: &[&str]) -> Option<Value> {
        let config: Value = serde_json::from_str(self.env.get(ENV_CHANNEL_CONFIG)?).ok()?;
        names.iter().find_map(|name| config.get(name).cloned())
    }

    /// Whether this is the shell plugin (`oxibot __plugin shell` or a link `oxibot-tool-shell`,
    /// bundled or named in a `plugins` entry to set its environment), which runs each command in a container of its own
    /// making. Landlock forbids mounting, so where containers can be built the launcher does
    /// not confine the plugin itself; its commands are confined (container and Landlock).
    pub fn contains_its_commands(&self) -> bool {
        self.program_name() == "oxibot-tool-shell"
    }

    /// The kind the program's name suggests (`oxibot-channel-*` and `oxibot __channel *` are
    /// channels, anything else a tool), shown until the plugin announces its kind in `hello`.
    pub fn expected_kind(&self) -> PeerKind {
        if self.program_name().starts_with(CHANNEL_PREFIX) { PeerKind::Channel } else { PeerKind::Tool }
    }

    /// The command line as one string, for messages.
    pub fn command_line(&self) -> String {
        std::iter::once(self.command.display().to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `args` with each relative one that names a file in `cwd` made absolute (so a script argument
/// such as `server.py` is granted), the others as they are.
fn absolute_args(args: &[String], cwd: Option<&Path>) -> Vec<String> {
    let resolve = |arg: &String| match cwd {
        Some(cwd) if Path::new(arg).is_relative() && cwd.join(arg).is_file() => cwd.join(arg).display().to_string(),
        _ => arg.clone(),
    };
    args.iter().map(resolve).collect()
}

/// `…/oxibot-tool-fs` → `fs`; `…/oxibot-channel-telegram` → `telegram`; `…/weather.py` →
/// `weather`.
pub fn name_from_command(command: &std::path::Path) -> String {
    let stem = command.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let short = stem.strip_prefix(TOOL_PREFIX).or_else(|| stem.strip_prefix(CHANNEL_PREFIX));
    short.map(str::to_owned).unwrap_or(stem)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(name: &str, config: Value) -> PluginSpec {
        let mut spec = PluginSpec::bundled(Path::new("/opt/oxibot/oxibot"), &PeerKind::Channel, name);
        spec.env.insert(ENV_CHANNEL_CONFIG.to_owned(), config.to_string());
        spec
    }

    #[test]
    fn only_the_shell_plugin_contains_its_commands_whatever_its_entry_is_called() {
        let bundled = PluginSpec::bundled(Path::new("/opt/oxibot/oxibot"), &PeerKind::Tool, "shell");
        let mut configured = PluginSpec::for_executable(PathBuf::from("/opt/oxibot/oxibot-tool-shell"), Origin::Config);
        configured.name = "exec".to_owned();
        let other = PluginSpec::bundled(Path::new("/opt/oxibot/oxibot"), &PeerKind::Tool, "fs");
        assert!(bundled.contains_its_commands() && configured.contains_its_commands());
        assert!(!other.contains_its_commands());
    }

    #[test]
    fn a_bundled_plugin_runs_the_kernel_executable_under_the_name_of_its_link() {
        let tool = PluginSpec::bundled(Path::new("/opt/oxibot/oxibot"), &PeerKind::Tool, "fs");
        assert_eq!((tool.command_line().as_str(), tool.name.as_str()), ("/opt/oxibot/oxibot __plugin fs", "fs"));
        assert_eq!((tool.program_name().as_str(), tool.expected_kind()), ("oxibot-tool-fs", PeerKind::Tool));
        let channel = PluginSpec::bundled(Path::new("/opt/oxibot/oxibot"), &PeerKind::Channel, "slack");
        assert_eq!(channel.command_line(), "/opt/oxibot/oxibot __channel slack");
        assert_eq!(channel.expected_kind(), PeerKind::Channel);
        let linked = PluginSpec::for_executable(PathBuf::from("/opt/oxibot/oxibot-channel-slack"), Origin::PluginDir);
        assert_eq!((linked.name.as_str(), linked.expected_kind()), ("slack", PeerKind::Channel));
    }

    #[test]
    fn an_unconfined_spec_has_no_policy() {
        let spec = PluginSpec::bundled(Path::new("/opt/oxibot/oxibot"), &PeerKind::Tool, "fs");
        assert!(!spec.is_confined());
        assert_eq!(spec.sandbox_policy(Path::new("/run/x.tmp")), None);
    }

    #[test]
    fn a_tool_plugin_gets_the_workspace_its_tmp_and_its_own_program() {
        let spec = PluginSpec::bundled(Path::new("/opt/oxibot/oxibot"), &PeerKind::Tool, "fs")
            .confined_to(Some(Path::new("/ws")));
        let policy = spec.sandbox_policy(Path::new("/run/fs-0.tmp")).unwrap();
        assert!(policy.read_write().contains(&PathBuf::from("/ws")));
        assert!(policy.read_write().contains(&PathBuf::from("/run/fs-0.tmp")));
        assert!(policy.executable().contains(&PathBuf::from("/opt/oxibot/oxibot")));
        let data = crate::paths::data_dir();
        let all = policy.read_write().iter().chain(policy.read_only()).chain(policy.executable());
        assert!(
            all.filter(|path| data.starts_with(path) || path.starts_with(&data)).all(|path| path == Path::new("/ws"))
        );
    }

    #[test]
    fn a_channel_plugin_gets_its_media_dir_and_allowed_paths_but_not_the_workspace() {
        let spec = channel("telegram", serde_json::json!({"mediaDir": "/srv/media", "allowPaths": ["/srv/certs"]}))
            .confined_to(Some(Path::new("/ws")));
        let policy = spec.sandbox_policy(Path::new("/run/t.tmp")).unwrap();
        assert!(policy.read_write().contains(&PathBuf::from("/srv/media")));
        assert!(policy.read_write().contains(&PathBuf::from("/srv/certs")));
        assert!(!policy.read_write().contains(&PathBuf::from("/ws")));
        let default = channel("slack", serde_json::json!({}));
        assert_eq!(default.media_dir(), Some(crate::paths::data_dir().join("media/slack")));
    }

    #[test]
    fn a_tool_that_saves_media_gets_its_media_dir_and_its_programs_besides_the_workspace() {
        let dir = std::env::temp_dir().join(format!("oxibot-spec-venv-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("venv/bin")).unwrap();
        std::fs::write(dir.join("server.py"), "pass").unwrap();
        let mut spec = PluginSpec::for_executable(PathBuf::from("/opt/oxibot/oxibot-tool-mcp"), Origin::Config);
        spec.env.insert(ENV_MEDIA_DIR.to_owned(), "/data/media/mcp-x".to_owned());
        spec.confinement.programs = vec![Program {
            command: dir.join("venv/bin/python"),
            args: vec!["server.py".to_owned(), "--flag".to_owned()],
            search_path: None,
            cwd: Some(dir.clone()),
        }];
        let policy = spec.confined_to(Some(Path::new("/ws"))).sandbox_policy(Path::new("/run/m.tmp")).unwrap();
        assert!(policy.read_write().contains(&PathBuf::from("/data/media/mcp-x")));
        assert!(policy.read_write().contains(&PathBuf::from("/ws")));
        assert!(policy.executable().contains(&dir.join("venv")), "{:?}", policy.executable());
        assert!(policy.read_only().contains(&dir.join("server.py")), "{:?}", policy.read_only());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn configured_allow_paths_are_granted_read_write() {
        let mut spec = PluginSpec::for_executable(PathBuf::from("/opt/x/weather"), Origin::Config);
        spec.confinement.allow_paths = vec![PathBuf::from("/srv/data"), PathBuf::from("relative")];
        let policy = spec.confined_to(Some(Path::new("/ws"))).sandbox_policy(Path::new("/run/w.tmp")).unwrap();
        assert!(policy.read_write().contains(&PathBuf::from("/srv/data")));
        assert!(!policy.read_write().contains(&PathBuf::from("relative")));
    }
}
