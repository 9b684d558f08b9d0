//! `oxibot service`: `oxibot gateway` as a service of the user — a systemd user unit on Linux,
//! a launchd agent on macOS — installed, removed, inspected and its log shown with the
//! system's own tools (`systemctl --user`, `journalctl --user`, `launchctl`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context as _;
use oxibot_kernel::paths;

use super::CommonArgs;

/// The systemd unit's name.
const UNIT: &str = "oxibot-gateway.service";
/// The launchd agent's label.
const LABEL: &str = "ai.oxibot.gateway";

/// What the service runs: this binary's `gateway`, with the config and data directory this
/// command was given.
struct Service {
    exe: PathBuf,
    config: Option<PathBuf>,
    home: Option<PathBuf>,
}

impl Service {
    fn for_this_binary(common: &CommonArgs) -> anyhow::Result<Service> {
        let exe = std::env::current_exe().context("cannot locate the oxibot binary")?;
        let exe = exe.canonicalize().unwrap_or(exe);
        let config = common.config.as_deref().map(absolute).transpose()?;
        let home = std::env::var_os(paths::HOME_VAR).filter(|v| !v.is_empty()).map(|h| absolute(Path::new(&h)));
        Ok(Service { exe, config, home: home.transpose()? })
    }

    /// The command line, first the program.
    fn command_line(&self) -> Vec<String> {
        let mut line = vec![self.exe.display().to_string(), "gateway".to_owned()];
        if let Some(config) = &self.config {
            line.extend(["--config".to_owned(), config.display().to_string()]);
        }
        line
    }

    /// A systemd user unit.
    fn systemd_unit(&self) -> String {
        let exec: Vec<String> = self.command_line().iter().map(|arg| systemd_quote(arg)).collect();
        let environment = match &self.home {
            Some(home) => {
                format!("Environment={}\n", systemd_quote(&format!("{}={}", paths::HOME_VAR, home.display())))
            }
            None => String::new(),
        };
        format!(
            "[Unit]\n\
             Description=oxibot gateway (personal AI assistant)\n\
             After=network-online.target\n\
             Wants=network-online.target\n\
             \n\
             [Service]\n\
             Type=simple\n\
             ExecStart={}\n\
             {environment}\
             Restart=on-failure\n\
             RestartSec=5\n\
             KillSignal=SIGTERM\n\
             TimeoutStopSec=30\n\
             \n\
             [Install]\n\
             WantedBy=default.target\n",
            exec.join(" ")
        )
    }

    /// A launchd agent definition.
    fn launchd_plist(&self) -> String {
        let arguments: String =
            self.command_line().iter().map(|arg| format!("        <string>{}</string>\n", xml_escape(arg))).collect();
        let environment = match &self.home {
            Some(home) => format!(
                "    <key>EnvironmentVariables</key>\n    <dict>\n        <key>{}</key>\n        <string>{}</string>\n    </dict>\n",
                paths::HOME_VAR,
                xml_escape(&home.display().to_string())
            ),
            None => String::new(),
        };
        let log = paths::data_dir().join("gateway.log");
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
             <plist version=\"1.0\">\n<dict>\n\
             \x20   <key>Label</key>\n    <string>{LABEL}</string>\n\
             \x20   <key>ProgramArguments</key>\n    <array>\n{arguments}    </array>\n\
             {environment}\
             \x20   <key>RunAtLoad</key>\n    <true/>\n\
             \x20   <key>KeepAlive</key>\n    <dict>\n        <key>SuccessfulExit</key>\n        <false/>\n    </dict>\n\
             \x20   <key>StandardErrorPath</key>\n    <string>{}</string>\n\
             </dict>\n</plist>\n",
            xml_escape(&log.display().to_string())
        )
    }
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(paths::expand_tilde(path)).with_context(|| format!("bad path {}", path.display()))
}

/// Where the definition goes on this system.
fn definition_path() -> PathBuf {
    if cfg!(target_os = "macos") {
        paths::home_dir().join("Library/LaunchAgents").join(format!("{LABEL}.plist"))
    } else {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| paths::home_dir().join(".config"));
        config.join("systemd/user").join(UNIT)
    }
}

/// `oxibot service install`.
pub fn install(common: &CommonArgs, no_start: bool) -> anyhow::Result<ExitCode> {
    let service = Service::for_this_binary(common)?;
    let text = if cfg!(target_os = "macos") { service.launchd_plist() } else { service.systemd_unit() };
    let path = definition_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    oxibot_kernel::fsutil::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    println!("wrote {}", path.display());
    if no_start {
        println!("not started (--no-start); start it with: {}", start_hint(&path));
        return Ok(ExitCode::SUCCESS);
    }
    let steps: Vec<Vec<String>> = if cfg!(target_os = "macos") {
        vec![words(&["launchctl", "load", "-w"]).into_iter().chain([path.display().to_string()]).collect()]
    } else {
        vec![words(&["systemctl", "--user", "daemon-reload"]), words(&["systemctl", "--user", "enable", "--now", UNIT])]
    };
    for step in steps {
        run_step(&step)
            .with_context(|| format!("the service is written but not started; try: {}", start_hint(&path)))?;
    }
    println!("the gateway runs as a service now; `oxibot service status` shows it, `oxibot service logs -f` its log");
    Ok(ExitCode::SUCCESS)
}

