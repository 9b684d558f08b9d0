//! Approvals in chats: a call waiting for a person's yes is announced in the turn's chat
//! with `/approve CODE` and `/deny CODE`; the router takes those answers from people's
//! incoming messages (never from anything the model wrote) before any session sees them, and
//! tells the owner's last active chat when an unattended turn was refused.
//!
//! The announcement is a reply like any other (kept in the outbox, retried, acknowledged)
//! whose metadata carries the request under [`APPROVAL_KEY`] (`code`, `tool`, `shown`,
//! `timeout_secs`). When it goes out, a channel that announced `approvals` gets it as an
//! `approval_request` message with the answers to draw as buttons ([`Router::approval_request`]);
//! every other channel gets the `outbound`, whose text says what to reply.

use std::rc::Rc;

use oxibot_proto::{ApprovalAnswer, Inbound, Message};
use serde_json::{Value, json};

use super::Router;
use super::reply::Reply;
use crate::gateway::settings::AllowFrom;
use crate::turn::approval::{Answer, Answerer, ApprovalRequest};

/// Outbound metadata key of an approval request.
pub const APPROVAL_KEY: &str = "approval";

/// Who may answer the approvals of one turn, and the channel details to reply with.
pub(super) struct Approver {
    /// The sender whose message started the turn; none when nobody may answer from the chat
    /// (a group open to everyone: only an owner may approve there).
    sender_id: Option<String>,
    /// The channel's details of that message (thread, reply-to).
    metadata: Value,
}

/// `/approve CODE`, `/approve CODE always` or `/deny CODE`, as a person types it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ApprovalCommand {
    code: String,
    answer: Answer,
}

impl ApprovalCommand {
    /// The command `text` is, when it is one (the whole message, nothing before it).
    pub(super) fn parse(text: &str) -> Option<ApprovalCommand> {
        let mut words = text.split_whitespace();
        let verb = words.next()?;
        let code = words.next()?.to_uppercase();
        let rest: Vec<&str> = words.collect();
        let answer = match (verb, rest.as_slice()) {
            ("/approve", []) => Answer::Yes,
            ("/approve", ["always"]) => Answer::Always,
            ("/deny", []) => Answer::No,
            _ => return None,
        };
        Some(ApprovalCommand { code, answer })
    }
}

impl Router {
    /// Who may answer the approvals of the turn `inbound` starts: its sender, unless the
    /// chat is a group anyone may write in (there an owner must be listed in `allowFrom` or
    /// paired, and nobody else answers).
    pub(super) fn approver(&self, channel: &str, inbound: &Inbound) -> Option<Approver> {
        Some(self.approver_of(channel, &inbound.sender_id, &inbound.metadata))
    }

    /// Who may answer the approvals of a turn `sender_id` started with a message whose
    /// channel details are `metadata` (see [`Router::approver`]).
    pub(super) fn approver_of(&self, channel: &str, sender_id: &str, metadata: &Value) -> Approver {
        let is_group = metadata.get("is_group").and_then(Value::as_bool).unwrap_or(false);
        let open_group = is_group && self.allow_from(channel) == Some(AllowFrom::Everyone);
        let sender_id = (!open_group).then(|| sender_id.to_owned());
        let metadata = if metadata.is_object() { metadata.clone() } else { json!({}) };
        Approver { sender_id, metadata }
    }

    /// Announces `request` in the chat and binds its code to the approver.
    pub(super) fn ask_in_chat(
        self: &Rc<Self>,
        channel: &str,
        chat_id: &str,
        approver: Option<&Approver>,
        request: ApprovalRequest,
    ) {
        let approvals = self.services.approvals();
        let sender = approver.and_then(|a| a.sender_id.as_deref());
        if let Some(sender) = sender {
            approvals.bind(&request.code, sender);
        }
        let code = &request.code;
        let who = if sender.is_some() {
            "Only you can answer"
        } else {
            "Nobody can answer it from this chat (only the owner approves, from a direct chat or the terminal)"
        };
        let text = format!(
            "Approval needed: the assistant wants to run\n\n{}\n\nReply /approve {code} to run it, /approve {code} always to allow calls like it from now on, or /deny {code}. {who}; no answer within {} s counts as no.",
            request.shown, request.timeout_secs
        );
        let mut metadata = approver.map_or_else(|| json!({}), |a| a.metadata.clone());
        if let Value::Object(fields) = &mut metadata {
            fields.insert(
                APPROVAL_KEY.to_owned(),
                json!({"code": code, "tool": request.tool, "shown": request.shown, "timeout_secs": request.timeout_secs}),
            );
        }
        let reply = Reply::new(channel, chat_id, text, None, metadata);
        let router = self.clone();
        actix::spawn(async move {
            let _ = router.deliver(reply).await;
        });
    }

