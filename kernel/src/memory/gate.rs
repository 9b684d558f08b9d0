//! The tools Dream's second phase may use, and where: `read_file` anywhere in the workspace,
//! `edit_file` only on the three memory files, `write_file` only under `skills/`.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::turn::tool_batch::ToolGate;

/// The files Dream edits, relative to the workspace.
pub const MEMORY_FILES: [&str; 3] = ["SOUL.md", "USER.md", "memory/MEMORY.md"];
/// The tools offered to Dream.
pub const DREAM_TOOLS: [&str; 3] = ["read_file", "edit_file", "write_file"];

/// Refuses every Dream tool call outside its allowance.
pub struct DreamGate {
    workspace: PathBuf,
}

impl DreamGate {
    /// A gate for `workspace`.
    pub fn new(workspace: &Path) -> DreamGate {
        DreamGate { workspace: normalize(workspace) }
    }

    /// `path` relative to the workspace, `None` when it lies outside.
    fn relative(&self, path: &str) -> Option<PathBuf> {
        let path = Path::new(path);
        let absolute = if path.is_absolute() { normalize(path) } else { normalize(&self.workspace.join(path)) };
        absolute.strip_prefix(&self.workspace).ok().map(Path::to_path_buf)
    }
}

impl ToolGate for DreamGate {
    fn check(&self, tool: &str, arguments: &Value) -> Result<(), String> {
        if !DREAM_TOOLS.contains(&tool) {
            return Err(format!("the tool {tool} is not available to Dream (only {})", DREAM_TOOLS.join(", ")));
        }
        let Some(path) = arguments.get("path").and_then(Value::as_str) else {
            return Err(format!("{tool} needs a \"path\" argument"));
        };
        let relative = self.relative(path);
        match tool {
            "read_file" if relative.is_some() => Ok(()),
            "read_file" => Err(format!("Dream may only read files inside the workspace, not {path}")),
            "edit_file" if relative.as_deref().is_some_and(|r| MEMORY_FILES.iter().any(|m| Path::new(m) == r)) => {
                Ok(())
            }
            "edit_file" => Err(format!("Dream may only edit {}, not {path}", MEMORY_FILES.join(", "))),
            "write_file"
                if relative.as_deref().is_some_and(|r| r.starts_with("skills") && r.components().count() > 1) =>
            {
                Ok(())
            }
            "write_file" => Err(format!("Dream may only write new skills under skills/, not {path}")),
            _ => Err(format!("Dream may not use {tool}")),
        }
    }
}

/// Resolves `.` and `..` without touching the file system (a `..` above the root stays at it).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(tool: &str, path: &str) -> Result<(), String> {
        DreamGate::new(Path::new("/home/u/ws")).check(tool, &json!({"path": path}))
    }

    #[test]
    fn the_three_memory_files_may_be_edited_by_relative_or_absolute_path() {
        assert!(check("edit_file", "SOUL.md").is_ok());
        assert!(check("edit_file", "./USER.md").is_ok());
        assert!(check("edit_file", "/home/u/ws/memory/MEMORY.md").is_ok());
        assert!(check("edit_file", "memory/../memory/MEMORY.md").is_ok());
    }

    #[test]
    fn other_files_may_not_be_edited_even_through_dot_dot() {
        for path in [
            "AGENTS.md",
            "memory/history.jsonl",
            "../ws/notes.md",
            "/etc/passwd",
            "skills/x/SKILL.md",
            "memory/../../ws2/SOUL.md",
        ] {
            let error = check("edit_file", path).unwrap_err();
            assert!(error.contains("may only edit"), "{path}: {error}");
        }
    }

    #[test]
    fn writes_are_limited_to_files_under_skills() {
        assert!(check("write_file", "skills/report-digest/SKILL.md").is_ok());
        assert!(check("write_file", "skills").is_err());
        assert!(check("write_file", "SOUL.md").unwrap_err().contains("skills/"));
        assert!(check("write_file", "skills/../SOUL.md").is_err());
    }

    #[test]
    fn reads_stay_inside_the_workspace_and_other_tools_are_refused() {
        assert!(check("read_file", ".oxibot/skills/skill-creator/SKILL.md").is_ok());
        assert!(check("read_file", "/home/u/.ssh/id_rsa").is_err());
        assert!(check("exec", "x").unwrap_err().contains("not available to Dream"));
        assert!(DreamGate::new(Path::new("/ws")).check("edit_file", &json!({})).unwrap_err().contains("\"path\""));
    }
}
