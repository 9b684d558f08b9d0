//! Reading a fetched mail into what the kernel gets: who wrote, the subject and thread
//! headers a reply needs, and the text (plain text preferred, HTML reduced to text, cut at
//! `maxBodyChars`).

use mail_parser::{HeaderValue, Message, MessageParser};
use serde_json::{Value, json};

use crate::auth_results;
use crate::config::Config;

/// A user's mail, ready for the kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct UserMail {
    /// Its `Message-ID` (or, without one, its place in the mailbox): the same when the mail is
    /// found again.
    pub id: String,
    /// The sender's address, lowercase: the sender and the chat.
    pub sender: String,
    /// The subject line, the text, and what a reply needs.
    pub content: String,
    /// `message_id`, `subject`, `references`, `sender_name`, `is_group`.
    pub metadata: Value,
}

/// What to do with a fetched mail.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Hand it to the kernel.
    Submit(UserMail),
    /// Leave it alone; the reason is logged.
    Skip(String),
}

/// Judges the raw mail `raw`, found as `fallback_id` (mailbox place) in the mailbox.
pub fn judge(raw: &[u8], fallback_id: &str, config: &Config) -> Verdict {
    let Some(message) = MessageParser::default().parse(raw) else { return Verdict::Skip("not a mail".to_owned()) };
    let from = message.from().and_then(|from| from.first());
    let Some(sender) = from.and_then(|addr| addr.address()).map(str::to_lowercase).filter(|a| a.contains('@')) else {
        return Verdict::Skip("no sender address".to_owned());
    };
    if is_own(&sender, config) {
        return Verdict::Skip(format!("sent by this mailbox ({sender})"));
    }
    if let Some(reason) = automatic(&message, &sender) {
        return Verdict::Skip(format!("{reason}: mail sent automatically is not answered (RFC 3834)"));
    }
    let domain = sender.rsplit('@').next().unwrap_or_default().to_owned();
    let checks = auth_results::verdict(message.headers_raw(), &domain, &config.trusted_authserv_ids);
    if config.verify_dkim && !checks.dkim {
        return Verdict::Skip(format!(
            "no aligned dkim=pass for {domain} from a trusted Authentication-Results header"
        ));
    }
    if config.verify_spf && !checks.spf {
        return Verdict::Skip(format!("no aligned spf=pass for {domain} from a trusted Authentication-Results header"));
    }
    let subject = message.subject().unwrap_or_default().trim().to_owned();
    let body = match message.body_text(0) {
        Some(text) => text.trim().to_owned(),
        None => message.body_html(0).map(|html| html_to_text(&html)).unwrap_or_default(),
    };
    let body = cut(&body, config.max_body_chars);
    let message_id = message.message_id().map(|id| format!("<{}>", id.trim_matches(['<', '>'])));
    let references = thread_of(message.references(), message.in_reply_to(), message_id.as_deref());
    let content = match (subject.is_empty(), body.is_empty()) {
        (true, true) => return Verdict::Skip("an empty mail".to_owned()),
        (false, _) => format!("Subject: {subject}\n\n{body}").trim_end().to_owned(),
        (true, false) => body,
    };
    let metadata = json!({
        "is_group": false, "message_id": message_id, "subject": subject, "references": references,
        "sender_name": from.and_then(|addr| addr.name()).unwrap_or_default(),
    });
    let id = message_id.unwrap_or_else(|| fallback_id.to_owned());
    Verdict::Submit(UserMail { id, sender, content, metadata })
}

/// Why `message` from `sender` was sent by a machine rather than a person (an auto-reply, a
/// bounce, a mailing list), if it was: answering it could start a mail loop.
fn automatic(message: &Message, sender: &str) -> Option<String> {
    let header = |wanted: &str| {
        message.headers_raw().find(|(name, _)| name.trim().eq_ignore_ascii_case(wanted)).map(|(_, value)| value.trim())
    };
    // The keyword may be followed by parameters (`auto-replied; owner-email=…`).
    let auto_submitted = header("Auto-Submitted").map(|value| value.split(';').next().unwrap_or_default().trim());
    if let Some(value) = auto_submitted.filter(|value| !value.eq_ignore_ascii_case("no")) {
        return Some(format!("Auto-Submitted: {value}"));
    }
    let precedence = header("Precedence").unwrap_or_default();
    if ["bulk", "junk", "list", "auto_reply"].iter().any(|kind| precedence.eq_ignore_ascii_case(kind)) {
        return Some(format!("Precedence: {precedence}"));
    }
    if let Some(name) = ["List-Id", "List-Unsubscribe"].into_iter().find(|name| header(name).is_some()) {
        return Some(format!("a {name} header"));
    }
    if header("Return-Path").is_some_and(|path| path.trim_matches(['<', '>', ' ']).is_empty()) {
        return Some("an empty Return-Path (a bounce)".to_owned());
    }
    let local = sender.split('@').next().unwrap_or_default();
    ["mailer-daemon", "postmaster"].contains(&local).then(|| format!("sent by {sender}"))
}

/// Whether `sender` is this mailbox's own address (a reply of ours that came back).
fn is_own(sender: &str, config: &Config) -> bool {
    let own = [&config.from_address, &config.imap.username, &config.smtp.username];
    own.iter().any(|own| {
        let address = own.rsplit('<').next().unwrap_or_default().trim_end_matches('>').trim();
        address.eq_ignore_ascii_case(sender)
    })
}

