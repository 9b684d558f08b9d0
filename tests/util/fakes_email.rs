//! A fake mail provider for the email channel's tests, on 127.0.0.1, speaking the real
//! protocols in plain text:
//!
//! - IMAP: a greeting, `CAPABILITY` (with or without `IDLE`), `LOGIN`, `SELECT`, `UID SEARCH
//!   UNSEEN`, `UID FETCH … (UID BODY.PEEK[])` (literals, flags untouched), `UID STORE …
//!   +FLAGS (\Seen)`, `IDLE` (an `EXISTS` sent when mail arrives, ended by `DONE`), `NOOP`
//!   and `LOGOUT`; every command is recorded, and a test adds mail or cuts connections;
//! - SMTP: `EHLO`, `AUTH PLAIN`, `MAIL FROM`, `RCPT TO`, `DATA`, `RSET`, `NOOP`, `QUIT`; every
//!   mail sent is recorded.
//!
//! Both servers run on one thread with its own tokio runtime and stop when the fake is dropped.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{self, UnboundedSender};

use crate::background::BackgroundServer;
use crate::channels::WAIT;

/// The bot's address, IMAP and SMTP user.
pub const BOT_ADDRESS: &str = "bot@fake.test";
/// The IMAP password.
pub const IMAP_PASSWORD: &str = "imap-secret";
/// `AUTH PLAIN` of the bot with the SMTP password `smtp-secret`.
const SMTP_AUTH_PLAIN: &str = "AGJvdEBmYWtlLnRlc3QAc210cC1zZWNyZXQ=";
/// The authserv-id of the fake's `Authentication-Results` headers.
pub const AUTHSERV: &str = "mx.fake.test";

/// One mail in the mailbox.
#[derive(Debug, Clone)]
struct Stored {
    uid: u32,
    raw: Vec<u8>,
    seen: bool,
}

/// One mail sent over SMTP.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    /// `MAIL FROM`.
    pub from: String,
    /// `RCPT TO`s.
    pub to: Vec<String>,
    /// The mail as sent, line ends `\r\n`.
    pub raw: String,
}

impl Sent {
    /// The value of header `name` (unfolded), if present.
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.raw.split("\r\n\r\n").next().unwrap_or_default();
        let mut value: Option<String> = None;
        for line in head.split("\r\n") {
            match (&mut value, line.starts_with([' ', '\t'])) {
                (Some(value), true) => value.push_str(line),
                (Some(_), false) => break,
                (None, _) => {
                    if let Some((header, rest)) = line.split_once(':')
                        && header.eq_ignore_ascii_case(name)
                    {
                        value = Some(rest.trim().to_owned());
                    }
                }
            }
        }
        value
    }

    /// The body, line ends `\n`, without the trailing line end.
    pub fn body(&self) -> String {
        self.raw
            .split_once("\r\n\r\n")
            .map(|(_, body)| body)
            .unwrap_or_default()
            .replace("\r\n", "\n")
            .trim_end()
            .to_owned()
    }
}

/// What the test asks of one IMAP connection.
enum Command {
    /// Mail arrived: the mailbox now holds this many.
    Exists(usize),
    Cut,
}

#[derive(Default)]
struct State {
    mails: Vec<Stored>,
    next_uid: u32,
    idle: bool,
    commands: Vec<String>,
    logins: usize,
    connections: Vec<UnboundedSender<Command>>,
    sent: Vec<Sent>,
}

/// The running fake. Dropping it stops both servers.
pub struct FakeMail {
    imap: SocketAddr,
    smtp: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The servers' thread; stops when dropped.
    _server: BackgroundServer,
}

impl FakeMail {
    /// Starts an IMAP server with IDLE and an SMTP server.
    pub fn start() -> FakeMail {
        FakeMail::with_idle(true)
    }

