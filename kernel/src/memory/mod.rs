//! Long-term memory: the archive of summarised conversation (`memory/history.jsonl`), the
//! Consolidator that keeps sessions under their token budget by archiving their oldest part,
//! Dream that folds the archive into SOUL.md, USER.md and MEMORY.md, and the git repository
//! that versions those files.

pub mod boundary;
pub mod consolidator;
pub mod consolidator_actor;
pub mod dream;
pub mod dream_actor;
pub mod gate;
pub mod git;
pub mod git_actor;
pub mod git_owner;
pub mod prompts;
pub mod schedule;
pub mod tokens;

use std::sync::Arc;

use actix::prelude::*;

use crate::services::Services;
use consolidator_actor::ConsolidatorActor;
use dream_actor::DreamActor;
use git_actor::GitActor;
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
}

impl MemoryActors {
    /// Starts the actors for the services' workspace (inside a running actix system). The
    /// memory repository is created or opened on first use.
    pub fn start(services: Arc<Services>) -> MemoryActors {
        let dream_settings =
            DreamSettings::from_config(&services.config().agents.defaults.dream).unwrap_or_else(|error| {
                tracing::warn!(%error, "using the default Dream settings");
                DreamSettings::default()
            });
        let git = GitActor::start(services.workspace().to_path_buf());
        let consolidator = ConsolidatorActor::new(services.clone()).start();
        let dream = DreamActor::new(services, dream_settings, Some(git.clone())).start();
        MemoryActors { consolidator, dream, git }
    }
}
