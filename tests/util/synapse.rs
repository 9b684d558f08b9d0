//! A real Matrix homeserver for the tests: Synapse from PyPI (`matrix-synapse`) on SQLite, its
//! client listener on a free loopback port, users registered through the admin shared-secret
//! API, and the few client calls a test makes as a human user (rooms, invites, messages).
//! Stopped when dropped; [`Synapse::stop`] and [`Synapse::restart`] make an outage.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::TempDir;
use crate::channels::free_port;
use crate::wait::block_on;

/// The homeserver's name: user ids end in `:oxibot.test`.
pub const SERVER_NAME: &str = "oxibot.test";
/// The shared secret of the admin registration API.
const SHARED_SECRET: &str = "oxibot-test-registration-secret";
/// How long Synapse may take to answer after it was started (a first start creates its schema).
const STARTUP: Duration = Duration::from_secs(90);

/// A running Synapse and its directory (config, SQLite database, log).
pub struct Synapse {
    dir: TempDir,
    port: u16,
    process: Option<Child>,
}

/// A registered user: its id, access token and device.
#[derive(Debug, Clone)]
pub struct MatrixUser {
    pub user_id: String,
    pub token: String,
    pub device_id: String,
}

impl Synapse {
    /// Starts a fresh Synapse, failing the test with the install line when it is missing.
    pub fn start() -> Synapse {
        crate::needs::python_module("synapse", "matrix-synapse");
        let dir = TempDir::new("synapse");
        let port = free_port();
        std::fs::write(dir.path().join("homeserver.yaml"), config(dir.path(), port)).unwrap();
        // Any 32 bytes do for a server that federates with nobody.
        std::fs::write(dir.path().join("signing.key"), "ed25519 a_test 6leRaq9+dWfd5z/8tcCJ4BM79Qx+h8yGN8fflqh+acQ\n")
            .unwrap();
        let mut synapse = Synapse { dir, port, process: None };
        synapse.launch();
        synapse
    }

