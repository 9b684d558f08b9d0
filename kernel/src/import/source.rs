//! The nanobot data dir being imported: its config, the workspace that config names, and
//! where its session files are.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::ImportError;
use crate::config::Config;
use crate::paths;
use crate::session::location;

/// A nanobot data dir, as found on disk.
#[derive(Debug, Clone)]
pub struct Source {
    /// The data dir itself (`~/.nanobot`).
    pub dir: PathBuf,
    /// `<dir>/config.json`.
    pub config_path: PathBuf,
    /// Whether that file exists.
    pub has_config: bool,
    /// Whether the config names the workspace (else it is nanobot's default).
    pub workspace_named: bool,
    /// The workspace nanobot works in: `agents.defaults.workspace`, else
    /// `~/.nanobot/workspace` (nanobot's default wherever its config is).
    pub workspace: PathBuf,
}

/// A directory of session files and the workspace they belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDir {
    /// The directory.
    pub dir: PathBuf,
    /// The workspace its sessions were held in.
    pub workspace: PathBuf,
    /// Its files are named by base64url key (nanobot 0.3) rather than by `channel_chat`.
    pub keyed: bool,
}

impl Source {
    /// Reads the data dir at `dir`.
    pub fn discover(dir: &Path) -> Result<Source, ImportError> {
        if !dir.is_dir() {
            return Err(ImportError::Missing(dir.to_path_buf()));
        }
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        let config_path = dir.join("config.json");
        let has_config = config_path.is_file();
        if !has_config && !dir.join("sessions").is_dir() {
            return Err(ImportError::NotNanobot(dir));
        }
        let workspace_named = has_config && names_workspace(&config_path);
        let workspace = if workspace_named {
            Config::load(&config_path)?.workspace()
        } else {
            paths::home_dir().join(".nanobot/workspace")
        };
        Ok(Source { dir, config_path, has_config, workspace_named, workspace })
    }

    /// Every directory of session files to import, nanobot 0.3's first: one per workspace
    /// namespace in `<dir>/sessions/` (named by the `.workspace` marker inside, or the
    /// workspace's own id), then the older `<dir>/sessions/*.jsonl` and
    /// `<workspace>/sessions/*.jsonl`. Namespaces whose workspace is unknown come back in
    /// the second list.
    pub fn session_dirs(&self) -> (Vec<SessionDir>, Vec<PathBuf>) {
        let root = self.dir.join("sessions");
        let own_id = location::nanobot_workspace_id(&self.workspace);
        let mut found = Vec::new();
        let mut unknown = Vec::new();
        let mut namespaces: Vec<PathBuf> = fs::read_dir(&root)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.is_dir() && !path.is_symlink())
            .filter(|path| path.file_name().and_then(|n| n.to_str()).is_some_and(location::is_nanobot_namespace))
            .collect();
        namespaces.sort();
        for dir in namespaces {
            let is_own = own_id.as_deref() == dir.file_name().and_then(|n| n.to_str());
            let workspace = if is_own { Some(self.workspace.clone()) } else { location::marked_workspace(&dir) };
            match workspace {
                Some(workspace) => found.push(SessionDir { dir, workspace, keyed: true }),
                None => unknown.push(dir),
            }
        }
        for dir in [root, location::legacy_dir(&self.workspace)] {
            if dir.is_dir() {
                found.push(SessionDir { dir, workspace: self.workspace.clone(), keyed: false });
            }
        }
        (found, unknown)
    }
}

/// Whether the config file sets `agents.defaults.workspace`.
fn names_workspace(path: &Path) -> bool {
    let Ok(text) = fs::read_to_string(path) else { return false };
    let Ok(value) = serde_json::from_str::<Value>(&text) else { return false };
    value
        .get("agents")
        .and_then(|agents| agents.get("defaults"))
        .and_then(|defaults| defaults.get("workspace"))
        .and_then(Value::as_str)
        .is_some_and(|workspace| !workspace.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    #[test]
    fn the_workspace_is_the_configured_one_and_namespaces_are_found_by_id_or_marker() {
        let dir = TempDir::new("import-source");
        let ws = dir.path().join("ws");
        let other = dir.path().join("other-ws");
        dir.write("nb/config.json", &serde_json::json!({"agents": {"defaults": {"workspace": ws}}}).to_string());
        dir.write("ws/.nanobot/workspace-id", "0123456789abcdef0123456789abcdef\n");
        dir.write("nb/sessions/0123456789abcdef0123456789abcdef/Y2xpOmRpcmVjdA.jsonl", "{}\n");
        dir.write("nb/sessions/ffffffffffffffffffffffffffffffff/.workspace", &format!("{}\n", other.display()));
        dir.write("nb/sessions/eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee/x.jsonl", "{}\n");
        dir.write("nb/sessions/not-a-namespace/x.jsonl", "{}\n");
        let source = Source::discover(&dir.path().join("nb")).unwrap();
        assert!(source.workspace_named);
        assert_eq!(source.workspace, ws);
        let (found, unknown) = source.session_dirs();
        let summary: Vec<(String, PathBuf, bool)> = found
            .iter()
            .map(|d| (d.dir.file_name().unwrap().to_string_lossy().into_owned(), d.workspace.clone(), d.keyed))
            .collect();
        assert_eq!(
            summary,
            [
                ("0123456789abcdef0123456789abcdef".to_owned(), ws.clone(), true),
                ("ffffffffffffffffffffffffffffffff".to_owned(), other, true),
                ("sessions".to_owned(), ws, false),
            ]
        );
        assert_eq!(unknown, [dir.path().join("nb/sessions/eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee")]);
    }

    #[test]
    fn a_directory_that_is_not_nanobots_is_refused() {
        let dir = TempDir::new("import-not-nanobot");
        assert!(matches!(Source::discover(dir.path()), Err(ImportError::NotNanobot(_))));
        assert!(matches!(Source::discover(&dir.path().join("missing")), Err(ImportError::Missing(_))));
    }
}
