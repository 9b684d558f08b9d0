//! The reply side: each outbound message is one mail over SMTP to the chat's address, in the
//! thread of the mail it answers (`In-Reply-To`, `References`, the subject with
//! `subjectPrefix`), sent through lettre.

use std::time::Duration;

use lettre::message::header::ContentType;
use lettre::message::{Mailbox, Message};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use oxibot_plugin::chat::{self, serve_replies};
use oxibot_plugin::{ChannelHandle, Outbound};
use oxibot_plugin::{info, warn};
use serde_json::Value;

use crate::config::{Config, SmtpSecurity};
use crate::error::EmailError;

/// How long one SMTP exchange may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(60);
/// The subject of a mail that answers no subject.
const DEFAULT_SUBJECT: &str = "Message from oxibot";

/// Sends replies for the mailbox.
pub struct Mailer {
    /// The SMTP client.
    transport: AsyncSmtpTransport<Tokio1Executor>,
    /// The replies' `From:`.
    from: Mailbox,
    /// Whether replies to users' mail are sent.
    auto_reply: bool,
    /// Put before a subject answered.
    subject_prefix: String,
}

impl Mailer {
    /// A mailer for the SMTP server in `config`.
    pub fn new(config: &Config) -> Result<Mailer, EmailError> {
        let smtp = &config.smtp;
        let builder = match config.smtp_security {
            SmtpSecurity::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&smtp.host),
            SmtpSecurity::StartTls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&smtp.host),
            SmtpSecurity::Plain => Ok(AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&smtp.host)),
        };
        let transport = builder
            .map_err(|error| EmailError::Smtp(error.to_string()))?
            .port(smtp.port)
            .credentials(Credentials::new(smtp.username.clone(), smtp.password.clone()))
            .timeout(Some(SMTP_TIMEOUT))
            .build();
        let from = config.from_address.parse().map_err(|error| {
            EmailError::Smtp(format!("fromAddress {:?} is not an address: {error}", config.from_address))
        })?;
        Ok(Mailer { transport, from, auto_reply: config.auto_reply, subject_prefix: config.subject_prefix.clone() })
    }

    /// Delivers the kernel's outbound messages until it hangs up, acknowledging each.
    pub async fn serve(mut self, channel: &ChannelHandle) {
        serve_replies(channel, &mut self).await;
    }

    /// Sends `outbound` as one mail (none when it answers a mail and `autoReplyEnabled` is off).
    async fn deliver(&self, outbound: &Outbound) -> Result<(), String> {
        let metadata = &outbound.metadata;
        let answers = metadata["message_id"].as_str().filter(|id| !id.is_empty());
        if answers.is_some() && !self.auto_reply {
            info!("reply {} to {} not sent: autoReplyEnabled is off", outbound.id, outbound.chat_id);
            return Ok(());
        }
        if !outbound.media.is_empty() {
            warn!("reply {}: {} attachment(s) not sent (files are not supported)", outbound.id, outbound.media.len());
            if outbound.content.trim().is_empty() {
                return Err("the email channel cannot send files".to_owned());
            }
        }
        let to: Mailbox =
            outbound.chat_id.parse().map_err(|error| format!("{:?} is not an address: {error}", outbound.chat_id))?;
        let mut mail = Message::builder().from(self.from.clone()).to(to).subject(self.subject(metadata));
        if let Some(id) = answers {
            mail = mail.in_reply_to(id.to_owned()).references(references(metadata, id));
        }
        let mail =
            mail.header(ContentType::TEXT_PLAIN).body(outbound.content.clone()).map_err(|error| error.to_string())?;
        self.transport.send(mail).await.map(drop).map_err(|error| format!("smtp: {error}"))
    }

    /// The subject: the answered mail's, with the prefix unless it has one already.
    fn subject(&self, metadata: &Value) -> String {
        let subject = metadata["subject"].as_str().map(str::trim).unwrap_or_default();
        if subject.is_empty() {
            return DEFAULT_SUBJECT.to_owned();
        }
        let prefix = self.subject_prefix.trim();
        if prefix.is_empty() || subject.to_lowercase().starts_with(&prefix.to_lowercase()) {
            subject.to_owned()
        } else {
            format!("{}{subject}", self.subject_prefix)
        }
    }
}

impl chat::Replies for Mailer {
    type Error = String;

    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), String> {
        Mailer::deliver(self, outbound).await
    }
}

/// The `References` of a reply to mail `id`: the thread the mail carried, ending with it.
fn references(metadata: &Value, id: &str) -> String {
    let mut thread: Vec<&str> =
        metadata["references"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if thread.last() != Some(&id) {
        thread.push(id);
    }
    thread.join(" ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn mailer(prefix: &str) -> Mailer {
        let section = json!({"consentGranted": true, "imapHost": "h", "imapUsername": "bot@example.org", "imapPassword": "p",
                             "smtpHost": "127.0.0.1", "smtpUsername": "bot@example.org", "smtpPassword": "p",
                             "smtpUseTls": false, "verifyDkim": false, "verifySpf": false, "subjectPrefix": prefix});
        Mailer::new(&Config::from_value(&section).unwrap()).unwrap()
    }

    #[test]
    fn a_subject_gets_the_prefix_once() {
        let mailer = mailer("Re: ");
        assert_eq!(mailer.subject(&json!({"subject": "Plans"})), "Re: Plans");
        assert_eq!(mailer.subject(&json!({"subject": "RE: Plans"})), "RE: Plans");
        assert_eq!(mailer.subject(&json!({})), DEFAULT_SUBJECT);
    }

    #[test]
    fn references_end_with_the_mail_answered() {
        let metadata = json!({"references": ["<a@x>", "<b@x>"]});
        assert_eq!(references(&metadata, "<b@x>"), "<a@x> <b@x>");
        assert_eq!(references(&json!({}), "<c@x>"), "<c@x>");
    }
}
