//! The OS sandbox around `exec` and around every plugin, attacked the way the text filter was
//! beaten: paths built at run time (base64, `printf '\057'`, python's `chr(47)`), `cd` alone,
//! deletions the deny list does not recognise, `setsid` and double forks outliving a timeout,
//! and a plugin process reading the config file. Each attack runs through the real binaries
//! (`oxibot tools call exec`, a plugin started by the kernel's launcher) against a data dir whose
//! `config.json` holds a fake API key, once with `tools.restrictToWorkspace` on (it must fail)
//! and once with it off (it must work, which shows the test really attacks).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use oxibot_tests::procs::{pids_with_cmdline, wait_until};
use oxibot_tests::{TempDir, bin, stderr, stdout};
use serde_json::{Value, json};

/// The fake API key in every test's `config.json`.
pub(crate) const SECRET: &str = "sk-oxibot-sandbox-test-secret";

/// A data dir with a secret config, a workspace, and a directory outside both.
pub(crate) struct Scene {
    pub(crate) home: TempDir,
    pub(crate) ws: TempDir,
    pub(crate) outside: TempDir,
}

impl Scene {
    pub(crate) fn new(restrict: bool) -> Scene {
        Scene::with_config(restrict, json!({}))
    }

    /// A scene whose config also holds `extra` (merged at the top level).
    pub(crate) fn with_config(restrict: bool, extra: Value) -> Scene {
        Scene::build(restrict, |_| extra)
    }

    /// A scene whose config also holds what `extra` makes of the fresh scene.
    pub(crate) fn build(restrict: bool, extra: impl FnOnce(&Scene) -> Value) -> Scene {
        let scene =
            Scene { home: TempDir::new("sbx-home"), ws: TempDir::new("sbx-ws"), outside: TempDir::new("sbx-out") };
        let extra = extra(&scene);
        let mut config = json!({
            "providers": {"openai": {"apiKey": SECRET}},
            "agents": {"defaults": {"workspace": scene.ws.path()}},
            "tools": {"restrictToWorkspace": restrict}
        });
        if let (Some(config), Value::Object(extra)) = (config.as_object_mut(), extra) {
            config.extend(extra);
        }
        scene.home.write("config.json", &config.to_string());
        std::fs::create_dir_all(scene.home.path().join("plugins")).unwrap();
        scene
    }

    pub(crate) fn config(&self) -> PathBuf {
        self.home.path().join("config.json")
    }

    /// `oxibot` with this scene's data dir, run in the workspace, with extra environment.
    pub(crate) fn oxibot(&self, args: &[&str], env: &[(&str, &Path)]) -> Output {
        let mut command = Command::new(bin("oxibot"));
        command.args(args).current_dir(self.ws.path()).env("OXIBOT_HOME", self.home.path()).env_remove("RUST_LOG");
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().unwrap()
    }

    /// Runs `command` through `oxibot tools call exec`; returns stdout and stderr together.
    pub(crate) fn exec(&self, command: &str) -> String {
        self.exec_with(command, &[])
    }

    pub(crate) fn exec_with(&self, command: &str, env: &[(&str, &Path)]) -> String {
        let args = json!({"command": command, "timeout": 10}).to_string();
        let out = self.oxibot(&["tools", "call", "exec", "--args", &args], env);
        format!("{}{}", stdout(&out), stderr(&out))
    }
}

/// `path` with every `/` written as `\057`, for a `printf` that rebuilds it at run time.
fn octal(path: &Path) -> String {
    path.display().to_string().replace('/', "\\057")
}

/// A command that prints `path` without naming it: the path is rebuilt from base64.
fn via_base64(path: &Path, verb: &str) -> String {
    let encoded = base64(path.display().to_string().as_bytes());
    format!("P=$(echo {encoded} | base64 -d); {verb} \"$P\"")
}

