//! [`WebError`]: everything that can go wrong fetching or searching, phrased for the model.

use std::net::IpAddr;

use oxibot_plugin::ToolError;

/// A failed web request or search; its `Display` is what the model reads.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The URL could not be parsed or is not `http`/`https`.
    #[error("invalid URL '{url}': {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The host names (or is) an internal address that is not whitelisted.
    #[error(
        "refused: {host} resolves to {address}, an internal address (loopback, private, link-local or cloud \
         metadata); web tools only reach public addresses unless tools.ssrfWhitelist allows it"
    )]
    Refused {
        /// The host as it appeared in the URL.
        host: String,
        /// The address it resolved to.
        address: IpAddr,
    },
    /// The host name could not be resolved.
    #[error("cannot resolve {host}: {reason}")]
    Dns {
        /// The host name.
        host: String,
        /// The resolver's message.
        reason: String,
    },
    /// The request took longer than allowed.
    #[error("timed out after {secs} s fetching {url}")]
    Timeout {
        /// The URL being fetched.
        url: String,
        /// The limit.
        secs: u64,
    },
    /// The server answered with an error status.
    #[error("HTTP {status} from {url}")]
    Status {
        /// The status code and reason.
        status: String,
        /// The URL that answered.
        url: String,
    },
    /// The response is larger than the plugin reads.
    #[error("response from {url} is too large (more than {limit} bytes)")]
    TooLarge {
        /// The URL that answered.
        url: String,
        /// The byte limit.
        limit: usize,
    },
    /// More redirects than allowed.
    #[error("too many redirects (more than {limit}) starting at {url}")]
    TooManyRedirects {
        /// The first URL.
        url: String,
        /// The limit.
        limit: usize,
    },
    /// Any other failure of the request.
    #[error("request to {url} failed: {reason}")]
    Request {
        /// The URL being fetched.
        url: String,
        /// What failed.
        reason: String,
    },
    /// A search provider answered with something that is not its documented format.
    #[error("cannot read the {provider} search response: {reason}")]
    BadResponse {
        /// The provider.
        provider: &'static str,
        /// What did not parse.
        reason: String,
    },
    /// The plugin's config is malformed.
    #[error("bad web tool config: {0}")]
    Config(String),
}

impl From<WebError> for ToolError {
    fn from(error: WebError) -> ToolError {
        ToolError::new(error.to_string())
    }
}
