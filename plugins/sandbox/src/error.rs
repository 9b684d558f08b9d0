//! Why a process could not be confined, or a policy could not be read.

/// An error of this crate.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The running system offers no sandbox this crate can apply.
    #[error("no sandbox is available: {reason}")]
    Unavailable {
        /// Why, in words a user can act on.
        reason: String,
    },
    /// The kernel refused the Landlock ruleset or the confinement.
    #[error("cannot confine the process: {0}")]
    Landlock(String),
    /// A policy given on the command line is malformed.
    #[error("bad sandbox arguments: {0}")]
    BadArguments(String),
    /// A namespace could not be entered, or the container's root could not be built.
    #[error("cannot build the container: {0}")]
    Namespaces(String),
    /// The seccomp filter could not be compiled or applied.
    #[error("cannot apply the seccomp filter: {0}")]
    Seccomp(String),
    /// A resource limit could not be set.
    #[error("cannot set a resource limit: {0}")]
    Limits(String),
    /// Capabilities could not be dropped.
    #[error("cannot drop capabilities: {0}")]
    Capabilities(std::io::Error),
}
