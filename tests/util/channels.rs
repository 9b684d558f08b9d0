//! Helpers for driving channel plugins: the loopback channel's spec and a line client for its
//! TCP port, plus waiting for plugin events.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use oxibot_kernel::plugin::{PluginEvent, PluginHost, PluginSpec, channel_spec};
use oxibot_proto::{DeliveryAck, Inbound, InboundAccepted, Message, Outbound, PeerKind};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::bin;

/// How long a test waits for a line or an event before failing.
pub const WAIT: Duration = crate::wait::DEADLINE;

/// The bundled loopback channel listening on `port`, built the way the gateway builds specs.
pub fn loopback_spec(port: u16) -> PluginSpec {
    channel_spec(&bin("oxibot"), "loopback", &json!({"port": port}))
        .unwrap_or_else(|e| panic!("{e}; run `cargo build --workspace` before the tests"))
}

/// A local TCP port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A client of the loopback channel's port, speaking lines.
pub struct LineClient {
    lines: Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
}

impl LineClient {
    /// Connects to `port`, retrying while the channel is (re)starting.
    pub async fn connect(port: u16) -> LineClient {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            match TcpStream::connect(("127.0.0.1", port)).await {
                Ok(stream) => {
                    let (read, write) = stream.into_split();
                    return LineClient { lines: BufReader::new(read).lines(), write };
                }
                Err(error) if tokio::time::Instant::now() > deadline => {
                    panic!("cannot connect to the loopback channel on port {port}: {error}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    /// Writes one line (the newline is added).
    pub async fn send(&mut self, line: &str) {
        self.write.write_all(format!("{line}\n").as_bytes()).await.unwrap();
    }

    /// The next line, or `None` once the channel closed the connection (its kernel died);
    /// waits as long as it takes (cancel-safe: wrap it in a timeout).
    pub async fn next_line(&mut self) -> Option<String> {
        self.lines.next_line().await.ok().flatten()
    }

    /// The next line from the channel, without its newline.
    pub async fn line(&mut self) -> String {
        match tokio::time::timeout(WAIT, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(other) => panic!("the loopback channel closed the connection: {other:?}"),
            Err(_) => panic!("no line from the loopback channel within {WAIT:?}"),
        }
    }
}

/// The next plugin event, failing the test after [`WAIT`].
pub async fn next_event(events: &mut UnboundedReceiver<PluginEvent>) -> PluginEvent {
    match tokio::time::timeout(WAIT, events.recv()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the host's event queue ended"),
        Err(_) => panic!("no plugin event within {WAIT:?}"),
    }
}

/// Skips events until one matches `wanted`, failing the test after [`WAIT`].
pub async fn event_where(
    events: &mut UnboundedReceiver<PluginEvent>,
    wanted: impl Fn(&PluginEvent) -> bool,
) -> PluginEvent {
    let search = async {
        loop {
            let event = next_event(events).await;
            if wanted(&event) {
                return event;
            }
        }
    };
    tokio::time::timeout(WAIT, search).await.unwrap_or_else(|_| panic!("no matching plugin event within {WAIT:?}"))
}

/// A reply from the kernel to chat `chat_id`, delivery `id`, with the channel's `metadata`.
pub fn outbound(id: u64, chat_id: &str, content: &str, metadata: Value) -> Message {
    Message::Outbound(Outbound {
        id,
        chat_id: chat_id.into(),
        content: content.into(),
        media: vec![],
        stream_id: None,
        metadata,
    })
}

/// Starts a host running the bundled channel `name` with its config section, and waits until
/// the channel announced itself ready.
pub async fn started_channel(name: &str, config: &Value) -> (PluginHost, UnboundedReceiver<PluginEvent>) {
    let spec = channel_spec(&bin("oxibot"), name, config)
        .unwrap_or_else(|e| panic!("{e}; run `cargo build --workspace` before the tests"));
    let host = crate::start_host(vec![spec]).await;
    let mut events = host.subscribe();
    let ready = event_where(&mut events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == name)).await;
    assert!(matches!(ready, PluginEvent::Ready { kind: PeerKind::Channel, .. }), "{ready:?}");
    (host, events)
}

/// The next inbound event, which must come from `channel`.
pub async fn next_inbound(events: &mut UnboundedReceiver<PluginEvent>, channel: &str) -> Inbound {
    match event_where(events, |e| matches!(e, PluginEvent::Inbound { .. })).await {
        PluginEvent::Inbound { plugin, inbound } => {
            assert_eq!(plugin, channel);
            inbound
        }
        _ => unreachable!(),
    }
}

/// The next delivery ack.
pub async fn next_delivery(events: &mut UnboundedReceiver<PluginEvent>) -> DeliveryAck {
    match event_where(events, |e| matches!(e, PluginEvent::Delivery { .. })).await {
        PluginEvent::Delivery { ack, .. } => ack,
        _ => unreachable!(),
    }
}

/// Tells `channel` that the kernel saved `inbound` (as the gateway does).
pub fn accept(host: &PluginHost, channel: &str, inbound: &Inbound) {
    host.send(channel, Message::InboundAccepted(InboundAccepted { id: inbound.id.clone() })).unwrap();
}