/// `oxibot service uninstall`.
pub fn uninstall() -> anyhow::Result<ExitCode> {
    let path = definition_path();
    let stop = if cfg!(target_os = "macos") {
        words(&["launchctl", "unload", "-w"]).into_iter().chain([path.display().to_string()]).collect()
    } else {
        words(&["systemctl", "--user", "disable", "--now", UNIT])
    };
    if path.exists() {
        // A service that was never started cannot be stopped: that is fine here.
        if let Err(error) = run_step(&stop) {
            eprintln!("note: {error:#}");
        }
        std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
        println!("removed {}", path.display());
        if !cfg!(target_os = "macos") {
            let _ = run_step(&words(&["systemctl", "--user", "daemon-reload"]));
        }
    } else {
        println!("no service installed ({} does not exist)", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `oxibot service status`: the system's own report, and its exit code.
pub fn status() -> anyhow::Result<ExitCode> {
    let command = if cfg!(target_os = "macos") {
        words(&["launchctl", "list", LABEL])
    } else {
        words(&["systemctl", "--user", "status", "--no-pager", UNIT])
    };
    pass_through(&command)
}

/// `oxibot service logs`.
pub fn logs(follow: bool) -> anyhow::Result<ExitCode> {
    if cfg!(target_os = "macos") {
        let log = paths::data_dir().join("gateway.log");
        let mut command = words(&["tail", "-n", "200"]);
        if follow {
            command.push("-f".to_owned());
        }
        command.push(log.display().to_string());
        return pass_through(&command);
    }
    let mut command = words(&["journalctl", "--user", "--no-pager", "-u", UNIT]);
    if follow {
        command.push("-f".to_owned());
    }
    pass_through(&command)
}

fn start_hint(path: &Path) -> String {
    if cfg!(target_os = "macos") {
        format!("launchctl load -w {}", path.display())
    } else {
        format!("systemctl --user daemon-reload && systemctl --user enable --now {UNIT}")
    }
}

fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_owned()).collect()
}

fn run_step(command: &[String]) -> anyhow::Result<()> {
    let (program, args) = command.split_first().context("empty command")?;
    let output = Command::new(program).args(args).output().with_context(|| format!("cannot run {program}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        anyhow::bail!("`{}` failed: {}", command.join(" "), stderr.trim());
    }
    Ok(())
}

fn pass_through(command: &[String]) -> anyhow::Result<ExitCode> {
    let (program, args) = command.split_first().context("empty command")?;
    let status = Command::new(program).args(args).status().with_context(|| format!("cannot run {program}"))?;
    Ok(ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1)))
}

/// One word of a systemd command line or assignment: quoted when it needs to be, with `%`
/// (a specifier) doubled and `\` and `"` escaped.
fn systemd_quote(word: &str) -> String {
    let escaped = word.replace('%', "%%");
    if !escaped.is_empty() && escaped.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c)) {
        return escaped;
    }
    format!("\"{}\"", escaped.replace('\\', "\\\\").replace('"', "\\\""))
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> Service {
        Service {
            exe: PathBuf::from("/opt/my tools/oxibot"),
            config: Some(PathBuf::from("/home/ada/100%/config.json")),
            home: Some(PathBuf::from("/home/ada/.oxibot")),
        }
    }

    #[test]
    fn the_unit_runs_the_gateway_with_quoted_paths_and_restarts_on_failure() {
        let unit = service().systemd_unit();
        assert!(
            unit.contains("ExecStart=\"/opt/my tools/oxibot\" gateway --config /home/ada/100%%/config.json\n"),
            "{unit}"
        );
        assert!(unit.contains("Environment=OXIBOT_HOME=/home/ada/.oxibot\n"), "{unit}");
        assert!(unit.contains("Restart=on-failure") && unit.contains("WantedBy=default.target"), "{unit}");
    }

    #[test]
    fn the_launchd_agent_lists_each_argument_and_keeps_the_gateway_alive() {
        let plist = service().launchd_plist();
        assert!(plist.contains("<string>/opt/my tools/oxibot</string>\n        <string>gateway</string>"), "{plist}");
        assert!(plist.contains("<key>Label</key>\n    <string>ai.oxibot.gateway</string>"), "{plist}");
        assert!(plist.contains("<key>OXIBOT_HOME</key>"), "{plist}");
    }

    #[test]
    fn systemd_words_are_quoted_only_when_needed() {
        assert_eq!(systemd_quote("/usr/bin/oxibot"), "/usr/bin/oxibot");
        assert_eq!(systemd_quote("a b"), "\"a b\"");
        assert_eq!(systemd_quote("say \"hi\""), "\"say \\\"hi\\\"\"");
        assert_eq!(systemd_quote("50%"), "50%%");
    }
}
