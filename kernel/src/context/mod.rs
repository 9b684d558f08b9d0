//! What the model is told: the system prompt, the per-turn runtime block, skills, and the
//! workspace templates.
//!
//! The system prompt is built from the workspace, section by section (see `prompt.rs`):
//!
//! 1. identity — what oxibot is, OS and architecture, where its files are, platform policy, a
//!    format hint for the channel, how to work with tools;
//! 2. the bootstrap files `AGENTS.md`, `SOUL.md`, `USER.md`, `TOOLS.md`, each that says
//!    something once comments and unfilled template lines are left out (`prune.rs`);
//! 3. `# Memory` — `memory/MEMORY.md`;
//! 4. always-on skills in full;
//! 5. a summary line for every other skill, with its `SKILL.md` path and availability.
//!
//! It holds no clock and nothing that changes between conversations, so it stays
//! byte-identical between turns and conversations and provider prompt caches hit (a local
//! server's too, whose template renders the tools after the system text). The time, the
//! `# Recent History` section (`memory/history.jsonl` entries Dream has not processed yet,
//! [`ContextBuilder::recent_history`]) and recalled memory go into the user's message as a
//! runtime block ([`ContextBuilder::runtime_context`], [`ContextBuilder::merge_runtime`]) that
//! can be stripped again before history is stored or summarised
//! ([`ContextBuilder::strip_runtime`]).
//!
//! This module does not talk to providers, store sessions, or write memory; it reads the
//! workspace and writes only the copies of built-in skills and, on request, missing templates.

mod builtin;
mod cache;
mod freshness;
pub mod frontmatter;
mod history;
mod identity;
mod prompt;
mod prune;
mod requires;
mod runtime;
mod skills;
mod templates;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

pub use builtin::BUILTIN_SKILLS_DIR;
pub use history::MAX_SECTION_CHARS as MAX_HISTORY_CHARS;
pub use history::{MAX_ENTRIES as MAX_HISTORY_ENTRIES, MAX_ENTRY_CHARS as MAX_HISTORY_ENTRY_CHARS};
pub use prompt::{BOOTSTRAP_FILES, DREAM_CURSOR_FILE, HISTORY_FILE, MEMORY_FILE};
pub use runtime::{RUNTIME_CLOSE, RUNTIME_OPEN};
pub use skills::{SkillInfo, SkillSource};
pub use templates::{templates, write_missing_templates};

use cache::FileCache;
use freshness::Freshness;
use skills::{Skill, SkillCache};

/// Builds the system prompt and the runtime block for one workspace, caching the files it reads.
#[derive(Debug)]
pub struct ContextBuilder {
    /// The workspace, absolute (canonical when it existed at construction).
    workspace: PathBuf,
    /// Texts of the workspace files read so far, re-read only when they change.
    files: FileCache,
    /// Skills parsed so far, parsed again only when their text changes.
    parsed_skills: SkillCache,
    /// Whether copying the built-in skills has failed and been reported, so that a read-only
    /// workspace does not log a warning every turn.
    copy_failure_reported: bool,
    /// The kernel built-in tools offered here (`cron`, `spawn`, `message`): skills that need
    /// another one are marked unavailable and left out of the prompt.
    builtins: Vec<String>,
    /// Whether anything the prompt is built from may have changed since it was built.
    freshness: Freshness,
    /// Whether a prompt has been built: the first is not watched (see
    /// [`ContextBuilder::system_prompt`]).
    built_once: bool,
    /// The prompt built last for each channel, good while `freshness` says nothing changed.
    prompts: HashMap<String, String>,
}

impl ContextBuilder {
    /// A builder for `workspace` (a leading `~` is expanded).
    pub fn new(workspace: PathBuf) -> ContextBuilder {
        let workspace = crate::paths::expand_tilde(&workspace);
        let workspace =
            std::fs::canonicalize(&workspace).or_else(|_| std::path::absolute(&workspace)).unwrap_or(workspace);
        ContextBuilder {
            workspace,
            files: FileCache::default(),
            parsed_skills: SkillCache::default(),
            copy_failure_reported: false,
            builtins: Vec::new(),
            freshness: Freshness::default(),
            built_once: false,
            prompts: HashMap::new(),
        }
    }

