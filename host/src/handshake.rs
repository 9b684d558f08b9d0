//! The kernel side of the handshake: listen, accept one connection, check `hello`, read the
//! manifest (tool plugins list their tools in it; channel plugins send an empty one).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use interprocess::local_socket::tokio::{Listener, Stream, prelude::*};
use interprocess::local_socket::{GenericFilePath, ListenerOptions, ToFsName};
use oxibot_proto::{Goodbye, Hello, Manifest, Message, PROTOCOL_NAME, PROTOCOL_VERSION, PeerKind};
use tokio::io::AsyncWriteExt;

use super::error::StartError;
use super::process::{PluginProcess, describe_status};
use super::wire::{self, FrameReader, Shared};

/// A plugin connection that passed the handshake.
#[derive(Debug)]
pub struct Handshaken {
    /// The socket.
    pub stream: Arc<Stream>,
    /// The reader, holding any bytes that arrived after the manifest.
    pub reader: FrameReader,
    /// What the plugin said about itself.
    pub hello: Hello,
    /// Its tools (none for a channel).
    pub manifest: Manifest,
}

/// Creates the one-shot listening socket at `path` (inside the private run directory).
pub fn listen(path: &Path) -> Result<Listener, StartError> {
    let error = |source| StartError::Listen { path: path.display().to_string(), source };
    let name = path.to_fs_name::<GenericFilePath>().map_err(error)?;
    ListenerOptions::new().name(name).create_tokio().map_err(error)
}

/// Accepts the plugin's connection and runs the handshake, giving up after `limit` or as
/// soon as the process exits.
pub async fn accept(
    listener: Listener,
    socket: &Path,
    process: &mut PluginProcess,
    token: &str,
    limit: Duration,
) -> Result<Handshaken, StartError> {
    let outcome = {
        let handshake = tokio::time::timeout(limit, handshake(&listener, token));
        tokio::select! {
            outcome = handshake => Some(outcome),
            _ = process.wait() => None,
        }
    };
    // The socket path is good for one connection only.
    drop(listener);
    let _ = std::fs::remove_file(socket);
    match outcome {
        Some(Ok(Ok(done))) => Ok(done),
        Some(Ok(Err(StartError::ClosedEarly))) => Err(exited_early(process).await.unwrap_or(StartError::ClosedEarly)),
        Some(Ok(Err(error))) => Err(error),
        Some(Err(_)) => Err(StartError::HandshakeTimeout(limit)),
        None => Err(exited_early(process).await.unwrap_or(StartError::Handshake("exited".into()))),
    }
}

/// If the process has exited (or exits very soon), an error with its status and stderr.
async fn exited_early(process: &mut PluginProcess) -> Option<StartError> {
    let status = tokio::time::timeout(Duration::from_millis(100), process.wait()).await.ok()?.ok()?;
    let _ = process.reap(Duration::from_millis(50)).await;
    Some(StartError::ExitedEarly { status: describe_status(status), stderr_tail: process.tail().lines() })
}

async fn handshake(listener: &Listener, token: &str) -> Result<Handshaken, StartError> {
    let stream = Arc::new(listener.accept().await.map_err(|e| StartError::Handshake(format!("accept failed: {e}")))?);
    let mut reader = FrameReader::new(Shared(stream.clone()));
    let hello = match next(&mut reader).await? {
        Message::Hello(hello) => hello,
        other => return Err(StartError::Handshake(format!("expected hello first, got {}", wire::describe(&other)))),
    };
    if let Err(reason) = check_hello(&hello, token) {
        let _ = send(&stream, &Message::Goodbye(Goodbye { reason: reason.clone() })).await;
        return Err(StartError::Refused(reason));
    }
    send(&stream, &Message::Hello(Hello::new("kernel", PeerKind::Kernel, token))).await?;
    let manifest = loop {
        match next(&mut reader).await? {
            Message::Manifest(manifest) => break manifest,
            Message::Log(_) | Message::Unknown => continue,
            other => return Err(StartError::Handshake(format!("expected manifest, got {}", wire::describe(&other)))),
        }
    };
    if let Err(reason) = check_manifest(&hello, &manifest) {
        let _ = send(&stream, &Message::Goodbye(Goodbye { reason: reason.clone() })).await;
        return Err(StartError::Refused(reason));
    }
    Ok(Handshaken { stream, reader, hello, manifest })
}

