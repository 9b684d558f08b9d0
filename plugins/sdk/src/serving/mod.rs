//! Helpers for channels that serve local clients themselves (a WebSocket or HTTP server):
//! reading the config and listening where it says ([`start`]), accepting clients into fairly
//! shared connection slots ([`accept_forever`], [`slots`]), keeping other web sites out
//! ([`site`]: `Host`, `Origin`, JSON bodies, bearer keys), serving HTTP/1.1 on a connection
//! (`http`, with the `http` feature), fresh ids, and the loopback check.
//!
//! ```no_run
//! use oxibot_plugin::chat::{ChannelConfig, SectionError};
//! use oxibot_plugin::serving::{self, Listening, StartError};
//! use oxibot_plugin::{ChannelHandle, ChannelPlugin};
//!
//! #[derive(serde::Deserialize)]
//! struct Config { host: String, port: u16 }
//!
//! impl ChannelConfig for Config {
//!     const CHANNEL: &'static str = "echo";
//!     type Error = SectionError;
//! }
//!
//! impl Listening for Config {
//!     fn address(&self) -> (&str, u16) { (&self.host, self.port) }
//! }
//!
//! async fn serve(channel: ChannelHandle) -> Result<(), StartError<SectionError>> {
//!     let (config, listener) = serving::start::<Config>(&channel).await?;
//!     tokio::spawn(serving::accept_forever("echo", listener, serving::DEFAULT_MAX_CONNECTIONS, |stream, _slot| async move { drop(stream) }));
//!     while let Some(_event) = channel.next_event().await {}
//!     Ok(())
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     ChannelPlugin::new("echo").run(serve)
//! }
//! ```

#[cfg(feature = "http")]
pub mod http;
pub mod site;
pub mod slots;

use std::future::Future;
use std::net::IpAddr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::{TcpListener, TcpSocket, TcpStream};

use self::slots::{Slot, Slots};

use crate::ChannelHandle;
use crate::chat::ChannelConfig;

/// Pause after a failed accept (for example when out of file descriptors).
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// The settings of a channel that listens for clients: where.
pub trait Listening: ChannelConfig {
    /// The host and TCP port to listen on.
    fn address(&self) -> (&str, u16);
}

/// Why a channel serving clients could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError<C: std::error::Error + 'static> {
    /// Its config section is unusable.
    #[error(transparent)]
    Config(C),
    /// It cannot listen where the config says.
    #[error("cannot listen on {host}:{port}: {source}")]
    Bind {
        /// The configured host.
        host: String,
        /// The configured port.
        port: u16,
        /// Why binding failed.
        source: std::io::Error,
    },
}

/// Reads and checks the channel's config section and listens where it says.
pub async fn start<C>(channel: &ChannelHandle) -> Result<(C, TcpListener), StartError<C::Error>>
where
    C: Listening,
    C::Error: std::error::Error + 'static,
{
    let config = C::load(channel.config()).map_err(StartError::Config)?;
    let (host, port) = config.address();
    let bind = |source| StartError::Bind { host: host.to_owned(), port, source };
    let listener = listen(host, port).await.map_err(bind)?;
    Ok((config, listener))
}

/// Connections the kernel queues for a listener before they are accepted. A burst of new
/// clients beyond the queue has its connection attempts dropped, and each client waits a
/// whole second before trying again, so the queue is as deep as the usual system limit.
const LISTEN_BACKLOG: u32 = 4096;

/// Listens on the first address `host` resolves to that can be bound, with a deep queue.
async fn listen(host: &str, port: u16) -> std::io::Result<TcpListener> {
    let mut last_error = None;
    for address in tokio::net::lookup_host((host, port)).await? {
        let socket = if address.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() };
        let bound = socket.and_then(|socket| {
            socket.set_reuseaddr(true)?;
            socket.bind(address)?;
            socket.listen(LISTEN_BACKLOG)
        });
        match bound {
            Ok(listener) => return Ok(listener),
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or_else(|| std::io::Error::other("the host resolves to no address")))
}

/// Most clients served at once by default: each holds a file descriptor and a task, so a
/// flood of idle or stalled connections cannot exhaust the process.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Accepts clients forever, each served by `serve_one` in its own task with its [`Slot`], at
/// most `max_connections` at a time. When all are open, the oldest connection not being served
/// (its slot not marked busy) is closed to make room, and only when every connection is busy
/// is the newcomer closed at once (and the refusal logged). A failed accept (out of file
/// descriptors, say) passes: it is logged under `channel`'s name and accepting goes on after a
/// short pause.
pub async fn accept_forever<F, Fut>(channel: &str, listener: TcpListener, max_connections: usize, mut serve_one: F)
where
    F: FnMut(TcpStream, &Slot) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Slots::new(max_connections);
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => match slots.admit() {
                Some(mut slot) => {
                    let serving = serve_one(stream, &slot);
                    tokio::spawn(async move {
                        // An evicted connection's future is dropped, which closes its socket.
                        tokio::select! {
                            () = serving => {}
                            _ = &mut slot.evicted => {}
                        }
                        drop(slot);
                    });
                }
                None => {
                    crate::warn!("{channel}: refusing {peer}: {max_connections} connections are being served already");
                    drop(stream);
                }
            },
            Err(error) => {
                crate::warn!("{channel}: accept failed: {error}");
                tokio::time::sleep(ACCEPT_PAUSE).await;
            }
        }
    }
}

/// `<prefix>-<process tag>-<n>`: the tag (process id and start time) keeps ids from colliding
/// with those of an earlier run, the counter keeps them apart within this one.
pub fn fresh_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    format!("{prefix}-{}-{}", process_tag(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Set once per process: its id and the time it started, in hex.
fn process_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let started = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or_default();
        format!("{:x}{:x}", std::process::id(), started)
    })
}

/// Whether `host` only accepts connections from this machine (`127.0.0.1`, `::1`,
/// `localhost`); a server bound anywhere else must require a token.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(address) => address.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_differ_and_carry_their_prefix() {
        let (a, b) = (fresh_id("api"), fresh_id("api"));
        assert_ne!(a, b);
        assert!(a.starts_with("api-"), "{a}");
    }

    #[test]
    fn only_loopback_addresses_and_localhost_count_as_local() {
        for host in ["127.0.0.1", "::1", "[::1]", "localhost", "LOCALHOST", "127.1.2.3"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["0.0.0.0", "192.168.1.2", "192.168.1.4", "::", "example.com"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
