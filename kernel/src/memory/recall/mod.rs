//! Memory recall: finding old things again. The memory files stay the source of truth; this
//! module keeps a derived SQLite index of them (rebuilt at will) and searches it.
//!
//! Code map: [`sources`] lists the memory files and cuts them into chunks; [`index`] is the
//! SQLite file (FTS5 for BM25, an f32 vector per chunk when embeddings are on) and its
//! incremental sync; [`rank`] scores (hybrid, time decay, MMR); [`settings`] reads the
//! `memory` config section; [`auto`] picks what a turn is reminded of; [`edit`] stores and
//! forgets in the files; [`tool`] is the `memory` built-in tool. [`Recall`] is the handle the
//! rest of the kernel holds: searches run on a blocking thread with their own connection, and
//! every write to the index goes through one [`IndexActor`], which also polls the files so
//! that edits made in an editor are picked up without a restart.

pub mod auto;
pub mod edit;
pub mod index;
pub mod metered;
pub mod rank;
/// The `memory` section, read with the rest of the config (see [`crate::config::memory`]).
pub use crate::config::memory as settings;
pub mod sources;
#[cfg(test)]
mod tests;
pub mod tool;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::watch;

use crate::history::HistoryStore;
use crate::provider::{Embedder, ProviderError};
use index::{Hit, IndexError, MemoryIndex, Query, SyncReport};
use metered::{EmbedMeter, MeteredEmbedder};
use rank::Weights;
use settings::RecallSettings;
use sources::Category;

/// How often the index looks for files changed behind its back (an editor, another process).
pub const POLL_INTERVAL: Duration = Duration::from_secs(5);
/// Chunks embedded per round of a sync.
const EMBED_ROUND: usize = 256;
/// After a failed embedding request, embeddings wait this long before being tried again.
const EMBED_BACKOFF: Duration = Duration::from_secs(60);

