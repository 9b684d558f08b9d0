//! Finding a local OpenAI-compatible model server (Ollama, llama.cpp's server, LM Studio,
//! vLLM) for a person with no API key: `GET /v1/models` on loopback, every port at once,
//! with a short timeout. Nothing is written here: `oxibot onboard` asks first.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// The ports probed, with the server usually found there.
const KNOWN_PORTS: &[(u16, &str)] =
    &[(11434, "Ollama"), (8080, "llama.cpp's server"), (1234, "LM Studio"), (8000, "vLLM")];

/// Replaces the probed ports (comma-separated), for tests whose machine may use the real ones.
pub const PORTS_VAR: &str = "OXIBOT_LOCAL_PROBE_PORTS";

/// How long one probe may take to connect, and then to answer.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
const ANSWER_TIMEOUT: Duration = Duration::from_millis(700);

/// A server that answered.
#[derive(Debug, Clone)]
pub struct LocalServer {
    /// What usually listens on its port, e.g. `Ollama`.
    pub name: &'static str,
    /// Its API base, e.g. `http://127.0.0.1:11434/v1`.
    pub api_base: String,
    /// The first model it lists.
    pub model: String,
}

impl LocalServer {
    /// `Ollama at http://127.0.0.1:11434 with model llama3.2`.
    pub fn describe(&self) -> String {
        let address = self.api_base.trim_end_matches("/v1");
        format!("{} at {address} with model {}", self.name, self.model)
    }
}

/// The servers that answer, in the order of the ports probed.
pub fn find() -> Vec<LocalServer> {
    let probes: Vec<_> = ports()
        .into_iter()
        .map(|(port, name)| {
            std::thread::spawn(move || probe(port).map(|(api_base, model)| LocalServer { name, api_base, model }))
        })
        .collect();
    probes.into_iter().filter_map(|probe| probe.join().ok().flatten()).collect()
}

/// The ports to probe: the usual ones, or those of [`PORTS_VAR`].
fn ports() -> Vec<(u16, &'static str)> {
    let Ok(list) = std::env::var(PORTS_VAR) else { return KNOWN_PORTS.to_vec() };
    list.split(',')
        .filter_map(|port| port.trim().parse::<u16>().ok())
        .map(|port| {
            let name =
                KNOWN_PORTS.iter().find(|(known, _)| *known == port).map_or("an OpenAI-compatible server", |k| k.1);
            (port, name)
        })
        .collect()
}

/// `GET /v1/models` on `127.0.0.1:port`: the API base and the first model, if any answer.
fn probe(port: u16) -> Option<(String, String)> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&address, CONNECT_TIMEOUT).ok()?;
    stream.set_read_timeout(Some(ANSWER_TIMEOUT)).ok()?;
    stream.set_write_timeout(Some(ANSWER_TIMEOUT)).ok()?;
    let request = format!("GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let response = read_response(&mut stream);
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return None;
    }
    let body =
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { unchunk(body) } else { body.to_owned() };
    let models: serde_json::Value = serde_json::from_str(&body).ok()?;
    let model = models["data"].as_array()?.iter().find_map(|model| model["id"].as_str())?.to_owned();
    Some((format!("http://127.0.0.1:{port}/v1"), model))
}

/// Reads a response until its `content-length` is in, the server closes, or the timeout.
fn read_response(stream: &mut TcpStream) -> Vec<u8> {
    let mut response = Vec::new();
    let mut buffer = [0u8; 4096];
    while let Ok(read) = stream.read(&mut buffer) {
        if read == 0 {
            break;
        }
        response.extend_from_slice(&buffer[..read]);
        if is_complete(&response) {
            break;
        }
    }
    response
}

/// Whether `response` holds its head and as many body bytes as `content-length` says.
fn is_complete(response: &[u8]) -> bool {
    let text = String::from_utf8_lossy(response);
    let Some((head, body)) = text.split_once("\r\n\r\n") else { return false };
    let length = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim().eq_ignore_ascii_case("content-length").then(|| value.trim().parse::<usize>().ok()).flatten()
    });
    length.is_some_and(|length| body.len() >= length)
}

/// The body of a chunked HTTP response.
fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_is_put_back_together() {
        assert_eq!(unchunk("4\r\n{\"a\"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\n\r\n"), "{\"a\": 1}");
    }
}
