//! Who may use the web UI, and protection against other sites.
//!
//! The rule of the other local servers: on a loopback address no token is needed (but the
//! `Host` header must name a loopback host too, so a DNS-rebound name cannot reach the API);
//! off loopback `gateway.token` is required, and without one the UI is refused (`/health`
//! still answers). The token is given once as `?token=`; the answer is a redirect to the same
//! URL without it and a cookie (`HttpOnly`, `SameSite=Strict`) that carries it from then on.
//! Scripts may send `Authorization: Bearer` instead. Every state-changing request must carry
//! the `x-oxibot-request` header (which a cross-site form cannot send and a cross-site script
//! cannot send without a preflight nobody answers), and any `Origin` or `Sec-Fetch-Site` it
//! carries must say it comes from this page; the WebSocket upgrade is checked the same way.

use std::net::IpAddr;

use super::http::{Request, Response};

/// The cookie that holds the token.
pub const COOKIE: &str = "oxibot_ui";
/// The header every state-changing request must carry.
pub const REQUEST_HEADER: &str = "x-oxibot-request";

/// The UI's access rule, from `gateway.host` and `gateway.token`.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The token, when configured.
    token: Option<String>,
    /// Whether the gateway listens beyond this machine.
    exposed: bool,
}

impl Guard {
    /// The rule for a gateway listening on `host`.
    pub fn new(host: &str, token: Option<String>) -> Guard {
        Guard { token, exposed: !is_loopback_host(host) }
    }

    /// `Ok` when `request` may be served; else the response to send instead (a refusal, or
    /// the redirect that trades a token in the URL for the cookie).
    pub fn admit(&self, request: &Request) -> Result<(), Response> {
        match &self.token {
            None if self.exposed => Err(Response::error(
                403,
                "the web UI is off: gateway.host is not a loopback address and gateway.token is not set",
            )),
            None if !request.header("host").is_some_and(names_loopback) => {
                Err(Response::error(403, "this gateway answers only to a loopback host name"))
            }
            None => self.same_site(request),
            Some(token) => {
                if let Some(given) = request.query_param("token") {
                    return Err(self.trade_for_cookie(request, &given, token));
                }
                let by_cookie = request.cookie(COOKIE).and_then(hex_decode);
                let by_header = request.header("authorization").and_then(bearer).map(|t| t.as_bytes().to_vec());
                let presented = by_cookie.or(by_header).is_some_and(|given| same_secret(&given, token.as_bytes()));
                if !presented {
                    return Err(Response::error(
                        401,
                        "open the URL oxibot gateway printed, with ?token=<gateway.token>",
                    ));
                }
                self.same_site(request)
            }
        }
    }

    /// The redirect that drops `?token=` from the URL and sets the cookie, or a refusal.
    fn trade_for_cookie(&self, request: &Request, given: &str, token: &str) -> Response {
        if !same_secret(given.as_bytes(), token.as_bytes()) {
            return Response::error(401, "wrong token");
        }
        // A path like `//host` would be read as another site by the browser.
        let path = if request.path.starts_with("//") { "/" } else { request.path.as_str() };
        let rest = request.query_without("token");
        let location = if rest.is_empty() { path.to_owned() } else { format!("{path}?{rest}") };
        let cookie = format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", hex_encode(token.as_bytes()));
        Response::redirect(location).with_header("set-cookie", cookie)
    }

    /// Refuses state-changing requests (and WebSocket upgrades) from other sites.
    fn same_site(&self, request: &Request) -> Result<(), Response> {
        let upgrade = request.header("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
        let changes_state = !matches!(request.method.as_str(), "GET" | "HEAD");
        if !changes_state && !upgrade {
            return Ok(());
        }
        if changes_state && request.header(REQUEST_HEADER).is_none() {
            return Err(Response::error(403, format!("missing the {REQUEST_HEADER} header")));
        }
        if let Some(site) = request.header("sec-fetch-site") {
            if site != "same-origin" && site != "none" {
                return Err(Response::error(403, "cross-site request refused"));
            }
        }
        if let Some(origin) = request.header("origin") {
            let host = request.header("host").unwrap_or("");
            let expected = [format!("http://{host}"), format!("https://{host}")];
            if !expected.iter().any(|e| e == origin) {
                return Err(Response::error(403, "cross-origin request refused"));
            }
        }
        Ok(())
    }
}

/// Whether a `Host` header (`name[:port]`) names this machine.
fn names_loopback(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        // `[::1]:8080` or `127.0.0.1:8080`; a bare IPv6 address has more colons than a port.
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) && !name.ends_with(':') => name,
        _ => host,
    };
    is_loopback_host(name)
}

