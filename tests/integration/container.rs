//! The container around `exec` (issue 23, findings 4, 5, 6 and 9): what Landlock alone let a
//! command do, each tried by a small Python probe that `oxibot tools call exec` runs — once with
//! `tools.restrictToWorkspace` on (it must fail) and once with it off (it must work, which shows
//! the probe really attacks). Paths the probes use are written into the probe files, never into
//! the command, so the text check does not stop them first.

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use oxibot_tests::procs::{pids_with_cmdline, wait_until};
use oxibot_tests::{bin, stderr, stdout};
use serde_json::{Value, json};

use super::sandbox::{Scene, base64};

/// A `plugins` entry for the shell plugin with the network off (it replaces the bundled
/// `exec` on purpose, so it says so).
fn network_off() -> Value {
    json!({"plugins": [{
        "name": "shell",
        "command": bin("oxibot"),
        "args": ["__plugin", "shell"],
        "env": {"OXIBOT_EXEC_NETWORK": "off"},
        "replaces": ["exec"],
    }]})
}

/// Writes `script` to `probe.py` in the workspace and runs it through `exec`.
fn probe(scene: &Scene, script: &str) -> String {
    scene.ws.write("probe.py", script);
    scene.exec("python3 probe.py")
}

/// Fails with the reason when this machine cannot build containers, instead of passing on
/// Landlock alone.
fn require_namespaces() {
    let status = stdout(&Scene::new(true).oxibot(&["status"], &[]));
    assert!(
        status.contains("exec: namespaces (user"),
        "this machine gives exec no container, so these tests cannot show it holds; enable unprivileged \
         user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0):\n{status}"
    );
}

/// Listeners on the loopback interface that note whatever reaches them.
struct Listeners {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Listeners {
    fn new() -> Listeners {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        Listeners { tcp, udp }
    }

    /// What arrived: the first bytes of every TCP connection, and every datagram.
    fn heard(&self) -> Vec<String> {
        let mut heard = Vec::new();
        while let Ok((mut stream, _)) = self.tcp.accept() {
            stream.set_nonblocking(false).unwrap();
            stream.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
            let mut buffer = [0u8; 16];
            let read = stream.read(&mut buffer).unwrap_or(0);
            heard.push(String::from_utf8_lossy(&buffer[..read]).into_owned());
        }
        let mut buffer = [0u8; 16];
        while let Ok(read) = self.udp.recv(&mut buffer) {
            heard.push(String::from_utf8_lossy(&buffer[..read]).into_owned());
        }
        heard.sort();
        heard
    }
}

/// A probe that talks to the listeners through TCP Fast Open, MPTCP and UDP.
fn network_probe(listeners: &Listeners) -> String {
    let tcp = listeners.tcp.local_addr().unwrap().port();
    let udp = listeners.udp.local_addr().unwrap().port();
    format!(
        r#"import socket, time
def attempt(name, send):
    try:
        send()
        print(name, "sent")
    except OSError as error:
        print(name, "refused:", error)
def tfo():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.sendto(b"tfo", 0x20000000, ("127.0.0.1", {tcp}))
    time.sleep(0.3)
def mptcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
    s.connect(("127.0.0.1", {tcp}))
    s.sendall(b"mptcp")
    time.sleep(0.3)
def udp():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"udp", ("127.0.0.1", {udp}))
attempt("tfo", tfo)
attempt("mptcp", mptcp)
attempt("udp", udp)
"#
    )
}

// Finding 4: TCP Fast Open and MPTCP held a conversation with a loopback listener, and UDP went
// out, while OXIBOT_EXEC_NETWORK was off.
#[test]
fn with_the_network_off_tcp_fast_open_mptcp_and_udp_reach_no_loopback_listener() {
    require_namespaces();
    let listeners = Listeners::new();
    let open = probe(&Scene::new(false), &network_probe(&listeners));
    assert_eq!(
        listeners.heard(),
        ["mptcp", "tfo", "udp"],
        "without the restriction every probe must get through (TFO client and MPTCP on): {open}"
    );
    let closed = probe(&Scene::with_config(true, network_off()), &network_probe(&listeners));
    assert!(closed.contains("refused"), "{closed}");
    assert_eq!(listeners.heard(), Vec::<String>::new(), "{closed}");
}

/// A probe that reads the key `description` of type `user` from the user key ring.
fn keyring_probe(description: &str) -> String {
    format!(
        r#"import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
KEYCTL = {{"x86_64": 250, "aarch64": 219}}[platform.machine()]
key = libc.syscall(KEYCTL, 10, -4, b"user", b"{description}", 0)
if key < 0:
    print("search refused, errno", ctypes.get_errno())
else:
    buffer = ctypes.create_string_buffer(128)
    size = libc.syscall(KEYCTL, 11, key, buffer, 128)
    print("read:", buffer.raw[:max(size, 0)].decode())
"#
    )
}

