//! A real OTLP receiver for the tests: Arize Phoenix from PyPI (`arize-phoenix`), its HTTP
//! server (OTLP at `/v1/traces`, its REST API at `/v1/projects/…/spans`) on a free loopback
//! port, its working directory (SQLite database) in a temp dir. Killed when dropped.
#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::TempDir;
use crate::channels::free_port;
use crate::wait::block_on;

/// How long Phoenix may take to answer after it was started (a first start migrates its
/// database; on a busy machine that takes over a minute).
const STARTUP: Duration = Duration::from_secs(240);

/// A running Phoenix and its working directory.
pub struct Phoenix {
    dir: TempDir,
    port: u16,
    process: Child,
}

impl Phoenix {
    /// Starts a fresh Phoenix, failing the test with the install line when it is missing.
    pub fn start() -> Phoenix {
        crate::needs::python_module("phoenix", "arize-phoenix");
        let dir = TempDir::new("phoenix");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("phoenix.log")).unwrap();
        let process = Command::new("python3")
            .args(["-m", "phoenix.server.main", "serve"])
            .current_dir(dir.path())
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port().to_string())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start python3 ({e}); install Python 3, then run {}", crate::needs::SETUP)
            });
        let mut phoenix = Phoenix { dir, port, process };
        phoenix.wait_ready();
        phoenix
    }

    /// The base URL OTLP/HTTP exporters post to (`/v1/traces` is added).
    pub fn otlp_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every span of the default project Phoenix has stored, newest first.
    pub fn spans(&self) -> Vec<Value> {
        let body = block_on(async {
            let response = crate::http::get(self.port, "/v1/projects/default/spans?limit=1000", &[]);
            tokio::time::timeout(Duration::from_secs(20), response).await.expect("phoenix answers").json().await
        });
        body["data"].as_array().cloned().unwrap_or_default()
    }

    /// Phoenix's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("phoenix.log")).unwrap_or_default()
    }

    fn wait_ready(&mut self) {
        let started = Instant::now();
        while !self.answers() {
            if let Some(status) = self.process.try_wait().unwrap() {
                panic!("phoenix exited with {status} while starting:\n{}", tail(&self.log()));
            }
            assert!(started.elapsed() < STARTUP, "phoenix did not answer within {STARTUP:?}:\n{}", tail(&self.log()));
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn answers(&self) -> bool {
        std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            && block_on(async {
                let health = crate::http::get(self.port, "/healthz", &[]);
                tokio::time::timeout(Duration::from_secs(5), health).await
            })
            .is_ok_and(|response| response.status == 200)
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A span's attribute `key` (dotted), whether Phoenix keeps attributes flat or nested.
pub fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    let attributes = &span["attributes"];
    if let Some(flat) = attributes.get(key) {
        return Some(flat);
    }
    key.split('.').try_fold(attributes, |value, part| value.get(part))
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
