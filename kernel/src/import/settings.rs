//! Bringing nanobot's `config.json` over: copied as it is to oxibot's config path when
//! nothing is there (oxibot reads nanobot's keys and keeps those it does not use); an
//! existing oxibot config is left alone.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use serde_json::Value;

use super::{Action, Area, ImportOptions, Report, Source};
use crate::config::Config;
use crate::fsutil::write_atomic;

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
    if dest.exists() {
        return keep_existing(source, dest, &text, report);
    }
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
    if !options.dry_run {
        if let Err(error) = write_private(dest, &bytes) {
            return report.push(Area::Config, Action::Fail, format!("cannot write {}: {error}", dest.display()));
        }
    }
    report.push(Area::Config, Action::Copy, detail);
}

/// Reports on an oxibot config that is already there.
fn keep_existing(source: &Source, dest: &Path, nanobot_text: &[u8], report: &mut Report) {
    if fs::read(dest).is_ok_and(|ours| ours == nanobot_text) {
        return report.push(Area::Config, Action::Skip, format!("{}: already copied, unchanged", dest.display()));
    }
    report.push(
        Area::Config,
        Action::Keep,
        format!("oxibot's config {}: it exists, so it is left as it is", dest.display()),
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
