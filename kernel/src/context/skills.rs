//! Skills: finding them (workspace `skills/<name>/SKILL.md` first, then the built-ins),
//! checking what they need, and the two ways they reach the system prompt — always-on skills
//! in full, every other skill as one summary line the model can follow up with `read_file`.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::builtin::{BUILTIN_SKILLS_DIR, BUILTINS, builtin_path};
use super::cache::FileCache;
use super::frontmatter;
use super::requires::SkillMeta;

/// Where a skill comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillSource {
    /// `<workspace>/skills/<name>/SKILL.md`, written by the user or by the agent.
    Workspace,
    /// Shipped with oxibot, copied to `<workspace>/.oxibot/skills/<name>/SKILL.md`.
    Builtin,
}

/// What the builder knows about one skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillInfo {
    /// The skill's directory name, which is also how a workspace skill overrides a built-in one.
    pub name: String,
    /// The frontmatter `description`, or the name when there is none.
    pub description: String,
    /// The `SKILL.md` file the model reads.
    pub path: PathBuf,
    /// Whether the skill asks to be loaded into every system prompt.
    pub always: bool,
    /// Whether everything the skill needs is present.
    pub available: bool,
    /// What is missing, e.g. `bin: gh`, `env: GITHUB_TOKEN`.
    pub missing: Vec<String>,
    /// Where the skill comes from.
    pub source: SkillSource,
}

/// A skill with its instructions.
#[derive(Debug, Clone)]
pub(crate) struct Skill {
    /// What is listed about it.
    pub(crate) info: SkillInfo,
    /// The `SKILL.md` text after the frontmatter, trimmed.
    pub(crate) body: Arc<str>,
    /// Built-in tools it needs offered.
    pub(crate) tools: Vec<String>,
    /// Programs it needs, by name (looked up on `PATH`) or by path.
    programs: Vec<String>,
    /// Whether one of those tools is not offered here: no install can fix that, so the skill
    /// is left out of the summary.
    pub(crate) tool_missing: bool,
}

/// What a `SKILL.md` text says, parsed once per version of the text.
#[derive(Debug)]
struct Parsed {
    /// The text it was parsed from.
    text: Arc<str>,
    /// The frontmatter `description`, whitespace collapsed, if not blank.
    description: Option<String>,
    /// The frontmatter `always`.
    always: bool,
    /// What the skill needs.
    meta: SkillMeta,
    /// The text after the frontmatter, trimmed.
    body: Arc<str>,
}

impl Parsed {
    fn of(text: Arc<str>) -> Parsed {
        let (front, body) = frontmatter::split(&text);
        let front = front.unwrap_or_default();
        let description = front.str("description").map(str::trim).filter(|d| !d.is_empty());
        Parsed {
            description: description.map(|d| d.split_whitespace().collect::<Vec<_>>().join(" ")),
            always: front.bool("always").unwrap_or(false),
            meta: SkillMeta::from_frontmatter(&front),
            body: body.trim().into(),
            text: Arc::clone(&text),
        }
    }
}

/// Parsed `SKILL.md` texts by path, so an unchanged skill is not parsed again every turn.
/// What the machine offers (programs, variables) is checked afresh every time.
#[derive(Debug, Default)]
pub(crate) struct SkillCache {
    parsed: HashMap<PathBuf, Parsed>,
}

impl SkillCache {
    /// The skill whose `SKILL.md` at `path` holds `text`.
    fn skill(&mut self, name: &str, path: PathBuf, source: SkillSource, text: Arc<str>) -> Skill {
        let parsed = match self.parsed.entry(path.clone()) {
            Entry::Occupied(entry) if *entry.get().text == *text => entry.into_mut(),
            Entry::Occupied(mut entry) => {
                entry.insert(Parsed::of(text));
                entry.into_mut()
            }
            Entry::Vacant(entry) => entry.insert(Parsed::of(text)),
        };
        let missing = parsed.meta.missing();
        let info = SkillInfo {
            name: name.to_string(),
            description: parsed.description.clone().unwrap_or_else(|| name.to_string()),
            path,
            always: parsed.always || parsed.meta.always,
            available: missing.is_empty(),
            missing,
            source,
        };
        Skill {
            info,
            body: Arc::clone(&parsed.body),
            tools: parsed.meta.tools.clone(),
            programs: parsed.meta.bins.clone(),
            tool_missing: false,
        }
    }
}