    /// The approval request `reply` carries, as the message of its own type, when it carries
    /// one and its channel announced `approvals`; `None` sends it as an `outbound`.
    pub(super) fn approval_request(&self, id: u64, reply: &Reply) -> Option<Message> {
        if !self.approval_requests.borrow().contains(&reply.channel) {
            return None;
        }
        let request = reply.metadata.get(APPROVAL_KEY)?;
        let field = |name: &str| request.get(name).and_then(Value::as_str).map(str::to_owned);
        let code = field("code")?;
        let mut metadata = reply.metadata.clone();
        if let Value::Object(fields) = &mut metadata {
            fields.remove(APPROVAL_KEY);
        }
        let answer =
            |label: &str, answer: String, refuses: bool| ApprovalAnswer { label: label.to_owned(), answer, refuses };
        Some(Message::ApprovalRequest(oxibot_proto::ApprovalRequest {
            id,
            chat_id: reply.chat_id.clone(),
            tool: field("tool").unwrap_or_default(),
            shown: field("shown").unwrap_or_default(),
            timeout_secs: request.get("timeout_secs").and_then(Value::as_u64).unwrap_or(0),
            text: reply.content.clone(),
            answers: vec![
                answer("Approve", format!("/approve {code}"), false),
                answer("Always", format!("/approve {code} always"), false),
                answer("Deny", format!("/deny {code}"), true),
            ],
            code,
            metadata,
        }))
    }

    /// Takes a person's `/approve` or `/deny` and says in the chat what became of it.
    pub(super) async fn answer_approval(self: &Rc<Self>, channel: &str, inbound: &Inbound, command: ApprovalCommand) {
        let from = Answerer {
            channel: channel.to_owned(),
            chat_id: inbound.chat_id.clone(),
            sender_id: inbound.sender_id.clone(),
        };
        let text = match self.services.approvals().answer(&command.code, command.answer, &from) {
            Ok(_) if command.answer == Answer::No => format!("Denied ({})", command.code),
            Ok(_) => format!("Approved ({})", command.code),
            Err(error) => {
                tracing::warn!(%channel, sender = %inbound.sender_id, %error, "approval answer refused");
                format!("Not taken: {error}")
            }
        };
        let reply = Reply::new(channel, &inbound.chat_id, text, None, inbound.metadata.clone());
        let _ = self.deliver(reply).await;
    }

    /// Tells the owner's last active chat of every call refused in an unattended turn, until
    /// the approvals go away.
    pub async fn tell_owner_of_refusals(self: Rc<Self>) {
        let mut notices = self.services.approvals().subscribe_notices();
        while let Some(denial) = notices.recv().await {
            let Some((channel, chat_id, metadata)) = self.last_active.borrow().clone() else {
                tracing::warn!(text = %denial.text, "a call was refused in an unattended turn; nobody has written yet to tell");
                continue;
            };
            let reply = Reply::new(&channel, &chat_id, denial.text, None, metadata);
            let _ = self.deliver(reply).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_message_is_an_answer() {
        let yes = ApprovalCommand::parse("/approve abcd2345").unwrap();
        assert_eq!((yes.code.as_str(), yes.answer), ("ABCD2345", Answer::Yes));
        assert_eq!(ApprovalCommand::parse("/approve X always").unwrap().answer, Answer::Always);
        assert_eq!(ApprovalCommand::parse(" /deny X ").unwrap().answer, Answer::No);
        assert_eq!(ApprovalCommand::parse("please /approve X"), None);
        assert_eq!(ApprovalCommand::parse("/approve X now"), None);
        assert_eq!(ApprovalCommand::parse("/approve"), None);
    }
}
