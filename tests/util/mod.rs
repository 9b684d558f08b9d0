//! Shared helpers for the integration tests: built binaries, temp dirs, in-process hosts.
#![allow(clippy::unwrap_used, missing_docs)]

pub mod background;
pub mod bench;
pub mod browser;
pub mod channels;
pub mod fakes_dingtalk;
pub mod fakes_discord;
pub mod fakes_email;
pub mod fakes_feishu;
pub mod fakes_matrix;
pub mod fakes_mattermost;
pub mod fakes_qq;
pub mod fakes_signal;
pub mod fakes_slack;
pub mod fakes_telegram;
pub mod fakes_wecom;
pub mod fault_proxy;
pub mod http;
pub mod llm;
pub mod mailserver;
pub mod nats;
pub mod needs;
pub mod otlp_metrics;
pub mod phoenix;
pub mod procs;
pub mod synapse;
pub mod wait;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use oxibot_kernel::plugin::{HostConfig, Origin, PluginHost, PluginSpec, RestartPolicy};
use oxibot_proto::CallContext;

/// The directory holding the workspace's built binaries (`target/debug`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/integration-xxxx → target/debug
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

/// Path of a built binary, with a hint when it has not been built.
pub fn bin(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(path.exists(), "{} is missing; run `cargo build --workspace` before the tests", path.display());
    path
}

/// A fresh, empty directory unique to this test; removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("oxibot-test-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path.canonicalize().unwrap())
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn write(&self, relative: &str, content: &str) -> PathBuf {
        let path = self.0.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A spec for the misbehaving stress plugin with the given environment.
pub fn stress_spec(name: &str, env: &[(&str, &str)]) -> PluginSpec {
    let mut spec = PluginSpec::for_executable(bin("oxibot-stress-plugin"), Origin::Config);
    spec.name = name.to_owned();
    spec.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    spec
}

/// A spec for one of the bundled tool plugins (`fs`, `shell`): `oxibot __plugin <name>`.
pub fn tool_spec(name: &str) -> PluginSpec {
    PluginSpec::bundled(&bin("oxibot"), &oxibot_proto::PeerKind::Tool, name)
}

/// Host settings for tests: the real launcher, quick backoff, short handshake timeout.
pub fn test_host_config() -> HostConfig {
    HostConfig {
        launcher: Some(bin("oxibot")),
        handshake_timeout: Duration::from_secs(3),
        default_call_timeout: Duration::from_secs(10),
        restart: RestartPolicy {
            backoff_base: Duration::from_millis(20),
            backoff_max: Duration::from_millis(200),
            ..RestartPolicy::default()
        },
        manifest_cache: None,
        ..HostConfig::default()
    }
}

/// Starts a host running `specs` with test settings, waiting until they settle.
pub async fn start_host(specs: Vec<PluginSpec>) -> PluginHost {
    let host = PluginHost::start(specs, test_host_config()).unwrap();
    host.wait_settled(wait::DEADLINE).await;
    host
}

/// A call context for a workspace.
pub fn context(workspace: &Path) -> CallContext {
    CallContext { workspace: workspace.display().to_string(), ..CallContext::default() }
}

/// The `oxibot` command with `args`, its data dir at `home`, the provider's retries shortened
/// to 20, 40 and 80 ms, and no `RUST_LOG` from the test's environment.
pub fn kernel_command(home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(bin("oxibot"));
    command
        .args(args)
        .env("OXIBOT_HOME", home)
        .env("OXIBOT_PROVIDER_RETRY_DELAYS_MS", "20,40,80")
        .env_remove("RUST_LOG");
    command
}

/// Runs the `oxibot` binary with `OXIBOT_HOME` pointing at `home`.
pub fn oxibot(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(bin("oxibot"))
        .args(args)
        .current_dir(cwd)
        .env("OXIBOT_HOME", home)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// Where the kernel keeps session `key` of `workspace` when its data dir is `home`: outside
/// the workspace, in the data dir's private session directory.
pub fn session_path(home: &Path, workspace: &Path, key: &str) -> PathBuf {
    use oxibot_kernel::session::location::{private_dir, storage_name};
    private_dir(home, workspace).join(storage_name(key))
}

/// stdout of a command as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// stderr of a command as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
