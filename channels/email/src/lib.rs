//! `oxibot-channel-email`: the email channel plugin. It reads a mailbox over IMAP (IDLE where
//! the server has it, else polling) and answers over SMTP, each reply a mail in the thread of
//! the one it answers. It starts only with the mailbox owner's consent (`consentGranted`).
//!
//! Config (`channels.email`, nanobot's camelCase keys or snake_case):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `consentGranted` | `false` | must be `true`: the owner allowed the assistant to read and answer the mailbox |
//! | `imapHost`, `imapUsername`, `imapPassword` | required | the mailbox read |
//! | `imapPort`, `imapUseSsl` | `993`, `true` | IMAP over TLS (`false`: plain, for a local server) |
//! | `imapMailbox` | `"INBOX"` | the mailbox read |
//! | `smtpHost`, `smtpUsername`, `smtpPassword` | required | the server replies go through |
//! | `smtpPort`, `smtpUseTls`, `smtpUseSsl` | `587`, `true`, `false` | STARTTLS; `smtpUseSsl`: TLS from the start (465); both off: plain |
//! | `fromAddress` | `smtpUsername` | the replies' `From:` |
//! | `pollIntervalSeconds` | `30` | between checks when the server has no IDLE |
//! | `markSeen` | `true` | flag a mail `\Seen` once the kernel has it |
//! | `autoReplyEnabled` | `true` | `false`: replies to mail are not sent |
//! | `maxBodyChars` | `12000` | the longest text handed to the kernel |
//! | `subjectPrefix` | `"Re: "` | put before the subject answered |
//! | `verifyDkim`, `verifySpf` | `true`, `true` | only mail with an aligned `dkim=pass` / `spf=pass` in an `Authentication-Results` header of a trusted server is read |
//! | `trustedAuthservIds` | `[]` | the authserv-id of your mail server (the first word of the `Authentication-Results` header it adds); required while a check is on. Only its topmost headers count: one the sender wrote further down is ignored |
//!
//! Who may write (`allowFrom`, pairing) is the kernel's business. nanobot's `postAction` and
//! `allowedAttachmentTypes` are refused with an error (this channel neither moves, deletes nor
//! saves attachments); the other attachment and post-action keys are accepted and unused.
//!
//! An inbound's id is the mail's `Message-ID` (a mail found twice is submitted once); its
//! sender and chat are the sender's address; its text is `Subject: …`, a blank line and the
//! body. Its metadata holds `message_id`, `subject`, `references` and `sender_name`, which the
//! reply's threading uses. Mail sent automatically is never answered (RFC 3834): an
//! `Auto-Submitted` other than `no`, `Precedence: bulk`, `junk`, `list` or `auto_reply`, a
//! `List-Id` or `List-Unsubscribe` header, an empty `Return-Path`, or a `mailer-daemon` or
//! `postmaster` sender; a vacation responder answering the bot would start a loop. Mail is read without flagging it and flagged `\Seen` only after the
//! kernel accepted it, so mail a crash lost is read again; the channel's own mail and mail that
//! fails the checks are left alone, unflagged.

mod auth_results;
mod config;
mod connect;
mod error;
mod imap;
mod mail;
mod replies;
mod submit;

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::Arc;

use oxibot_plugin::chat::{REMEMBERED, RecentMessages};
use oxibot_plugin::info;
use oxibot_plugin::{ChannelHandle, ChannelPlugin};
use tokio::sync::mpsc;

use crate::config::Config;
use crate::error::EmailError;
use crate::imap::Mailbox;
use crate::replies::Mailer;
use crate::submit::Submitter;

/// Serves the email channel to the kernel that started this process; the entry `oxibot __channel email` runs.
pub fn run() -> ExitCode {
    // The TLS of IMAP and SMTP needs a rustls crypto provider; ring is the one linked.
    let _ = rustls::crypto::ring::default_provider().install_default();
    ChannelPlugin::new("email").run(serve)
}

/// Runs the channel: reads the mailbox and sends replies until the kernel hangs up.
async fn serve(channel: ChannelHandle) -> Result<(), EmailError> {
    let config = Arc::new(Config::from_value(channel.config())?);
    let mailer = Mailer::new(&config)?;
    info!("reading {} as {} on {}", config.mailbox, config.imap.username, config.imap.host);
    let recent = RecentMessages::new(REMEMBERED);
    let (submissions, queue) = mpsc::unbounded_channel();
    let (accepted_tx, accepted) = mpsc::unbounded_channel();
    tokio::spawn(Submitter { channel: channel.clone(), recent: recent.clone(), accepted: accepted_tx }.run(queue));
    let mailbox = Mailbox { config, recent, submissions, accepted, known: HashSet::new(), to_mark: Vec::new() };
    tokio::select! {
        refused = mailbox.run() => refused,
        () = mailer.serve(&channel) => Ok(()),
    }
}
