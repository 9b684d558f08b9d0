//! MCP over streamable HTTP, its simplest conforming form: every message is a `POST` to
//! [`ENDPOINT`] whose answer comes back as one `application/json` body (no event streams, so `GET`
//! and `DELETE` are 405), a notification gets `202 Accepted`, and no session id is handed out:
//! the server keeps nothing per client.
//!
//! Every request must carry `Authorization: Bearer <key>` (401 otherwise, whatever the address:
//! any local process and any web page can reach a loopback port), and a browser's `Origin` must
//! be this server's own (403: DNS rebinding). A `MCP-Protocol-Version` header naming a
//! revision this server does not speak is a 400.

use std::rc::Rc;

use oxibot_kernel::gateway::web::http::{Request, Response, read_request};
use tokio::net::{TcpListener, TcpStream};

use super::assistant::Assistant;
use super::protocol::{self, PARSE_ERROR, RpcError, SUPPORTED_REVISIONS};

/// The path MCP is served at.
pub const ENDPOINT: &str = "/mcp";

/// Where clients find the key, for the 401's message.
pub struct KeyHint(pub String);

/// What every connection needs.
struct Server {
    assistant: Rc<Assistant>,
    /// The bearer key clients must present.
    key: String,
    /// Where the key is kept, named in a 401.
    hint: KeyHint,
}

/// Serves connections on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, assistant: Rc<Assistant>, key: String, hint: KeyHint) -> anyhow::Result<()> {
    let server = Rc::new(Server { assistant, key, hint });
    loop {
        let (socket, _) = listener.accept().await?;
        actix::spawn(connection(socket, server.clone()));
    }
}

/// One request and its response (the connection closes after it).
async fn connection(mut socket: TcpStream, server: Rc<Server>) {
    let response = match read_request(&mut socket).await {
        Ok(Some(request)) => respond(&server, request).await,
        Ok(None) => return,
        Err(error) => Response::error(400, error),
    };
    if let Err(error) = response.write_to(&mut socket).await {
        tracing::debug!(%error, "an MCP client went away before its answer");
    }
}

async fn respond(server: &Server, request: Request) -> Response {
    if request.path != ENDPOINT {
        return Response::error(404, format!("not found: MCP is served at {ENDPOINT}"));
    }
    if !origin_allowed(request.header("origin"), request.header("host")) {
        return Response::error(403, "forbidden: requests from another site's pages are refused");
    }
    if !authorised(&request, &server.key) {
        let message = format!("invalid or missing key: send it as Authorization: Bearer <key> ({})", server.hint.0);
        return Response::error(401, message).with_header("www-authenticate", "Bearer".to_owned());
    }
    if request.method != "POST" {
        let message = format!("method not allowed: send each JSON-RPC message as a POST to {ENDPOINT}");
        return Response::error(405, message).with_header("allow", "POST".to_owned());
    }
    if let Some(revision) = request.header("mcp-protocol-version")
        && !SUPPORTED_REVISIONS.contains(&revision)
    {
        let supported = SUPPORTED_REVISIONS.join(", ");
        return Response::error(
            400,
            format!("unsupported MCP-Protocol-Version {revision} (this server speaks {supported})"),
        );
    }
    let Ok(text) = std::str::from_utf8(&request.body) else {
        let error = RpcError::new(PARSE_ERROR, "parse error: the body is not UTF-8");
        return Response::json(400, &protocol::error_reply(serde_json::Value::Null, &error));
    };
    match protocol::answer(server.assistant.as_ref(), text).await {
        // A message that could not be read at all has nothing to answer to: a bad request.
        Some(answer) if answer["id"].is_null() && answer.get("error").is_some() => Response::json(400, &answer),
        Some(answer) => Response::json(200, &answer),
        None => Response::bytes(202, "application/json", Vec::new()),
    }
}

/// Whether the request carries the key (compared without stopping at the first difference).
fn authorised(request: &Request, key: &str) -> bool {
    let presented = request.header("authorization").and_then(|value| {
        let (scheme, credentials) = value.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| credentials.trim())
    });
    let Some(given) = presented else { return false };
    let differences = given.bytes().zip(key.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    given.len() == key.len() && differences == 0
}

/// No `Origin` (not a browser), or one naming this very server.
fn origin_allowed(origin: Option<&str>, host: Option<&str>) -> bool {
    let Some(origin) = origin else { return true };
    let authority = origin.split_once("://").map_or(origin, |(_, rest)| rest).trim_end_matches('/');
    host.is_some_and(|host| host.eq_ignore_ascii_case(authority))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request {
        Request {
            method: "POST".into(),
            path: ENDPOINT.into(),
            query: String::new(),
            headers: headers.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect(),
            body: Vec::new(),
        }
    }

    #[test]
    fn only_the_exact_bearer_key_is_authorised() {
        assert!(authorised(&request(&[("authorization", "Bearer k-1")]), "k-1"));
        assert!(authorised(&request(&[("authorization", "bearer  k-1 ")]), "k-1"));
        for wrong in ["Bearer k-", "Bearer k-12", "Basic k-1", "k-1"] {
            assert!(!authorised(&request(&[("authorization", wrong)]), "k-1"), "{wrong}");
        }
        assert!(!authorised(&request(&[]), "k-1"));
    }

    #[test]
    fn a_page_of_another_site_is_refused() {
        assert!(origin_allowed(None, Some("127.0.0.1:9")));
        assert!(origin_allowed(Some("http://127.0.0.1:9"), Some("127.0.0.1:9")));
        assert!(!origin_allowed(Some("https://evil.example"), Some("127.0.0.1:9")));
    }
}
