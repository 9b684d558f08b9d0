//! The email channel plugin through the real plugin host (and, for `allowFrom`, the real
//! gateway) against a fake mail provider (IMAP and SMTP): verified mail becomes inbound
//! events and is flagged `\Seen` only once the kernel accepted it, mail found twice or read
//! again after a drop or a crash is handled once, IDLE and polling both find new mail, and
//! replies go out as mail in the thread of the mail they answer.

use oxibot_kernel::plugin::{PluginEvent, PluginHost, channel_spec};
use oxibot_proto::DeliveryAck;
use oxibot_tests::channels::{accept, event_where, next_delivery, next_inbound, outbound, started_channel};
use oxibot_tests::fakes_email::{AUTHSERV, BOT_ADDRESS, FakeMail, mail, verified_mail};
use oxibot_tests::llm::Reply;
use oxibot_tests::procs::sigkill;
use oxibot_tests::wait::block_on;
use oxibot_tests::{bin, start_host};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use super::gateway::GatewayEnv;

/// Starts the host with the email channel configured for `fake`, and waits until the channel
/// has logged in.
async fn email_host(fake: &FakeMail, extra: Value) -> (PluginHost, UnboundedReceiver<PluginEvent>) {
    let (host, events) = started_channel("email", &fake.config(extra)).await;
    fake.wait_logins(1).await;
    (host, events)
}