    /// Tells the builder which kernel built-in tools this kernel offers.
    pub fn set_builtin_tools(&mut self, names: Vec<String>) {
        self.builtins = names;
        self.prompts.clear();
    }

    /// The workspace this builder reads.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The system prompt for a conversation on `channel` (`cli`, `telegram`, …). It contains no
    /// clock. It is built again only when something it reads may have changed (see
    /// [`freshness`]), and then files are re-read only when their modification time or length
    /// has changed.
    pub fn system_prompt(&mut self, channel: &str) -> String {
        if !self.freshness.unchanged() {
            self.prompts.clear();
        } else if let Some(prompt) = self.prompts.get(channel) {
            return prompt.clone();
        }
        // The watches start with the second build: a one-shot run builds its prompt once, and
        // watching would cost it a system call per directory and, at exit, a close of the
        // inotify descriptor that waits on the kernel for tens of milliseconds.
        let reusable = self.built_once && self.freshness.arm(&self.workspace);
        self.built_once = true;
        let skills = self.load_skills();
        let prompt = prompt::build(&self.workspace, channel, &mut self.files, &skills);
        self.freshness.watch_programs(skills.iter().flat_map(Skill::programs));
        if reusable {
            self.prompts.insert(channel.to_owned(), prompt.clone());
        }
        prompt
    }

    /// The `# Recent History` section, or `None` when Dream has processed every entry. It goes
    /// into the runtime block, after the tool list in every request layout, so a conversation
    /// archived by `/new` leaves the cached system prompt and tools as they were.
    pub fn recent_history(&mut self) -> Option<String> {
        prompt::recent_history(&self.workspace, &mut self.files)
    }

    /// Every skill, sorted by name: workspace skills, and the built-ins they do not override.
    pub fn skills(&mut self) -> Vec<SkillInfo> {
        self.load_skills().into_iter().map(|skill| skill.info).collect()
    }

    /// The runtime block for a turn: the time `now` in `timezone` (an IANA name, UTC when absent
    /// or unknown), the channel and the chat id, between [`RUNTIME_OPEN`] and [`RUNTIME_CLOSE`].
    pub fn runtime_context(channel: &str, chat_id: &str, timezone: Option<&str>, now: DateTime<Utc>) -> String {
        runtime::runtime_context(channel, chat_id, timezone, now)
    }

    /// The runtime block with recalled memory (auto-recall's lines) inside it.
    pub fn with_recalled(runtime: &str, recalled: &str) -> String {
        runtime::with_recalled(runtime, recalled)
    }

    /// The user's text with the runtime block in front of it, as one message (some providers
    /// reject two user messages in a row).
    pub fn merge_runtime(user_text: &str, runtime: &str) -> String {
        runtime::merge_runtime(user_text, runtime)
    }

    /// A stored user message without its runtime block; text without one is returned unchanged.
    pub fn strip_runtime(text: &str) -> String {
        runtime::strip_runtime(text)
    }

    /// Copies the built-in skills into the workspace (when needed) and lists all skills.
    fn load_skills(&mut self) -> Vec<Skill> {
        match builtin::materialise(&self.workspace, &mut self.files) {
            Ok(()) => self.copy_failure_reported = false,
            Err(error) if !self.copy_failure_reported => {
                self.copy_failure_reported = true;
                tracing::warn!(
                    workspace = %self.workspace.display(),
                    %error,
                    "could not copy the built-in skills into the workspace; the model cannot read them"
                );
            }
            Err(_) => {}
        }
        let mut skills = skills::discover(&self.workspace, &mut self.files, &mut self.parsed_skills);
        for skill in &mut skills {
            skill.check_tools(&self.builtins);
        }
        skills
    }

    /// How many times a file was read from disk (for cache tests).
    #[cfg(test)]
    fn file_reads(&self) -> u64 {
        self.files.reads()
    }
}
