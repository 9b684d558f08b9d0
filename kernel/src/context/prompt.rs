//! Assembling the system prompt from its sections, in nanobot's order: identity, bootstrap
//! files, memory, always-on skills, the skills summary, recent history. Sections are separated
//! by a `---` line; empty sections are left out, and so are comments and unfilled parts of the
//! workspace files (`prune.rs`).

use std::path::Path;

use super::cache::FileCache;
use super::history;
use super::identity::identity;
use super::prune::prune;
use super::skills::{self, Skill};
use super::templates::template;

/// Workspace files put into the prompt under their own name, in this order.
pub const BOOTSTRAP_FILES: &[&str] = &["AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md"];

/// Long-term memory, relative to the workspace.
pub const MEMORY_FILE: &str = "memory/MEMORY.md";
pub use crate::history::{DREAM_CURSOR_FILE, HISTORY_FILE};

/// What goes between two sections.
const SECTION_SEPARATOR: &str = "\n\n---\n\n";

/// The whole system prompt.
pub(crate) fn build(workspace: &Path, channel: &str, files: &mut FileCache, skills: &[Skill]) -> String {
    let mut parts = vec![identity(workspace, channel)];
    parts.extend(bootstrap(workspace, files));
    parts.extend(memory(workspace, files));
    parts.extend(skills::render_loaded(skills));
    parts.extend(skills::render_summary(skills));
    parts.join(SECTION_SEPARATOR)
}

/// Each bootstrap file that exists and says something (see [`prune`]), under a heading with
/// its name.
fn bootstrap(workspace: &Path, files: &mut FileCache) -> Option<String> {
    let parts: Vec<String> = BOOTSTRAP_FILES
        .iter()
        .filter_map(|name| {
            let text = prune(&files.read(&workspace.join(name))?);
            (!text.is_empty()).then(|| format!("## {name}\n\n{text}"))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// `memory/MEMORY.md`, unless it is blank or still the untouched template.
fn memory(workspace: &Path, files: &mut FileCache) -> Option<String> {
    let text = prune(&files.read(&workspace.join(MEMORY_FILE))?);
    let untouched = template(MEMORY_FILE).is_some_and(|t| prune(t) == text);
    (!text.is_empty() && !untouched).then(|| format!("# Memory\n\n{text}"))
}

/// History entries Dream has not processed yet: not part of the system prompt, since they
/// change with every archived conversation (see [`super::ContextBuilder::recent_history`]).
pub(crate) fn recent_history(workspace: &Path, files: &mut FileCache) -> Option<String> {
    let cursor = files.read(&workspace.join(DREAM_CURSOR_FILE));
    let since = history::dream_cursor(cursor.as_deref());
    let section = files.derive(&workspace.join(HISTORY_FILE), &since.to_string(), |path| {
        Some(history::section(path, since).ok()?.unwrap_or_default())
    })?;
    (!section.is_empty()).then(|| section.to_string())
}
