//! The email channel through the real `oxibot gateway` against Debian's Dovecot and Postfix
//! (issue 27): a vacation responder's auto-reply gets no answer (no mail loop) while a person's
//! mail does, and a reply written while the SMTP relay is down for 30 s reaches the sender
//! once it is back. Mail goes in through Postfix and the replies are read from the Maildir
//! Postfix delivered them to.

use std::time::Duration;

use oxibot_tests::llm::Reply;
use oxibot_tests::mailserver::{ADA, BOT, MailServer};
use oxibot_tests::procs::wait_until;
use serde_json::json;

use super::gateway::GatewayEnv;

/// How long a test waits for a reply to reach a mailbox.
const PATIENCE: Duration = Duration::from_secs(60);

/// A mail from Ada to the bot with `extra_headers` (each ending in `\n`).
fn mail_from_ada(message_id: &str, subject: &str, body: &str, extra_headers: &str) -> String {
    format!(
        "From: Ada Lovelace <{ADA}>\nTo: {BOT}\nSubject: {subject}\nMessage-ID: {message_id}\n\
         Date: Fri, 27 Nov 2026 08:00:00 +0000\n{extra_headers}MIME-Version: 1.0\n\
         Content-Type: text/plain; charset=utf-8\n\n{body}\n"
    )
}

/// Waits until Ada's mailbox holds at least `count` mails and returns them.
fn wait_replies(server: &MailServer, env: &GatewayEnv, count: usize) -> Vec<String> {
    let arrived = wait_until(PATIENCE, || server.mailbox(ADA).len() >= count);
    let (got, postfix, gateway) = (server.mailbox(ADA).len(), server.smtp_log(), env.log());
    assert!(arrived, "{got} mails reached ada, waited for {count}:\n{postfix}\ngateway:\n{gateway}");
    server.mailbox(ADA)
}

// Issue 27, finding 5: the channel answered auto-replies, a mail loop with a real vacation
// responder (RFC 3834).
#[test]
fn an_auto_reply_gets_no_answer_and_the_mail_after_it_does() {
    let server = MailServer::start();
    let env = GatewayEnv::with_channels(json!({"email": server.config(json!({"allowFrom": "*"}))}));
    let _gateway = env.start_with("email");
    env.llm.push(Reply::Text("answering the person".into()));
    let vacation = "Auto-Submitted: auto-replied\nPrecedence: auto_reply\n";
    server.send(ADA, BOT, &mail_from_ada("<away@oxibot.test>", "Out of office", "I am away until Monday.", vacation));
    // The person's mail follows once the auto-reply was seen: one arriving in the same instant
    // can wait for the next IDLE renewal (a separate defect, seen with this Dovecot).
    let seen = || env.log().contains("left alone: Auto-Submitted");
    assert!(wait_until(PATIENCE, seen), "the auto-reply was never looked at:\n{}", env.log());
    server.send(ADA, BOT, &mail_from_ada("<question@oxibot.test>", "A question", "What time is it?", ""));
    let replies = wait_replies(&server, &env, 1);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(server.mailbox(ADA).len(), 1, "the auto-reply was answered too");
    assert!(replies[0].contains("In-Reply-To: <question@oxibot.test>"), "{}", replies[0]);
    assert!(replies[0].contains("answering the person"), "{}", replies[0]);
    assert_eq!(env.llm.requests().len(), 1, "the model was asked about the auto-reply");
}

// Issue 27, finding 2: the kernel gave a reply up after ~7 s of failed attempts, so an SMTP
// relay restart lost the answer to a mail already marked seen.
#[test]
fn a_reply_written_while_postfix_is_down_for_30_seconds_reaches_the_sender_when_it_is_back() {
    let server = MailServer::start();
    let env = GatewayEnv::with_channels(json!({"email": server.config(json!({"allowFrom": "*"}))}));
    let _gateway = env.start_with_env("email", &[("OXIBOT_DELIVERY_RETRY_DELAYS_MS", "1000,2000")]);
    env.llm.push(Reply::SlowFirstToken { delay_ms: 5_000, text: "sorry for the wait".into() });
    server.send(ADA, BOT, &mail_from_ada("<patient@oxibot.test>", "Patience", "answer me when you can", ""));
    assert!(wait_until(PATIENCE, || !env.llm.requests().is_empty()), "the mail never reached the model");
    server.stop_smtp();
    std::thread::sleep(Duration::from_secs(30));
    assert!(server.mailbox(ADA).is_empty(), "a reply went out while postfix was down");
    server.start_smtp();
    let replies = wait_replies(&server, &env, 1);
    assert!(replies[0].contains("sorry for the wait"), "{}", replies[0]);
    assert!(replies[0].contains("In-Reply-To: <patient@oxibot.test>"), "{}", replies[0]);
}