    /// Starts the servers, the IMAP one with IDLE or without.
    pub fn with_idle(idle: bool) -> FakeMail {
        let imap = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let smtp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        imap.set_nonblocking(true).unwrap();
        smtp.set_nonblocking(true).unwrap();
        let (imap_addr, smtp_addr) = (imap.local_addr().unwrap(), smtp.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State { next_uid: 1, idle, ..State::default() }));
        let server_state = state.clone();
        let server = BackgroundServer::start("fake-mail", move || async move {
            let imap = TcpListener::from_std(imap).unwrap();
            let smtp = TcpListener::from_std(smtp).unwrap();
            let imap_state = server_state.clone();
            let serve_imap = async move {
                while let Ok((socket, _)) = imap.accept().await {
                    tokio::spawn(imap_connection(socket, imap_state.clone()));
                }
            };
            let serve_smtp = async move {
                while let Ok((socket, _)) = smtp.accept().await {
                    tokio::spawn(smtp_connection(socket, server_state.clone()));
                }
            };
            tokio::join!(serve_imap, serve_smtp);
        });
        FakeMail { imap: imap_addr, smtp: smtp_addr, state, _server: server }
    }

    /// A `channels.email` section for this fake (plain connections, checks trusting the
    /// fake's authserv-id, one-second polling), with `extra` keys merged in.
    pub fn config(&self, extra: Value) -> Value {
        let mut config = json!({
            "consentGranted": true,
            "imapHost": "127.0.0.1", "imapPort": self.imap.port(), "imapUseSsl": false,
            "imapUsername": BOT_ADDRESS, "imapPassword": IMAP_PASSWORD,
            "smtpHost": "127.0.0.1", "smtpPort": self.smtp.port(), "smtpUseTls": false, "smtpUseSsl": false,
            "smtpUsername": BOT_ADDRESS, "smtpPassword": "smtp-secret",
            "trustedAuthservIds": [AUTHSERV], "pollIntervalSeconds": 1,
        });
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            config.extend(extra.clone());
        }
        config
    }

    /// Puts `raw` into the mailbox, unseen, telling idling clients; returns its UID.
    pub fn deliver(&self, raw: &str) -> u32 {
        let mut state = self.state.lock().unwrap();
        let uid = state.next_uid;
        state.next_uid += 1;
        state.mails.push(Stored { uid, raw: raw.replace('\n', "\r\n").into_bytes(), seen: false });
        let count = state.mails.len();
        state.connections.retain(|connection| connection.send(Command::Exists(count)).is_ok());
        uid
    }

    /// Whether mail `uid` is flagged `\Seen`.
    pub fn is_seen(&self, uid: u32) -> bool {
        self.state.lock().unwrap().mails.iter().any(|mail| mail.uid == uid && mail.seen)
    }

    /// Waits until mail `uid` is flagged `\Seen`.
    pub async fn wait_seen(&self, uid: u32) {
        self.wait_for(&format!("mail {uid} seen"), |state| {
            state.mails.iter().any(|m| m.uid == uid && m.seen).then_some(())
        })
        .await;
    }

    /// Waits until `count` logins succeeded.
    pub async fn wait_logins(&self, count: usize) {
        self.wait_for(&format!("{count} logins"), |state| (state.logins >= count).then_some(())).await;
    }

    /// Waits until the client sent `count` commands starting with `prefix` (after the tag).
    pub async fn wait_commands(&self, prefix: &str, count: usize) -> Vec<String> {
        self.wait_for(&format!("{count} {prefix} commands"), |state| {
            let found: Vec<String> = state.commands.iter().filter(|c| c.starts_with(prefix)).cloned().collect();
            (found.len() >= count).then_some(found)
        })
        .await
    }

    /// Waits until the client sent a command starting with `then` after one starting with
    /// `first`.
    pub async fn wait_command_after(&self, first: &str, then: &str) {
        self.wait_for(&format!("{then} after {first}"), |state| {
            let start = state.commands.iter().position(|c| c.starts_with(first))?;
            state.commands[start..].iter().any(|c| c.starts_with(then)).then_some(())
        })
        .await;
    }

    /// Every IMAP command the client sent (without tags), in order.
    pub fn commands(&self) -> Vec<String> {
        self.state.lock().unwrap().commands.clone()
    }

    /// Drops every IMAP connection without a goodbye.
    pub fn cut_connections(&self) {
        let mut state = self.state.lock().unwrap();
        for connection in state.connections.drain(..) {
            let _ = connection.send(Command::Cut);
        }
    }

    /// The mails sent so far.
    pub fn sent(&self) -> Vec<Sent> {
        self.state.lock().unwrap().sent.clone()
    }

    /// Waits until `count` mails were sent; returns them.
    pub async fn wait_sent(&self, count: usize) -> Vec<Sent> {
        self.wait_for(&format!("{count} mails sent"), |state| (state.sent.len() >= count).then(|| state.sent.clone()))
            .await
    }

    async fn wait_for<T>(&self, what: &str, found: impl Fn(&State) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(value) = found(&self.state.lock().unwrap()) {
                return value;
            }
            assert!(tokio::time::Instant::now() < deadline, "fake mail: no {what} within {WAIT:?}");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

/// A mail from `from` to the bot, with an `Authentication-Results` header of the fake's
/// server saying `auth` (e.g. `dkim=pass header.d=… ; spf=pass smtp.mailfrom=…`).
pub fn mail(from: &str, message_id: &str, subject: &str, body: &str, auth: &str, extra_headers: &str) -> String {
    format!(
        "Authentication-Results: {AUTHSERV}; {auth}\nFrom: {from}\nTo: {BOT_ADDRESS}\nSubject: {subject}\n\
         Message-ID: {message_id}\nDate: Tue, 24 Nov 2026 08:00:00 +0000\n{extra_headers}\
         MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n{body}\n"
    )
}

/// A mail from `address` at `domain` that passes both checks.
pub fn verified_mail(address: &str, message_id: &str, subject: &str, body: &str) -> String {
    let domain = address.rsplit('@').next().unwrap();
    let auth = format!("dkim=pass header.d={domain} header.s=s1; spf=pass smtp.mailfrom={address}");
    mail(&format!("Ada Lovelace <{address}>"), message_id, subject, body, &auth, "")
}

async fn imap_connection(socket: TcpStream, state: Arc<Mutex<State>>) {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read).lines();
    let (commands, mut queue) = mpsc::unbounded_channel();
    state.lock().unwrap().connections.push(commands);
    if write.write_all(b"* OK fake IMAP4rev1 ready\r\n").await.is_err() {
        return;
    }
    let mut idling: Option<String> = None;
    // The mailbox size this client was last told; mail that arrives while it is not idling is
    // reported when it next starts IDLE, as servers report changes at the next chance.
    let mut reported = 0;
    loop {
        tokio::select! {
            command = queue.recv() => match command {
                Some(Command::Exists(count)) if idling.is_some() => {
                    reported = count;
                    if write.write_all(format!("* {count} EXISTS\r\n").as_bytes()).await.is_err() {
                        return;
                    }
                }
                Some(Command::Exists(_)) => {}
                Some(Command::Cut) | None => return,
            },
            line = lines.next_line() => {
                let Ok(Some(line)) = line else { return };
                let answer = match idling.take() {
                    Some(tag) if line.trim().eq_ignore_ascii_case("DONE") => format!("{tag} OK IDLE terminated\r\n").into_bytes(),
                    Some(tag) => {
                        idling = Some(tag);
                        continue;
                    }
                    None => {
                        let mut answer = imap_answer(&line, &state, &mut idling);
                        let count = state.lock().unwrap().mails.len();
                        if line.to_uppercase().contains(" SELECT ") {
                            reported = count;
                        } else if idling.is_some() && count > reported {
                            reported = count;
                            answer.extend(format!("* {count} EXISTS\r\n").into_bytes());
                        }
                        answer
                    }
                };
                if write.write_all(&answer).await.is_err() {
                    return;
                }
                if line.to_uppercase().contains(" LOGOUT") {
                    return;
                }
            }
        }
    }
}

