//! The mailbox side: log in over IMAP, open the mailbox, hand unseen mail on (each
//! `Message-ID` once), flag it `\Seen` once the kernel accepted it, and wait for more with
//! IDLE where the server has it (else poll every `pollIntervalSeconds`); connect again with
//! backoff when the connection drops. Mail is fetched with `BODY.PEEK[]`, so reading it
//! flags nothing: a mail the kernel never accepted stays unseen and is found again.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use async_imap::Session;
use async_imap::extensions::idle::IdleResponse;
use async_imap::types::UnsolicitedResponse;
use futures_util::StreamExt;
use oxibot_plugin::chat::{Backoff, RecentMessages, Seen};
use oxibot_plugin::{info, warn};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;

use crate::config::Config;
use crate::connect::{self, Stream};
use crate::error::EmailError;
use crate::mail::{self, UserMail, Verdict};

/// How long one IDLE lasts before it is renewed (servers end it after 30 minutes).
const IDLE_RENEW: Duration = Duration::from_secs(20 * 60);
/// How long the server may take over one round of work (flagging, searching, fetching) or
/// the end of an IDLE, before the connection counts as dead.
const ROUND_TIMEOUT: Duration = Duration::from_secs(120);
/// A connection that lasted this long worked: the next one starts over with short waits.
const STEADY: Duration = Duration::from_secs(10);
/// The waits between attempts to reach the server: 1 s, 2 s, 4 s, … up to 60 s.
pub const BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

type ImapSession = Session<Box<dyn Stream>>;

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
enum ImapError {
    #[error("{0}")]
    Connect(String),
    #[error("the imap server closed the connection before its greeting")]
    NoGreeting,
    #[error("login refused: {0}")]
    Login(String),
    #[error("select refused: {0}")]
    Select(String),
    #[error("imap: {0}")]
    Protocol(#[from] async_imap::error::Error),
    #[error("the imap server did not answer within {ROUND_TIMEOUT:?}")]
    Silent,
}

/// Everything the mailbox side needs.
pub struct Mailbox {
    /// The channel's settings.
    pub config: Arc<Config>,
    /// Mail seen lately by `Message-ID`, with the UIDs that brought it.
    pub recent: RecentMessages,
    /// Mail for the kernel, in order.
    pub submissions: UnboundedSender<UserMail>,
    /// UIDs of mail the kernel accepted, to flag `\Seen`.
    pub accepted: UnboundedReceiver<u32>,
    /// UIDs handled in this process (submitted or skipped), not fetched again.
    pub known: HashSet<u32>,
    /// UIDs to flag `\Seen`, kept until the server confirmed.
    pub to_mark: Vec<u32>,
}

impl Mailbox {
    /// Keeps reading the mailbox for good; returns only when the server refuses the login or
    /// the mailbox.
    pub async fn run(mut self) -> Result<(), EmailError> {
        let mut backoff = BACKOFF;
        loop {
            let started = Instant::now();
            let outcome = self.connection().await;
            if started.elapsed() >= STEADY {
                backoff.reset();
            }
            match outcome {
                Err(ImapError::Login(reason)) => return Err(EmailError::Login(reason)),
                Err(ImapError::Select(reason)) => {
                    return Err(EmailError::Mailbox { mailbox: self.config.mailbox.clone(), reason });
                }
                Err(error) => warn!("the imap connection ended: {error}"),
                Ok(()) => return Ok(()),
            }
            let wait = backoff.next_wait();
            info!("connecting to the imap server again in {wait:?}");
            tokio::time::sleep(wait).await;
        }
    }

    /// Runs one connection until it fails (or the kernel is gone: `Ok`).
    async fn connection(&mut self) -> Result<(), ImapError> {
        let stream = connect::open(&self.config.imap).await.map_err(ImapError::Connect)?;
        let mut client = async_imap::Client::new(stream);
        client.read_response().await.ok_or(ImapError::NoGreeting)?.map_err(async_imap::error::Error::from)?;
        let imap = &self.config.imap;
        let mut session = client.login(&imap.username, &imap.password).await.map_err(|(error, _)| match error {
            async_imap::error::Error::No(reason) | async_imap::error::Error::Bad(reason) => ImapError::Login(reason),
            other => ImapError::Protocol(other),
        })?;
        let idle = session.capabilities().await?.has_str("IDLE");
        session.select(&self.config.mailbox).await.map_err(|error| match error {
            async_imap::error::Error::No(reason) | async_imap::error::Error::Bad(reason) => ImapError::Select(reason),
            other => ImapError::Protocol(other),
        })?;
        info!("reading {} on {} ({})", self.config.mailbox, imap.host, if idle { "idle" } else { "polling" });
        loop {
            while let Ok(uid) = self.accepted.try_recv() {
                self.to_mark.push(uid);
            }
            let round = async {
                self.mark_seen(&mut session).await?;
                self.check(&mut session).await
            };
            if !tokio::time::timeout(ROUND_TIMEOUT, round).await.map_err(|_| ImapError::Silent)?? {
                return Ok(());
            }
            session = if idle { self.idle(session).await? } else { self.pause(session).await };
        }
    }