/// Checks protocol, version, token and kind; the error is the reason sent in `goodbye`.
fn check_hello(hello: &Hello, token: &str) -> Result<(), String> {
    if hello.protocol != PROTOCOL_NAME {
        return Err(format!("unknown protocol '{}' (expected '{PROTOCOL_NAME}')", hello.protocol));
    }
    if hello.version != PROTOCOL_VERSION {
        return Err(format!(
            "protocol version {} is not supported (the kernel speaks version {PROTOCOL_VERSION})",
            hello.version
        ));
    }
    if !constant_time_eq(hello.token.as_bytes(), token.as_bytes()) {
        return Err("wrong token (the plugin must present the OXIBOT_PLUGIN_TOKEN it was started with)".to_owned());
    }
    if !matches!(hello.kind, PeerKind::Tool | PeerKind::Channel) {
        return Err(format!(
            "plugin kind '{}' is not supported (expected 'tool' or 'channel')",
            String::from(hello.kind.clone())
        ));
    }
    Ok(())
}

/// A channel bridges a chat service and offers no tools; its tools would be unreachable.
fn check_manifest(hello: &Hello, manifest: &Manifest) -> Result<(), String> {
    if hello.kind == PeerKind::Channel && !manifest.tools.is_empty() {
        return Err(format!("a channel plugin cannot offer tools (its manifest lists {})", manifest.tools.len()));
    }
    Ok(())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn next(reader: &mut FrameReader) -> Result<Message, StartError> {
    match reader.next().await {
        Ok(Some(message)) => Ok(message),
        Ok(None) => Err(StartError::ClosedEarly),
        Err(error) => Err(StartError::Handshake(format!("protocol violation during the handshake: {error}"))),
    }
}

async fn send(stream: &Stream, message: &Message) -> Result<(), StartError> {
    let frame = oxibot_proto::encode(message).map_err(|e| StartError::Handshake(e.to_string()))?;
    let mut writer = stream;
    writer.write_all(&frame).await.map_err(|e| StartError::Handshake(format!("cannot write to the plugin: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxibot_proto::ToolSpec;

    fn hello(kind: PeerKind) -> Hello {
        Hello::new("p", kind, "token")
    }

    #[test]
    fn tool_and_channel_plugins_pass_the_hello_check_and_others_are_refused() {
        assert_eq!(check_hello(&hello(PeerKind::Tool), "token"), Ok(()));
        assert_eq!(check_hello(&hello(PeerKind::Channel), "token"), Ok(()));
        let refused = check_hello(&hello(PeerKind::Other("gizmo".into())), "token").unwrap_err();
        assert!(refused.contains("'gizmo'"), "{refused}");
        assert!(check_hello(&hello(PeerKind::Kernel), "token").is_err());
    }

    #[test]
    fn a_channel_may_send_an_empty_manifest_but_not_offer_tools() {
        let channel = hello(PeerKind::Channel);
        assert_eq!(check_manifest(&channel, &Manifest::default()), Ok(()));
        let tool = ToolSpec {
            name: "t".into(),
            description: String::new(),
            parameters: serde_json::json!({}),
            read_only: false,
            exclusive: false,
            timeout_secs: None,
        };
        let manifest = Manifest { tools: vec![tool], detail: None };
        assert!(check_manifest(&channel, &manifest).unwrap_err().contains("cannot offer tools"));
        assert_eq!(check_manifest(&hello(PeerKind::Tool), &manifest), Ok(()));
    }
}
