//! Deciding about an upgrade request: is it for our path, which chat does it join, and did the
//! client present the token.

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
    /// Whether the client presented the configured token (always true without one).
    pub authorised: bool,
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
}

/// Reads an upgrade request's path, query and `Authorization` header.
pub fn admit(
    path: &str,
    query: Option<&str>,
    authorization: Option<&str>,
    config: &Config,
) -> Result<Admission, Refusal> {
    if path != config.path {
        return Err(Refusal::WrongPath);
    }
    let query = query.unwrap_or("");
    let chat_id = checked_param(query, "chat_id")?;
    let client_id = checked_param(query, "client_id")?;
    let authorised = match &config.token {
        None => true,
        Some(token) => presented_token(query, authorization).is_some_and(|given| same_secret(&given, token)),
    };
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

/// The credentials of a `Bearer` authorization header (the scheme is case-insensitive).
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, credentials) = header.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| credentials.trim())
}

/// Compares secrets without stopping at the first difference.
pub fn same_secret(given: &str, expected: &str) -> bool {
    let (given, expected) = (given.as_bytes(), expected.as_bytes());
    let differences = given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    given.len() == expected.len() && differences == 0
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

    #[test]
    fn without_a_token_configured_everyone_is_admitted_on_the_right_path_only() {
        let admission = admit("/ws", None, None, &config(None)).unwrap();
        assert_eq!(admission, Admission { chat_id: None, client_id: None, authorised: true });
        assert_eq!(admit("/other", None, None, &config(None)), Err(Refusal::WrongPath));
    }

    #[test]
    fn the_token_is_taken_from_the_query_or_a_bearer_header() {
        let config = config(Some("s3 cret"));
        assert!(admit("/ws", Some("token=s3%20cret"), None, &config).unwrap().authorised);
        assert!(admit("/ws", Some("token=s3+cret"), None, &config).unwrap().authorised);
        assert!(admit("/ws", None, Some("Bearer s3 cret"), &config).unwrap().authorised);
        assert!(admit("/ws", None, Some("bearer   s3 cret"), &config).unwrap().authorised);
        assert!(!admit("/ws", None, None, &config).unwrap().authorised);
        assert!(!admit("/ws", Some("token=wrong"), Some("Bearer s3 cret"), &config).unwrap().authorised);
        assert!(!admit("/ws", None, Some("Basic s3 cret"), &config).unwrap().authorised);
    }

    #[test]
    fn chat_and_client_ids_come_from_the_query_decoded() {
        let admission = admit("/ws", Some("chat_id=team%2F1&client_id=web&x=y"), None, &config(None)).unwrap();
        assert_eq!(admission.chat_id.as_deref(), Some("team/1"));
        assert_eq!(admission.client_id.as_deref(), Some("web"));
    }

    #[test]
    fn an_empty_or_overlong_chat_id_is_refused() {
        assert_eq!(admit("/ws", Some("chat_id="), None, &config(None)), Err(Refusal::BadParameter("chat_id")));
        let long = format!("chat_id={}", "c".repeat(129));
        assert_eq!(admit("/ws", Some(&long), None, &config(None)), Err(Refusal::BadParameter("chat_id")));
        assert_eq!(admit("/ws", Some("client_id=%0A"), None, &config(None)), Err(Refusal::BadParameter("client_id")));
    }

    #[test]
    fn malformed_escapes_are_kept_as_written() {
        assert_eq!(query_param("a=100%&b=%zz%4", "a").as_deref(), Some("100%"));
        assert_eq!(query_param("a=100%&b=%zz%4", "b").as_deref(), Some("%zz%4"));
        assert_eq!(query_param("flag", "flag").as_deref(), Some(""));
    }

    #[test]
    fn secrets_compare_equal_only_when_identical() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
        assert!(!same_secret("", "a"));
    }
}
