//! `oxibot-channel-loopback`: a channel plugin that bridges a local TCP port, so tests can
//! drive a channel without any chat service.
//!
//! Config: `{"port": N}`; the channel listens on `127.0.0.1:N` and takes any number of clients.
//! Protocol, one line each way:
//!
//! | client writes / reads | meaning |
//! |---|---|
//! | `sender:chat:text` → | a user's message: an `inbound` with `sender_id` = `sender`, `chat_id` = `chat`, `content` = `text` |
//! | ← `ACCEPTED <id>` | the kernel accepted the inbound `<id>` |
//! | ← `ERR <reason>` | the line was not `sender:chat:text` |
//! | ← `OUT <chat_id> <content>` | an `outbound` (newlines in `content` written as `\n`); sent to every client, acked ok when at least one got it |
//! | ← `DELTA <chat_id> <text>` | a `delta` (the channel announces streaming); sent to every client |
//! | ← `APPROVAL <chat_id> <code> <tool> <answer>\|<answer>…` | an `approval_request` (only with `"approvalRequests": true`, which announces `approvals`); acked like an `outbound` |
//!
//! Tests can ask for delivery faults in the config section (`failFirst`, `announce`,
//! `holdWithoutClient`, `stallAcks`, `seenIdsFile`; see `faults.rs`).
//!
//! A client's lines are submitted one at a time, each after the previous one was accepted: the
//! discipline a real channel follows. Inbound ids are `<pid>-<n>`; nothing is redelivered after
//! a restart (there is no service to fetch from again).

mod faults;

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use faults::{FaultState, Faults};
use oxibot_plugin::chat::{ChannelConfig, SectionError};
use oxibot_plugin::serving::{self, Listening, StartError};
use oxibot_plugin::{ChannelEvent, ChannelHandle, ChannelPlugin, Outbound};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;

/// The channel's config section.
#[derive(Debug, Deserialize)]
struct Config {
    /// The local TCP port to listen on.
    port: u16,
    /// Announce `approvals` (read from the environment before the handshake, see
    /// [`announces_approvals`]; here so the key is known).
    #[serde(default, rename = "approvalRequests")]
    _approval_requests: bool,
    /// Delivery faults a test asked for.
    #[serde(flatten)]
    faults: Faults,
}

impl ChannelConfig for Config {
    const CHANNEL: &'static str = "loopback";
    type Error = SectionError;
}

impl Listening for Config {
    fn address(&self) -> (&str, u16) {
        ("127.0.0.1", self.port)
    }
}

/// Where lines for one client are queued; its writer task drains it.
type LineQueue = mpsc::UnboundedSender<String>;

/// The line queues of the connected clients, by client number.
#[derive(Clone, Default)]
struct Clients(Arc<Mutex<Vec<(u64, LineQueue)>>>);

impl Clients {
    /// Registers a client's line queue; returns its number for [`Clients::remove`].
    fn add(&self, client: LineQueue) -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let number = NEXT.fetch_add(1, Ordering::Relaxed);
        self.lock().push((number, client));
        number
    }

    /// Forgets a client that disconnected.
    fn remove(&self, number: u64) {
        self.lock().retain(|(n, _)| *n != number);
    }

    /// Queues `line` for every connected client; returns how many took it.
    fn broadcast(&self, line: &str) -> usize {
        let mut clients = self.lock();
        clients.retain(|(_, client)| client.send(line.to_owned()).is_ok());
        clients.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, LineQueue)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Serves the loopback channel to the kernel that started this process; the entry `oxibot __channel loopback` runs.
pub fn run() -> ExitCode {
    let plugin = ChannelPlugin::new("loopback").streaming();
    if announces_approvals() { plugin.approvals().run(serve) } else { plugin.run(serve) }
}

/// Whether the config section says `"approvalRequests": true`: the channel then takes
/// approval requests as messages of their own (a test of the kernel's two ways of asking).
fn announces_approvals() -> bool {
    let config = std::env::var(oxibot_proto::ENV_CHANNEL_CONFIG).unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(&config)
        .is_ok_and(|config| config.get("approvalRequests").and_then(serde_json::Value::as_bool) == Some(true))
}

async fn serve(channel: ChannelHandle) -> Result<(), StartError<SectionError>> {
    let (config, listener) = serving::start::<Config>(&channel).await?;
    let faults = Arc::new(FaultState::new(config.faults));
    let clients = Clients::default();
    let (kernel, shared, held) = (channel.clone(), clients.clone(), faults.clone());
    tokio::spawn(serving::accept_forever(
        "loopback",
        listener,
        serving::DEFAULT_MAX_CONNECTIONS,
        move |stream, slot| {
            // A test client keeps its connection as long as it likes: it is never evicted.
            let busy = slot.busy();
            let serving = serve_client(stream, kernel.clone(), shared.clone(), held.clone());
            async move {
                let _busy = busy;
                serving.await;
            }
        },
    ));
    while let Some(event) = channel.next_event().await {
        deliver(&channel, &clients, &faults, event);
    }
    Ok(())
}

