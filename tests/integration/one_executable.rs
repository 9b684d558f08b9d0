//! One executable (issue 30): the bundled tool plugins and channels are built into `oxibot`,
//! so the `oxibot` file alone has them all, and a link named after one of them runs it.

use std::path::{Path, PathBuf};

use oxibot_kernel::plugin::{Origin, PluginEvent, PluginSpec, channel_spec};
use oxibot_proto::PeerKind;
use oxibot_tests::channels::{LineClient, event_where, free_port};
use oxibot_tests::{TempDir, bin, context, start_host, stderr, stdout};
use serde_json::json;

/// `oxibot` put into `dir` alone: a hard link where the file system allows one (the same file,
/// no copy of a large debug build), a copy otherwise.
fn lone_oxibot(dir: &Path) -> PathBuf {
    let lone = dir.join("oxibot");
    if std::fs::hard_link(bin("oxibot"), &lone).is_err() {
        std::fs::copy(bin("oxibot"), &lone).unwrap();
    }
    lone
}

#[test]
fn oxibot_copied_alone_into_an_empty_directory_has_every_bundled_tool() {
    let home = TempDir::new("lone-home");
    let alone = TempDir::new("lone-install");
    let ws = TempDir::new("lone-ws");
    ws.write("README.md", "read through the one executable\n");
    let oxibot = lone_oxibot(alone.path());
    let run = |args: &[&str]| {
        std::process::Command::new(&oxibot)
            .args(args)
            .current_dir(alone.path())
            .env("OXIBOT_HOME", home.path())
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    };
    let workspace = ws.path().display().to_string();
    let read = run(&["tools", "call", "read_file", "--workspace", &workspace, "--args", r#"{"path":"README.md"}"#]);
    assert!(read.status.success(), "{}", stderr(&read));
    assert!(stdout(&read).contains("read through the one executable"), "{}", stdout(&read));
    let list = stdout(&run(&["tools", "list"]));
    for tool in ["read_file", "exec", "web_fetch"] {
        assert!(list.contains(tool), "{tool} missing from:\n{list}");
    }
    let entries: Vec<_> = std::fs::read_dir(alone.path()).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    assert_eq!(entries, ["oxibot"], "nothing but the one file was installed");
}

#[actix_rt::test]
async fn oxibot_copied_alone_into_an_empty_directory_runs_a_bundled_channel() {
    let alone = TempDir::new("lone-channel");
    let oxibot = lone_oxibot(alone.path());
    let port = free_port();
    let spec = channel_spec(&oxibot, "loopback", &json!({"port": port})).unwrap();
    assert_eq!(spec.command_line(), format!("{} __channel loopback", oxibot.display()));
    let host = start_host(vec![spec]).await;
    let mut events = host.subscribe();
    let mut client = LineClient::connect(port).await;
    client.send("alice:c1:hello from one file").await;
    let inbound = event_where(&mut events, |event| matches!(event, PluginEvent::Inbound { .. })).await;
    let PluginEvent::Inbound { plugin, inbound, .. } = inbound else { unreachable!() };
    assert_eq!((plugin.as_str(), inbound.content.as_str()), ("loopback", "hello from one file"));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_link_named_after_a_bundled_tool_plugin_runs_that_plugin() {
    let dir = TempDir::new("link-tool");
    let ws = TempDir::new("link-ws");
    ws.write("note.txt", "reached through a link\n");
    let link = dir.path().join("oxibot-tool-fs");
    std::os::unix::fs::symlink(bin("oxibot"), &link).unwrap();
    // As a packager might install it: next to the kernel, in place of a separate executable.
    let spec = PluginSpec::for_executable(link, Origin::Bundled);
    assert_eq!((spec.name.as_str(), spec.expected_kind()), ("fs", PeerKind::Tool));
    let host = start_host(vec![spec]).await;
    let read = host.call("read_file", json!({"path": "note.txt"}), context(ws.path()), None).await.unwrap();
    assert!(read.content.contains("reached through a link"), "{}", read.content);
    host.shutdown().await;
}

#[test]
fn a_link_named_after_a_channel_runs_the_channel_and_an_unknown_name_is_refused() {
    let dir = TempDir::new("link-channel");
    let link = dir.path().join("oxibot-channel-api");
    std::os::unix::fs::symlink(bin("oxibot"), &link).unwrap();
    let started = std::process::Command::new(&link).env_remove("OXIBOT_PLUGIN_SOCKET").output().unwrap();
    assert!(stderr(&started).contains("api is an oxibot plugin"), "{}", stderr(&started));
    let unknown = std::process::Command::new(bin("oxibot")).args(["__channel", "carrier-pigeon"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(127));
    assert!(stderr(&unknown).contains("no bundled channel named 'carrier-pigeon'"), "{}", stderr(&unknown));
}

#[test]
fn the_plugin_entries_are_hidden_from_help() {
    let help = std::process::Command::new(bin("oxibot")).arg("--help").output().unwrap();
    assert!(help.status.success() && !stdout(&help).contains("__"), "{}", stdout(&help));
}
