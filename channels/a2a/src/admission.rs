//! Who may call: a request must name this server as its `Host` (no DNS rebinding), come from
//! no other web site (`Origin`), carry one of the configured keys as a bearer token, and post
//! JSON. The agent card needs only the first two: it names no key and other agents read it
//! before they call.

use hyper::HeaderMap;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN};
use oxibot_plugin::serving::site::{bearer, host_allowed, is_json_content_type, origin_allowed, same_secret};

use crate::config::Config;

/// Why a request is refused before it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The `Host` names another server.
    #[error("this server answers only to its own address or a loopback name")]
    ForeignHost,
    /// A web page of another site sent the request.
    #[error("requests from other web sites are refused")]
    ForeignOrigin,
    /// No key, or not one of the configured keys.
    #[error("invalid or missing A2A key: send one of channels.a2a.keys as Authorization: Bearer <key>")]
    Unauthorised,
    /// A body that is not JSON.
    #[error("the request body must be JSON: send Content-Type: application/json")]
    NotJson,
}

/// `Ok` when the request comes from this server's own site (any page may read the card).
pub fn same_site(config: &Config, headers: &HeaderMap) -> Result<(), Refusal> {
    let host = text(headers, HOST);
    if !host_allowed(host, &config.host) {
        return Err(Refusal::ForeignHost);
    }
    if !origin_allowed(text(headers, ORIGIN), host) {
        return Err(Refusal::ForeignOrigin);
    }
    Ok(())
}

/// `Ok` when a JSON-RPC call may be served.
pub fn admit_call(config: &Config, headers: &HeaderMap) -> Result<(), Refusal> {
    same_site(config, headers)?;
    let presented = text(headers, AUTHORIZATION).and_then(bearer);
    if !presented.is_some_and(|given| config.keys.iter().any(|key| same_secret(given, key))) {
        return Err(Refusal::Unauthorised);
    }
    if !is_json_content_type(text(headers, CONTENT_TYPE)) {
        return Err(Refusal::NotJson);
    }
    Ok(())
}

fn text(headers: &HeaderMap, name: hyper::header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(hyper::header::HeaderName, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(name, HeaderValue::from_static(value));
        }
        headers
    }

    fn config() -> Config {
        Config { keys: vec!["one".into(), "two".into()], ..Config::default() }
    }

    const OWN_HOST: (hyper::header::HeaderName, &str) = (HOST, "127.0.0.1:18793");
    const JSON: (hyper::header::HeaderName, &str) = (CONTENT_TYPE, "application/json");

    #[test]
    fn any_configured_key_is_admitted_and_nothing_else() {
        let call = |auth| admit_call(&config(), &headers(&[OWN_HOST, JSON, (AUTHORIZATION, auth)]));
        assert_eq!(call("Bearer one"), Ok(()));
        assert_eq!(call("bearer two"), Ok(()));
        for wrong in ["Bearer on", "Bearer onetwo", "Basic one", "one"] {
            assert_eq!(call(wrong), Err(Refusal::Unauthorised), "{wrong}");
        }
        assert_eq!(admit_call(&config(), &headers(&[OWN_HOST, JSON])), Err(Refusal::Unauthorised));
    }

    #[test]
    fn another_host_or_site_or_a_text_body_is_refused() {
        let rebound = headers(&[(HOST, "evil.example"), (AUTHORIZATION, "Bearer one"), JSON]);
        assert_eq!(admit_call(&config(), &rebound), Err(Refusal::ForeignHost));
        let page = headers(&[OWN_HOST, (ORIGIN, "http://evil.example"), (AUTHORIZATION, "Bearer one"), JSON]);
        assert_eq!(admit_call(&config(), &page), Err(Refusal::ForeignOrigin));
        let text = headers(&[OWN_HOST, (AUTHORIZATION, "Bearer one"), (CONTENT_TYPE, "text/plain")]);
        assert_eq!(admit_call(&config(), &text), Err(Refusal::NotJson));
    }
}
