//! Who may use the API: a request must name this server as its `Host` (no DNS rebinding), come
//! from no other web site (`Origin`), carry the API key, and send a body only as JSON (a web
//! page can post text or a form anywhere without asking, but not JSON).

use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN};
use hyper::{HeaderMap, Method};
use oxibot_plugin::serving::site::{bearer, host_allowed, is_json_content_type, origin_allowed, same_secret};

use crate::config::Config;
use crate::responses::ApiFailure;

/// `Ok` when the request may be served; else why not, in the order the checks run.
pub fn admit(config: &Config, method: &Method, headers: &HeaderMap) -> Result<(), ApiFailure> {
    let text = |name| headers.get(name).and_then(|value: &hyper::header::HeaderValue| value.to_str().ok());
    let host = text(HOST);
    if !host_allowed(host, &config.host) {
        return Err(ApiFailure::ForeignHost);
    }
    if !origin_allowed(text(ORIGIN), host) {
        return Err(ApiFailure::ForeignOrigin);
    }
    if !authorised(config, headers) {
        return Err(ApiFailure::Unauthorised);
    }
    if method == Method::POST && !is_json_content_type(text(CONTENT_TYPE)) {
        return Err(ApiFailure::NotJson);
    }
    Ok(())
}

/// Whether the request carries the configured API key (never without one).
fn authorised(config: &Config, headers: &HeaderMap) -> bool {
    let Some(key) = &config.api_key else { return false };
    let presented = headers.get(AUTHORIZATION).and_then(|value| value.to_str().ok()).and_then(bearer);
    presented.is_some_and(|given| same_secret(given, key))
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;

    use super::*;

    fn config() -> Config {
        Config { api_key: Some("sk-test".into()), ..Config::default() }
    }

    fn headers(pairs: &[(hyper::header::HeaderName, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(name, HeaderValue::from_static(value));
        }
        headers
    }

    const OWN_HOST: (hyper::header::HeaderName, &str) = (HOST, "127.0.0.1:18791");
    const KEY: (hyper::header::HeaderName, &str) = (AUTHORIZATION, "Bearer sk-test");
    const JSON: (hyper::header::HeaderName, &str) = (CONTENT_TYPE, "application/json");

    #[test]
    fn only_the_matching_bearer_key_is_authorised() {
        let get = |authorization| admit(&config(), &Method::GET, &headers(&[OWN_HOST, (AUTHORIZATION, authorization)]));
        assert!(get("Bearer sk-test").is_ok());
        assert!(get("bearer  sk-test ").is_ok());
        for wrong in ["Bearer sk-tes", "Basic sk-test", "sk-test"] {
            assert!(matches!(get(wrong), Err(ApiFailure::Unauthorised)), "{wrong}");
        }
        assert!(matches!(admit(&config(), &Method::GET, &headers(&[OWN_HOST])), Err(ApiFailure::Unauthorised)));
        let keyless = Config { api_key: None, ..Config::default() };
        assert!(matches!(admit(&keyless, &Method::GET, &headers(&[OWN_HOST])), Err(ApiFailure::Unauthorised)));
    }

    #[test]
    fn another_host_or_another_sites_origin_is_refused_even_with_the_key() {
        let rebound = headers(&[(HOST, "evil.example:18791"), KEY, JSON]);
        assert!(matches!(admit(&config(), &Method::POST, &rebound), Err(ApiFailure::ForeignHost)));
        let cross_site = headers(&[OWN_HOST, (ORIGIN, "http://evil.example"), KEY, JSON]);
        assert!(matches!(admit(&config(), &Method::POST, &cross_site), Err(ApiFailure::ForeignOrigin)));
    }

    #[test]
    fn a_post_must_be_json() {
        let text = headers(&[OWN_HOST, KEY, (CONTENT_TYPE, "text/plain")]);
        assert!(matches!(admit(&config(), &Method::POST, &text), Err(ApiFailure::NotJson)));
        assert!(matches!(admit(&config(), &Method::POST, &headers(&[OWN_HOST, KEY])), Err(ApiFailure::NotJson)));
        assert!(admit(&config(), &Method::POST, &headers(&[OWN_HOST, KEY, JSON])).is_ok());
    }
}