/// Answers one IMAP command line.
fn imap_answer(line: &str, state: &Mutex<State>, idling: &mut Option<String>) -> Vec<u8> {
    let mut state = state.lock().unwrap();
    let (tag, command) = line.split_once(' ').unwrap_or((line, ""));
    state.commands.push(command.to_owned());
    let upper = command.to_uppercase();
    let ok = |text: &str| format!("{tag} OK {text}\r\n").into_bytes();
    if upper == "CAPABILITY" {
        let idle = if state.idle { " IDLE" } else { "" };
        return [format!("* CAPABILITY IMAP4rev1{idle} AUTH=PLAIN\r\n").into_bytes(), ok("CAPABILITY completed")]
            .concat();
    }
    if upper.starts_with("LOGIN ") {
        if command == format!("LOGIN \"{BOT_ADDRESS}\" \"{IMAP_PASSWORD}\"") {
            state.logins += 1;
            return ok("LOGIN completed");
        }
        return format!("{tag} NO [AUTHENTICATIONFAILED] Invalid credentials\r\n").into_bytes();
    }
    if upper.starts_with("SELECT ") {
        if upper != "SELECT \"INBOX\"" {
            return format!("{tag} NO [NONEXISTENT] Unknown Mailbox\r\n").into_bytes();
        }
        let head = format!(
            "* FLAGS (\\Seen \\Answered)\r\n* {} EXISTS\r\n* 0 RECENT\r\n* OK [UIDVALIDITY 7] UIDs valid\r\n* OK [UIDNEXT {}] next\r\n",
            state.mails.len(),
            state.next_uid
        );
        return [head.into_bytes(), ok("[READ-WRITE] SELECT completed")].concat();
    }
    if upper == "UID SEARCH UNSEEN" {
        let uids: Vec<String> = state.mails.iter().filter(|mail| !mail.seen).map(|mail| mail.uid.to_string()).collect();
        let found = if uids.is_empty() { String::new() } else { format!(" {}", uids.join(" ")) };
        return [format!("* SEARCH{found}\r\n").into_bytes(), ok("SEARCH completed")].concat();
    }
    if let Some(rest) = upper.strip_prefix("UID FETCH ") {
        let (set, items) = rest.split_once(' ').unwrap_or((rest, ""));
        assert_eq!(items, "(UID BODY.PEEK[])", "the fake serves only what the channel fetches");
        let mut answer = Vec::new();
        for uid in uid_set(set) {
            if let Some((seq, mail)) = state.mails.iter().enumerate().find(|(_, mail)| mail.uid == uid) {
                answer.extend(format!("* {} FETCH (UID {uid} BODY[] {{{}}}\r\n", seq + 1, mail.raw.len()).into_bytes());
                answer.extend(&mail.raw);
                answer.extend(b")\r\n");
            }
        }
        answer.extend(ok("FETCH completed"));
        return answer;
    }
    if let Some(rest) = upper.strip_prefix("UID STORE ") {
        let (set, change) = rest.split_once(' ').unwrap_or((rest, ""));
        assert_eq!(change, "+FLAGS (\\SEEN)", "the fake serves only what the channel stores");
        let mut answer = Vec::new();
        for uid in uid_set(set) {
            if let Some((seq, mail)) = state.mails.iter_mut().enumerate().find(|(_, mail)| mail.uid == uid) {
                mail.seen = true;
                answer.extend(format!("* {} FETCH (UID {uid} FLAGS (\\Seen))\r\n", seq + 1).into_bytes());
            }
        }
        answer.extend(ok("STORE completed"));
        return answer;
    }
    match upper.as_str() {
        "IDLE" if state.idle => {
            *idling = Some(tag.to_owned());
            b"+ idling\r\n".to_vec()
        }
        "NOOP" => ok("NOOP completed"),
        "LOGOUT" => [b"* BYE fake logging out\r\n".to_vec(), ok("LOGOUT completed")].concat(),
        _ => format!("{tag} BAD unknown command\r\n").into_bytes(),
    }
}

