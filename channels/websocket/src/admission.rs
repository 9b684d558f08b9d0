//! Deciding about an upgrade request: is it for our path and our host, from no other web
//! site, which chat does it join, and did the client present the token.

use oxibot_plugin::serving::site::{bearer, host_allowed, origin_allowed, same_secret};

use crate::config::Config;

/// Longest chat or client id accepted from a query string.
const MAX_ID_LEN: usize = 128;

/// What the upgrade request asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The chat named with `?chat_id=`, if any.
    pub chat_id: Option<String>,
    /// The client's name for itself from `?client_id=`, if any.
    pub client_id: Option<String>,
    /// Whether the client presented the configured token.
    pub authorised: bool,
}

/// The parts of an upgrade request the decision reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct UpgradeRequest<'a> {
    /// The URL path.
    pub path: &'a str,
    /// The query string, if any.
    pub query: Option<&'a str>,
    /// The `Host` header.
    pub host: Option<&'a str>,
    /// The `Origin` header a browser sends.
    pub origin: Option<&'a str>,
    /// The `Authorization` header.
    pub authorization: Option<&'a str>,
}

/// Why an upgrade request is refused at the HTTP level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The request is for another path (HTTP 404).
    #[error("no WebSocket endpoint at this path")]
    WrongPath,
    /// A query parameter cannot be used (HTTP 400).
    #[error("invalid query parameter {0}: it must be 1 to {MAX_ID_LEN} printable characters")]
    BadParameter(&'static str),
    /// The `Host` names another server, as after DNS rebinding (HTTP 403).
    #[error("this server answers only to its own address or a loopback name")]
    ForeignHost,
    /// A web page of another site opened the connection (HTTP 403).
    #[error("connections from other web sites are refused")]
    ForeignOrigin,
}

/// Reads an upgrade request: its path, host, origin, query and credentials.
pub fn admit(request: &UpgradeRequest<'_>, config: &Config) -> Result<Admission, Refusal> {
    if request.path != config.path {
        return Err(Refusal::WrongPath);
    }
    if !host_allowed(request.host, &config.host) {
        return Err(Refusal::ForeignHost);
    }
    if !origin_allowed(request.origin, request.host) {
        return Err(Refusal::ForeignOrigin);
    }
    let query = request.query.unwrap_or("");
    let chat_id = checked_param(query, "chat_id")?;
    let client_id = checked_param(query, "client_id")?;
    let authorised = config.token.as_deref().is_some_and(|token| {
        presented_token(query, request.authorization).is_some_and(|given| same_secret(&given, token))
    });
    Ok(Admission { chat_id, client_id, authorised })
}

/// A query parameter usable as an id, `None` when absent.
fn checked_param(query: &str, name: &'static str) -> Result<Option<String>, Refusal> {
    let Some(value) = query_param(query, name) else { return Ok(None) };
    let usable = !value.is_empty() && value.len() <= MAX_ID_LEN && !value.chars().any(char::is_control);
    if usable { Ok(Some(value)) } else { Err(Refusal::BadParameter(name)) }
}

/// The token from `?token=` or else from `Authorization: Bearer …`.
fn presented_token(query: &str, authorization: Option<&str>) -> Option<String> {
    query_param(query, "token").or_else(|| bearer(authorization?).map(str::to_owned))
}

/// The first value of `name` in a query string, percent-decoded (`+` is a space).
pub fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(key) == name).then(|| percent_decode(value))
    })
}

