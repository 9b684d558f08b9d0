//! `oxibot memory log|show|restore`: Dream's changes to the memory files, from the shell.

use std::process::ExitCode;

use anyhow::Context as _;
use oxibot_kernel::memory::git::{DREAM_PREFIX, GitStore};

use super::CommonArgs;
use super::kernel::{Setup, WorkspaceDefault};

/// Lists the most recent Dream commits (all commits with `all`).
pub fn log(common: &CommonArgs, limit: usize, all: bool) -> anyhow::Result<ExitCode> {
    let store = store(common)?;
    let commits = store.log(limit, (!all).then_some(DREAM_PREFIX)).context("cannot read the memory history")?;
    if commits.is_empty() {
        eprintln!("Dream has not changed the memory files yet.");
    }
    for commit in commits {
        println!("{} {} {}", commit.short, commit.time, commit.message);
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints a commit's diff (the latest Dream commit without `sha`).
pub fn show(common: &CommonArgs, sha: Option<&str>) -> anyhow::Result<ExitCode> {
    let diff = store(common)?.show(sha)?;
    println!(
        "{} {} ({}, {} file(s) changed)\n",
        diff.commit.short, diff.commit.message, diff.commit.time, diff.files_changed
    );
    print!("{}", diff.diff);
    Ok(ExitCode::SUCCESS)
}

/// Puts the memory files back as they were before `sha`, in a new commit.
pub fn restore(common: &CommonArgs, sha: &str) -> anyhow::Result<ExitCode> {
    let commit = store(common)?.restore(sha)?;
    println!("Restored the memory files to before {sha}; recorded as {} ({}).", commit.short, commit.message);
    Ok(ExitCode::SUCCESS)
}

fn store(common: &CommonArgs) -> anyhow::Result<GitStore> {
    let setup = Setup::load_with(common, WorkspaceDefault::Configured)?;
    let store = GitStore::new(&setup.workspace);
    store.init().with_context(|| format!("cannot open the memory repository in {}", setup.workspace.display()))?;
    Ok(store)
}
