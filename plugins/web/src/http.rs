//! [`Fetcher`]: HTTP requests behind the SSRF guard, with redirects followed by hand (each hop
//! checked again), a time limit and a size limit.

use std::error::Error as _;
use std::time::Duration;

use reqwest::{Client, RequestBuilder, StatusCode, header};
use url::Url;

use crate::error::WebError;
use crate::guard::SsrfGuard;

/// The most redirects one request follows.
pub const MAX_REDIRECTS: usize = 5;
/// How long one fetch may take, every redirect hop and the whole body included.
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// How long connecting to one address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes of a response body read.
pub const MAX_BODY_BYTES: usize = 5 * 1024 * 1024;
/// What the plugin calls itself to servers.
const USER_AGENT: &str = concat!("Mozilla/5.0 (compatible; oxibot/", env!("CARGO_PKG_VERSION"), ")");

/// A response read in full.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The URL that answered, after redirects.
    pub url: Url,
    /// Its status.
    pub status: StatusCode,
    /// The `Content-Type` header, lowercased, without parameters (empty when absent).
    pub content_type: String,
    /// The header's `charset` parameter, if any.
    pub charset: Option<String>,
    /// The body.
    pub body: Vec<u8>,
}

/// Makes guarded requests; one per plugin, shared by every call.
#[derive(Debug, Clone)]
pub struct Fetcher {
    /// The client: no proxy (a proxy would connect where the guard did not look), no automatic
    /// redirects, and the guard's resolver.
    client: Client,
    /// The address policy checked before every hop.
    guard: SsrfGuard,
}

impl Fetcher {
    /// A fetcher enforcing `guard`.
    pub fn new(guard: SsrfGuard) -> Result<Fetcher, WebError> {
        let client = Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(guard.resolver())
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(USER_AGENT)
            .build()
            .map_err(|e| WebError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Fetcher { client, guard })
    }

    /// GETs `url`, following redirects.
    pub async fn get(&self, url: &str) -> Result<Fetched, WebError> {
        self.send(url, |client, url| client.get(url)).await
    }

    /// Sends the request `build` makes for `url`, then follows redirects with plain GETs, each
    /// hop's host checked by the guard; fails on an error status, or after [`TIMEOUT`].
    pub async fn send(
        &self,
        url: &str,
        build: impl FnOnce(&Client, Url) -> RequestBuilder,
    ) -> Result<Fetched, WebError> {
        let start = parse_url(url)?;
        let timed_out = || WebError::Timeout { url: start.to_string(), secs: TIMEOUT.as_secs() };
        tokio::time::timeout(TIMEOUT, self.send_within(start.clone(), build)).await.map_err(|_| timed_out())?
    }

    /// [`Fetcher::send`] without the time limit.
    async fn send_within(
        &self,
        start: Url,
        build: impl FnOnce(&Client, Url) -> RequestBuilder,
    ) -> Result<Fetched, WebError> {
        self.check(&start).await?;
        let mut response = self.execute(build(&self.client, start.clone()), &start).await?;
        let mut redirects = 0;
        while response.status().is_redirection() {
            let Some(location) = response.headers().get(header::LOCATION) else { break };
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(WebError::TooManyRedirects { url: start.to_string(), limit: MAX_REDIRECTS });
            }
            let location = location.to_str().unwrap_or_default();
            let next = response.url().join(location).map_err(|e| WebError::InvalidUrl {
                url: location.to_owned(),
                reason: format!("bad redirect target: {e}"),
            })?;
            let next = parse_url(next.as_str())?;
            self.check(&next).await?;
            response = self.execute(self.client.get(next.clone()), &next).await?;
        }
        let status = response.status();
        let url = response.url().clone();
        if !status.is_success() {
            return Err(WebError::Status { status: status.to_string(), url: url.to_string() });
        }
        let header = response.headers().get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok());
        let (content_type, charset) = split_content_type(header.unwrap_or_default());
        let body = read_body(response, &url).await?;
        Ok(Fetched { url, status, content_type, charset, body })
    }

    /// Refuses `url` when its host is, or resolves only to, an address the guard refuses. The
    /// client's resolver filters again at connect time, so the name cannot change in between.
    async fn check(&self, url: &Url) -> Result<(), WebError> {
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(80);
        self.guard.resolve(host, port).await.map(drop)
    }

    /// Sends one request, mapping transport failures to [`WebError`].
    async fn execute(&self, request: RequestBuilder, url: &Url) -> Result<reqwest::Response, WebError> {
        request.send().await.map_err(|e| transport_error(&e, url))
    }
}

/// Parses `text` as an `http`/`https` URL with a host.
pub fn parse_url(text: &str) -> Result<Url, WebError> {
    let invalid = |reason: &str| WebError::InvalidUrl { url: text.to_owned(), reason: reason.to_owned() };
    let url = Url::parse(text.trim()).map_err(|e| invalid(&e.to_string()))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(invalid("only http and https URLs can be fetched"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("the URL has no host"));
    }
    Ok(url)
}

/// A `Content-Type` value as its lowercased type and its `charset` parameter (quotes removed).
fn split_content_type(value: &str) -> (String, Option<String>) {
    let mut parts = value.split(';');
    let kind = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let charset = parts.find_map(|part| {
        let (name, value) = part.split_once('=')?;
        name.trim().eq_ignore_ascii_case("charset").then(|| value.trim().trim_matches('"').to_owned())
    });
    (kind, charset.filter(|charset| !charset.is_empty()))
}

/// Reads a body up to [`MAX_BODY_BYTES`].
async fn read_body(mut response: reqwest::Response, url: &Url) -> Result<Vec<u8>, WebError> {
    let too_large = || WebError::TooLarge { url: url.to_string(), limit: MAX_BODY_BYTES };
    if response.content_length().is_some_and(|length| length > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport_error(&e, url))? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A transport failure as the model should read it: a timeout, the guard's refusal (found in
/// the error's causes when the resolver refused), or the innermost cause.
fn transport_error(error: &reqwest::Error, url: &Url) -> WebError {
    if error.is_timeout() {
        return WebError::Timeout { url: url.to_string(), secs: TIMEOUT.as_secs() };
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = error.source();
    let mut innermost = error.to_string();
    while let Some(current) = cause {
        if let Some(WebError::Refused { host, address }) = current.downcast_ref::<WebError>() {
            return WebError::Refused { host: host.clone(), address: *address };
        }
        innermost = current.to_string();
        cause = current.source();
    }
    WebError::Request { url: url.to_string(), reason: innermost }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_content_type_splits_into_its_type_and_charset() {
        assert_eq!(
            split_content_type("Text/HTML; Charset=\"Shift_JIS\""),
            ("text/html".to_owned(), Some("Shift_JIS".to_owned()))
        );
        assert_eq!(split_content_type("application/json"), ("application/json".to_owned(), None));
        assert_eq!(
            split_content_type("text/plain; format=flowed; charset=latin1"),
            ("text/plain".to_owned(), Some("latin1".to_owned()))
        );
        assert_eq!(split_content_type(""), (String::new(), None));
    }
}