/// Adds a `user` key with `payload` to the user key ring of the user running the tests.
fn add_user_key(description: &str, payload: &str) {
    let script = format!(
        r#"import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, KEYCTL = {{"x86_64": (248, 250), "aarch64": (217, 219)}}[platform.machine()]
key = libc.syscall(ADD_KEY, b"user", b"{description}", b"{payload}", {len}, -4)
assert key > 0, ctypes.get_errno()
# Readable by its user, not only by a process that possesses the user key ring.
assert libc.syscall(KEYCTL, 5, key, 0x3f3f0000) == 0, ctypes.get_errno()
"#,
        len = payload.len()
    );
    let out = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "cannot add a key to the user key ring here: {}", stderr(&out));
}

// Finding 5: a command read a secret from the user key ring.
#[test]
fn a_command_cannot_read_the_user_key_ring() {
    require_namespaces();
    let description = format!("oxibot-test-{}", std::process::id());
    add_user_key(&description, "keyring-secret");
    let open = probe(&Scene::new(false), &keyring_probe(&description));
    assert!(open.contains("read: keyring-secret"), "{open}");
    let closed = probe(&Scene::new(true), &keyring_probe(&description));
    assert!(!closed.contains("keyring-secret") && closed.contains("refused"), "{closed}");
}

/// A probe that attaches the System V shared memory segment `key` and prints its start.
fn shm_probe(key: i32) -> String {
    format!(
        r#"import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
id = libc.shmget({key}, 0, 0)
if id < 0:
    print("shmget refused, errno", ctypes.get_errno())
else:
    address = libc.shmat(id, None, 0o10000)
    print("read:", ctypes.string_at(address, 9).decode())
"#
    )
}

// Finding 5: a command read a secret from System V shared memory.
#[test]
fn a_command_cannot_read_system_v_shared_memory() {
    require_namespaces();
    let key = 0x0b1b_0000 + i32::try_from(std::process::id() % 0xffff).unwrap();
    let create = format!(
        r#"import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
id = libc.shmget({key}, 4096, 0o1600)
assert id >= 0, ctypes.get_errno()
ctypes.memmove(libc.shmat(id, None, 0), b"shmsecret", 9)
"#
    );
    let out = Command::new("python3").args(["-c", &create]).output().unwrap();
    assert!(out.status.success(), "cannot create a shared memory segment here: {}", stderr(&out));
    let open = probe(&Scene::new(false), &shm_probe(key));
    let closed = probe(&Scene::new(true), &shm_probe(key));
    let _ = Command::new("ipcrm").args(["-M", &key.to_string()]).output();
    assert!(open.contains("read: shmsecret"), "{open}");
    assert!(!closed.contains("shmsecret") && closed.contains("refused"), "{closed}");
}

/// A probe that changes the mode, times and an extended attribute of `path`.
fn metadata_probe(path: &Path) -> String {
    format!(
        r#"import os
path = "{path}"
for name, change in [("chmod", lambda: os.chmod(path, 0o644)),
                     ("utime", lambda: os.utime(path, (0, 0))),
                     ("setxattr", lambda: os.setxattr(path, "user.oxibot", b"1"))]:
    try:
        change()
        print(name, "changed")
    except OSError as error:
        print(name, "refused:", error)
"#,
        path = path.display()
    )
}

// Finding 5: `chmod 0644 ~/.oxibot/config.json`, `utime` and `setxattr` worked outside the
// workspace.
#[test]
fn a_command_cannot_change_the_mode_times_or_attributes_of_the_config_file() {
    require_namespaces();
    for restrict in [false, true] {
        let scene = Scene::new(restrict);
        let config = scene.config();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
        let before = std::fs::metadata(&config).unwrap();
        let output = probe(&scene, &metadata_probe(&config));
        let after = std::fs::metadata(&config).unwrap();
        let changed = [
            after.permissions().mode() & 0o777 != 0o600,
            after.modified().unwrap() != before.modified().unwrap(),
            xattr_set(&config),
        ];
        assert_eq!(changed, [!restrict; 3], "restrict={restrict}: {output}");
    }
}

/// Whether `path` carries the attribute the metadata probe sets.
fn xattr_set(path: &Path) -> bool {
    let script = format!("import os; print('user.oxibot' in os.listxattr('{}'))", path.display());
    stdout(&Command::new("python3").args(["-c", &script]).output().unwrap()).trim() == "True"
}

/// A probe that looks for the kernel's command line among all processes, and for `marker` among
/// the unix sockets.
fn proc_probe(marker: &str) -> String {
    format!(
        r#"import os
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        words = open(f"/proc/{{pid}}/cmdline", "rb").read().split(b"\0")
    except OSError:
        continue
    if b"tools" in words and b"call" in words:
        print("kernel command line seen in pid", pid)
try:
    if "{marker}" in open("/proc/net/unix").read():
        print("socket path seen")
except OSError as error:
    print("/proc/net/unix refused:", error)
print("looked")
"#
    )
}

