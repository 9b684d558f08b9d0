//! The workspace stays where it is: its files, `memory/history.jsonl` and the cursors are
//! nanobot's format already and are used in place. What the import does there is adopt the
//! memory repository nanobot made in `<workspace>/.git` (see [`crate::memory::git_owner`]),
//! and say what it found.

use super::{Action, Area, ImportOptions, Report, Source, count};
use crate::history::HistoryStore;
use crate::memory::git::GitStore;
use crate::memory::git_owner::{self, RepoOwner};

/// Reports on the workspace and adopts nanobot's memory repository.
pub fn import(source: &Source, options: &ImportOptions, report: &mut Report) {
    let workspace = &source.workspace;
    if !workspace.is_dir() {
        return report.push(
            Area::Workspace,
            Action::Note,
            format!("nanobot's workspace {} does not exist; nothing there to use", workspace.display()),
        );
    }
    report.push(
        Area::Workspace,
        Action::Note,
        format!("{} stays where it is (not copied): oxibot works in it through the config", workspace.display()),
    );
    describe_history(&HistoryStore::new(workspace), report);
    adopt_repository(&GitStore::new(workspace), options.dry_run, report);
}

/// Notes the archive oxibot will read as it is.
fn describe_history(history: &HistoryStore, report: &mut Report) {
    if !history.path().is_file() {
        return;
    }
    match history.entries() {
        Ok(entries) => {
            let last = entries.iter().map(|entry| entry.cursor).max().unwrap_or(0);
            report.push(
                Area::Workspace,
                Action::Note,
                format!(
                    "memory/history.jsonl: {} up to cursor {last}, Dream done up to {}: read as they are",
                    count(entries.len(), "entry", "entries"),
                    history.dream_cursor()
                ),
            );
        }
        Err(error) => report.push(Area::Workspace, Action::Fail, error.to_string()),
    }
}

/// Adopts nanobot's memory repository; any other repository is left alone.
fn adopt_repository(store: &GitStore, dry_run: bool, report: &mut Report) {
    let git_dir = store.workspace().join(".git");
    let owner = match git_owner::owner(store) {
        Ok(owner) => owner,
        Err(error) => return report.push(Area::Workspace, Action::Fail, error.to_string()),
    };
    match owner {
        RepoOwner::Nobody => {}
        RepoOwner::Oxibot => {
            report.push(
                Area::Workspace,
                Action::Skip,
                format!("memory repository {}: already oxibot's", git_dir.display()),
            );
        }
        RepoOwner::Nanobot { commits } => {
            if !dry_run && let Err(error) = git_owner::adopt_nanobot(store) {
                return report.push(Area::Workspace, Action::Fail, error.to_string());
            }
            report.push(
                Area::Workspace,
                Action::Adopt,
                format!(
                    "nanobot's memory repository {} ({}): Dream's changes are committed on top of its history",
                    git_dir.display(),
                    count(commits, "commit", "commits")
                ),
            );
        }
        RepoOwner::Other => report.push(
            Area::Workspace,
            Action::Note,
            format!(
                "{} is a repository neither nanobot nor oxibot made: left alone, and memory versioning stays off",
                git_dir.display()
            ),
        ),
    }
}