impl Skill {
    /// Marks the skill unavailable when a built-in tool it needs is not among `offered`.
    pub(crate) fn check_tools(&mut self, offered: &[String]) {
        for tool in &self.tools {
            if !offered.contains(tool) {
                self.info.missing.push(format!("tool: {tool}"));
                self.info.available = false;
                self.tool_missing = true;
            }
        }
    }

    /// The programs the skill needs, as its frontmatter names them.
    pub(crate) fn programs(&self) -> impl Iterator<Item = &str> {
        self.programs.iter().map(String::as_str)
    }

    /// Whether the skill goes into the prompt in full: it asks to, and it can run.
    pub(crate) fn is_loaded(&self) -> bool {
        self.info.always && self.info.available
    }
}

/// Every skill, sorted by name: workspace skills, then the built-ins they do not override.
pub(crate) fn discover(workspace: &Path, cache: &mut FileCache, parsed: &mut SkillCache) -> Vec<Skill> {
    let mut skills = workspace_skills(workspace, cache, parsed);
    for builtin in BUILTINS {
        if skills.iter().all(|s| s.info.name != builtin.name) {
            let path = builtin_path(workspace, builtin.name);
            skills.push(parsed.skill(builtin.name, path, SkillSource::Builtin, builtin.content.into()));
        }
    }
    skills.sort_by(|a, b| a.info.name.cmp(&b.info.name));
    skills
}

/// The skills under `<workspace>/skills/`: each directory (not hidden) holding a `SKILL.md`.
fn workspace_skills(workspace: &Path, cache: &mut FileCache, parsed: &mut SkillCache) -> Vec<Skill> {
    let Ok(entries) = std::fs::read_dir(workspace.join("skills")) else {
        return Vec::new();
    };
    let mut skills = Vec::new();
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path().join("SKILL.md");
        if let Some(text) = cache.read(&path) {
            skills.push(parsed.skill(&name, path, SkillSource::Workspace, text));
        }
    }
    skills
}

/// The always-on skills in full, or `None` when there are none.
pub(crate) fn render_loaded(skills: &[Skill]) -> Option<String> {
    let parts: Vec<String> =
        skills.iter().filter(|s| s.is_loaded()).map(|s| format!("## Skill: {}\n\n{}", s.info.name, s.body)).collect();
    if parts.is_empty() {
        return None;
    }
    Some(format!("# Active Skills\n\n{}", parts.join("\n\n")))
}

/// One line per skill that is not loaded in full and could work here, or `None` when there
/// are none. A skill's name is its directory's, so each group names its directory once, relative
/// to the workspace where the file tools start.
pub(crate) fn render_summary(skills: &[Skill]) -> Option<String> {
    let listed: Vec<&Skill> = skills.iter().filter(|s| !s.is_loaded() && !s.tool_missing).collect();
    if listed.is_empty() {
        return None;
    }
    let mut out =
        String::from("# Skills\n\nBefore a task a skill covers, read its `SKILL.md`; offer to install what one needs.");
    for (source, place) in [(SkillSource::Builtin, BUILTIN_SKILLS_DIR), (SkillSource::Workspace, "skills")] {
        let group: Vec<&&Skill> = listed.iter().filter(|s| s.info.source == source).collect();
        if group.is_empty() {
            continue;
        }
        let title = if source == SkillSource::Builtin { "Built-in" } else { "Yours" };
        out.push_str(&format!("\n\n{title}, in `{place}/<name>/`:"));
        for skill in group {
            out.push('\n');
            out.push_str(&summary_line(&skill.info));
        }
    }
    Some(out)
}

