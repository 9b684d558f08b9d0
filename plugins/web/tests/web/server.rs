//! A tiny HTTP/1.1 server on 127.0.0.1 answering each request with what a handler returns, and
//! remembering the requests it got.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use oxibot_tool_web::Web;
use oxibot_tool_web::config::WebConfig;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path and query.
    pub target: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// The value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

/// A response to send.
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Extra headers.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    /// A 200 with `content_type` and `body`.
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply { status: 200, headers: vec![("Content-Type", content_type.to_owned())], body: body.into() }
    }

    /// A 302 to `location`.
    pub fn redirect(location: &str) -> Reply {
        Reply { status: 302, headers: vec![("Location", location.to_owned())], body: Vec::new() }
    }
}

/// A running server.
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Every request so far.
    pub requests: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The requests received so far.
    pub fn received(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

/// Starts a server answering with `handler`.
pub async fn serve(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    let handler = Arc::new(handler);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (handler, seen) = (Arc::clone(&handler), Arc::clone(&seen));
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let Some(request) = read_request(&mut BufReader::new(read)).await else { return };
                let reply = handler(&request);
                seen.lock().unwrap().push(request);
                let mut head = format!(
                    "HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                    reply.status,
                    reply.body.len()
                );
                for (name, value) in &reply.headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("\r\n");
                let _ = write.write_all(head.as_bytes()).await;
                let _ = write.write_all(&reply.body).await;
                let _ = write.shutdown().await;
            });
        }
    });
    Server { addr, requests }
}

/// Reads one request (headers, then a `Content-Length` body).
async fn read_request(reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) -> Option<Request> {
    let mut line = String::new();
    reader.read_line(&mut line).await.ok()?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await.ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length = headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await.ok()?;
    Some(Request { method, target, headers, body })
}

/// The plugin's state for `config` (JSON text of `OXIBOT_TOOL_CONFIG`).
pub fn web(config: &str) -> Web {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Web::new(&WebConfig::parse(config).unwrap()).unwrap()
}