/// A recall operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RecallError {
    /// The index failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The index's actor is gone (the kernel is stopping).
    #[error("the memory index is shutting down")]
    Gone,
    /// A blocking task panicked or was cancelled.
    #[error("a memory index task failed: {0}")]
    Task(String),
    /// The embedding endpoint failed.
    #[error("embedding failed: {0}")]
    Embed(#[from] ProviderError),
    /// A metered embedding request failed or was refused at its cap.
    #[error(transparent)]
    Embedding(#[from] metered::EmbedError),
}

/// The kernel's handle on memory recall (cheap to clone).
#[derive(Clone)]
pub struct Recall {
    inner: Arc<Inner>,
}

struct Inner {
    /// The workspace whose memory files are indexed.
    workspace: PathBuf,
    /// Weights, auto-recall and flush settings.
    settings: RecallSettings,
    /// The embedding client, when `memory.embedding` names a model.
    embedder: Option<MeteredEmbedder>,
    /// Serialises every write to the index.
    writer: Addr<IndexActor>,
    /// The connection searches use (SQLite's WAL lets it read while the writer writes).
    reader: Arc<Mutex<MemoryIndex>>,
    /// The archive, for storing and forgetting conversation entries.
    history: Arc<HistoryStore>,
    /// For timestamps of stored notes.
    timezone: Option<String>,
    /// Becomes `true` once the first sync has read the files (embeddings may still follow).
    first_sync: watch::Receiver<bool>,
}

/// How long a search waits for the first sync of a freshly started index, so a turn right
/// after start finds what the files held (a sync that takes longer is not waited for).
const FIRST_SYNC_WAIT: Duration = Duration::from_secs(3);

/// What [`Recall::start`] needs.
pub struct RecallSetup {
    /// The workspace.
    pub workspace: PathBuf,
    /// The index file.
    pub index_path: PathBuf,
    /// The settings.
    pub settings: RecallSettings,
    /// The embedding client, if any.
    pub embedder: Option<Embedder>,
    /// The meter of its requests (`None`: not metered).
    pub meter: Option<EmbedMeter>,
    /// The archive.
    pub history: Arc<HistoryStore>,
    /// The configured timezone.
    pub timezone: Option<String>,
    /// How often to look for changed files (`None`: only on request).
    pub poll: Option<Duration>,
}

impl Recall {
    /// Opens the index and starts its actor (inside a running actix system); a first sync
    /// starts at once, in the background.
    pub fn start(setup: RecallSetup) -> Result<Recall, RecallError> {
        let embedder = setup.embedder.map(|embedder| MeteredEmbedder::new(embedder, setup.meter));
        let mut writer = MemoryIndex::open(&setup.index_path)?;
        writer.use_model(embedder.as_ref().map(MeteredEmbedder::model))?;
        let reader = MemoryIndex::open(&setup.index_path)?;
        let (first_synced, first_sync) = watch::channel(false);
        let actor = IndexActor {
            index: Arc::new(Mutex::new(writer)),
            workspace: setup.workspace.clone(),
            embedder: embedder.clone(),
            poll: setup.poll,
            embed_failed: None,
            first_synced: Some(first_synced),
        };
        let inner = Inner {
            workspace: setup.workspace,
            settings: setup.settings,
            embedder,
            writer: actor.start(),
            reader: Arc::new(Mutex::new(reader)),
            history: setup.history,
            timezone: setup.timezone,
            first_sync,
        };
        Ok(Recall { inner: Arc::new(inner) })
    }

    /// The settings.
    pub fn settings(&self) -> &RecallSettings {
        &self.inner.settings
    }

    /// The workspace.
    pub fn workspace(&self) -> &Path {
        &self.inner.workspace
    }

    /// The archive.
    pub fn history(&self) -> &Arc<HistoryStore> {
        &self.inner.history
    }

    /// The configured timezone.
    pub fn timezone(&self) -> Option<&str> {
        self.inner.timezone.as_deref()
    }

    /// Brings the index up to date with the files and waits for it.
    pub async fn sync(&self) -> Result<SyncReport, RecallError> {
        self.inner.writer.send(SyncIndex).await.map_err(|_| RecallError::Gone)?
    }

    /// Asks for a sync without waiting.
    pub fn request_sync(&self) {
        self.inner.writer.do_send(SyncIndex);
    }

    /// The best `limit` chunks for `text` (of `category`, if given). With embeddings on, the
    /// query is embedded first; when that fails, the search falls back to keywords.
    pub async fn search(&self, text: &str, limit: usize, category: Option<Category>) -> Result<Vec<Hit>, RecallError> {
        let mut first_sync = self.inner.first_sync.clone();
        if tokio::time::timeout(FIRST_SYNC_WAIT, first_sync.wait_for(|done| *done)).await.is_err() {
            tracing::debug!("searching memory before its first sync finished");
        }
        let vector = match &self.inner.embedder {
            Some(embedder) => match embedder.embed(&[text.to_owned()]).await {
                Ok(mut vectors) => vectors.pop(),
                Err(error) => {
                    tracing::warn!(%error, "cannot embed the query; searching by keywords alone");
                    None
                }
            },
            None => None,
        };
        let settings = &self.inner.settings;
        let weights = Weights {
            vector: settings.vector_weight,
            text: settings.text_weight,
            half_life_days: settings.half_life_days,
            lambda: settings.mmr_lambda,
        };
        let text = text.to_owned();
        let now = chrono::Utc::now().timestamp();
        self.read(move |index| {
            index.search(&Query { text: &text, vector: vector.as_deref(), limit, category, weights, now })
        })
        .await
    }

    /// Runs `read` on the search connection, on the caller's thread: a search or a listing
    /// takes well under a millisecond, less than handing it to the blocking pool and waking
    /// the caller again would cost (a turn's own thread is the session's, so nothing else
    /// waits on it). Writes (syncs) still go to the blocking pool.
    pub async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&mut MemoryIndex) -> Result<T, IndexError> + Send + 'static,
    ) -> Result<T, RecallError> {
        Ok(read(&mut self.inner.reader.lock().unwrap_or_else(PoisonError::into_inner))?)
    }
}

