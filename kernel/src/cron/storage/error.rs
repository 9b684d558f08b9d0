//! Why the stored jobs could not be used: the errors of every [`super::JobStorage`] (a local
//! file's are the most detailed, since it is the one implementation today).

use std::io;
use std::path::PathBuf;

/// Why the jobs file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file-system call failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: io::Error,
    },
    /// The file did not parse; it was moved aside and is kept.
    #[error(
        "{} could not be read ({reason}); it was moved to {} and is kept there: fix it and move it back, or delete it",
        path.display(), backup.display()
    )]
    Corrupt {
        /// The jobs file.
        path: PathBuf,
        /// Where it is now.
        backup: PathBuf,
        /// The parse error.
        reason: String,
    },
    /// The file did not parse and could not be moved aside; it is left alone.
    #[error("{} could not be read ({reason}) and could not be moved aside ({source}); it is left as it is", path.display())]
    CorruptInPlace {
        /// The jobs file.
        path: PathBuf,
        /// The parse error.
        reason: String,
        /// Why the move failed.
        #[source]
        source: io::Error,
    },
    /// Another writer changed the jobs between this writer's read and its write, every time
    /// it tried.
    #[error("the scheduled jobs kept changing while this edit was being saved; try again")]
    Conflict,
    /// In cluster mode, the kernels' shared state could not be reached to elect the scheduler.
    #[error("cannot reach the cluster to elect the scheduler: {0}")]
    Cluster(String),
}
