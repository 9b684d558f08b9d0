//! Why the Discord channel stops or a delivery fails.

/// Errors of the Discord channel.
#[derive(Debug, thiserror::Error)]
pub enum DiscordError {
    /// The `channels.discord` config section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] oxibot_plugin::chat::SectionError),
    /// The `channels.discord` config section is unusable.
    #[error("invalid discord config: {0}")]
    Config(String),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    /// Discord refused the session for good (bad token, disallowed intents, …).
    #[error("discord closed the gateway for good (code {code}): {reason}")]
    Fatal {
        /// The WebSocket close code Discord sent.
        code: u16,
        /// What the code means.
        reason: String,
    },
}

/// Why one REST request failed in the end.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    /// The request did not get an answer (connection refused, timeout, …).
    #[error("request to discord failed: {0}")]
    Transport(#[from] reqwest::Error),
    /// Discord answered with an error status.
    #[error("discord answered {status}: {body}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The start of the answer's body (Discord's JSON error).
        body: String,
    },
    /// Discord keeps rate-limiting this route, or asks for a wait too long to sit out.
    #[error("discord rate limit: retry after {retry_after:.1}s")]
    RateLimited {
        /// The wait Discord asked for, in seconds.
        retry_after: f64,
    },
    /// A file to upload could not be read.
    #[error("cannot read {path}: {source}")]
    File {
        /// The file's path.
        path: String,
        /// Why it could not be read.
        source: std::io::Error,
    },
}
