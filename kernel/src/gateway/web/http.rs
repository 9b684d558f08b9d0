//! The HTTP/1.1 the web UI needs and no more: one request per connection (`Connection: close`),
//! a head of at most 16 KiB, a body by `Content-Length` of at most 2 MiB, and responses that
//! always carry the page's security headers.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest request head (request line and headers).
const MAX_HEAD: usize = 16 * 1024;
/// Largest request body (a memory file being saved).
const MAX_BODY: usize = 2 * 1024 * 1024;

/// Sent with every response: no sniffing, no framing, no referrers, nothing cached, and a
/// content security policy that lets the page run only its own scripts and styles.
const SECURITY_HEADERS: &str = "x-content-type-options: nosniff\r\nx-frame-options: DENY\r\nreferrer-policy: no-referrer\r\ncache-control: no-store\r\ncontent-security-policy: default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n";

/// Why a request could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The connection failed or closed early.
    #[error("reading the request: {0}")]
    Io(#[from] std::io::Error),
    /// Not an HTTP/1.x request, or over a limit.
    #[error("bad request: {0}")]
    Malformed(&'static str),
}

/// One request, read whole.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path, percent-encoded as sent, without the query.
    pub path: String,
    /// The query string without `?` (empty when absent).
    pub query: String,
    /// Headers, names in lower case, in the order sent.
    pub headers: Vec<(String, String)>,
    /// The body (empty without `Content-Length`).
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The value of cookie `name`.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == "cookie")
            .flat_map(|(_, v)| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value)
    }

    /// The first value of query parameter `name`, percent-decoded.
    pub fn query_param(&self, name: &str) -> Option<String> {
        self.query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key) == name).then(|| percent_decode(value))
        })
    }

    /// The query string without parameter `name` (to redirect away from a token in the URL).
    pub fn query_without(&self, name: &str) -> String {
        let kept: Vec<&str> = self
            .query
            .split('&')
            .filter(|pair| !pair.is_empty() && percent_decode(pair.split('=').next().unwrap_or("")) != name)
            .collect();
        kept.join("&")
    }
}

/// Reads one request from `socket`; `None` when the peer closed without sending one.
pub async fn read_request(socket: &mut TcpStream) -> Result<Option<Request>, HttpError> {
    let mut buffer = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        if buffer.len() > MAX_HEAD {
            return Err(HttpError::Malformed("request head too large"));
        }
        let mut chunk = [0u8; 4096];
        let read = socket.read(&mut chunk).await?;
        if read == 0 {
            return if buffer.is_empty() { Ok(None) } else { Err(HttpError::Malformed("request cut short")) };
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = std::str::from_utf8(&buffer[..head_end]).map_err(|_| HttpError::Malformed("head is not UTF-8"))?;
    let mut request = parse_head(head)?;
    let length = match request.header("content-length") {
        None => 0,
        Some(value) => value.trim().parse::<usize>().map_err(|_| HttpError::Malformed("bad content-length"))?,
    };
    if length > MAX_BODY {
        return Err(HttpError::Malformed("request body too large"));
    }
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = vec![0u8; (length - body.len()).min(64 * 1024)];
        let read = socket.read(&mut chunk).await?;
        if read == 0 {
            return Err(HttpError::Malformed("request body cut short"));
        }
        body.extend_from_slice(&chunk[..read]);
    }
    body.truncate(length);
    request.body = body;
    Ok(Some(request))
}

/// Parses the request line and headers.
fn parse_head(head: &str) -> Result<Request, HttpError> {
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(HttpError::Malformed("bad request line"));
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Err(HttpError::Malformed("bad request line"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line.split_once(':').ok_or(HttpError::Malformed("bad header line"))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    Ok(Request { method: method.to_owned(), path: path.to_owned(), query: query.to_owned(), headers, body: Vec::new() })
}

/// Decodes `%XX` escapes and `+`; malformed escapes are kept as they are.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => decoded.push(b' '),
            b'%' => match bytes.get(index + 1..index + 3).and_then(hex_byte) {
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

/// The byte two hex digits stand for.
fn hex_byte(pair: &[u8]) -> Option<u8> {
    let digit = |c: u8| (c as char).to_digit(16);
    Some((digit(pair[0])? * 16 + digit(pair[1])?) as u8)
}

/// A response about to be written.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// `content-type`.
    pub content_type: &'static str,
    /// Further headers (name, value).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON body.
    pub fn json(status: u16, value: &serde_json::Value) -> Response {
        Response::bytes(status, "application/json", value.to_string().into_bytes())
    }

    /// A JSON `{"error": …}` body.
    pub fn error(status: u16, message: impl std::fmt::Display) -> Response {
        Response::json(status, &serde_json::json!({"error": message.to_string()}))
    }

    /// Any body.
    pub fn bytes(status: u16, content_type: &'static str, body: Vec<u8>) -> Response {
        Response { status, content_type, headers: Vec::new(), body }
    }

    /// A `303 See Other` to `location`.
    pub fn redirect(location: String) -> Response {
        Response::bytes(303, "text/plain; charset=utf-8", Vec::new()).with_header("location", location)
    }

    /// The same response with one more header.
    pub fn with_header(mut self, name: &str, value: String) -> Response {
        self.headers.push((name.to_owned(), value));
        self
    }

    /// The bytes on the wire.
    pub fn encode(&self) -> Vec<u8> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n{SECURITY_HEADERS}",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }

    /// Writes the response and closes the sending side.
    pub async fn write_to(&self, socket: &mut TcpStream) -> std::io::Result<()> {
        socket.write_all(&self.encode()).await?;
        socket.shutdown().await
    }
}

/// The reason phrase of the status codes used here.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_request_head_gives_method_path_query_and_lower_case_headers() {
        let request =
            parse_head("POST /api/x?a=1&token=t%20x HTTP/1.1\r\nHost: h\r\nCookie: a=1; oxibot_token=abc").unwrap();
        assert_eq!((request.method.as_str(), request.path.as_str()), ("POST", "/api/x"));
        assert_eq!(request.header("host"), Some("h"));
        assert_eq!(request.cookie("oxibot_token"), Some("abc"));
        assert_eq!(request.query_param("token").as_deref(), Some("t x"));
        assert_eq!(request.query_without("token"), "a=1");
    }

    #[test]
    fn a_head_that_is_not_http_is_refused() {
        assert!(parse_head("hello").is_err());
        assert!(parse_head("GET http://x/ HTTP/1.1").is_err());
        assert!(parse_head("GET / HTTP/1.1\r\nno colon").is_err());
    }

    #[test]
    fn every_response_carries_the_security_headers_and_its_length() {
        let text = String::from_utf8(Response::error(404, "no").encode()).unwrap();
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
        assert!(text.contains("content-security-policy: default-src 'none'; script-src 'self'"), "{text}");
        assert!(text.contains("content-length: 14\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n{\"error\":\"no\"}"), "{text}");
    }
}