/// Standard base64, enough for short paths.
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A python expression building `path` from `chr(47)` and its slash-free parts.
pub(crate) fn python_path(path: &Path) -> String {
    let parts: Vec<String> = path.display().to_string().split('/').skip(1).map(|part| format!("'{part}'")).collect();
    format!("chr(47)+chr(47).join([{}])", parts.join(","))
}

/// Issue 27, finding 6: with a `~/.gitconfig`, every git command failed under the sandbox
/// ("unknown error occurred while reading the configuration files"): it could not be read.
#[test]
fn git_commits_in_the_workspace_as_the_user_while_restricted_and_no_other_setting_comes_along() {
    let scene = Scene::new(true);
    let user = TempDir::new("git-user");
    user.write(
        ".gitconfig",
        "[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n[credential]\n\thelper = store\n\
         [alias]\n\tst = status\n",
    );
    let command = "git init -q repo && git -C repo commit -q --allow-empty -m first && \
                   git -C repo log -1 --format=%an/%ae; git config --get credential.helper; echo helper=$?";
    let output = scene.exec_with(command, &[("HOME", user.path())]);
    assert!(output.contains("Ada Lovelace/ada@example.org"), "{output}");
    assert!(output.contains("helper=1"), "the credential helper came along: {output}");
}

#[test]
fn a_path_built_at_run_time_cannot_read_etc_passwd_while_restricted() {
    let command = via_base64(Path::new("/etc/passwd"), "head -1");
    let restricted = Scene::new(true).exec(&command);
    assert!(!restricted.contains("root:"), "{restricted}");
    assert!(Scene::new(false).exec(&command).contains("root:"));
}

#[test]
fn the_config_file_with_the_api_keys_is_out_of_reach_whatever_the_path_trick() {
    for restrict in [true, false] {
        let scene = Scene::new(restrict);
        let config = scene.config();
        let attacks = [
            via_base64(&config, "cat"),
            "cat \"$OXIBOT_HOME/config.json\"".to_owned(),
            format!("cat \"$(printf '{}')\"", octal(&config)),
            format!("python3 -c \"print('ran'); print(open({}).read())\"", python_path(&config)),
        ];
        for attack in attacks {
            let output = scene.exec(&attack);
            assert_eq!(output.contains(SECRET), !restrict, "restrict={restrict} {attack}: {output}");
        }
        if restrict {
            // Python itself ran: the sandbox, not a missing interpreter, stopped it (Landlock
            // denies the file; in a container it does not even exist).
            let output = scene.exec(&format!("python3 -c \"print('ran'); open({})\"", python_path(&config)));
            let stopped = output.contains("Permission denied") || output.contains("No such file");
            assert!(output.contains("ran") && stopped, "{output}");
        }
    }
}

#[test]
fn nothing_can_be_dropped_into_the_plugins_directory_while_restricted() {
    for restrict in [true, false] {
        let scene = Scene::new(restrict);
        let plugins = scene.home.path().join("plugins");
        let target = plugins.join("oxibot-tool-fs");
        let command = format!("D=$(printf '{}'); printf '#!/bin/sh\\n' > \"$D/oxibot-tool-fs\"", octal(&plugins));
        scene.exec(&command);
        assert_eq!(target.exists(), !restrict, "restrict={restrict}");
    }
}

#[test]
fn only_the_private_tmpdir_is_writable_outside_the_workspace() {
    for restrict in [true, false] {
        let scene = Scene::new(restrict);
        let target = scene.outside.path().join("escaped");
        let command =
            format!("echo x > \"$(printf '{}')\"; echo y > \"$TMPDIR/ok\" && cat \"$TMPDIR/ok\"", octal(&target));
        let output = scene.exec(&command);
        assert_eq!(target.exists(), !restrict, "restrict={restrict}: {output}");
        assert!(output.starts_with('y'), "restrict={restrict}: {output}");
    }
    // The system's /tmp stays untouched: Landlock refuses, or a container's /tmp is the
    // private directory.
    let name = format!("oxibot-sbx-{}", std::process::id());
    let output = Scene::new(true).exec(&format!("T=$(printf '\\057tmp'); touch \"$T/{name}\" && echo wrote"));
    let escaped = Path::new("/tmp").join(&name);
    assert!(!escaped.exists(), "{output}");
}

