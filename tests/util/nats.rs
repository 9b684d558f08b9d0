//! A real NATS server for the cluster tests: Debian's `nats-server` with JetStream on, on a
//! free loopback port, its store in a directory of its own; killed when dropped. A missing
//! `nats-server` fails the test with the line that installs it.
#![allow(clippy::unwrap_used)]

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::TempDir;
use crate::channels::free_port;

/// What installs the server.
const INSTALL: &str = "apt-get install nats-server";

/// A running `nats-server -js` and its store directory.
pub struct NatsServer {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl NatsServer {
    /// Starts a server with JetStream on a free loopback port and waits until it listens.
    pub fn start() -> NatsServer {
        let program = which_nats_server();
        let dir = TempDir::new("nats");
        let port = free_port();
        let child = Command::new(program)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(15), "nats-server did not listen on port {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        NatsServer { child, port, _dir: dir }
    }

    /// Its URL, as `cluster.nats` takes it.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `nats-server` program, or a failed test saying how to install it.
fn which_nats_server() -> &'static str {
    for program in ["/usr/bin/nats-server", "/usr/sbin/nats-server", "/usr/local/bin/nats-server"] {
        if Path::new(program).exists() {
            return program;
        }
    }
    panic!("this test needs nats-server 2.9 or newer (JetStream): run {}, or `{INSTALL}` as root", crate::needs::SETUP)
}