// Finding 5: every process's command line and every socket path in /proc/net/unix were readable.
#[test]
fn a_command_sees_neither_the_kernels_command_line_nor_other_unix_sockets() {
    require_namespaces();
    let open_scene = Scene::new(false);
    let socket = open_scene.outside.path().join("oxibot-marker.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    let marker = "oxibot-marker.sock";
    let open = probe(&open_scene, &proc_probe(marker));
    assert!(open.contains("kernel command line seen") && open.contains("socket path seen"), "{open}");
    let closed = probe(&Scene::with_config(true, network_off()), &proc_probe(marker));
    assert!(closed.contains("looked"), "{closed}");
    assert!(!closed.contains("kernel command line seen") && !closed.contains("socket path seen"), "{closed}");
}

/// A probe that connects to the unix socket at `path` and says hello.
fn unix_probe(path: &Path) -> String {
    format!(
        r#"import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("{path}")
    s.sendall(b"hello")
    print("connected")
except OSError as error:
    print("connect refused:", error)
"#,
        path = path.display()
    )
}

// Finding 5: a command talked to any pathname unix socket it could name (ssh-agent, D-Bus).
#[test]
fn a_command_cannot_connect_to_a_unix_socket_outside_the_workspace() {
    require_namespaces();
    for restrict in [false, true] {
        let scene = Scene::new(restrict);
        let path = scene.outside.path().join("agent.sock");
        let listener = UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let output = probe(&scene, &unix_probe(&path));
        assert_eq!(listener.accept().is_ok(), !restrict, "restrict={restrict}: {output}");
    }
}

// Finding 6: `sleep 7100 &` with a timeout was reported killed but lived on. In a container it
// ends with the command; without one it holds the output open until the timeout, and then it
// is killed as the answer says.
#[test]
fn a_background_child_of_a_command_is_gone_when_the_call_returns() {
    require_namespaces();
    for restrict in [false, true] {
        let scene = Scene::new(restrict);
        let seconds = 7000 + std::process::id() % 2000;
        let command = format!("sleep {seconds}.{} &", u8::from(restrict) + 1);
        let args = json!({"command": command, "timeout": 3}).to_string();
        let out = scene.oxibot(&["tools", "call", "exec", "--args", &args], &[]);
        let needle = format!("{} ", command.trim_end_matches(" &"));
        let gone = wait_until(Duration::from_secs(5), || pids_with_cmdline(&needle).is_empty());
        let survivors = pids_with_cmdline(&needle);
        for pid in &survivors {
            oxibot_tests::procs::sigkill(*pid);
        }
        let answer = format!("{}{}", stdout(&out), stderr(&out));
        assert!(gone, "restrict={restrict}: the background sleep outlived the call ({survivors:?}): {answer}");
    }
}

// Finding 9: a base64-piped `rm -rf ./* ./.git` deleted memory, cron jobs and the git history.
#[test]
fn deleting_the_whole_workspace_leaves_the_assistants_own_state() {
    require_namespaces();
    let state = [".git/HEAD", "memory/MEMORY.md", "cron/jobs.json", "SOUL.md", "USER.md", "AGENTS.md"];
    let encoded = base64(b"rm -rf ./* ./.git");
    for restrict in [false, true] {
        let scene = Scene::new(restrict);
        for file in state.iter().chain(&["notes.txt"]) {
            scene.ws.write(file, "keep");
        }
        let output = scene.exec(&format!("echo {encoded} | base64 -d | sh"));
        assert!(!scene.ws.path().join("notes.txt").exists(), "restrict={restrict}: rm did not run: {output}");
        for file in state {
            assert_eq!(scene.ws.path().join(file).exists(), restrict, "restrict={restrict} {file}: {output}");
        }
    }
}

#[test]
fn status_names_every_layer_that_confines_exec_and_the_fallback_without_namespaces() {
    let scene = Scene::new(true);
    let status = stdout(&scene.oxibot(&["status"], &[]));
    let layers = status.lines().find(|line| line.starts_with("layers:")).unwrap_or_default();
    for layer in ["namespaces (user, mount, pid", "seccomp", "landlock", "rlimits", "own PID namespace"] {
        assert!(layers.contains(layer), "{layer} missing (user namespaces off here?): {status}");
    }
    let off: &[(&str, &Path)] = &[("OXIBOT_CONTAINER_DISABLE", Path::new("1"))];
    let fallback = stdout(&scene.oxibot(&["status"], off));
    assert!(fallback.contains("namespaces off") && fallback.contains("landlock only"), "{fallback}");
    // Without the container exec still runs, confined by Landlock.
    let output = scene.exec_with("echo ran", off);
    assert_eq!(output.trim(), "ran");
}

// A command run as root keeps no more than the user's file permissions: no capabilities, so a
// file whose mode denies its owner stays unreadable (as root with capabilities reads it).
#[test]
fn a_command_holds_no_capabilities_in_its_container() {
    require_namespaces();
    let is_root = rustix::process::getuid().is_root();
    for restrict in [false, true] {
        let scene = Scene::new(restrict);
        let file = scene.ws.write("locked.txt", "locked content");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).unwrap();
        let output = scene.exec("cat locked.txt; grep CapEff \"$(printf '\\057proc\\057self\\057status')\"");
        if restrict {
            assert!(!output.contains("locked content"), "{output}");
            assert!(output.contains("CapEff:\t0000000000000000"), "{output}");
        } else if is_root {
            assert!(output.contains("locked content"), "root with capabilities must read it: {output}");
        }
    }
}