/// The UIDs of a set like `3` or `1,4`.
fn uid_set(set: &str) -> Vec<u32> {
    set.split(',').filter_map(|uid| uid.trim().parse().ok()).collect()
}

async fn smtp_connection(socket: TcpStream, state: Arc<Mutex<State>>) {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read).lines();
    let _ = write.write_all(b"220 fake.test ESMTP ready\r\n").await;
    let (mut from, mut to, mut authenticated) = (String::new(), Vec::new(), false);
    while let Ok(Some(line)) = lines.next_line().await {
        let upper = line.to_uppercase();
        let answer = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
            "250-fake.test\r\n250-AUTH PLAIN\r\n250 8BITMIME\r\n".to_owned()
        } else if let Some(credentials) = line.strip_prefix("AUTH PLAIN ") {
            authenticated = credentials.trim() == SMTP_AUTH_PLAIN;
            if authenticated { "235 2.7.0 accepted\r\n" } else { "535 5.7.8 bad credentials\r\n" }.to_owned()
        } else if !authenticated && (upper.starts_with("MAIL") || upper.starts_with("RCPT") || upper == "DATA") {
            "530 5.7.0 authentication required\r\n".to_owned()
        } else if upper.starts_with("MAIL FROM:") {
            from = address_in(&line);
            "250 OK\r\n".to_owned()
        } else if upper.starts_with("RCPT TO:") {
            to.push(address_in(&line));
            "250 OK\r\n".to_owned()
        } else if upper == "DATA" {
            if write.write_all(b"354 go ahead\r\n").await.is_err() {
                return;
            }
            let mut raw = String::new();
            while let Ok(Some(line)) = lines.next_line().await {
                if line == "." {
                    break;
                }
                raw.push_str(line.strip_prefix('.').filter(|_| line.starts_with("..")).unwrap_or(&line));
                raw.push_str("\r\n");
            }
            state.lock().unwrap().sent.push(Sent { from: std::mem::take(&mut from), to: std::mem::take(&mut to), raw });
            "250 OK queued\r\n".to_owned()
        } else if upper == "QUIT" {
            let _ = write.write_all(b"221 bye\r\n").await;
            return;
        } else if upper == "RSET" || upper == "NOOP" {
            "250 OK\r\n".to_owned()
        } else {
            "502 5.5.1 unknown command\r\n".to_owned()
        };
        if write.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The address between `<` and `>` of a `MAIL FROM` or `RCPT TO` line.
fn address_in(line: &str) -> String {
    line.split_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map(|(address, _)| address.to_owned())
        .unwrap_or_default()
}
