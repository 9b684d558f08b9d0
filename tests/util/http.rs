//! A small HTTP/1.1 client over a plain `TcpStream` for driving the API channel: one request per
//! connection, bodies by `Content-Length` or chunked, and server-sent events read as they come;
//! and a blocking read of a gateway's `/health`.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::channels::WAIT;

/// How the response body is delimited.
enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

/// A response whose body has not been read yet.
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    framing: Framing,
    finished: bool,
    /// Event-stream text read but not yet split into events.
    pending_events: String,
}

/// Connects to `127.0.0.1:port`, retrying while the server is (re)starting.
pub async fn connect(port: u16) -> TcpStream {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match TcpStream::connect(("127.0.0.1", port)).await {
            Ok(stream) => return stream,
            Err(error) if tokio::time::Instant::now() > deadline => panic!("cannot connect to port {port}: {error}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Sends one request (with `Connection: close`) and reads the status line and headers.
pub async fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> HttpResponse {
    let mut stream = connect(port).await;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    head.push_str(body.unwrap_or(""));
    stream.write_all(head.as_bytes()).await.unwrap();
    read_head(BufReader::new(stream)).await
}

/// `GET path`.
pub async fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
    request(port, "GET", path, headers, None).await
}

/// `POST path` with a JSON body.
pub async fn post_json(port: u16, path: &str, headers: &[(&str, &str)], body: &Value) -> HttpResponse {
    request(port, "POST", path, headers, Some(&body.to_string())).await
}

async fn read_head(mut reader: BufReader<TcpStream>) -> HttpResponse {
    let status_line = timed(read_line(&mut reader)).await;
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let mut headers = Vec::new();
    loop {
        let line = timed(read_line(&mut reader)).await;
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let framing = match (header("transfer-encoding"), header("content-length")) {
        (Some(encoding), _) if encoding.eq_ignore_ascii_case("chunked") => Framing::Chunked,
        (_, Some(length)) => Framing::Length(length.parse().unwrap()),
        _ => Framing::UntilClose,
    };
    HttpResponse { status, headers, reader, framing, finished: false, pending_events: String::new() }
}

impl HttpResponse {
    /// A header's value (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    /// The next piece of the body as it arrives, `None` at its end.
    pub async fn next_data(&mut self) -> Option<Vec<u8>> {
        if self.finished {
            return None;
        }
        let data = timed(self.read_piece()).await;
        if data.is_empty() {
            self.finished = true;
            return None;
        }
        Some(data)
    }

    async fn read_piece(&mut self) -> Vec<u8> {
        match self.framing {
            Framing::Length(length) => {
                let mut data = vec![0; length];
                self.reader.read_exact(&mut data).await.unwrap();
                self.framing = Framing::Length(0);
                data
            }
            Framing::Chunked => {
                let size_line = read_line(&mut self.reader).await;
                let size = usize::from_str_radix(size_line.split(';').next().unwrap().trim(), 16).unwrap();
                let mut data = vec![0; size];
                self.reader.read_exact(&mut data).await.unwrap();
                // The CRLF after the chunk (or after the last, empty one).
                read_line(&mut self.reader).await;
                data
            }
            Framing::UntilClose => {
                let mut data = vec![0; 8192];
                let read = self.reader.read(&mut data).await.unwrap();
                data.truncate(read);
                data
            }
        }
    }

    /// The whole body as text.
    pub async fn text(mut self) -> String {
        let mut body = Vec::new();
        while let Some(data) = self.next_data().await {
            body.extend(data);
        }
        String::from_utf8(body).unwrap()
    }

    /// The whole body as JSON.
    pub async fn json(self) -> Value {
        let text = self.text().await;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    /// The `data:` payload of the next server-sent event, `None` at the end of the stream.
    pub async fn next_event(&mut self) -> Option<String> {
        loop {
            if let Some(end) = self.pending_events.find("\n\n") {
                let event: String = self.pending_events.drain(..end + 2).collect();
                let data: Vec<&str> =
                    event.lines().filter_map(|line| line.strip_prefix("data:")).map(str::trim_start).collect();
                return Some(data.join("\n"));
            }
            let data = self.next_data().await?;
            self.pending_events.push_str(&String::from_utf8(data).unwrap());
        }
    }
}

async fn read_line(reader: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).await.unwrap();
    line.trim_end_matches(['\r', '\n']).to_owned()
}

/// Fails the test when the server takes longer than [`WAIT`].
async fn timed<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, work).await.unwrap_or_else(|_| panic!("no answer from the server within {WAIT:?}"))
}

/// `GET /health` of the gateway whose health port is `port`, parsed; `None` when it does not
/// answer (blocking, for tests that poll from synchronous code).
pub fn gateway_health(port: u16) -> Option<Value> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    serde_json::from_str(response.split("\r\n\r\n").nth(1)?).ok()
}
