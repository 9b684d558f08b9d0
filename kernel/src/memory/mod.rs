//! Long-term memory: the archive of summarised conversation (`memory/history.jsonl`), the
//! Consolidator that keeps sessions under their token budget by archiving their oldest part,
//! Dream that folds the archive into SOUL.md, USER.md and MEMORY.md, the git repository
//! that versions those files, [`recall`] (the search index over all memory files, the
//! `memory` tool, auto-recall) and [`flush`] (session flushes and the silent pre-archive turn).

pub mod boundary;
pub mod bpe;
pub mod consolidator;
pub mod consolidator_actor;
pub mod dream;
pub mod dream_actor;
pub mod flush;
pub mod gate;
pub mod git;
pub mod git_actor;
mod git_error;
pub mod git_mirror;
pub mod git_owner;
pub mod prompts;
pub mod recall;
pub mod schedule;
pub mod tokens;

use std::sync::Arc;

use actix::prelude::*;

use crate::services::Services;
use consolidator_actor::ConsolidatorActor;
use dream_actor::DreamActor;
use git::GitStore;
use git_actor::GitActor;
use recall::index::MemoryIndex;
use recall::{Recall, RecallSetup};
use schedule::DreamSettings;

/// The kernel's memory actors, shared by every session.
#[derive(Clone)]
pub struct MemoryActors {
    /// Archives sessions that outgrow their budget.
    pub consolidator: Addr<ConsolidatorActor>,
    /// Folds the archive into the memory files.
    pub dream: Addr<DreamActor>,
    /// Versions the memory files.
    pub git: Addr<GitActor>,
    /// Searches the memory files (`None` when the index cannot be opened; memory then works
    /// as before, without search).
    pub recall: Option<Recall>,
}

impl MemoryActors {
    /// Starts the actors for the services' workspace (inside a running actix system). The
    /// memory repository is created or opened on first use.
    pub fn start(services: Arc<Services>) -> MemoryActors {
        let dream_settings = DreamSettings::from_config(&services.settings().config.agents.defaults.dream)
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "using the default Dream settings");
                DreamSettings::default()
            });
        let git = GitActor::start(GitStore::mirrored(services.workspace(), &crate::paths::data_dir()));
        let recall = start_recall(&services);
        let consolidator = ConsolidatorActor::new(services.clone(), recall.clone()).start();
        let dream = DreamActor::new(services, dream_settings, Some(git.clone())).start();
        MemoryActors { consolidator, dream, git, recall }
    }
}

impl MemoryActors {
    /// The built-in tools memory offers: `memory` (store, recall, forget, get, list, count),
    /// when the index is open.
    pub fn tools(&self) -> Vec<Arc<dyn crate::turn::builtin::BuiltinTool>> {
        self.recall.iter().map(|recall| Arc::new(recall::tool::MemoryTool::new(recall.clone())) as _).collect()
    }
}

/// Opens the workspace's memory index with the `memory` settings; a problem is logged and
/// leaves memory without search rather than stopping the kernel.
fn start_recall(services: &Services) -> Option<Recall> {
    let snapshot = services.settings();
    if let Err(error) = &snapshot.memory {
        tracing::warn!(%error, "using the default memory settings");
    }
    let settings = snapshot.memory_or_default();
    let embedder = settings.embedding.as_deref().and_then(|model| {
        crate::provider::Embedder::from_config(&snapshot.config.llm(), model)
            .inspect_err(|error| tracing::warn!(%error, "memory search runs on keywords alone"))
            .ok()
    });
    let setup = RecallSetup {
        workspace: services.workspace().to_path_buf(),
        index_path: MemoryIndex::location(services.data_dir(), services.workspace()),
        settings,
        embedder,
        meter: Some(embedding_meter(services.settings_handle(), services.data_dir())),
        history: services.history().clone(),
        timezone: services.timezone(),
        poll: Some(recall::POLL_INTERVAL),
    };
    Recall::start(setup).inspect_err(|error| tracing::warn!(%error, "memory search is off")).ok()
}

/// Meters for embedding requests, written to the usage log as `embedding` with the caps and
/// prices `settings` hold when each request is made.
pub fn embedding_meter(
    settings: crate::settings::SettingsHandle,
    data_dir: &std::path::Path,
) -> recall::metered::EmbedMeter {
    let data_dir = data_dir.to_path_buf();
    Arc::new(move |model: &str| {
        crate::meter::Meter::per_call(&settings.current(), &data_dir, "system:memory", model, "embedding")
    })
}