    /// One Synapse for every test of the binary that does not stop it, started on first use
    /// and killed by a watchdog when the test process ends (statics are never dropped).
    pub fn shared() -> &'static Synapse {
        static SHARED: std::sync::OnceLock<Synapse> = std::sync::OnceLock::new();
        SHARED.get_or_init(|| {
            let synapse = Synapse::start();
            let pid = synapse.process.as_ref().map(Child::id).unwrap_or_default();
            let watch = format!("while kill -0 {} 2>/dev/null; do sleep 1; done; kill {pid}", std::process::id());
            // Never waited for on purpose: the watchdog outlives this process.
            #[allow(clippy::zombie_processes)]
            Command::new("sh").args(["-c", &watch]).stdin(Stdio::null()).spawn().unwrap();
            synapse
        })
    }

    /// The homeserver's base URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The client listener's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops Synapse (SIGTERM, then waits for it to exit).
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = Command::new("kill").arg(process.id().to_string()).status();
            let _ = process.wait();
        }
    }

    /// Starts the stopped Synapse again, on the same port with the same database.
    pub fn restart(&mut self) {
        self.launch();
    }

    /// Synapse's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("synapse.log")).unwrap_or_default()
    }

    fn launch(&mut self) {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.dir.path().join("synapse.log")).unwrap();
        let process = Command::new("python3")
            .args(["-m", "synapse.app.homeserver", "-c"])
            .arg(self.dir.path().join("homeserver.yaml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start python3 ({e}); install Python 3, then run {}", crate::needs::SETUP)
            });
        self.process = Some(process);
        let started = Instant::now();
        while !self.answers() {
            if let Some(status) = self.process.as_mut().and_then(|p| p.try_wait().unwrap()) {
                panic!("synapse exited with {status} while starting:\n{}", tail(&self.log()));
            }
            assert!(started.elapsed() < STARTUP, "synapse did not answer within {STARTUP:?}:\n{}", tail(&self.log()));
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn answers(&self) -> bool {
        std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            && block_on(async {
                let versions = crate::http::get(self.port, "/_matrix/client/versions", &[]);
                tokio::time::timeout(Duration::from_secs(5), versions).await
            })
            .is_ok_and(|response| response.status == 200)
    }

    /// Registers `name` with `password` through the admin shared-secret API (the HMAC done by
    /// Python's standard library) and returns it logged in.
    pub fn register(&self, name: &str, password: &str) -> MatrixUser {
        let script = r#"
import hashlib, hmac, json, sys, urllib.request
url, secret, user, password = sys.argv[1:5]
endpoint = url + "/_synapse/admin/v1/register"
nonce = json.load(urllib.request.urlopen(endpoint))["nonce"]
mac = hmac.new(secret.encode(), b"\0".join([nonce.encode(), user.encode(), password.encode(), b"notadmin"]), hashlib.sha1)
body = json.dumps({"nonce": nonce, "username": user, "password": password, "admin": False, "mac": mac.hexdigest()})
request = urllib.request.Request(endpoint, body.encode(), {"Content-Type": "application/json"})
print(urllib.request.urlopen(request).read().decode())
"#;
        let output =
            Command::new("python3").args(["-c", script, &self.url(), SHARED_SECRET, name, password]).output().unwrap();
        assert!(output.status.success(), "registering {name} failed: {}", String::from_utf8_lossy(&output.stderr));
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
        MatrixUser {
            user_id: answer["user_id"].as_str().unwrap().to_owned(),
            token: answer["access_token"].as_str().unwrap().to_owned(),
            device_id: answer["device_id"].as_str().unwrap().to_owned(),
        }
    }

    /// Calls the client API as `user`; returns the status and the JSON answer.
    pub fn call(&self, user: &MatrixUser, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let auth = format!("Bearer {}", user.token);
        let text = body.map(Value::to_string);
        block_on(async {
            let response =
                crate::http::request(self.port, method, path, &[("Authorization", auth.as_str())], text.as_deref())
                    .await;
            let status = response.status;
            let text = response.text().await;
            (status, serde_json::from_str(&text).unwrap_or(Value::Null))
        })
    }

    /// Creates a private room as `user`, inviting `invite`; returns its id.
    pub fn create_room(&self, user: &MatrixUser, invite: &[&str]) -> String {
        let body = json!({"preset": "private_chat", "invite": invite});
        let (status, answer) = self.call(user, "POST", "/_matrix/client/v3/createRoom", Some(&body));
        assert_eq!(status, 200, "createRoom: {answer}");
        answer["room_id"].as_str().unwrap().to_owned()
    }

    /// Invites `invitee` into `room` as `user`.
    pub fn invite(&self, user: &MatrixUser, room: &str, invitee: &str) {
        let path = format!("/_matrix/client/v3/rooms/{room}/invite");
        let (status, answer) = self.call(user, "POST", &path, Some(&json!({"user_id": invitee})));
        assert_eq!(status, 200, "invite: {answer}");
    }

    /// Sends a text message into `room` as `user`; returns its event id.
    pub fn say(&self, user: &MatrixUser, room: &str, text: &str) -> String {
        static TXN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let txn = TXN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = format!("/_matrix/client/v3/rooms/{room}/send/m.room.message/test-{txn}");
        let (status, answer) = self.call(user, "PUT", &path, Some(&json!({"msgtype": "m.text", "body": text})));
        assert_eq!(status, 200, "send: {answer}");
        answer["event_id"].as_str().unwrap().to_owned()
    }

    /// The `m.room.message` events of `room` from `sender`, oldest first, read as `reader`.
    pub fn messages_from(&self, reader: &MatrixUser, room: &str, sender: &str) -> Vec<Value> {
        let path = format!("/_matrix/client/v3/rooms/{room}/messages?dir=b&limit=100");
        let (status, answer) = self.call(reader, "GET", &path, None);
        assert_eq!(status, 200, "messages: {answer}");
        let mut events: Vec<Value> = answer["chunk"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|event| event["type"] == "m.room.message" && event["sender"] == sender)
            .cloned()
            .collect();
        events.reverse();
        events
    }

    /// Whether `user_id` has joined `room`, as `reader` sees it.
    pub fn has_joined(&self, reader: &MatrixUser, room: &str, user_id: &str) -> bool {
        let (status, answer) =
            self.call(reader, "GET", &format!("/_matrix/client/v3/rooms/{room}/joined_members"), None);
        status == 200 && answer["joined"].get(user_id).is_some()
    }
}

impl Drop for Synapse {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last lines of a log, for a failure message.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// A homeserver config: SQLite in `dir`, the client API on 127.0.0.1:`port`, no federation,
/// rate limits out of the way and cheap password hashing.
fn config(dir: &Path, port: u16) -> String {
    let dir = dir.display();
    format!(
        r#"server_name: "{SERVER_NAME}"
pid_file: {dir}/homeserver.pid
listeners:
  - port: {port}
    bind_addresses: ['127.0.0.1']
    type: http
    tls: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: {dir}/homeserver.db
media_store_path: {dir}/media
signing_key_path: {dir}/signing.key
registration_shared_secret: "{SHARED_SECRET}"
macaroon_secret_key: "oxibot-test-macaroon"
form_secret: "oxibot-test-form"
report_stats: false
trusted_key_servers: []
suppress_key_server_warning: true
enable_metrics: false
bcrypt_rounds: 4
presence:
  enabled: false
rc_message: {{per_second: 1000, burst_count: 1000}}
rc_login:
  address: {{per_second: 1000, burst_count: 1000}}
  account: {{per_second: 1000, burst_count: 1000}}
  failed_attempts: {{per_second: 1000, burst_count: 1000}}
rc_joins:
  local: {{per_second: 1000, burst_count: 1000}}
rc_invites:
  per_room: {{per_second: 1000, burst_count: 1000}}
  per_user: {{per_second: 1000, burst_count: 1000}}
"#
    )
}
