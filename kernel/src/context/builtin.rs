//! The built-in skills: embedded in the binary from `skills/<name>/SKILL.md`, and copied into
//! `<workspace>/.oxibot/skills/<name>/SKILL.md` so the model can read them with `read_file`
//! (the fs plugin only reads inside the workspace).
//!
//! The embedded text is the source of truth: a copy that differs from it (edited, truncated,
//! from an older oxibot) is rewritten. To change a built-in skill, copy it to
//! `<workspace>/skills/<name>/`, where it overrides the built-in one.

use std::io;
use std::path::{Path, PathBuf};

use super::cache::FileCache;

/// One skill shipped with oxibot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Builtin {
    /// The skill's directory name.
    pub(crate) name: &'static str,
    /// The whole `SKILL.md`, frontmatter included.
    pub(crate) content: &'static str,
}

/// Embeds `skills/<name>/SKILL.md` from the repository root.
macro_rules! builtin {
    ($name:literal) => {
        Builtin { name: $name, content: include_str!(concat!("../../../skills/", $name, "/SKILL.md")) }
    };
}

/// Every built-in skill, by name.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("cron"),
    builtin!("github"),
    builtin!("memory"),
    builtin!("skill-creator"),
    builtin!("summarize"),
    builtin!("tmux"),
    builtin!("weather"),
];

/// Where built-in skills are copied, relative to the workspace.
pub const BUILTIN_SKILLS_DIR: &str = ".oxibot/skills";

/// The path of built-in skill `name`'s copy in `workspace`.
pub(crate) fn builtin_path(workspace: &Path, name: &str) -> PathBuf {
    workspace.join(BUILTIN_SKILLS_DIR).join(name).join("SKILL.md")
}

/// Copies every built-in skill into `workspace`, writing only copies that are missing or differ.
/// Checks go through `cache`, so an up-to-date copy costs a `stat`, not a read.
pub(crate) fn materialise(workspace: &Path, cache: &mut FileCache) -> io::Result<()> {
    for skill in BUILTINS {
        let path = builtin_path(workspace, skill.name);
        if cache.read(&path).as_deref() == Some(skill.content) {
            continue;
        }
        write_atomically(&path, skill.content)?;
        cache.remember(&path, skill.content);
    }
    Ok(())
}

/// Writes `text` to a temporary sibling of `path` and renames it over `path`, so that a reader
/// never sees half a file.
fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| io::Error::other("skill path has no parent directory"))?;
    std::fs::create_dir_all(dir)?;
    let temp = dir.join(format!(".SKILL.md.{}.tmp", std::process::id()));
    std::fs::write(&temp, text)?;
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::frontmatter;
    use crate::testing::TempDir;

    #[test]
    fn every_builtin_has_frontmatter_naming_it_and_describing_it() {
        for skill in BUILTINS {
            let (front, body) = frontmatter::split(skill.content);
            let front = front.unwrap_or_else(|| panic!("{} has no frontmatter", skill.name));
            assert_eq!(front.str("name"), Some(skill.name));
            assert!(front.str("description").is_some_and(|d| d.len() > 20), "{}", skill.name);
            assert!(body.trim().len() > 200, "{} has too short a body", skill.name);
        }
    }

    #[test]
    fn materialising_writes_missing_copies_and_repairs_changed_ones_only() {
        let ws = TempDir::new("builtin");
        let mut cache = FileCache::default();
        materialise(ws.path(), &mut cache).expect("materialise");
        for skill in BUILTINS {
            let copy = std::fs::read_to_string(builtin_path(ws.path(), skill.name)).expect("copy");
            assert_eq!(copy, skill.content);
        }
        let reads = cache.reads();
        materialise(ws.path(), &mut cache).expect("materialise again");
        assert_eq!(cache.reads(), reads, "up-to-date copies were read again");

        let cron = builtin_path(ws.path(), "cron");
        std::fs::write(&cron, "edited").expect("edit");
        materialise(ws.path(), &mut cache).expect("repair");
        let embedded = BUILTINS.iter().find(|s| s.name == "cron").expect("cron is built in");
        assert_eq!(std::fs::read_to_string(&cron).expect("read"), embedded.content);
    }
}
