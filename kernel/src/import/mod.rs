//! `oxibot import nanobot`: brings a nanobot data dir (`~/.nanobot`) over to oxibot without
//! changing it.
//!
//! What moves where:
//! - the config (`<nanobot>/config.json`) is copied to oxibot's config path when there is
//!   none, unknown keys and all ([`settings`]);
//! - the workspace stays where it is and oxibot's config points at it; its memory files,
//!   `memory/history.jsonl` and its cursors are read as they are, and nanobot's memory
//!   repository in `<workspace>/.git` is adopted so Dream's changes continue its history
//!   ([`workspace`]);
//! - sessions — nanobot 0.3's `<nanobot>/sessions/<workspace id>/<base64url key>.jsonl`, and
//!   the older `<workspace>/sessions/<key>.jsonl` and `<nanobot>/sessions/<key>.jsonl` — are
//!   copied into oxibot's private session directory of their workspace ([`sessions`]);
//! - cron jobs of older nanobot (`<nanobot>/cron/jobs.json`) and the changes a one-shot
//!   nanobot agent queued (`cron/action.jsonl`) are merged by id into
//!   `<workspace>/cron/jobs.json`, which nanobot 0.3 and oxibot share ([`cron_jobs`]);
//! - approved senders (`<nanobot>/pairing.json`) are added to oxibot's `pairing.json`
//!   ([`pairing`]).
//!
//! An import never deletes or rewrites anything in the nanobot data dir, and running it
//! again brings over only what changed since. It returns a [`Report`] of what it did (or,
//! with `dry_run`, would do); each area that fails is reported and the others go on.

pub mod cron_jobs;
pub mod pairing;
pub mod sessions;
pub mod settings;
pub mod source;
pub mod workspace;

use std::fmt;
use std::path::PathBuf;

use crate::config::ConfigError;
pub use source::Source;

/// What to import and where to.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The nanobot data dir (`~/.nanobot`).
    pub from: PathBuf,
    /// oxibot's data dir (sessions and `pairing.json` go there).
    pub data_dir: PathBuf,
    /// oxibot's config file (written only when it does not exist).
    pub config_path: PathBuf,
    /// Only report what would be done.
    pub dry_run: bool,
    /// Put nanobot's config in place of an existing oxibot config (which is kept beside).
    pub take_config: bool,
}

/// Why an import could not start.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The directory does not exist.
    #[error("{} does not exist (pass the nanobot data dir with --from)", .0.display())]
    Missing(PathBuf),
    /// The directory holds neither a config nor sessions.
    #[error("{} is not a nanobot data dir: it has neither a config.json nor a sessions directory", .0.display())]
    NotNanobot(PathBuf),
    /// nanobot's config cannot be read, so its workspace is unknown.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Which part of nanobot's data an entry is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Area {
    /// `config.json`.
    Config,
    /// The workspace, its memory files and their repository.
    Workspace,
    /// Session files.
    Sessions,
    /// Scheduled jobs.
    Cron,
    /// Approved senders.
    Pairing,
}

impl Area {
    /// The area's name as printed.
    pub fn label(self) -> &'static str {
        match self {
            Area::Config => "config",
            Area::Workspace => "workspace",
            Area::Sessions => "sessions",
            Area::Cron => "cron",
            Area::Pairing => "pairing",
        }
    }
}

/// What was (or would be) done with one thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Copied over (new to oxibot).
    Copy,
    /// oxibot's copy replaced by nanobot's newer one (oxibot's had nothing of its own).
    Update,
    /// Added to a file oxibot already had.
    Add,
    /// Taken over in place.
    Adopt,
    /// Already there, unchanged: nothing to do.
    Skip,
    /// oxibot's own version kept over nanobot's.
    Keep,
    /// Something worth knowing; nothing done.
    Note,
    /// It failed.
    Fail,
}

impl Action {
    /// Whether the action changes oxibot's files.
    pub fn changes(self) -> bool {
        matches!(self, Action::Copy | Action::Update | Action::Add | Action::Adopt)
    }

    /// The verb that starts an entry's line, as done or as planned.
    fn verb(self, dry_run: bool) -> &'static str {
        match (self, dry_run) {
            (Action::Copy, false) => "copied",
            (Action::Copy, true) => "would copy",
            (Action::Update, false) => "updated",
            (Action::Update, true) => "would update",
            (Action::Add, false) => "added",
            (Action::Add, true) => "would add",
            (Action::Adopt, false) => "adopted",
            (Action::Adopt, true) => "would adopt",
            (Action::Skip, _) => "skipped",
            (Action::Keep, false) => "kept",
            (Action::Keep, true) => "would keep",
            (Action::Note, _) => "",
            (Action::Fail, _) => "failed:",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// What it is about.
    pub area: Area,
    /// What was done.
    pub action: Action,
    /// The rest of the sentence after the verb.
    pub detail: String,
}

/// What an import did, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Whether nothing was written.
    pub dry_run: bool,
    /// One entry per thing looked at.
    pub entries: Vec<Entry>,
}

impl Report {
    fn new(dry_run: bool) -> Report {
        Report { dry_run, entries: Vec::new() }
    }

    /// Records an entry.
    pub fn push(&mut self, area: Area, action: Action, detail: impl Into<String>) {
        self.entries.push(Entry { area, action, detail: detail.into() });
    }

    /// How many things were (or would be) brought over.
    pub fn changes(&self) -> usize {
        self.entries.iter().filter(|entry| entry.action.changes()).count()
    }

    /// How many things failed.
    pub fn failures(&self) -> usize {
        self.entries.iter().filter(|entry| entry.action == Action::Fail).count()
    }

    /// One entry as printed: area, verb and detail.
    pub fn line(&self, entry: &Entry) -> String {
        let verb = entry.action.verb(self.dry_run);
        let text = if verb.is_empty() { entry.detail.clone() } else { format!("{verb} {}", entry.detail) };
        format!("{:<10} {text}", entry.area.label())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for entry in &self.entries {
            writeln!(f, "  {}", self.line(entry))?;
        }
        Ok(())
    }
}

/// `n` and the noun, singular or plural: `1 entry`, `2 entries`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Imports the nanobot data dir `options.from`.
pub fn run(options: &ImportOptions) -> Result<Report, ImportError> {
    let source = Source::discover(&options.from)?;
    let mut report = Report::new(options.dry_run);
    settings::import(&source, options, &mut report);
    workspace::import(&source, options, &mut report);
    sessions::import(&source, options, &mut report);
    cron_jobs::import(&source, options, &mut report);
    pairing::import(&source, options, &mut report);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_counts_changes_and_words_them_as_done_or_planned() {
        let mut report = Report::new(true);
        report.push(Area::Sessions, Action::Copy, "session cli:direct");
        report.push(Area::Sessions, Action::Skip, "session telegram:42: unchanged");
        report.push(Area::Workspace, Action::Note, "the workspace stays where it is");
        assert_eq!(report.changes(), 1);
        assert_eq!(report.line(&report.entries[0]), "sessions   would copy session cli:direct");
        assert_eq!(report.line(&report.entries[2]), "workspace  the workspace stays where it is");
        report.dry_run = false;
        assert_eq!(report.line(&report.entries[0]), "sessions   copied session cli:direct");
    }
}