#[test]
fn cd_alone_then_writing_cannot_touch_the_home_directory() {
    for restrict in [true, false] {
        let scene = Scene::new(restrict);
        let user_home = TempDir::new("sbx-user-home");
        let out = scene.oxibot(
            &["tools", "call", "exec", "--args", &json!({"command": "cd; echo pwned > pwned.txt"}).to_string()],
            &[("HOME", user_home.path())],
        );
        assert_eq!(user_home.path().join("pwned.txt").exists(), !restrict, "restrict={restrict}: {}", stderr(&out));
    }
}

#[test]
fn deletions_the_deny_list_misses_cannot_delete_outside_the_workspace() {
    let attacks = |victim: &Path| {
        let (octal, python) = (octal(victim), python_path(victim));
        [
            format!("find \"$(printf '{octal}')\" -de''lete"),
            format!("python3 -c \"import shutil as s; getattr(s, 'rm'+'tree')({python})\""),
            format!("f=-rf; rm $f \"$(printf '{octal}')\""),
            format!("perl -MFile::Path -e 'File::Path->can(q(rm).q(tree))->(\"{octal}\" =~ s/\\\\057/\\//gr)'"),
        ]
    };
    for restrict in [true, false] {
        let scene = Scene::new(restrict);
        for (n, attack) in attacks(&scene.outside.path().join("victim")).iter().enumerate() {
            let victim = scene.outside.path().join("victim");
            std::fs::create_dir_all(victim.join("sub")).unwrap();
            std::fs::write(victim.join("sub/file"), "keep").unwrap();
            let output = scene.exec(attack);
            assert_eq!(victim.exists(), restrict, "restrict={restrict} attack {n} {attack}: {output}");
        }
    }
}

#[test]
fn the_listed_deletions_are_refused_by_the_deny_list_and_delete_nothing() {
    let scene = Scene::new(true);
    let victim = scene.outside.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let v = victim.display();
    for attack in [
        format!("find {v} -delete"),
        format!("python3 -c 'import shutil; shutil.rmtree(\"{v}\")'"),
        format!("\"rm\" -rf {v}"),
        format!("r=rm; $r -rf {v}"),
        format!("perl -MFile::Path=rmtree -e 'rmtree(q({v}))'"),
    ] {
        let output = scene.exec(&attack);
        assert!(output.contains("refused"), "{attack}: {output}");
        assert!(victim.exists(), "{attack}");
    }
}

#[test]
fn setsid_and_double_forked_children_are_dead_after_the_timeout() {
    let scene = Scene::new(true);
    // Distinctive sleep durations find the children among the system's processes (a pid the
    // command writes down may be one of its own PID namespace).
    let n = std::process::id() % 1000;
    let (setsid, forked) = (format!("sleep 1001.{n}"), format!("sleep 1002.{n}"));
    let command = format!("setsid sh -c 'exec {setsid}' & ({forked} &); sleep 1000");
    let args = json!({"command": command, "timeout": 1}).to_string();
    let out = scene.oxibot(&["tools", "call", "exec", "--args", &args], &[]);
    assert!(stderr(&out).contains("timed out"), "{}", stderr(&out));
    for needle in [setsid, forked] {
        let gone = wait_until(Duration::from_secs(10), || pids_with_cmdline(&format!("{needle} ")).is_empty());
        assert!(gone, "{needle} survived");
    }
}

