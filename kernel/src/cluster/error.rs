//! Why the cluster could not be reached or answered.

/// A failure talking to NATS.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No server of `cluster.nats` answered.
    #[error("cannot connect to NATS at {servers} (cluster.nats): {source}")]
    Connect {
        /// The configured servers.
        servers: String,
        /// The client's error.
        #[source]
        source: async_nats::ConnectError,
    },
    /// A key-value bucket could not be opened or created.
    #[error(
        "cannot open the JetStream key-value bucket {bucket} (is JetStream enabled on the server, `nats-server -js`?): {source}"
    )]
    Bucket {
        /// The bucket.
        bucket: &'static str,
        /// The client's error.
        #[source]
        source: async_nats::Error,
    },
    /// A request to the bucket failed (a timeout, a lost connection).
    #[error("NATS request failed while {action}: {source}")]
    Request {
        /// What was being done.
        action: &'static str,
        /// The client's error.
        #[source]
        source: async_nats::Error,
    },
    /// The cluster's runtime could not start or is gone.
    #[error("the cluster client's runtime {0}")]
    Runtime(String),
}

impl ClusterError {
    /// A failed request while doing `action`.
    pub(crate) fn request(action: &'static str, source: impl Into<async_nats::Error>) -> ClusterError {
        ClusterError::Request { action, source: source.into() }
    }
}
