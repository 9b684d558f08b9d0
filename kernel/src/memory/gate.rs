//! The tools Dream's second phase may use, and where: `read_file` anywhere in the workspace,
//! `edit_file` only on the three memory files, `write_file` only to create a skill as
//! `skills/<name>/SKILL.md` whose content opens with frontmatter naming it and describing it
//! (a small model once wrote `skills/memory/MEMORY.md`, a memory file where no one looks).

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
            "write_file" => match relative.as_deref().and_then(skill_name) {
                Some(name) => check_skill_content(&name, arguments.get("content").and_then(Value::as_str)),
                None => Err(format!(
                    "Dream may only create a skill as skills/<name>/SKILL.md (name in kebab-case), not {path}"
                )),
            },
            _ => Err(format!("Dream may not use {tool}")),
        }
    }
}

/// The skill's name when `relative` is `skills/<name>/SKILL.md` with a kebab-case name.
fn skill_name(relative: &Path) -> Option<String> {
    let parts: Vec<&str> = relative.components().map(|c| c.as_os_str().to_str()).collect::<Option<_>>()?;
    let [SKILLS, name, SKILL_FILE] = parts.as_slice() else { return None };
    let kebab = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    kebab.then(|| (*name).to_owned())
}

/// The skills directory and a skill's file, as Dream must write them.
const SKILLS: &str = "skills";
const SKILL_FILE: &str = "SKILL.md";

/// A new skill's file opens with `---`, a `name:` equal to its directory, a non-empty
/// `description:`, and a closing `---`.
fn check_skill_content(name: &str, content: Option<&str>) -> Result<(), String> {
    let shape = format!(
        "a skill's SKILL.md starts with frontmatter: ---, name: {name}, description: <one line>, --- (then the steps)"
    );
    let content = content.unwrap_or_default().trim_start();
    let Some(rest) = content.strip_prefix("---") else { return Err(shape) };
    let Some(end) = rest.find("\n---") else { return Err(shape) };
    let field = |key: &str| {
        rest[..end].lines().find_map(|line| line.trim().strip_prefix(key)).map(|v| v.trim().trim_matches(['"', '\'']))
    };
    match (field("name:"), field("description:")) {
        (Some(given), Some(description)) if given == name && !description.is_empty() => Ok(()),
        _ => Err(shape),
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

    fn write(path: &str, content: &str) -> Result<(), String> {
        DreamGate::new(Path::new("/home/u/ws")).check("write_file", &json!({"path": path, "content": content}))
    }

    #[test]
    fn writes_only_create_a_skill_file_with_its_frontmatter() {
        let skill = "---\nname: report-digest\ndescription: Sum up the weekly reports\n---\n1. Read them.\n";
        assert!(write("skills/report-digest/SKILL.md", skill).is_ok());
        for path in ["skills", "skills/memory/MEMORY.md", "skills/Report/SKILL.md", "skills/a/b/SKILL.md", "SOUL.md"] {
            assert!(write(path, skill).unwrap_err().contains("skills/<name>/SKILL.md"), "{path}");
        }
        assert!(write("skills/../SOUL.md", skill).is_err());
        let other_name = skill.replace("name: report-digest", "name: digest");
        for content in ["1. Read them.", "---\nname: report-digest\n---\n", other_name.as_str()] {
            assert!(write("skills/report-digest/SKILL.md", content).unwrap_err().contains("frontmatter"), "{content}");
        }
    }

    #[test]
    fn reads_stay_inside_the_workspace_and_other_tools_are_refused() {
        assert!(check("read_file", ".oxibot/skills/skill-creator/SKILL.md").is_ok());
        assert!(check("read_file", "/home/u/.ssh/id_rsa").is_err());
        assert!(check("exec", "x").unwrap_err().contains("not available to Dream"));
        assert!(DreamGate::new(Path::new("/ws")).check("edit_file", &json!({})).unwrap_err().contains("\"path\""));
    }
}
