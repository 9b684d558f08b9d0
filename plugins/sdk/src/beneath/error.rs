//! `AccessError`: why a path in the workspace could not be used, with the one message the
//! model sees for a path outside a restricted workspace.

use std::io;
use std::path::PathBuf;

use rustix::io::Errno;

use crate::ToolError;

/// Why a path could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The path leads outside a restricted workspace (found before or while opening it).
    #[error(
        "path '{shown}' is outside the workspace {} and access outside it is restricted; use a path inside the workspace",
        .root.display()
    )]
    Outside {
        /// The path as the model wrote it.
        shown: String,
        /// The workspace root.
        root: PathBuf,
    },
    /// The workspace root itself cannot be opened.
    #[error("cannot open the workspace {}: {source}", .root.display())]
    Workspace {
        /// The workspace root.
        root: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// Any other failure, as the system reported it.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl AccessError {
    /// The kind of a system error, `None` for the other variants.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            AccessError::Io(e) => Some(e.kind()),
            _ => None,
        }
    }

    /// Whether this is "no such file or directory".
    pub fn is_not_found(&self) -> bool {
        self.io_kind() == Some(io::ErrorKind::NotFound)
    }
}

impl From<Errno> for AccessError {
    fn from(errno: Errno) -> AccessError {
        AccessError::Io(errno.into())
    }
}

impl From<AccessError> for ToolError {
    fn from(error: AccessError) -> ToolError {
        ToolError::new(error.to_string())
    }
}