/// Writes one kernel event to the clients; acks an outbound message (unless a fault asked
/// for holding it).
fn deliver(channel: &ChannelHandle, clients: &Clients, faults: &FaultState, event: ChannelEvent) {
    match event {
        ChannelEvent::Outbound(outbound) => {
            if let Some(line) = faults.announcement(&outbound) {
                clients.broadcast(&line);
            }
            if let Some(error) = faults.refusal() {
                let _ = channel.ack(outbound.id, Err(error));
                return;
            }
            if faults.seen_before(outbound.id) {
                // Shown already: a service that de-duplicates by id takes it without posting.
                let _ = channel.ack(outbound.id, Ok(()));
                return;
            }
            if clients.broadcast(&out_line(&outbound)) > 0 {
                faults.remember(outbound.id);
                if !faults.stalls_acks() {
                    let _ = channel.ack(outbound.id, Ok(()));
                }
            } else if let Some(outbound) = faults.hold(outbound) {
                let _ = channel.ack(outbound.id, Err("no client is connected".to_owned()));
            }
        }
        ChannelEvent::Delta(delta) => {
            clients.broadcast(&format!("DELTA {} {}\n", delta.chat_id, delta.text.replace('\n', "\\n")));
        }
        ChannelEvent::Approval(request) => {
            let answers: Vec<&str> = request.answers.iter().map(|a| a.answer.as_str()).collect();
            let line =
                format!("APPROVAL {} {} {} {}\n", request.chat_id, request.code, request.tool, answers.join("|"));
            let outcome = if clients.broadcast(&line) > 0 { Ok(()) } else { Err("no client is connected".to_owned()) };
            let _ = channel.ack(request.id, outcome);
        }
    }
}

/// The line an outbound message is written as.
fn out_line(outbound: &Outbound) -> String {
    format!("OUT {} {}\n", outbound.chat_id, outbound.content.replace('\n', "\\n"))
}

/// Submits a client's lines one by one, answering each with `ACCEPTED` or `ERR`; a new client
/// first gets the replies held for one.
async fn serve_client(stream: TcpStream, channel: ChannelHandle, clients: Clients, faults: Arc<FaultState>) {
    let (read, write) = stream.into_split();
    let (lines_tx, lines_rx) = mpsc::unbounded_channel();
    tokio::spawn(write_lines(write, lines_rx));
    let number = clients.add(lines_tx.clone());
    for outbound in faults.take_held() {
        let _ = lines_tx.send(out_line(&outbound));
        let _ = channel.ack(outbound.id, Ok(()));
    }
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Some((sender, chat, text)) = parse_line(&line) else {
            let _ = lines_tx.send("ERR expected sender:chat:text\n".to_owned());
            continue;
        };
        let id = next_id();
        if channel.submit(channel.inbound(id.clone(), sender, chat, text)).await.is_err() {
            break;
        }
        let _ = lines_tx.send(format!("ACCEPTED {id}\n"));
    }
    // The writer ends once both queue senders are gone.
    clients.remove(number);
}

async fn write_lines(mut write: OwnedWriteHalf, mut lines: mpsc::UnboundedReceiver<String>) {
    while let Some(line) = lines.recv().await {
        if write.write_all(line.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// `sender:chat:text` → its three parts (the text may contain `:`).
fn parse_line(line: &str) -> Option<(&str, &str, &str)> {
    let mut parts = line.splitn(3, ':');
    let (sender, chat, text) = (parts.next()?, parts.next()?, parts.next()?);
    (!sender.is_empty() && !chat.is_empty()).then_some((sender, chat, text))
}

/// A fresh inbound id, unique across restarts of this channel (a process id alone is not: each
/// run is the same pid of its own PID namespace).
fn next_id() -> String {
    serving::fresh_id("loopback")
}

#[cfg(test)]
mod tests {
    use super::parse_line;

    #[test]
    fn a_line_splits_into_sender_chat_and_text_which_may_hold_colons() {
        assert_eq!(parse_line("alice:c1:hi: there"), Some(("alice", "c1", "hi: there")));
        assert_eq!(parse_line("alice:c1:"), Some(("alice", "c1", "")));
        assert_eq!(parse_line("alice:c1"), None);
        assert_eq!(parse_line(":c1:text"), None);
    }
}