/// Decodes `%XX` escapes and `+`; malformed escapes are kept as they are.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => decoded.push(b' '),
            b'%' => match bytes.get(index + 1..index + 3).and_then(|pair| hex_pair(pair[0], pair[1])) {
                Some(byte) => {
                    decoded.push(byte);
                    index += 2;
                }
                None => decoded.push(b'%'),
            },
            other => decoded.push(other),
        }
        index += 1;
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// The byte written as two hex digits.
fn hex_pair(high: u8, low: u8) -> Option<u8> {
    let digit = |c: u8| (c as char).to_digit(16);
    Some((digit(high)? * 16 + digit(low)?) as u8)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(token: Option<&str>) -> Config {
        Config { token: token.map(str::to_owned), ..Config::default() }
    }

    const HOST: Option<&str> = Some("127.0.0.1:18792");

    fn request<'a>(path: &'a str, query: Option<&'a str>, authorization: Option<&'a str>) -> UpgradeRequest<'a> {
        UpgradeRequest { path, query, host: HOST, origin: None, authorization }
    }

    fn admit_plain(path: &str, query: Option<&str>, token: Option<&str>) -> Result<Admission, Refusal> {
        admit(&request(path, query, None), &config(token))
    }

    #[test]
    fn without_the_token_nobody_is_authorised_and_only_the_right_path_is_served() {
        let admission = admit_plain("/ws", None, Some("t")).unwrap();
        assert_eq!(admission, Admission { chat_id: None, client_id: None, authorised: false });
        assert!(!admit_plain("/ws", Some("token=x"), None).unwrap().authorised);
        assert_eq!(admit_plain("/other", None, Some("t")), Err(Refusal::WrongPath));
    }

    #[test]
    fn the_token_is_taken_from_the_query_or_a_bearer_header() {
        let config = config(Some("s3 cret"));
        let authorised =
            |query, authorization| admit(&request("/ws", query, authorization), &config).unwrap().authorised;
        assert!(authorised(Some("token=s3%20cret"), None));
        assert!(authorised(Some("token=s3+cret"), None));
        assert!(authorised(None, Some("Bearer s3 cret")));
        assert!(authorised(None, Some("bearer   s3 cret")));
        assert!(!authorised(None, None));
        assert!(!authorised(Some("token=wrong"), Some("Bearer s3 cret")));
        assert!(!authorised(None, Some("Basic s3 cret")));
    }

    #[test]
    fn another_sites_page_or_a_rebound_host_name_is_refused_before_the_token_is_read() {
        let config = config(Some("t"));
        let foreign_origin =
            UpgradeRequest { origin: Some("http://evil.example"), ..request("/ws", Some("token=t"), None) };
        assert_eq!(admit(&foreign_origin, &config), Err(Refusal::ForeignOrigin));
        let rebound = UpgradeRequest { host: Some("evil.example:18792"), ..request("/ws", Some("token=t"), None) };
        assert_eq!(admit(&rebound, &config), Err(Refusal::ForeignHost));
        let no_host = UpgradeRequest { host: None, ..request("/ws", Some("token=t"), None) };
        assert_eq!(admit(&no_host, &config), Err(Refusal::ForeignHost));
        let own = UpgradeRequest { origin: Some("http://127.0.0.1:18792"), ..request("/ws", Some("token=t"), None) };
        assert!(admit(&own, &config).unwrap().authorised);
    }

    #[test]
    fn chat_and_client_ids_come_from_the_query_decoded() {
        let admission = admit_plain("/ws", Some("chat_id=team%2F1&client_id=web&x=y"), Some("t")).unwrap();
        assert_eq!(admission.chat_id.as_deref(), Some("team/1"));
        assert_eq!(admission.client_id.as_deref(), Some("web"));
    }

    #[test]
    fn an_empty_or_overlong_chat_id_is_refused() {
        assert_eq!(admit_plain("/ws", Some("chat_id="), None), Err(Refusal::BadParameter("chat_id")));
        let long = format!("chat_id={}", "c".repeat(129));
        assert_eq!(admit_plain("/ws", Some(&long), None), Err(Refusal::BadParameter("chat_id")));
        assert_eq!(admit_plain("/ws", Some("client_id=%0A"), None), Err(Refusal::BadParameter("client_id")));
    }

    #[test]
    fn malformed_escapes_are_kept_as_written() {
        assert_eq!(query_param("a=100%&b=%zz%4", "a").as_deref(), Some("100%"));
        assert_eq!(query_param("a=100%&b=%zz%4", "b").as_deref(), Some("%zz%4"));
        assert_eq!(query_param("flag", "flag").as_deref(), Some(""));
    }
}
