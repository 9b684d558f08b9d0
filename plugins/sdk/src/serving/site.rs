//! Keeping other web sites out of a local server: the `Host` a request names must be this
//! server's (its configured host, a loopback name, or an address literal, which no DNS
//! rebinding can produce), and an `Origin` a browser sends must be the server's own. A page
//! from elsewhere that makes the user's browser connect is refused before any secret is checked.
//! Then the secret: a `Bearer` credential, compared in constant time.

use std::net::IpAddr;

/// Whether a `Host` header (`name[:port]`) may reach a server configured to listen on
/// `configured_host`: the configured name itself, `localhost`, or any IP address literal.
/// A name that only resolves here (DNS rebinding) is refused.
pub fn host_allowed(host_header: Option<&str>, configured_host: &str) -> bool {
    let Some(header) = host_header else { return false };
    let name = host_name(header.trim());
    if name.is_empty() {
        return false;
    }
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().is_ok()
        || bare.eq_ignore_ascii_case("localhost")
        || bare.eq_ignore_ascii_case(configured_host.trim_start_matches('[').trim_end_matches(']'))
}

/// Whether an `Origin` header, when there is one, is the server's own (`http://` or
/// `https://` plus the request's `Host`). Clients that are not browsers send none.
pub fn origin_allowed(origin: Option<&str>, host_header: Option<&str>) -> bool {
    let Some(origin) = origin else { return true };
    let Some(host) = host_header else { return false };
    let origin = origin.trim();
    [format!("http://{host}"), format!("https://{host}")].iter().any(|own| own.eq_ignore_ascii_case(origin))
}

/// Whether a `Content-Type` header says JSON (`application/json`, any parameters).
pub fn is_json_content_type(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
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

/// The host part of `name[:port]`; a bracketed or bare IPv6 address keeps its colons.
fn host_name(header: &str) -> &str {
    if let Some(rest) = header.strip_prefix('[') {
        return rest.split_once(']').map_or(header, |(inside, _)| inside);
    }
    match header.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => header,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_address_literals_and_the_configured_name_are_this_servers_hosts() {
        for host in ["127.0.0.1:18791", "localhost:1", "LOCALHOST", "[::1]:8080", "::1", "192.168.1.5:80"] {
            assert!(host_allowed(Some(host), "127.0.0.1"), "{host}");
        }
        assert!(host_allowed(Some("assistant.lan:18791"), "assistant.lan"));
    }

    #[test]
    fn another_name_or_no_host_is_refused() {
        for host in ["evil.example", "evil.example:18791", "127.0.0.1.nip.io:1", "", ":80"] {
            assert!(!host_allowed(Some(host), "127.0.0.1"), "{host}");
        }
        assert!(!host_allowed(None, "127.0.0.1"));
    }

    #[test]
    fn only_the_servers_own_origin_or_none_passes() {
        assert!(origin_allowed(None, Some("127.0.0.1:1")));
        assert!(origin_allowed(Some("http://127.0.0.1:1"), Some("127.0.0.1:1")));
        assert!(origin_allowed(Some("https://localhost:1"), Some("localhost:1")));
        assert!(!origin_allowed(Some("http://evil.example"), Some("127.0.0.1:1")));
        assert!(!origin_allowed(Some("http://127.0.0.1:2"), Some("127.0.0.1:1")));
        assert!(!origin_allowed(Some("null"), Some("127.0.0.1:1")));
        assert!(!origin_allowed(Some("http://127.0.0.1:1"), None));
    }

    #[test]
    fn json_is_told_by_its_media_type_whatever_the_parameters() {
        assert!(is_json_content_type(Some("application/json")));
        assert!(is_json_content_type(Some("Application/JSON; charset=utf-8")));
        for other in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
            assert!(!is_json_content_type(Some(other)), "{other}");
        }
        assert!(!is_json_content_type(None));
    }

    #[test]
    fn a_bearer_credential_is_read_whatever_the_schemes_case_and_nothing_else_is() {
        assert_eq!(bearer("Bearer one"), Some("one"));
        assert_eq!(bearer("bearer   two "), Some("two"));
        assert_eq!(bearer("Basic one"), None);
        assert_eq!(bearer("one"), None);
    }

    #[test]
    fn secrets_compare_equal_only_when_identical() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
        assert!(!same_secret("", "a"));
    }
}
