//! The workspace templates (`templates/` in the repository), embedded in the binary, and the
//! onboarding step that writes the ones a workspace lacks.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// Embeds `templates/<path>` from the repository root as `(path, content)`.
macro_rules! template {
    ($path:literal) => {
        ($path, include_str!(concat!("../../../templates/", $path)))
    };
}

/// Every template as (path relative to the workspace, content).
static TEMPLATES: &[(&str, &str)] = &[
    template!("AGENTS.md"),
    template!("SOUL.md"),
    template!("USER.md"),
    template!("TOOLS.md"),
    template!("HEARTBEAT.md"),
    template!("memory/MEMORY.md"),
];

/// Directories a workspace always has, relative to it.
const DIRECTORIES: &[&str] = &["memory", "skills"];

/// Every workspace template as (path relative to the workspace, content), for `oxibot onboard`.
pub fn templates() -> &'static [(&'static str, &'static str)] {
    TEMPLATES
}

/// The content of the template at `relative`, if there is one.
pub(crate) fn template(relative: &str) -> Option<&'static str> {
    TEMPLATES.iter().find(|(path, _)| *path == relative).map(|(_, content)| *content)
}

/// Creates `workspace`, its `memory/` and `skills/` directories, and every template file it
/// does not have yet. Existing files are never touched, whatever they contain. Returns the
/// files written.
pub fn write_missing_templates(workspace: &Path) -> io::Result<Vec<PathBuf>> {
    for dir in DIRECTORIES {
        std::fs::create_dir_all(workspace.join(dir))?;
    }
    let mut written = Vec::new();
    for (relative, content) in TEMPLATES {
        let path = workspace.join(relative);
        if write_new(&path, content)? {
            written.push(path);
        }
    }
    Ok(written)
}

/// Writes `content` to `path` only if no file is there; `Ok(false)` if one was. Opening with
/// `create_new` makes the check and the creation one step, so a file that appears meanwhile is
/// not overwritten either.
fn write_new(path: &Path, content: &str) -> io::Result<bool> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(mut file) => file.write_all(content.as_bytes()).map(|()| true),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    #[test]
    fn every_template_is_listed_with_content() {
        let paths: Vec<&str> = templates().iter().map(|(path, _)| *path).collect();
        assert_eq!(paths, ["AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "HEARTBEAT.md", "memory/MEMORY.md"]);
        assert!(templates().iter().all(|(_, content)| content.trim().len() > 20));
        assert_eq!(template("SOUL.md"), Some(templates()[1].1));
        assert_eq!(template("nope.md"), None);
    }

    #[test]
    fn write_missing_templates_fills_an_empty_workspace() {
        let ws = TempDir::new("templates-fill");
        let root = ws.path().join("fresh");
        let written = write_missing_templates(&root).expect("write");
        assert_eq!(written.len(), templates().len());
        assert!(root.join("skills").is_dir() && root.join("memory").is_dir());
        for (relative, content) in templates() {
            assert_eq!(std::fs::read_to_string(root.join(relative)).expect("read"), *content);
        }
    }

    #[test]
    fn write_missing_templates_never_overwrites() {
        let ws = TempDir::new("templates-keep");
        ws.write("SOUL.md", "my soul");
        ws.write("memory/MEMORY.md", "");
        let written = write_missing_templates(ws.path()).expect("write");
        assert_eq!(std::fs::read_to_string(ws.path().join("SOUL.md")).expect("read"), "my soul");
        assert_eq!(std::fs::read_to_string(ws.path().join("memory/MEMORY.md")).expect("read"), "");
        assert!(!written.contains(&ws.path().join("SOUL.md")));
        assert_eq!(written.len(), templates().len() - 2);
        assert!(write_missing_templates(ws.path()).expect("again").is_empty());
    }
}