/// The `References` a reply carries: the mail's own references (or the mail it answered), then
/// the mail itself.
fn thread_of(references: &HeaderValue, in_reply_to: &HeaderValue, message_id: Option<&str>) -> Vec<String> {
    let ids = |value: &HeaderValue| -> Vec<String> {
        value.as_text_list().unwrap_or_default().iter().map(|id| format!("<{}>", id.trim_matches(['<', '>']))).collect()
    };
    let mut thread = ids(references);
    if thread.is_empty() {
        thread = ids(in_reply_to);
    }
    thread.extend(message_id.map(str::to_owned));
    thread.dedup();
    thread
}

/// At most `limit` characters of `text`, said so when cut.
fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let kept: String = text.chars().take(limit).collect();
    format!("{kept}\n[… cut at {limit} characters]")
}

/// HTML reduced to its text: tags dropped, the common entities decoded, blank runs squeezed.
fn html_to_text(html: &str) -> String {
    let mut text = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = text
        .replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        let section = json!({"consentGranted": true, "imapHost": "h", "imapUsername": "bot@example.org", "imapPassword": "p",
                             "smtpHost": "h", "smtpUsername": "bot@example.org", "smtpPassword": "p",
                             "trustedAuthservIds": ["mx.example.org"], "maxBodyChars": 20});
        Config::from_value(&section).unwrap()
    }

    fn mail(from: &str, auth: &str, extra: &str, body: &str) -> Vec<u8> {
        format!(
            "Authentication-Results: {auth}\r\nFrom: {from}\r\nTo: bot@example.org\r\nSubject: Plans\r\n\
                 Message-ID: <m1@sender.com>\r\n{extra}Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
        )
        .into_bytes()
    }

    const PASS: &str = "mx.example.org; dkim=pass header.d=sender.com; spf=pass smtp.mailfrom=sender.com";

    #[test]
    fn a_verified_mail_is_its_senders_with_the_thread_a_reply_needs() {
        let raw = mail("Ada <Ada@Sender.com>", PASS, "In-Reply-To: <m0@example.org>\r\n", "Friday?");
        let Verdict::Submit(mail) = judge(&raw, "uid-1", &config()) else { panic!("skipped") };
        assert_eq!((mail.id.as_str(), mail.sender.as_str()), ("<m1@sender.com>", "ada@sender.com"));
        assert_eq!(mail.content, "Subject: Plans\n\nFriday?");
        assert_eq!(mail.metadata["references"], json!(["<m0@example.org>", "<m1@sender.com>"]));
        assert_eq!(
            (mail.metadata["subject"].as_str(), mail.metadata["sender_name"].as_str()),
            (Some("Plans"), Some("Ada"))
        );
    }

    #[test]
    fn an_unverified_or_own_mail_is_skipped_and_a_long_body_is_cut() {
        let forged = mail("ada@sender.com", "mx.example.org; dkim=none; spf=pass smtp.mailfrom=sender.com", "", "hi");
        assert!(matches!(judge(&forged, "uid-2", &config()), Verdict::Skip(reason) if reason.contains("dkim")));
        let own = mail("bot@example.org", PASS, "", "hi");
        assert!(matches!(judge(&own, "uid-3", &config()), Verdict::Skip(_)));
        let long = mail("ada@sender.com", PASS, "", &"word ".repeat(20));
        let Verdict::Submit(mail) = judge(&long, "uid-4", &config()) else { panic!("skipped") };
        assert!(mail.content.ends_with("[… cut at 20 characters]"), "{}", mail.content);
    }

    #[test]
    fn mail_sent_automatically_is_skipped_and_auto_submitted_no_is_not() {
        let automatic = [
            ("ada@sender.com", "Auto-Submitted: auto-replied; owner-email=\"ada@sender.com\"\r\n"),
            ("ada@sender.com", "Auto-Submitted: Auto-Generated\r\n"),
            ("ada@sender.com", "Precedence: auto_reply\r\n"),
            ("ada@sender.com", "Precedence: BULK\r\n"),
            ("ada@sender.com", "List-Id: <plans.sender.com>\r\n"),
            ("ada@sender.com", "List-Unsubscribe: <mailto:leave@sender.com>\r\n"),
            ("ada@sender.com", "Return-Path: <>\r\n"),
            ("MAILER-DAEMON@sender.com", ""),
            ("postmaster@sender.com", ""),
        ];
        for (from, extra) in automatic {
            let raw = mail(from, PASS, extra, "I am away");
            assert!(
                matches!(judge(&raw, "uid-5", &config()), Verdict::Skip(reason) if reason.contains("RFC 3834")),
                "{from} {extra}"
            );
        }
        let person = mail("ada@sender.com", PASS, "Auto-Submitted: no\r\nPrecedence: first-class\r\n", "hi");
        assert!(matches!(judge(&person, "uid-6", &config()), Verdict::Submit(_)));
    }

    #[test]
    fn html_is_reduced_to_its_text() {
        assert_eq!(html_to_text("<p>Hello&nbsp;<b>Ada</b> &amp; co</p>"), "Hello Ada & co");
    }
}
