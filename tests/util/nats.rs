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
        let (dir, port) = (TempDir::new("nats"), free_port());
        let mut command = Command::new(program);
        command.args(["-js", "-a", "127.0.0.1", "-p", &port.to_string()]);
        NatsServer::spawn(command, dir, port)
    }

    /// Three servers forming one JetStream cluster on free loopback ports (each its own
    /// store directory); the key-value buckets then keep three copies. Waits until each
    /// listens; JetStream itself is ready a moment later (its leaders are elected).
    pub fn start_cluster() -> Vec<NatsServer> {
        let program = which_nats_server();
        let routes: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let route_urls: Vec<String> = routes.iter().map(|port| format!("nats://127.0.0.1:{port}")).collect();
        (0..3)
            .map(|index| {
                let (dir, port) = (TempDir::new("nats-node"), free_port());
                let mut command = Command::new(program);
                command
                    .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "--server_name"])
                    .arg(format!("n{index}"))
                    .args(["--cluster_name", "oxibot-test", "--cluster", &route_urls[index], "--routes"])
                    .arg(route_urls.join(","));
                NatsServer::spawn(command, dir, port)
            })
            .collect()
    }

    /// Runs `command` (a server's arguments, but its store) with its store in `dir`, quiet,
    /// and waits until it listens on `port`.
    fn spawn(mut command: Command, dir: TempDir, port: u16) -> NatsServer {
        command.arg("-sd").arg(dir.path()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let child = command.spawn().unwrap();
        wait_listening(port);
        NatsServer { child, port, _dir: dir }
    }

    /// Kills the server at once (SIGKILL), as a crashed host would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

/// Waits until a server listens on `port`.
fn wait_listening(port: u16) {
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(15), "nats-server did not listen on port {port}");
        std::thread::sleep(Duration::from_millis(20));
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
