//! Bringing nanobot's `config.json` over: copied as it is to oxibot's config path when
//! nothing is there (oxibot reads nanobot's keys and keeps those it does not use), or when the
//! config there is still the one `oxibot onboard` wrote and no conversation has used it (what
//! a person who followed the README has), or with `--take-config`; a replaced config is kept
//! beside it. A config a person made is otherwise left alone.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use serde_json::Value;

use super::{Action, Area, ImportOptions, Report, Source};
use crate::config::Config;
use crate::config::fresh::is_untouched_onboard_config;
use crate::fsutil::write_atomic;
use crate::session::location::private_dir;

/// Copies the config, or says why not.
pub fn import(source: &Source, options: &ImportOptions, report: &mut Report) {
    let dest = &options.config_path;
    if !source.has_config {
        return report.push(
            Area::Config,
            Action::Note,
            format!(
                "{} has no config.json: write one with `oxibot onboard` and set agents.defaults.workspace to {}",
                source.dir.display(),
                source.workspace.display()
            ),
        );
    }
    let text = match fs::read(&source.config_path) {
        Ok(text) => text,
        Err(error) => {
            return report.push(
                Area::Config,
                Action::Fail,
                format!("cannot read {}: {error}", source.config_path.display()),
            );
        }
    };
    let replaced = match fs::read(dest) {
        Ok(ours) if ours == text => {
            return report.push(Area::Config, Action::Skip, format!("{}: already copied, unchanged", dest.display()));
        }
        Ok(ours) if options.take_config || untouched_since_onboard(&ours, dest, options) => true,
        Ok(_) => return keep_existing(source, dest, report),
        Err(_) => false,
    };
    let (bytes, detail) = if source.workspace_named {
        (text, format!("{} to {}", source.config_path.display(), dest.display()))
    } else {
        match with_workspace(&text, &source.workspace) {
            Some(bytes) => (
                bytes,
                format!(
                    "{} to {}, adding agents.defaults.workspace = {} (nanobot's default)",
                    source.config_path.display(),
                    dest.display(),
                    source.workspace.display()
                ),
            ),
            None => {
                return report.push(
                    Area::Config,
                    Action::Fail,
                    format!("{} is not a JSON object", source.config_path.display()),
                );
            }
        }
    };
    let backup = replaced_copy(dest);
    if !options.dry_run {
        if replaced && let Err(error) = fs::copy(dest, &backup) {
            return report.push(Area::Config, Action::Fail, format!("cannot keep {}: {error}", backup.display()));
        }
        if let Err(error) = write_private(dest, &bytes) {
            return report.push(Area::Config, Action::Fail, format!("cannot write {}: {error}", dest.display()));
        }
    }
    if replaced {
        let why =
            if options.take_config { "as --take-config asks" } else { "it was still as `oxibot onboard` wrote it" };
        let detail =
            format!("{detail}, in place of oxibot's config ({why}; the old one is kept as {})", backup.display());
        return report.push(Area::Config, Action::Copy, detail);
    }
    report.push(Area::Config, Action::Copy, detail);
}

/// Where a config replaced by nanobot's is kept.
fn replaced_copy(dest: &Path) -> std::path::PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".before-import");
    dest.with_file_name(name)
}

/// Whether oxibot's config `text` (at `dest`) is the one `oxibot onboard` wrote, unedited, and
/// no conversation has happened in the workspace it names: nothing of the person's is lost
/// when nanobot's takes its place.
fn untouched_since_onboard(text: &[u8], dest: &Path, options: &ImportOptions) -> bool {
    if !is_untouched_onboard_config(text) {
        return false;
    }
    let Ok(workspace) = Config::load(dest).map(|config| config.workspace()) else { return false };
    let sessions = private_dir(&options.data_dir, &workspace);
    let talked = fs::read_dir(&sessions)
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| entry.path().extension().is_some_and(|e| e == "jsonl"));
    !talked
}

/// Reports on an oxibot config that is already there and stays.
fn keep_existing(source: &Source, dest: &Path, report: &mut Report) {
    report.push(
        Area::Config,
        Action::Keep,
        format!(
            "oxibot's config {}: it exists and was edited or used, so it is left as it is \
             (`--take-config` puts nanobot's in its place and keeps it beside)",
            dest.display()
        ),
    );
    let Ok(workspace) = Config::load(dest).map(|config| config.workspace()) else { return };
    if !same_dir(&workspace, &source.workspace) {
        report.push(
            Area::Config,
            Action::Note,
            format!(
                "it points at the workspace {}; to carry on in nanobot's, set agents.defaults.workspace to {}",
                workspace.display(),
                source.workspace.display()
            ),
        );
    }
}

/// nanobot's config with `agents.defaults.workspace` set, every other key kept.
fn with_workspace(text: &[u8], workspace: &Path) -> Option<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(text).ok()?;
    let root = value.as_object_mut()?;
    let agents = root.entry("agents").or_insert_with(|| Value::Object(Default::default())).as_object_mut()?;
    let defaults = agents.entry("defaults").or_insert_with(|| Value::Object(Default::default())).as_object_mut()?;
    defaults.insert("workspace".to_owned(), Value::String(workspace.display().to_string()));
    let mut bytes = serde_json::to_vec_pretty(&value).ok()?;
    bytes.push(b'\n');
    Some(bytes)
}

/// Writes a file only its owner can read (a config holds API keys).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic(path, bytes)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_without_a_workspace_gets_nanobots_default_and_keeps_every_other_key() {
        let text = br#"{"providers": {"custom": {"apiKey": "k"}}, "futureKey": [1, 2], "agents": {"defaults": {"model": "m"}}}"#;
        let bytes = with_workspace(text, Path::new("/home/u/.nanobot/workspace")).unwrap();
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["agents"]["defaults"]["workspace"], "/home/u/.nanobot/workspace");
        assert_eq!(value["agents"]["defaults"]["model"], "m");
        assert_eq!(value["futureKey"], serde_json::json!([1, 2]));
        assert_eq!(value["providers"]["custom"]["apiKey"], "k");
        assert!(with_workspace(b"[1]", Path::new("/w")).is_none());
    }
}
