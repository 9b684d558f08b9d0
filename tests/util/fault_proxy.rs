//! A loopback HTTP proxy between a channel plugin and a real server, with one fault the test
//! arms: the answer to a request whose method and path match is swallowed after the server
//! handled it (the connection is closed instead), as when a network drops a reply on its way
//! back. Each request goes to the server on its own connection (`Connection: close`).
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::background::BackgroundServer;

/// Which answers to swallow, and what went through.
#[derive(Default)]
struct Faults {
    /// (method, path fragment, how many answers still to swallow).
    swallow: Option<(String, String, usize)>,
    /// `METHOD path` of every request, with whether its answer was swallowed.
    seen: Vec<(String, bool)>,
}

/// The running proxy; stops when dropped.
pub struct FaultProxy {
    port: u16,
    faults: Arc<Mutex<Faults>>,
    _server: BackgroundServer,
}

impl FaultProxy {
    /// A proxy on a free loopback port in front of the HTTP server on 127.0.0.1:`upstream`.
    pub fn start(upstream: u16) -> FaultProxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let faults = Arc::new(Mutex::new(Faults::default()));
        let shared = faults.clone();
        let server = BackgroundServer::start("fault-proxy", move || async move {
            let listener = TcpListener::from_std(listener).unwrap();
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, upstream, shared.clone()));
            }
        });
        FaultProxy { port, faults, _server: server }
    }

    /// The proxy's base URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Swallows the answers to the next `times` requests with `method` whose path contains
    /// `path_fragment`.
    pub fn swallow_answers(&self, method: &str, path_fragment: &str, times: usize) {
        self.faults.lock().unwrap().swallow = Some((method.to_owned(), path_fragment.to_owned(), times));
    }

    /// `METHOD path` of every request seen whose answer was swallowed.
    pub fn swallowed(&self) -> Vec<String> {
        self.faults.lock().unwrap().seen.iter().filter(|(_, swallowed)| *swallowed).map(|(r, _)| r.clone()).collect()
    }
}

/// Serves one client connection: its request relayed to the server, the answer relayed back
/// (or swallowed), then the connection closed, as the server's `Connection: close` says.
async fn relay(client: TcpStream, upstream: u16, faults: Arc<Mutex<Faults>>) {
    let (read, mut write) = client.into_split();
    let mut reader = BufReader::new(read);
    let Some((request_line, head, body)) = read_request(&mut reader).await else { return };
    let mut parts = request_line.split(' ');
    let (method, path) = (parts.next().unwrap_or_default().to_owned(), parts.next().unwrap_or_default().to_owned());
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)).await else { return };
    let forwarded = format!("{request_line}\r\n{head}Connection: close\r\n\r\n");
    if server.write_all(forwarded.as_bytes()).await.is_err() || server.write_all(&body).await.is_err() {
        return;
    }
    let mut answer = Vec::new();
    if server.read_to_end(&mut answer).await.is_err() {
        return;
    }
    let swallow = {
        let mut faults = faults.lock().unwrap();
        let swallow = match &mut faults.swallow {
            Some((m, fragment, left)) if *left > 0 && *m == method && path.contains(fragment.as_str()) => {
                *left -= 1;
                true
            }
            _ => false,
        };
        faults.seen.push((format!("{method} {path}"), swallow));
        swallow
    };
    if !swallow {
        let _ = write.write_all(&answer).await;
    }
}

/// Reads one request: its request line, its other header lines (without `Connection`, each
/// ending in CRLF) and its body (by `Content-Length`); `None` at the end of the connection.
async fn read_request<R: tokio::io::AsyncBufRead + Unpin>(reader: &mut R) -> Option<(String, String, Vec<u8>)> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).await.ok()? == 0 {
        return None;
    }
    let (mut head, mut length) = (String::new(), 0);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            length = value.trim().parse().ok()?;
        }
        if !lower.starts_with("connection:") {
            head.push_str(line);
            head.push_str("\r\n");
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await.ok()?;
    Some((request_line.trim_end().to_owned(), head, body))
}