    /// Flags the accepted mail `\Seen` (with `markSeen`).
    async fn mark_seen(&mut self, session: &mut ImapSession) -> Result<(), ImapError> {
        if self.to_mark.is_empty() || !self.config.mark_seen {
            self.to_mark.clear();
            return Ok(());
        }
        let set = self.to_mark.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let mut updates = session.uid_store(&set, "+FLAGS (\\Seen)").await?;
        while let Some(update) = updates.next().await {
            update?;
        }
        drop(updates);
        self.to_mark.clear();
        Ok(())
    }

    /// Hands unseen mail not handled yet to the submitter; false once the submitter is gone.
    async fn check(&mut self, session: &mut ImapSession) -> Result<bool, ImapError> {
        let mut uids: Vec<u32> =
            session.uid_search("UNSEEN").await?.into_iter().filter(|uid| !self.known.contains(uid)).collect();
        uids.sort_unstable();
        for uid in uids {
            let Some(raw) = fetch(session, uid).await? else { continue };
            self.known.insert(uid);
            let mail = match mail::judge(&raw, &format!("uid:{uid}"), &self.config) {
                Verdict::Submit(mail) => mail,
                Verdict::Skip(reason) => {
                    info!("mail {uid} left alone: {reason}");
                    continue;
                }
            };
            match self.recent.arrived(&mail.id, &uid.to_string()) {
                Seen::New => {
                    if self.submissions.send(mail).is_err() {
                        return Ok(false);
                    }
                }
                Seen::InFlight => info!("mail {} found again (uid {uid}) while being submitted", mail.id),
                Seen::Accepted => self.to_mark.push(uid),
            }
        }
        Ok(true)
    }

    /// Waits in IDLE until the server reports something, the kernel accepts mail, or it is
    /// time to renew the IDLE.
    async fn idle(&mut self, session: ImapSession) -> Result<ImapSession, ImapError> {
        if new_mail_reported(&session) {
            return Ok(session);
        }
        let mut handle = session.idle();
        handle.init().await?;
        let (waiting, interrupt) = handle.wait_with_timeout(IDLE_RENEW);
        tokio::select! {
            outcome = waiting => match outcome? {
                IdleResponse::NewData(_) | IdleResponse::Timeout | IdleResponse::ManualInterrupt => {}
            },
            Some(uid) = self.accepted.recv() => self.to_mark.push(uid),
        }
        drop(interrupt);
        tokio::time::timeout(ROUND_TIMEOUT, handle.done())
            .await
            .map_err(|_| ImapError::Silent)?
            .map_err(ImapError::from)
    }

    /// Waits `pollIntervalSeconds`, or until the kernel accepts mail.
    async fn pause(&mut self, session: ImapSession) -> ImapSession {
        let interval = Duration::from_secs(self.config.poll_interval_secs);
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            Some(uid) = self.accepted.recv() => self.to_mark.push(uid),
        }
        session
    }
}

/// Whether the server reported new mail (`EXISTS`, `RECENT`) while it answered the last
/// commands: such a report is set aside, not seen by IDLE, so the loop checks again at once
/// instead of idling past the mail until the next renewal. Drains what was set aside.
fn new_mail_reported(session: &ImapSession) -> bool {
    let mut reported = false;
    while let Ok(response) = session.unsolicited_responses.try_recv() {
        reported |= matches!(response, UnsolicitedResponse::Exists(_) | UnsolicitedResponse::Recent(_));
    }
    reported
}

/// The raw mail of `uid`, without flagging it `\Seen`.
async fn fetch(session: &mut ImapSession, uid: u32) -> Result<Option<Vec<u8>>, ImapError> {
    let mut fetches = session.uid_fetch(uid.to_string(), "(UID BODY.PEEK[])").await?;
    let mut body = None;
    while let Some(fetch) = fetches.next().await {
        if let Some(bytes) = fetch?.body() {
            body = Some(bytes.to_vec());
        }
    }
    Ok(body)
}