/// Owns the writing connection: runs syncs one at a time (the files are read and SQLite
/// written on a blocking thread; embeddings are awaited in between), and polls for changes.
pub struct IndexActor {
    /// The writing connection.
    index: Arc<Mutex<MemoryIndex>>,
    /// The workspace read.
    workspace: PathBuf,
    /// Embeddings for new chunks, when on.
    embedder: Option<MeteredEmbedder>,
    /// Poll interval, if polling.
    poll: Option<Duration>,
    /// When embedding last failed (embeddings pause for [`EMBED_BACKOFF`]).
    embed_failed: Option<Instant>,
    /// Told when the first sync has read the files; `None` after.
    first_synced: Option<watch::Sender<bool>>,
}

impl Actor for IndexActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.notify(SyncIndex);
        if let Some(poll) = self.poll {
            ctx.run_interval(poll, |_, ctx| ctx.notify(SyncIndex));
        }
    }
}

/// Bring the index up to date with the memory files.
#[derive(Debug, Message)]
#[rtype(result = "Result<SyncReport, RecallError>")]
pub struct SyncIndex;

impl Handler<SyncIndex> for IndexActor {
    // Atomic: one sync at a time; a request waits for the running sync, then runs its own.
    type Result = AtomicResponse<Self, Result<SyncReport, RecallError>>;

    fn handle(&mut self, _: SyncIndex, _: &mut Context<Self>) -> Self::Result {
        let index = self.index.clone();
        let workspace = self.workspace.clone();
        let embedder =
            self.embedder.clone().filter(|_| self.embed_failed.is_none_or(|at| at.elapsed() > EMBED_BACKOFF));
        let first_synced = self.first_synced.take();
        AtomicResponse::new(Box::pin(
            async move {
                let report = blocking(&index, move |index| index.sync(&workspace)).await;
                if let Some(first_synced) = first_synced {
                    first_synced.send_replace(true);
                }
                let embedded = match (&report, embedder) {
                    (Ok(_), Some(embedder)) => embed_missing(&index, &embedder).await,
                    _ => Ok(()),
                };
                (report, embedded)
            }
            .into_actor(self)
            .map(|(report, embedded), actor, _| {
                if let Err(error) = embedded {
                    tracing::warn!(%error, "cannot embed new memory; keyword search still finds it");
                    actor.embed_failed = Some(Instant::now());
                }
                if let Err(error) = &report {
                    tracing::warn!(%error, "cannot update the memory index");
                }
                report
            }),
        ))
    }
}

/// Embeds every chunk that has no vector yet, a round at a time.
async fn embed_missing(index: &Arc<Mutex<MemoryIndex>>, embedder: &MeteredEmbedder) -> Result<(), RecallError> {
    loop {
        let missing = blocking(index, |index| index.missing_vectors(EMBED_ROUND)).await?;
        if missing.is_empty() {
            return Ok(());
        }
        let texts: Vec<String> = missing.iter().map(|(_, text)| text.clone()).collect();
        let vectors = embedder.embed(&texts).await?;
        let rows: Vec<(i64, Vec<f32>)> = missing.into_iter().map(|(row, _)| row).zip(vectors).collect();
        blocking(index, move |index| index.store_vectors(&rows)).await?;
    }
}

async fn blocking<T: Send + 'static>(
    index: &Arc<Mutex<MemoryIndex>>,
    work: impl FnOnce(&mut MemoryIndex) -> Result<T, IndexError> + Send + 'static,
) -> Result<T, RecallError> {
    let index = index.clone();
    let result = tokio::task::spawn_blocking(move || work(&mut index.lock().unwrap_or_else(PoisonError::into_inner)))
        .await
        .map_err(|e| RecallError::Task(e.to_string()))?;
    Ok(result?)
}
