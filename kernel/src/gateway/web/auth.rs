//! Who may use the web UI, and protection against other sites.
//!
//! The UI asks for its secret whatever the address, loopback included: any local process (a
//! command the assistant runs, say) can reach a loopback port, and no endpoint may hand a
//! transcript to a process that only knows the port. The secret is `gateway.token`, else the
//! one the gateway keeps in `<data dir>/local-secrets.json` ([`crate::gateway::local_secrets`]).
//! A person signs in with a one-time login link (`?code=`, see [`super::login`]) that
//! `oxibot gateway` and `oxibot ui` print, or once with `?token=<secret>`; the answer is a
//! redirect to the same URL without it and a cookie (`HttpOnly`, `SameSite=Strict`, named
//! after the port) that carries the secret from then on. Scripts send `Authorization: Bearer`.
//!
//! Before any secret is read, the `Host` must be the configured host, a loopback name or an
//! address literal (a DNS-rebound name is refused), and any `Origin` must be this page's own.
//! Every state-changing request must carry the `x-oxibot-request` header (which a cross-site
//! form cannot send and a cross-site script cannot send without a preflight nobody answers),
//! send its body as JSON, and any `Sec-Fetch-Site` it carries must say it comes from this page;
//! the WebSocket upgrade is checked the same way.

use std::net::IpAddr;

use super::http::{Request, Response};
use super::login::LoginCodes;

/// The header every state-changing request must carry.
pub const REQUEST_HEADER: &str = "x-oxibot-request";

/// The UI's access rule.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The secret: `gateway.token` or the generated one.
    secret: String,
    /// `gateway.host`, a name the `Host` header may carry.
    host: String,
    /// The cookie's name (per port: cookies do not tell ports apart).
    cookie: String,
    /// The one-time login codes.
    codes: LoginCodes,
}

impl Guard {
    /// The rule for a gateway listening on `host:port` with `secret`.
    pub fn new(host: &str, port: u16, secret: String, codes: LoginCodes) -> Guard {
        Guard { secret, host: host.to_owned(), cookie: format!("oxibot_ui_{port}"), codes }
    }

    /// `Ok` when `request` may be served; else the response to send instead (a refusal, or
    /// the redirect that trades a code or token in the URL for the cookie).
    pub fn admit(&self, request: &Request) -> Result<(), Response> {
        if !host_allowed(request.header("host"), &self.host) {
            return Err(Response::error(403, "this gateway answers only to its own address or a loopback name"));
        }
        if let Some(origin) = request.header("origin")
            && !is_own_origin(origin, request)
        {
            return Err(Response::error(403, "cross-origin request refused"));
        }
        if let Some(code) = request.query_param("code") {
            if !self.codes.redeem(&code) {
                return Err(Response::error(
                    401,
                    "this login link was used already or has expired: run `oxibot ui` for a new one",
                ));
            }
            return Err(self.signed_in(request, "code"));
        }
        if let Some(given) = request.query_param("token") {
            if self.secret.is_empty() || !same_secret(given.as_bytes(), self.secret.as_bytes()) {
                return Err(Response::error(401, "wrong token"));
            }
            return Err(self.signed_in(request, "token"));
        }
        let by_cookie = request.cookie(&self.cookie).and_then(hex_decode);
        let by_header = request.header("authorization").and_then(bearer).map(|t| t.as_bytes().to_vec());
        let presented = !self.secret.is_empty()
            && by_cookie.or(by_header).is_some_and(|given| same_secret(&given, self.secret.as_bytes()));
        if !presented {
            return Err(Response::error(
                401,
                "sign in with the login link `oxibot gateway` or `oxibot ui` prints (the web UI asks for it on loopback too)",
            ));
        }
        same_site(request)
    }

    /// The redirect that drops `param` from the URL and sets the cookie.
    fn signed_in(&self, request: &Request, param: &str) -> Response {
        // A path like `//host` would be read as another site by the browser.
        let path = if request.path.starts_with("//") { "/" } else { request.path.as_str() };
        let rest = request.query_without(param);
        let location = if rest.is_empty() { path.to_owned() } else { format!("{path}?{rest}") };
        let cookie =
            format!("{}={}; HttpOnly; SameSite=Strict; Path=/", self.cookie, hex_encode(self.secret.as_bytes()));
        Response::redirect(location).with_header("set-cookie", cookie)
    }
}