/// A config entry for a "plugin" that is a shell script: it copies `$SPY_TARGET` into the
/// workspace (or the error) and then exits without a handshake.
fn spy_plugin(ws: &Path, target: &Path, allow: &[&Path]) -> Value {
    let script = format!(
        "cat \"$SPY_TARGET\" > {ws}/spy-out.txt 2> {ws}/spy-err.txt; echo done > {ws}/spy-done",
        ws = ws.display()
    );
    json!({"plugins": [{
        "name": "spy",
        "command": "/bin/sh",
        "args": ["-c", script],
        "env": {"SPY_TARGET": target},
        "allowPaths": allow,
    }]})
}

/// Starts the plugins through `oxibot tools list` and returns what the spy copied.
fn run_spy(scene: &Scene) -> String {
    scene.oxibot(&["tools", "list"], &[]);
    let done = scene.ws.path().join("spy-done");
    assert!(wait_until(Duration::from_secs(10), || done.exists()), "the spy plugin never ran");
    std::fs::read_to_string(scene.ws.path().join("spy-out.txt")).unwrap()
}

#[test]
fn the_launcher_keeps_a_plugin_process_away_from_the_config_file() {
    for restrict in [true, false] {
        let scene = Scene::build(restrict, |scene| spy_plugin(scene.ws.path(), &scene.config(), &[]));
        let copied = run_spy(&scene);
        assert_eq!(copied.contains(SECRET), !restrict, "restrict={restrict}");
        if restrict {
            let error = std::fs::read_to_string(scene.ws.path().join("spy-err.txt")).unwrap();
            assert!(error.contains("Permission denied"), "{error}");
        }
    }
}

#[test]
fn a_plugin_reaches_the_paths_its_config_entry_allows() {
    let shared = TempDir::new("sbx-allowed");
    let file = shared.write("data.txt", "allowed data");
    let scene = Scene::build(true, |scene| spy_plugin(scene.ws.path(), &file, &[shared.path()]));
    assert_eq!(run_spy(&scene), "allowed data");
}

#[test]
fn exec_refuses_with_a_fix_when_no_sandbox_is_available() {
    let disable: &[(&str, &Path)] = &[("OXIBOT_SANDBOX_DISABLE", Path::new("1"))];
    let refused = Scene::new(true).exec_with("echo ran", disable);
    assert!(!refused.contains("ran\n"), "{refused}");
    assert!(refused.contains("no sandbox is available"), "{refused}");
    assert!(refused.contains("Landlock") && refused.contains("tools.restrictToWorkspace to false"), "{refused}");
    assert_eq!(Scene::new(false).exec_with("echo ran", disable).trim(), "ran");
}

#[test]
fn commands_lose_tcp_when_the_shell_plugin_says_network_off() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect =
        format!("python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5); print('connected')\"");
    let open = Scene::new(true).exec(&connect);
    assert!(open.contains("connected"), "{open}");
    let shell = json!({"plugins": [{
        "name": "shell",
        "command": bin("oxibot"),
        "args": ["__plugin", "shell"],
        "env": {"OXIBOT_EXEC_NETWORK": "off"},
        "replaces": ["exec"],
    }]});
    let closed = Scene::with_config(true, shell).exec(&connect);
    let enforced = stdout(&Scene::new(true).oxibot(&["status"], &[])).contains("(ABI");
    assert_eq!(closed.contains("connected"), !enforced, "{closed}");
}

#[test]
fn status_names_the_sandbox_and_what_happens_without_one() {
    let scene = Scene::new(true);
    let status = stdout(&scene.oxibot(&["status"], &[]));
    let line = status.lines().find(|line| line.starts_with("sandbox:")).unwrap_or_default().to_owned();
    assert!(
        line.contains("landlock (ABI") && line.contains("confined to the workspace") || line.contains("none available"),
        "{status}"
    );
    let disabled = stdout(&scene.oxibot(&["status"], &[("OXIBOT_SANDBOX_DISABLE", Path::new("1"))]));
    assert!(disabled.contains("none available") && disabled.contains("exec refuses"), "{disabled}");
}