/// `- name: description` plus what is missing, if anything.
fn summary_line(info: &SkillInfo) -> String {
    let mut line = format!("- {}: {}", info.name, info.description);
    if !info.available {
        line.push_str(&format!(" (needs {})", info.missing.join(", ")));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    fn find<'a>(skills: &'a [Skill], name: &str) -> &'a Skill {
        skills.iter().find(|s| s.info.name == name).unwrap_or_else(|| panic!("no skill {name}"))
    }

    #[test]
    fn builtins_are_listed_at_their_workspace_copy() {
        let ws = TempDir::new("skills-builtin");
        let skills = discover(ws.path(), &mut FileCache::default(), &mut SkillCache::default());
        let cron = find(&skills, "cron");
        assert_eq!(cron.info.source, SkillSource::Builtin);
        assert_eq!(cron.info.path, ws.path().join(".oxibot/skills/cron/SKILL.md"));
        assert!(!find(&skills, "memory").is_loaded(), "no built-in skill costs every prompt its whole text");
    }

    #[test]
    fn a_workspace_skill_overrides_the_builtin_of_the_same_name() {
        let ws = TempDir::new("skills-override");
        ws.write("skills/cron/SKILL.md", "---\nname: cron\ndescription: My own scheduler.\n---\nUse crontab.\n");
        ws.write("skills/notes/SKILL.md", "---\ndescription: Take notes.\n---\nWrite notes.\n");
        ws.write("skills/.hidden/SKILL.md", "---\ndescription: Hidden.\n---\n");
        ws.write("skills/empty-dir/README.md", "no skill here");
        let skills = discover(ws.path(), &mut FileCache::default(), &mut SkillCache::default());
        let cron = find(&skills, "cron");
        assert_eq!(cron.info.source, SkillSource::Workspace);
        assert_eq!(cron.info.description, "My own scheduler.");
        assert_eq!(&*cron.body, "Use crontab.");
        assert_eq!(skills.iter().filter(|s| s.info.name == "cron").count(), 1);
        assert_eq!(find(&skills, "notes").info.path, ws.path().join("skills/notes/SKILL.md"));
        assert!(skills.iter().all(|s| s.info.name != ".hidden" && s.info.name != "empty-dir"));
        let names: Vec<&str> = skills.iter().map(|s| s.info.name.as_str()).collect();
        assert!(names.windows(2).all(|w| w[0] <= w[1]), "not sorted: {names:?}");
    }

    #[test]
    fn an_unavailable_skill_lists_the_missing_program() {
        let ws = TempDir::new("skills-missing");
        ws.write(
            "skills/fancy/SKILL.md",
            "---\ndescription: Needs a tool.\nalways: true\nmetadata: {\"nanobot\":{\"requires\":{\"bins\":[\"oxibot-absent-bin\"]}}}\n---\nbody\n",
        );
        let skills = discover(ws.path(), &mut FileCache::default(), &mut SkillCache::default());
        let fancy = find(&skills, "fancy");
        assert!(!fancy.info.available);
        assert_eq!(fancy.info.missing, ["bin: oxibot-absent-bin"]);
        assert!(!fancy.is_loaded(), "an unavailable always-on skill must not be loaded");
        let summary = render_summary(&skills).expect("summary");
        let yours = &summary[summary.find("Yours, in `skills/<name>/`:").expect("group of workspace skills")..];
        assert!(yours.contains("\n- fancy: Needs a tool. (needs bin: oxibot-absent-bin)"), "{summary}");
    }

    #[test]
    fn a_skill_without_frontmatter_is_described_by_its_name() {
        let ws = TempDir::new("skills-plain");
        ws.write("skills/plain/SKILL.md", "# Plain\nJust text.\n");
        let skills = discover(ws.path(), &mut FileCache::default(), &mut SkillCache::default());
        let plain = find(&skills, "plain");
        assert_eq!(plain.info.description, "plain");
        assert!(plain.info.available && !plain.info.always);
        assert_eq!(&*plain.body, "# Plain\nJust text.");
    }
}