/// Refuses state-changing requests (and WebSocket upgrades) from other sites, and bodies
/// that are not JSON.
fn same_site(request: &Request) -> Result<(), Response> {
    let upgrade = request.header("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    let changes_state = !matches!(request.method.as_str(), "GET" | "HEAD");
    if !changes_state && !upgrade {
        return Ok(());
    }
    if changes_state && request.header(REQUEST_HEADER).is_none() {
        return Err(Response::error(403, format!("missing the {REQUEST_HEADER} header")));
    }
    if let Some(site) = request.header("sec-fetch-site")
        && site != "same-origin"
        && site != "none"
    {
        return Err(Response::error(403, "cross-site request refused"));
    }
    if !request.body.is_empty() && !is_json(request.header("content-type")) {
        return Err(Response::error(415, "the request body must be JSON: send content-type: application/json"));
    }
    Ok(())
}

/// Whether `origin` is this page's (`http://` or `https://` and the request's `Host`).
fn is_own_origin(origin: &str, request: &Request) -> bool {
    let host = request.header("host").unwrap_or("");
    [format!("http://{host}"), format!("https://{host}")].iter().any(|own| own.eq_ignore_ascii_case(origin.trim()))
}

/// Whether a `content-type` says JSON, whatever its parameters.
fn is_json(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// Whether a `Host` header (`name[:port]`) names this gateway: its configured host,
/// `localhost`, or an address literal (which no DNS rebinding produces). The channels apply
/// the same rule (`oxibot_plugin::serving::site`).
fn host_allowed(header: Option<&str>, configured: &str) -> bool {
    let Some(header) = header.map(str::trim) else { return false };
    let name = match header.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(header, |(inside, _)| inside),
        None => match header.rsplit_once(':') {
            // `127.0.0.1:8080`; a bare IPv6 address has more colons than a port.
            Some((name, port)) if !name.contains(':') && port.chars().all(|c| c.is_ascii_digit()) => name,
            _ => header,
        },
    };
    let configured = configured.trim_start_matches('[').trim_end_matches(']');
    !name.is_empty()
        && (name.parse::<IpAddr>().is_ok()
            || name.eq_ignore_ascii_case("localhost")
            || name.eq_ignore_ascii_case(configured))
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
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::path::PathBuf;

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

    fn scratch(label: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oxibot-guard-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn guard(host: &str, secret: &str, label: &str) -> Guard {
        Guard::new(host, 18790, secret.into(), LoginCodes::new(&scratch(label)))
    }

    const HOST: (&str, &str) = ("host", "127.0.0.1:18790");
    const BEARER: (&str, &str) = ("authorization", "Bearer s3 cret");

    fn cookie_of(answer: &Response) -> String {
        let header = answer.headers.iter().find(|(n, _)| n == "set-cookie").unwrap().1.clone();
        assert!(header.contains("HttpOnly") && header.contains("SameSite=Strict"), "{header}");
        header.split(';').next().unwrap().to_owned()
    }

    #[test]
    fn on_loopback_too_nothing_is_served_without_the_secret() {
        let guard = guard("127.0.0.1", "s3 cret", "loopback");
        for path in ["/", "/api/session", "/api/status", "/ws"] {
            assert_eq!(guard.admit(&request("GET", path, &[HOST])).unwrap_err().status, 401, "{path}");
        }
        assert!(guard.admit(&request("GET", "/api/session", &[HOST, BEARER])).is_ok());
        let wrong = [HOST, ("authorization", "Bearer s3 cre")];
        assert_eq!(guard.admit(&request("GET", "/", &wrong)).unwrap_err().status, 401);
    }

    #[test]
    fn a_rebound_host_name_or_a_foreign_origin_is_refused_even_with_the_secret() {
        let guard = guard("127.0.0.1", "s3 cret", "hosts");
        for host in ["127.0.0.1:18790", "localhost:1", "[::1]:1", "192.168.1.4:18790"] {
            assert!(guard.admit(&request("GET", "/", &[("host", host), BEARER])).is_ok(), "{host}");
        }
        let rebound = guard.admit(&request("GET", "/", &[("host", "evil.example:18790"), BEARER])).unwrap_err();
        assert_eq!(rebound.status, 403);
        assert_eq!(guard.admit(&request("GET", "/", &[BEARER])).unwrap_err().status, 403);
        let foreign = [HOST, BEARER, ("origin", "http://evil.example")];
        assert_eq!(guard.admit(&request("GET", "/api/session", &foreign)).unwrap_err().status, 403);
    }

    #[test]
    fn a_one_time_code_becomes_a_strict_http_only_cookie_and_works_once() {
        let dir = scratch("code");
        let codes = LoginCodes::new(&dir);
        let guard = Guard::new("127.0.0.1", 18790, "s3 cret".into(), codes.clone());
        let code = codes.mint().unwrap();
        let answer = guard.admit(&request("GET", &format!("/?view=chat&code={code}"), &[HOST])).unwrap_err();
        assert_eq!(answer.status, 303);
        assert_eq!(answer.headers.iter().find(|(n, _)| n == "location").unwrap().1, "/?view=chat");
        let cookie = cookie_of(&answer);
        assert!(cookie.starts_with("oxibot_ui_18790="), "{cookie}");
        assert!(guard.admit(&request("GET", "/api/sessions", &[HOST, ("cookie", &cookie)])).is_ok());
        let again = guard.admit(&request("GET", &format!("/?code={code}"), &[HOST])).unwrap_err();
        assert_eq!(again.status, 401);
        assert_eq!(
            guard.admit(&request("GET", "/", &[HOST, ("cookie", "oxibot_ui_18790=00")])).unwrap_err().status,
            401
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_secret_in_the_url_is_traded_for_the_cookie_and_leaves_the_url() {
        let guard = guard("0.0.0.0", "s3 cret", "token");
        let answer = guard.admit(&request("GET", "/?view=chat&token=s3%20cret", &[HOST])).unwrap_err();
        assert_eq!(answer.status, 303);
        assert_eq!(answer.headers.iter().find(|(n, _)| n == "location").unwrap().1, "/?view=chat");
        let cookie = cookie_of(&answer);
        assert!(guard.admit(&request("GET", "/api/sessions", &[HOST, ("cookie", &cookie)])).is_ok());
        assert_eq!(guard.admit(&request("GET", "/?token=wrong", &[HOST])).unwrap_err().status, 401);
    }

    #[test]
    fn a_sign_in_redirect_never_leads_to_another_site() {
        let guard = guard("0.0.0.0", "t", "redirect");
        let answer = guard.admit(&request("GET", "//evil.example?token=t", &[HOST])).unwrap_err();
        assert_eq!(answer.headers.iter().find(|(n, _)| n == "location").unwrap().1, "/");
    }

    #[test]
    fn state_changing_requests_need_the_header_the_same_origin_and_a_json_body() {
        let guard = guard("127.0.0.1", "s3 cret", "changes");
        assert_eq!(guard.admit(&request("PUT", "/api/memory", &[HOST, BEARER])).unwrap_err().status, 403);
        let ours = [
            HOST,
            BEARER,
            (REQUEST_HEADER, "1"),
            ("origin", "http://127.0.0.1:18790"),
            ("sec-fetch-site", "same-origin"),
            ("content-type", "application/json"),
        ];
        let mut save = request("PUT", "/api/memory", &ours);
        save.body = b"{}".to_vec();
        assert!(guard.admit(&save).is_ok());
        let mut text = request("PUT", "/api/memory", &ours[..5]);
        text.headers.push(("content-type".into(), "text/plain".into()));
        text.body = b"{}".to_vec();
        assert_eq!(guard.admit(&text).unwrap_err().status, 415);
        let cross_site = [HOST, BEARER, (REQUEST_HEADER, "1"), ("sec-fetch-site", "cross-site")];
        assert_eq!(guard.admit(&request("DELETE", "/api/x", &cross_site)).unwrap_err().status, 403);
        let foreign_socket = [HOST, BEARER, ("upgrade", "websocket"), ("origin", "http://evil.example")];
        assert_eq!(guard.admit(&request("GET", "/ws", &foreign_socket)).unwrap_err().status, 403);
    }
}
