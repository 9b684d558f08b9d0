//! A harmless git configuration for confined plugins: the user's identity and nothing else.
//!
//! git stops with "unknown error occurred while reading the configuration files" when
//! `~/.gitconfig` (or `~/.config/git/config`) exists but cannot be read, which is what the
//! sandbox does to the home directory. So the kernel, which may read them, asks git for the
//! few settings worth carrying ([`CARRIED`]), writes them into the confined plugin's private
//! `TMPDIR` and points the plugin's `GIT_CONFIG_GLOBAL` at that copy; a stdio MCP server
//! inherits it, and the shell plugin copies it into each command's private `/tmp`. Credential
//! helpers, aliases, hooks, `core.sshCommand`, `core.fsmonitor` and includes stay behind, and
//! the global ignore and attributes files (in the home directory) are `/dev/null`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The variable git reads its global configuration file from.
pub const GIT_CONFIG_GLOBAL: &str = "GIT_CONFIG_GLOBAL";
/// The copy's file name inside the plugin's `TMPDIR`.
pub const FILE_NAME: &str = "gitconfig";
/// The settings carried over: who commits, and the branch a new repository starts on.
const CARRIED: &[(&str, &str, &str)] =
    &[("user.name", "user", "name"), ("user.email", "user", "email"), ("init.defaultbranch", "init", "defaultBranch")];

/// Writes the copy into `dir` (the plugin's private `TMPDIR`); returns its path.
pub fn write_into(dir: &Path) -> std::io::Result<std::path::PathBuf> {
    let path = dir.join(FILE_NAME);
    std::fs::write(&path, carried())?;
    Ok(path)
}

/// The copy's text, made once per kernel process.
fn carried() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| render(&users_settings()))
}

/// The carried settings of the user's global git configuration, as git resolves them
/// (includes followed); none when git is missing or nothing is set.
fn users_settings() -> Vec<(String, String)> {
    let pattern =
        format!("^({})$", CARRIED.iter().map(|(key, ..)| key.replace('.', "\\.")).collect::<Vec<_>>().join("|"));
    let output = Command::new("git")
        .args(["config", "--global", "--includes", "--null", "--get-regexp", &pattern])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let Ok(output) = output else { return Vec::new() };
    String::from_utf8_lossy(&output.stdout)
        .split('\0')
        .filter_map(|entry| entry.split_once('\n'))
        .map(|(key, value)| (key.to_lowercase(), value.to_owned()))
        .collect()
}

/// A git configuration file holding `settings` (the last value of a key wins, as in git).
fn render(settings: &[(String, String)]) -> String {
    let mut text = String::new();
    let mut section = "";
    for (key, name, field) in CARRIED {
        let Some((_, value)) = settings.iter().rev().find(|(found, _)| found == key) else { continue };
        if section != *name {
            text.push_str(&format!("[{name}]\n"));
            section = name;
        }
        text.push_str(&format!("\t{field} = {}\n", quoted(value)));
    }
    text.push_str("[core]\n\texcludesFile = /dev/null\n\tattributesFile = /dev/null\n");
    text
}

/// `value` as a quoted git configuration value, control characters dropped.
fn quoted(value: &str) -> String {
    let escaped: String = value
        .chars()
        .filter(|c| !c.is_control())
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            _ => vec![c],
        })
        .collect();
    format!("\"{escaped}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_identity_and_the_default_branch_are_written_quoted() {
        let settings = [
            ("user.name".to_owned(), "Ada \"the\" Lovelace".to_owned()),
            ("user.email".to_owned(), "old@example.org".to_owned()),
            ("user.email".to_owned(), "ada@example.org".to_owned()),
        ];
        let text = render(&settings);
        assert_eq!(
            text,
            "[user]\n\tname = \"Ada \\\"the\\\" Lovelace\"\n\temail = \"ada@example.org\"\n\
             [core]\n\texcludesFile = /dev/null\n\tattributesFile = /dev/null\n"
        );
    }
}
