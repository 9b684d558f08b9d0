//! `ClusterJobs`: the jobs store of a kernel in a cluster. The jobs themselves stay where the
//! inner store keeps them (the workspace's `cron/jobs.json`, on storage the kernels share);
//! the scheduler's lease needs, on top of the inner store's own (the file lock, which keeps
//! out an `oxibot agent` on the same host), the cluster's `scheduler` leader key, so exactly
//! one kernel of the cluster runs cron jobs and the heartbeat. When it dies, its key expires
//! after the TTL and another kernel can take the lead.
//!
//! Its methods block on the cluster's runtime, like the file store's block on the disk: call
//! them where the file store is called (its store thread, start-up), never from a handler.

use std::path::PathBuf;
use std::sync::Arc;

use super::node::Node;
use crate::cron::job::JobsFile;
use crate::cron::storage::{JobStorage, Lease, StoreError, Version};

/// A jobs store whose scheduler lease is also the cluster's leader key.
#[derive(Debug)]
pub struct ClusterJobs<S> {
    /// Where the jobs are kept, and the host-local lease.
    inner: S,
    /// The cluster this kernel is part of.
    node: Arc<Node>,
}

impl<S: JobStorage> ClusterJobs<S> {
    /// `inner`'s jobs, scheduled by the leader among `node`'s cluster.
    pub fn new(inner: S, node: Arc<Node>) -> ClusterJobs<S> {
        ClusterJobs { inner, node }
    }
}

/// A failed cluster call as the jobs store's error.
fn cluster_error(error: impl std::fmt::Display) -> StoreError {
    StoreError::Cluster(error.to_string())
}

impl<S: JobStorage> JobStorage for ClusterJobs<S> {
    fn read(&self) -> Result<Option<(JobsFile, Version)>, StoreError> {
        self.inner.read()
    }

    fn version(&self) -> Option<Version> {
        self.inner.version()
    }

    fn replace(&self, expected: Option<&Version>, jobs: &JobsFile) -> Result<Version, StoreError> {
        self.inner.replace(expected, jobs)
    }

    /// The host's lease first (cheap, local), then the cluster's leader key; both are held
    /// by the lease and given up with it.
    fn try_scheduler_lease(&self) -> Result<Option<Lease>, StoreError> {
        let Some(local) = self.inner.try_scheduler_lease()? else { return Ok(None) };
        let node = Arc::clone(&self.node);
        let lead = self.node.block_on(async move { node.try_lead_scheduler().await }).map_err(cluster_error)?;
        match lead.map_err(cluster_error)? {
            Some(claim) => {
                tracing::info!(node = %self.node.name(), "this kernel schedules the cluster's jobs");
                Ok(Some(Lease::new(Box::new((local, claim)))))
            }
            None => Ok(None),
        }
    }

    /// Whether this host's or any kernel's scheduler runs; an unreachable cluster counts as
    /// one running (a job added now may still fire when it comes back).
    fn scheduler_running(&self) -> bool {
        if self.inner.scheduler_running() {
            return true;
        }
        let node = Arc::clone(&self.node);
        match self.node.block_on(async move { node.scheduler().await }) {
            Ok(Ok(leader)) => leader.is_some(),
            Ok(Err(error)) | Err(error) => {
                tracing::warn!(%error, "cannot ask the cluster who schedules");
                true
            }
        }
    }

    fn watched_file(&self) -> Option<(PathBuf, &'static str)> {
        self.inner.watched_file()
    }
}
