//! A real mail server for the tests: Debian's Dovecot (IMAP) and Postfix (SMTP) on free
//! loopback ports, both run from a directory of their own. Postfix delivers mail for
//! `@oxibot.test` into Maildirs that Dovecot serves, and authenticates SMTP clients through
//! Dovecot's auth socket, so the email channel reads and sends as it would at a real provider.
//! A test sends mail in over SMTP and reads what reached a user's Maildir. Stopped when dropped;
//! [`MailServer::stop_smtp`] and [`MailServer::start_smtp`] make an outage of the relay.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::TempDir;
use crate::channels::free_port;

/// The bot's address and IMAP/SMTP login.
pub const BOT: &str = "bot@oxibot.test";
/// The bot's password.
pub const BOT_PASSWORD: &str = "bot-password";
/// The human user's address.
pub const ADA: &str = "ada@oxibot.test";
/// What installs both servers.
const INSTALL: &str = "apt-get install dovecot-imapd postfix";
/// The uid and gid mail is stored with (`nobody`: Postfix delivers to no uid below 100).
const MAIL_OWNER: u32 = 65534;

/// A running Dovecot and Postfix and their directory.
pub struct MailServer {
    dir: TempDir,
    imap_port: u16,
    smtp_port: u16,
}

impl MailServer {
    /// Starts both servers, failing the test with the install line when one is missing.
    pub fn start() -> MailServer {
        for program in ["/usr/sbin/dovecot", "/usr/sbin/postfix"] {
            assert!(
                Path::new(program).exists(),
                "this test needs {program}: run {}, or `{INSTALL}` as root",
                crate::needs::SETUP
            );
        }
        let dir = TempDir::new("mailserver");
        let (imap_port, smtp_port) = (free_port(), free_port());
        let server = MailServer { dir, imap_port, smtp_port };
        server.write_configs();
        server.run("dovecot", &["-c", &server.dovecot_conf()]);
        server.start_smtp();
        wait_listening(imap_port, "dovecot");
        server
    }

