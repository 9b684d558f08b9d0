//! `oxibot memory log|show|restore`: Dream's changes to the memory files, from the shell (a
//! deleted workspace repository is re-created from its copy in the data dir);
//! `oxibot memory search|reindex`: the search index over the memory files.

use std::process::ExitCode;

use anyhow::Context as _;
use std::sync::Arc;

use oxibot_kernel::history::HistoryStore;
use oxibot_kernel::memory::git::{DREAM_PREFIX, GitStore, InitOutcome};
use oxibot_kernel::memory::recall::index::MemoryIndex;
use oxibot_kernel::memory::recall::settings::RecallSettings;
use oxibot_kernel::memory::recall::sources::Category;
use oxibot_kernel::memory::recall::{Recall, RecallSetup};
use oxibot_kernel::paths;
use oxibot_kernel::provider::Embedder;

use super::CommonArgs;
use super::kernel::Setup;

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

/// Puts the memory files back as they were before `sha`, in a new commit; without `sha`, as
/// they are in the latest commit (after the workspace's repository, if deleted, is re-created
/// from the copy in the data dir).
pub fn restore(common: &CommonArgs, sha: Option<&str>) -> anyhow::Result<ExitCode> {
    let store = store(common)?;
    let Some(sha) = sha else {
        let (commit, written) = store.restore_latest()?;
        if written.is_empty() {
            println!("The memory files already match the latest commit, {} ({}).", commit.short, commit.message);
        } else {
            println!("Put back {} as of {} ({}).", written.join(", "), commit.short, commit.message);
        }
        return Ok(ExitCode::SUCCESS);
    };
    let commit = store.restore(sha)?;
    println!("Restored the memory files to before {sha}; recorded as {} ({}).", commit.short, commit.message);
    Ok(ExitCode::SUCCESS)
}

/// Searches memory and prints the best hits with where they are.
pub fn search(common: &CommonArgs, query: &str, limit: usize, category: Option<&str>) -> anyhow::Result<ExitCode> {
    let category = match category {
        Some(name) => Some(
            Category::parse(name)
                .with_context(|| format!("unknown category '{name}' (core, daily or conversation)"))?,
        ),
        None => None,
    };
    let (setup, settings) = recall_setup(common)?;
    let hits = actix::System::new().block_on(async move {
        let recall = start_recall(&setup, settings)?;
        recall.sync().await?;
        anyhow::Ok(recall.search(query, limit, category).await?)
    })?;
    if hits.is_empty() {
        eprintln!("Nothing in memory matches \"{query}\".");
    }
    for (rank, hit) in hits.iter().enumerate() {
        let day = hit.day().map(|d| format!(", {d}")).unwrap_or_default();
        println!(
            "{}. [{}] {} ({}{day}) score {:.2}",
            rank + 1,
            hit.id,
            hit.location(),
            hit.category.as_str(),
            hit.score
        );
        for line in hit.text.lines() {
            println!("   {line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Deletes the index and builds it again from the memory files.
pub fn reindex(common: &CommonArgs) -> anyhow::Result<ExitCode> {
    let (setup, settings) = recall_setup(common)?;
    let path = MemoryIndex::location(&paths::data_dir(), &setup.workspace);
    for suffix in ["", "-wal", "-shm"] {
        let file = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error).with_context(|| format!("cannot remove {}", file.display())),
        }
    }
    let started = std::time::Instant::now();
    let stats = actix::System::new().block_on(async move {
        let recall = start_recall(&setup, settings)?;
        recall.sync().await?;
        anyhow::Ok(
            recall
                .read(|index| {
                    index.checkpoint()?;
                    index.stats()
                })
                .await?,
        )
    })?;
    println!(
        "Indexed {} chunk(s) of {} file(s) in {:.1} s ({} with vectors); {} KiB at {}",
        stats.chunks,
        stats.files,
        started.elapsed().as_secs_f64(),
        stats.embedded,
        stats.bytes / 1024,
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The workspace and the `memory` settings (a bad setting is an error here, naming its key).
fn recall_setup(common: &CommonArgs) -> anyhow::Result<(Setup, RecallSettings)> {
    let setup = Setup::load(common)?;
    let settings = setup.settings.memory.clone()?;
    Ok((setup, settings))
}

/// Opens the index the kernel uses for this workspace (inside an actix system), polling off.
fn start_recall(setup: &Setup, settings: RecallSettings) -> anyhow::Result<Recall> {
    let embedder = match &settings.embedding {
        Some(model) => Some(Embedder::from_config(&setup.settings.config.llm(), model)?),
        None => None,
    };
    let recall = Recall::start(RecallSetup {
        workspace: setup.workspace.clone(),
        index_path: MemoryIndex::location(&paths::data_dir(), &setup.workspace),
        settings,
        embedder,
        meter: Some(oxibot_kernel::memory::embedding_meter(
            oxibot_kernel::settings::SettingsHandle::new(setup.settings.clone()),
            &paths::data_dir(),
        )),
        history: Arc::new(HistoryStore::new(&setup.workspace)),
        timezone: setup.settings.config.agents.defaults.timezone.clone(),
        poll: None,
    })?;
    Ok(recall)
}

/// The workspace's memory repository; one that was deleted is re-created from the copy in
/// the data dir (and the user told so).
fn store(common: &CommonArgs) -> anyhow::Result<GitStore> {
    let setup = Setup::load(common)?;
    let store = GitStore::mirrored(&setup.workspace, &paths::data_dir());
    let outcome =
        store.init().with_context(|| format!("cannot open the memory repository in {}", setup.workspace.display()))?;
    if let InitOutcome::Recovered { mirror, head } = outcome {
        eprintln!(
            "The memory repository in {} was missing; re-created it from the copy in {} (latest: {} {}).",
            setup.workspace.display(),
            mirror.display(),
            head.short,
            head.message
        );
        eprintln!("Run `oxibot memory restore` to put the memory files back as of that commit.");
    }
    Ok(store)
}