#[actix_rt::test]
async fn a_verified_mail_arrives_from_its_sender_and_the_reply_goes_back_in_its_thread() {
    let fake = FakeMail::start();
    let (host, mut events) = email_host(&fake, json!({})).await;
    let uid = fake.deliver(&verified_mail("ada@sender.test", "<m1@sender.test>", "Plans", "Friday or Monday?"));
    let inbound = next_inbound(&mut events, "email").await;
    assert_eq!(
        (inbound.id.as_str(), inbound.sender_id.as_str(), inbound.chat_id.as_str()),
        ("<m1@sender.test>", "ada@sender.test", "ada@sender.test")
    );
    assert_eq!(inbound.content, "Subject: Plans\n\nFriday or Monday?");
    assert_eq!(inbound.metadata["sender_name"], "Ada Lovelace");
    accept(&host, "email", &inbound);
    fake.wait_seen(uid).await;

    host.send("email", outbound(7, &inbound.chat_id, "Friday, **after lunch**.", inbound.metadata.clone())).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 7, ok: true, error: None, permanent: false });
    let sent = &fake.sent()[0];
    assert_eq!((sent.from.as_str(), sent.to.as_slice()), (BOT_ADDRESS, ["ada@sender.test".to_owned()].as_slice()));
    assert_eq!(sent.header("Subject").as_deref(), Some("Re: Plans"));
    assert_eq!(sent.header("In-Reply-To").as_deref(), Some("<m1@sender.test>"));
    assert_eq!(sent.header("References").as_deref(), Some("<m1@sender.test>"));
    assert_eq!(sent.body(), "Friday, **after lunch**.");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_mail_is_flagged_seen_only_after_the_kernel_accepted_it() {
    let fake = FakeMail::start();
    let (host, mut events) = email_host(&fake, json!({})).await;
    let uid = fake.deliver(&verified_mail("ada@sender.test", "<wait@sender.test>", "Keep", "keep me"));
    let inbound = next_inbound(&mut events, "email").await;
    // A barrier instead of a pause: the channel speaks to the server one command at a time,
    // so a flag set on arrival would come before the IDLE that follows the fetch.
    fake.wait_command_after(&format!("UID FETCH {uid} "), "IDLE").await;
    assert!(fake.commands().iter().all(|command| !command.starts_with("UID STORE")), "flagged before acceptance");
    assert!(!fake.is_seen(uid));
    accept(&host, "email", &inbound);
    fake.wait_seen(uid).await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_reply_continues_the_thread_the_answered_mail_belongs_to() {
    let fake = FakeMail::start();
    let (host, mut events) = email_host(&fake, json!({"subjectPrefix": "AW: "})).await;
    let auth = "dkim=pass header.d=sender.test; spf=pass smtp.mailfrom=ada@sender.test";
    let thread = "In-Reply-To: <m1@fake.test>\nReferences: <m0@sender.test> <m1@fake.test>\n";
    fake.deliver(&mail("ada@sender.test", "<m2@sender.test>", "Re: Plans", "Monday then.", auth, thread));
    let inbound = next_inbound(&mut events, "email").await;
    accept(&host, "email", &inbound);
    host.send("email", outbound(8, &inbound.chat_id, "Monday it is.", inbound.metadata.clone())).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let sent = &fake.sent()[0];
    assert_eq!(sent.header("Subject").as_deref(), Some("AW: Re: Plans"));
    assert_eq!(sent.header("In-Reply-To").as_deref(), Some("<m2@sender.test>"));
    assert_eq!(sent.header("References").as_deref(), Some("<m0@sender.test> <m1@fake.test> <m2@sender.test>"));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_mail_found_twice_is_submitted_once_and_both_copies_are_flagged_seen() {
    let fake = FakeMail::start();
    let (host, mut events) = email_host(&fake, json!({})).await;
    let raw = verified_mail("ada@sender.test", "<twice@sender.test>", "Twice", "only once");
    let first = fake.deliver(&raw);
    let inbound = next_inbound(&mut events, "email").await;
    let second = fake.deliver(&raw);
    fake.wait_commands(&format!("UID FETCH {second} "), 1).await;
    accept(&host, "email", &inbound);
    fake.wait_seen(first).await;
    fake.wait_seen(second).await;
    fake.deliver(&verified_mail("ada@sender.test", "<next@sender.test>", "Next", "a new one"));
    assert_eq!(next_inbound(&mut events, "email").await.id, "<next@sender.test>", "the copy came through");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_dropped_connection_is_logged_in_again_and_mail_from_meanwhile_arrives() {
    let fake = FakeMail::start();
    let (host, mut events) = email_host(&fake, json!({})).await;
    fake.cut_connections();
    fake.deliver(&verified_mail("ada@sender.test", "<meanwhile@sender.test>", "Meanwhile", "are you back?"));
    fake.wait_logins(2).await;
    let inbound = next_inbound(&mut events, "email").await;
    assert_eq!(inbound.id, "<meanwhile@sender.test>");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_mail_not_accepted_before_the_channel_died_is_read_again_by_the_next_one() {
    let fake = FakeMail::start();
    let (host, mut events) = email_host(&fake, json!({})).await;
    let uid = fake.deliver(&verified_mail("ada@sender.test", "<crash@sender.test>", "Crash", "do not lose me"));
    let first = next_inbound(&mut events, "email").await;
    sigkill(host.statuses()[0].pid.unwrap());
    event_where(&mut events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == "email")).await;
    let again = next_inbound(&mut events, "email").await;
    assert_eq!((again.id.as_str(), again.content.as_str()), (first.id.as_str(), "Subject: Crash\n\ndo not lose me"));
    assert!(!fake.is_seen(uid), "flagged before any acceptance");
    accept(&host, "email", &again);
    fake.wait_seen(uid).await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn without_idle_the_mailbox_is_polled() {
    let fake = FakeMail::with_idle(false);
    let (host, mut events) = email_host(&fake, json!({"pollIntervalSeconds": 1})).await;
    fake.deliver(&verified_mail("ada@sender.test", "<polled@sender.test>", "Poll", "found by polling"));
    assert_eq!(next_inbound(&mut events, "email").await.id, "<polled@sender.test>");
    assert!(fake.commands().iter().all(|command| command != "IDLE"));
    host.shutdown().await;
}

#[actix_rt::test]
async fn mail_failing_the_checks_or_sent_by_the_bot_is_left_alone_unflagged() {
    let fake = FakeMail::start();
    let (host, mut events) = email_host(&fake, json!({})).await;
    let forged = fake.deliver(&mail(
        "ceo@sender.test",
        "<forged@evil.test>",
        "Wire money",
        "now",
        "dkim=fail header.d=sender.test; spf=fail smtp.mailfrom=evil.test",
        "",
    ));
    let own = fake.deliver(&verified_mail(BOT_ADDRESS, "<own@fake.test>", "Re: Plans", "my own reply"));
    fake.deliver(&verified_mail("ada@sender.test", "<real@sender.test>", "Real", "hello"));
    assert_eq!(next_inbound(&mut events, "email").await.id, "<real@sender.test>", "a skipped mail reached the kernel");
    assert!(!fake.is_seen(forged) && !fake.is_seen(own));
    host.shutdown().await;
}

/// Issue 27, finding 5: a vacation responder answered by the bot is a mail loop (RFC 3834).
#[actix_rt::test]
async fn auto_replies_bounces_and_list_mail_reach_no_one_and_stay_unflagged() {
    let fake = FakeMail::start();
    let (host, mut events) = email_host(&fake, json!({})).await;
    let auth = "dkim=pass header.d=sender.test; spf=pass smtp.mailfrom=ada@sender.test";
    let automatic = [
        ("ada@sender.test", "Auto-Submitted: auto-replied\n"),
        ("ada@sender.test", "Precedence: auto_reply\n"),
        ("ada@sender.test", "Precedence: bulk\n"),
        ("ada@sender.test", "List-Id: <plans.sender.test>\n"),
        ("ada@sender.test", "List-Unsubscribe: <mailto:leave@sender.test>\n"),
        ("MAILER-DAEMON@sender.test", ""),
        ("postmaster@sender.test", ""),
    ];
    let mut skipped = Vec::new();
    for (n, (from, headers)) in automatic.into_iter().enumerate() {
        let id = format!("<auto{n}@sender.test>");
        skipped.push(fake.deliver(&mail(from, &id, "Out of office", "I am away until Monday.", auth, headers)));
    }
    let person = "Auto-Submitted: no\n";
    fake.deliver(&mail("ada@sender.test", "<person@sender.test>", "Back", "I am back.", auth, person));
    let inbound = next_inbound(&mut events, "email").await;
    assert_eq!(inbound.id, "<person@sender.test>", "mail sent automatically reached the kernel");
    assert!(skipped.iter().all(|uid| !fake.is_seen(*uid)));
    host.shutdown().await;
}

/// Issue 27, finding 5: any `Authentication-Results` header with the server's authserv-id was
/// believed, so a sender could write a `dkim=pass` of its own below the server's `fail`.
#[actix_rt::test]
async fn an_authentication_results_header_forged_below_the_servers_own_is_not_believed() {
    let fake = FakeMail::start();
    let (host, mut events) = email_host(&fake, json!({})).await;
    let servers = "dkim=fail header.d=sender.test; spf=fail smtp.mailfrom=ceo@evil.test";
    let forged = format!(
        "Received: from evil.test by {AUTHSERV}\nAuthentication-Results: {AUTHSERV}; dkim=pass header.d=sender.test; \
         spf=pass smtp.mailfrom=ceo@sender.test\n"
    );
    let uid = fake.deliver(&mail("ceo@sender.test", "<forged@evil.test>", "Wire money", "now", servers, &forged));
    fake.deliver(&verified_mail("ada@sender.test", "<real@sender.test>", "Real", "hello"));
    assert_eq!(next_inbound(&mut events, "email").await.id, "<real@sender.test>", "the forged mail was believed");
    assert!(!fake.is_seen(uid));
    host.shutdown().await;
}

#[actix_rt::test]
async fn with_auto_reply_off_no_reply_is_mailed_but_the_delivery_is_acknowledged() {
    let fake = FakeMail::start();
    let (host, mut events) = email_host(&fake, json!({"autoReplyEnabled": false})).await;
    fake.deliver(&verified_mail("ada@sender.test", "<quiet@sender.test>", "Quiet", "no answer please"));
    let inbound = next_inbound(&mut events, "email").await;
    accept(&host, "email", &inbound);
    host.send("email", outbound(9, &inbound.chat_id, "unsent", inbound.metadata.clone())).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 9, ok: true, error: None, permanent: false });
    host.send("email", outbound(10, "ada@sender.test", "a message of its own", json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let sent = fake.sent();
    assert_eq!(sent.len(), 1, "only the message that answers no mail went out");
    assert_eq!(sent[0].header("Subject").as_deref(), Some("Message from oxibot"));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_long_reply_goes_out_whole_as_one_mail() {
    let fake = FakeMail::start();
    let (host, mut events) = email_host(&fake, json!({})).await;
    let lines: Vec<String> = (0..2000).map(|n| format!("line {n:04} of a long answer")).collect();
    host.send("email", outbound(11, "ada@sender.test", &lines.join("\n"), json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let sent = fake.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body(), lines.join("\n"));
    host.shutdown().await;
}

#[actix_rt::test]
async fn without_consent_or_with_a_refused_login_the_channel_fails_with_a_reason_naming_the_keys() {
    let fake = FakeMail::start();
    let spec = channel_spec(&bin("oxibot"), "email", &fake.config(json!({"consentGranted": false}))).unwrap();
    let host = start_host(vec![spec]).await;
    oxibot_tests::wait::eventually("the channel has failed", || host.statuses()[0].state == "failed").await;
    let reason = host.statuses()[0].reason.clone().unwrap();
    assert!(reason.contains("channels.email.consentGranted"), "{reason}");
    assert!(fake.commands().is_empty(), "the mailbox was read without consent");
    host.shutdown().await;

    let spec = channel_spec(&bin("oxibot"), "email", &fake.config(json!({"imapPassword": "wrong"}))).unwrap();
    let host = start_host(vec![spec]).await;
    oxibot_tests::wait::eventually("the channel has failed", || host.statuses()[0].state == "failed").await;
    let reason = host.statuses()[0].reason.clone().unwrap();
    assert!(reason.contains("channels.email.imapUsername, imapPassword"), "{reason}");
    host.shutdown().await;
}

#[test]
fn only_senders_in_allow_from_reach_the_model() {
    let fake = FakeMail::start();
    let section = fake.config(json!({"enabled": true, "allowFrom": ["ada@sender.test"]}));
    let env = GatewayEnv::with_channels(json!({"email": section}));
    let _gateway = env.start_with("email");
    env.llm.push(Reply::Text("Hello, allowed one".into()));
    block_on(async {
        fake.wait_logins(1).await;
        fake.deliver(&verified_mail("eve@other.test", "<stranger@other.test>", "Hi", "let me in"));
        fake.deliver(&verified_mail("ada@sender.test", "<friend@sender.test>", "Hi", "hello"));
        let sent = fake.wait_sent(1).await;
        assert_eq!(sent[0].to, ["ada@sender.test"]);
        assert_eq!(sent[0].body(), "Hello, allowed one");
    });
    assert_eq!(fake.sent().len(), 1, "the stranger got an answer");
    assert_eq!(env.llm.requests().len(), 1, "the stranger reached the model");
}