    /// The email channel's config section for the bot, with `extra` keys on top.
    pub fn config(&self, extra: Value) -> Value {
        let mut config = json!({
            "enabled": true, "consentGranted": true,
            "imapHost": "127.0.0.1", "imapPort": self.imap_port, "imapUseSsl": false,
            "imapUsername": BOT, "imapPassword": BOT_PASSWORD,
            "smtpHost": "127.0.0.1", "smtpPort": self.smtp_port, "smtpUseTls": false, "smtpUseSsl": false,
            "smtpUsername": BOT, "smtpPassword": BOT_PASSWORD,
            // Postfix here adds no Authentication-Results (no DKIM or SPF milter).
            "verifyDkim": false, "verifySpf": false, "pollIntervalSeconds": 1,
        });
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            config.extend(extra.clone());
        }
        config
    }

    /// Stops Postfix: SMTP connections are refused until [`Self::start_smtp`].
    pub fn stop_smtp(&self) {
        self.run("postfix", &["-c", &self.postfix_dir(), "stop"]);
        let refused = || TcpStream::connect(("127.0.0.1", self.smtp_port)).is_err();
        let started = Instant::now();
        while !refused() {
            assert!(started.elapsed() < Duration::from_secs(20), "postfix still answers after stop");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts Postfix (again).
    pub fn start_smtp(&self) {
        self.run("postfix", &["-c", &self.postfix_dir(), "start"]);
        wait_listening(self.smtp_port, "postfix");
    }

    /// Sends `raw` (headers and body, lines ending in `\n`) from `from` to `to` through Postfix.
    pub fn send(&self, from: &str, to: &str, raw: &str) {
        let stream = TcpStream::connect(("127.0.0.1", self.smtp_port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        let mut expect = |code: &str| {
            let mut line = String::new();
            loop {
                line.clear();
                reader.read_line(&mut line).unwrap();
                assert!(line.starts_with(code), "postfix answered {line:?}, expected {code}");
                if line.as_bytes().get(3) != Some(&b'-') {
                    return;
                }
            }
        };
        expect("220");
        let data = raw.replace("\r\n", "\n").replace('\n', "\r\n").replace("\r\n.", "\r\n..");
        for (command, code) in [
            ("EHLO test.local".to_owned(), "250"),
            (format!("MAIL FROM:<{from}>"), "250"),
            (format!("RCPT TO:<{to}>"), "250"),
            ("DATA".to_owned(), "354"),
            (format!("{data}\r\n."), "250"),
            ("QUIT".to_owned(), "221"),
        ] {
            writer.write_all(format!("{command}\r\n").as_bytes()).unwrap();
            expect(code);
        }
    }

    /// Every mail in `user`'s Maildir (new and seen), as text, oldest first.
    pub fn mailbox(&self, user: &str) -> Vec<String> {
        let local = user.split('@').next().unwrap();
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = ["new", "cur"]
            .iter()
            .flat_map(|sub| std::fs::read_dir(self.dir.path().join("mail").join(local).join(sub)).into_iter().flatten())
            .flatten()
            .map(|entry| (entry.metadata().and_then(|m| m.modified()).unwrap(), entry.path()))
            .collect();
        files.sort();
        files.iter().map(|(_, path)| std::fs::read_to_string(path).unwrap()).collect()
    }

    /// Postfix's log so far.
    pub fn smtp_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postfix.log")).unwrap_or_default()
    }

    /// Runs a server's control command, failing the test with what it wrote. Its output goes
    /// to a file: the daemon it starts keeps a pipe open for as long as it runs.
    fn run(&self, program: &str, args: &[&str]) {
        let path = self.dir.path().join("control.log");
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
        let status = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .status()
            .unwrap_or_else(|e| panic!("cannot run {program} ({e}): run `{INSTALL}` as root"));
        let said = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(status.success(), "{program} {args:?} failed ({status}): {said}{}", self.smtp_log());
    }

    fn dovecot_conf(&self) -> String {
        self.dir.path().join("dovecot.conf").display().to_string()
    }

    fn postfix_dir(&self) -> String {
        self.dir.path().join("postfix").display().to_string()
    }

    fn write_configs(&self) {
        let dir = self.dir.path();
        for sub in ["postfix", "queue", "data", "mail", "dovecot-run"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        std::os::unix::fs::chown(dir.join("mail"), Some(MAIL_OWNER), Some(MAIL_OWNER)).unwrap();
        let postfix_user = Command::new("id").args(["-u", "postfix"]).output().unwrap();
        let postfix_uid = String::from_utf8_lossy(&postfix_user.stdout).trim().parse::<u32>().ok();
        std::os::unix::fs::chown(dir.join("data"), postfix_uid, None).unwrap();
        std::fs::write(dir.join("users"), format!("bot:{{PLAIN}}{BOT_PASSWORD}\n")).unwrap();
        std::fs::write(dir.join("dovecot.conf"), dovecot_conf(dir, self.imap_port)).unwrap();
        std::fs::write(dir.join("postfix/main.cf"), postfix_main(dir)).unwrap();
        std::fs::write(dir.join("postfix/master.cf"), postfix_master(self.smtp_port)).unwrap();
    }
}

impl Drop for MailServer {
    fn drop(&mut self) {
        for (program, args) in
            [("postfix", ["-c", &self.postfix_dir(), "stop"]), ("doveadm", ["-c", &self.dovecot_conf(), "stop"])]
        {
            let _ = Command::new(program)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Waits until something listens on `port`.
fn wait_listening(port: u16, what: &str) {
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "{what} does not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Dovecot: IMAP on 127.0.0.1:`port` without TLS, users from a password file, Maildirs that
/// Postfix fills, and an auth socket for Postfix. Runs as root with Debian's `dovenull` and
/// `dovecot` users for its login and internal processes.
fn dovecot_conf(dir: &Path, port: u16) -> String {
    let dir = dir.display();
    format!(
        r#"base_dir = {dir}/dovecot-run
state_dir = {dir}/dovecot-state
log_path = {dir}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:{dir}/mail/%n
default_login_user = dovenull
default_internal_user = dovecot
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%n {dir}/users
}}
userdb {{
  driver = static
  args = uid={MAIL_OWNER} gid={MAIL_OWNER} home={dir}/mail/%n
}}
service imap-login {{
  inet_listener imap {{
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
  chroot =
}}
service anvil {{
  chroot =
}}
service auth {{
  unix_listener {dir}/auth-postfix {{
    mode = 0666
  }}
}}
"#
    )
}

/// Postfix: final delivery of `@oxibot.test` into Maildirs, SASL through Dovecot, nothing
/// relayed elsewhere, its log in its directory.
fn postfix_main(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        r#"compatibility_level = 3.6
queue_directory = {dir}/queue
data_directory = {dir}/data
maillog_file = {dir}/postfix.log
maillog_file_prefixes = {dir}
myhostname = mail.oxibot.test
mydomain = oxibot.test
myorigin = oxibot.test
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
virtual_mailbox_domains = oxibot.test
virtual_mailbox_base = {dir}/mail
virtual_mailbox_maps = inline:{{ {BOT}=bot/, {ADA}=ada/ }}
virtual_uid_maps = static:{MAIL_OWNER}
virtual_gid_maps = static:{MAIL_OWNER}
smtpd_sasl_auth_enable = yes
smtpd_sasl_type = dovecot
smtpd_sasl_path = {dir}/auth-postfix
smtpd_relay_restrictions = permit_mynetworks, permit_sasl_authenticated, reject
alias_maps =
alias_database =
smtputf8_enable = no
biff = no
"#
    )
}

/// Postfix's services, none chrooted, `smtpd` on 127.0.0.1:`port`.
fn postfix_master(port: u16) -> String {
    let services = [
        ("pickup", "unix", "n", "60", "1", "pickup"),
        ("cleanup", "unix", "n", "-", "0", "cleanup"),
        ("qmgr", "unix", "n", "300", "1", "qmgr"),
        ("rewrite", "unix", "-", "-", "-", "trivial-rewrite"),
        ("bounce", "unix", "-", "-", "0", "bounce"),
        ("defer", "unix", "-", "-", "0", "bounce"),
        ("trace", "unix", "-", "-", "0", "bounce"),
        ("verify", "unix", "-", "-", "1", "verify"),
        ("flush", "unix", "n", "1000?", "0", "flush"),
        ("proxymap", "unix", "-", "-", "-", "proxymap"),
        ("smtp", "unix", "-", "-", "-", "smtp"),
        ("relay", "unix", "-", "-", "-", "smtp"),
        ("showq", "unix", "n", "-", "-", "showq"),
        ("error", "unix", "-", "-", "-", "error"),
        ("retry", "unix", "-", "-", "-", "error"),
        ("discard", "unix", "-", "-", "-", "discard"),
        ("virtual", "unix", "-", "-", "-", "virtual"),
        ("anvil", "unix", "-", "-", "1", "anvil"),
        ("scache", "unix", "-", "-", "1", "scache"),
        ("postlog", "unix-dgram", "n", "-", "1", "postlogd"),
    ];
    let mut master = format!("127.0.0.1:{port} inet n - n - - smtpd\n");
    for (name, kind, private, wakeup, limit, command) in services {
        // `virtual` writes into the Maildirs as their owner, so it runs privileged.
        let unprivileged = if name == "virtual" { "n" } else { "-" };
        master.push_str(&format!("{name} {kind} {private} {unprivileged} n {wakeup} {limit} {command}\n"));
    }
    master
}