/// Whether `host` (an address or name, maybe in brackets) is this machine only.
fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(address) => address.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

/// Compares secrets without stopping at the first difference.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    let differences = given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    given.len() == expected.len() && differences == 0
}

/// The credentials of a `Bearer` authorization header.
fn bearer(header: &str) -> Option<&str> {
    let (scheme, credentials) = header.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| credentials.trim())
}

fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn request(method: &str, target: &str, headers: &[(&str, &str)]) -> Request {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        Request {
            method: method.into(),
            path: path.into(),
            query: query.into(),
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
            body: Vec::new(),
        }
    }

    #[test]
    fn on_loopback_without_a_token_the_page_is_served_to_loopback_host_names_only() {
        let guard = Guard::new("127.0.0.1", None);
        assert!(guard.admit(&request("GET", "/", &[("host", "127.0.0.1:18790")])).is_ok());
        assert!(guard.admit(&request("GET", "/", &[("host", "localhost:1")])).is_ok());
        assert!(guard.admit(&request("GET", "/", &[("host", "[::1]:1")])).is_ok());
        let rebound = guard.admit(&request("GET", "/", &[("host", "evil.example:18790")])).unwrap_err();
        assert_eq!(rebound.status, 403);
    }

    #[test]
    fn off_loopback_without_a_token_the_ui_is_refused() {
        let guard = Guard::new("0.0.0.0", None);
        let refused = guard.admit(&request("GET", "/", &[("host", "127.0.0.1")])).unwrap_err();
        assert_eq!(refused.status, 403);
        assert!(String::from_utf8(refused.body).unwrap().contains("gateway.token"));
    }

    #[test]
    fn a_token_in_the_url_becomes_a_strict_http_only_cookie_and_leaves_the_url() {
        let guard = Guard::new("0.0.0.0", Some("s3 cret".into()));
        let answer = guard.admit(&request("GET", "/?view=chat&token=s3%20cret", &[])).unwrap_err();
        assert_eq!(answer.status, 303);
        let header = |name: &str| answer.headers.iter().find(|(n, _)| n == name).unwrap().1.clone();
        assert_eq!(header("location"), "/?view=chat");
        let cookie = header("set-cookie");
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
        let value = cookie.split(';').next().unwrap().split_once('=').unwrap().1.to_owned();
        let with_cookie = format!("{COOKIE}={value}");
        assert!(guard.admit(&request("GET", "/api/sessions", &[("cookie", &with_cookie)])).is_ok());
        assert_eq!(guard.admit(&request("GET", "/", &[])).unwrap_err().status, 401);
        assert_eq!(guard.admit(&request("GET", "/?token=wrong", &[])).unwrap_err().status, 401);
        assert_eq!(guard.admit(&request("GET", "/", &[("cookie", "oxibot_ui=00")])).unwrap_err().status, 401);
        assert!(guard.admit(&request("GET", "/", &[("authorization", "Bearer s3 cret")])).is_ok());
    }

    #[test]
    fn a_token_redirect_never_leads_to_another_site() {
        let guard = Guard::new("0.0.0.0", Some("t".into()));
        let answer = guard.admit(&request("GET", "//evil.example?token=t", &[])).unwrap_err();
        assert_eq!(answer.headers.iter().find(|(n, _)| n == "location").unwrap().1, "/");
    }

    #[test]
    fn state_changing_requests_need_the_header_and_the_same_origin() {
        let guard = Guard::new("127.0.0.1", None);
        let host = ("host", "127.0.0.1:1");
        assert_eq!(guard.admit(&request("PUT", "/api/memory/USER.md", &[host])).unwrap_err().status, 403);
        let ours = [host, (REQUEST_HEADER, "1"), ("origin", "http://127.0.0.1:1"), ("sec-fetch-site", "same-origin")];
        assert!(guard.admit(&request("PUT", "/api/memory/USER.md", &ours)).is_ok());
        let foreign = [host, (REQUEST_HEADER, "1"), ("origin", "http://evil.example")];
        assert_eq!(guard.admit(&request("POST", "/api/x", &foreign)).unwrap_err().status, 403);
        let cross_site = [host, (REQUEST_HEADER, "1"), ("sec-fetch-site", "cross-site")];
        assert_eq!(guard.admit(&request("DELETE", "/api/x", &cross_site)).unwrap_err().status, 403);
        let foreign_socket = [host, ("upgrade", "websocket"), ("origin", "http://evil.example")];
        assert_eq!(guard.admit(&request("GET", "/ws", &foreign_socket)).unwrap_err().status, 403);
    }
}
