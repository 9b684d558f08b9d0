//! Approvals the model cannot forge: before a call the policy (`tools.approval`) says `ask`
//! for runs, a person says yes where they are, and the kernel alone decides.
//!
//! Code map: [`gate::admit`] is the one point where a turn's tool execution asks (from
//! `tool_batch::run_one`); it reads the policy ([`crate::config::approval`]), the standing
//! approvals ([`standing`]), and otherwise registers a pending call here under a fresh
//! random code and tells the turn's caller with [`super::runner::TurnEvent::ApprovalRequested`]
//! (the terminal prompts; the gateway's router sends `/approve CODE` to the chat). The answer
//! comes back through [`Approvals::answer`] (a chat message the router intercepts before any
//! session sees it) or [`Approvals::answer_in_terminal`].
//!
//! What keeps it unforgeable:
//! - the answer never travels through the model: not a tool argument (`approved: true` is just
//!   another argument, hashed with the rest), not the model's text (which only ever goes
//!   *out* to a chat, and the router reads `/approve` only from people's incoming messages);
//! - a code is bound to one call: the call's id is a SHA-256 of the tool, its canonical
//!   arguments and the turn, computed before asking and checked when the answer comes; the
//!   code is removed with its first answer, so replaying it finds nothing;
//! - only the person the turn answers (same channel, chat and sender) may answer, and an
//!   answer from a chat before the router bound the sender counts for nothing;
//! - no answer within `timeoutSecs`, a dropped request, or an unattended turn (cron,
//!   heartbeat, helpers) is a denial the model reads.

pub mod gate;
pub mod shown;
pub mod standing;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::config::approval::ApprovalPolicy;
use standing::StandingGrants;

/// The channel name of the terminal (`oxibot agent`).
pub const TERMINAL_CHANNEL: &str = "cli";

/// What a person answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Run this call.
    Yes,
    /// Run this call, and calls like it from now on (a standing approval).
    Always,
    /// Do not run it.
    No,
}

/// Who answers: the chat and the sender an answer came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answerer {
    /// The channel (`telegram`, …).
    pub channel: String,
    /// The chat within it.
    pub chat_id: String,
    /// The sender's id as the channel reports it.
    pub sender_id: String,
}

/// What the person is asked, sent to the turn's caller.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The code that answers it (`/approve CODE`).
    pub code: String,
    /// The tool.
    pub tool: String,
    /// The call as it will run, whole (for `exec`: the command, its directory and the sandbox).
    pub shown: String,
    /// Seconds until no answer counts as a denial.
    pub timeout_secs: u64,
}

/// A denial in an unattended turn, for the owner's last active chat.
#[derive(Debug, Clone, PartialEq)]
pub struct UnattendedDenial {
    /// The session of the turn.
    pub session: Option<String>,
    /// What was not run and why, for a person.
    pub text: String,
}

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// No call waits under that code (never given, answered already, or timed out).
    #[error("no call waits for approval under code {0}")]
    Unknown(String),
    /// Someone other than the person the turn answers.
    #[error("only the person who started this turn, in the same chat, can answer code {0}")]
    WrongPerson(String),
}

/// One call waiting for an answer.
struct Pending {
    /// The call's id (see [`shown::call_id`]): what the answer is bound to.
    call_id: String,
    /// The channel and chat of the turn.
    channel: Option<String>,
    chat_id: Option<String>,
    /// The sender who may answer, once the router bound it.
    sender: Option<String>,
    /// Where the answer goes; the waiting call holds the other end.
    reply: oneshot::Sender<(Answer, Answerer)>,
}

/// The kernel's approvals: the policy in force, the calls waiting for an answer, and the
/// standing approvals on disk. One per kernel, shared by every turn.
pub struct Approvals {
    /// The `tools.approval` policy in force, replaced by a config reload.
    policy: RwLock<Arc<ApprovalPolicy>>,
    /// Calls waiting for an answer, by code.
    pending: Mutex<HashMap<String, Pending>>,
    /// "Always" answers and `oxibot approvals grant`, kept in the data dir.
    standing: StandingGrants,
    /// Where denials of unattended turns go (the gateway tells the owner); none in the CLI.
    notices: Mutex<Option<mpsc::UnboundedSender<UnattendedDenial>>>,
}

impl Approvals {
    /// Approvals under `policy`, with standing approvals in `data_dir`.
    pub fn new(policy: ApprovalPolicy, data_dir: &Path) -> Approvals {
        Approvals {
            policy: RwLock::new(Arc::new(policy)),
            pending: Mutex::default(),
            standing: StandingGrants::in_data_dir(data_dir),
            notices: Mutex::default(),
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<ApprovalPolicy> {
        self.policy.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Puts an edited policy in force; calls already waiting keep waiting.
    pub fn replace_policy(&self, policy: ApprovalPolicy) {
        *self.policy.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(policy);
    }

    /// The standing approvals.
    pub fn standing(&self) -> &StandingGrants {
        &self.standing
    }

    /// Denials of unattended turns from now on go to the returned receiver.
    pub fn subscribe_notices(&self) -> mpsc::UnboundedReceiver<UnattendedDenial> {
        let (sender, receiver) = mpsc::unbounded_channel();
        *self.notices.lock().unwrap_or_else(PoisonError::into_inner) = Some(sender);
        receiver
    }

    fn notify(&self, denial: UnattendedDenial) {
        let notices = self.notices.lock().unwrap_or_else(PoisonError::into_inner);
        match notices.as_ref() {
            Some(sender) if sender.send(denial.clone()).is_ok() => {}
            _ => tracing::warn!(session = ?denial.session, text = %denial.text, "call denied in an unattended turn"),
        }
    }

    /// Binds the call waiting under `code` to the one sender who may answer it (the router,
    /// for the person whose message started the turn). A code already bound stays bound.
    pub fn bind(&self, code: &str, sender_id: &str) {
        if let Some(pending) = self.pending.lock().unwrap_or_else(PoisonError::into_inner).get_mut(code) {
            pending.sender.get_or_insert_with(|| sender_id.to_owned());
        }
    }

    /// Takes `answer` to the call under `code` from a chat. Only the bound sender in the
    /// turn's own channel and chat is heard; the code is used up by the answer.
    pub fn answer(&self, code: &str, answer: Answer, from: &Answerer) -> Result<String, AnswerError> {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let waiting = pending.get(code).ok_or_else(|| AnswerError::Unknown(code.to_owned()))?;
        let same_chat = waiting.channel.as_deref() == Some(from.channel.as_str())
            && waiting.chat_id.as_deref() == Some(from.chat_id.as_str())
            && waiting.sender.as_deref() == Some(from.sender_id.as_str());
        if !same_chat {
            return Err(AnswerError::WrongPerson(code.to_owned()));
        }
        let waiting = pending.remove(code).ok_or_else(|| AnswerError::Unknown(code.to_owned()))?;
        let call_id = waiting.call_id.clone();
        let _ = waiting.reply.send((answer, from.clone()));
        Ok(call_id)
    }

    /// Takes `answer` to the call under `code` from the person at the terminal: only a call
    /// of a terminal session.
    pub fn answer_in_terminal(&self, code: &str, answer: Answer) -> Result<String, AnswerError> {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let waiting = pending.get(code).ok_or_else(|| AnswerError::Unknown(code.to_owned()))?;
        if waiting.channel.as_deref() != Some(TERMINAL_CHANNEL) {
            return Err(AnswerError::WrongPerson(code.to_owned()));
        }
        let waiting = pending.remove(code).ok_or_else(|| AnswerError::Unknown(code.to_owned()))?;
        let from = Answerer {
            channel: TERMINAL_CHANNEL.to_owned(),
            chat_id: waiting.chat_id.clone().unwrap_or_default(),
            sender_id: "terminal".to_owned(),
        };
        let call_id = waiting.call_id.clone();
        let _ = waiting.reply.send((answer, from));
        Ok(call_id)
    }

    /// Registers a call waiting for an answer; returns its code and where the answer arrives.
    fn wait_for(
        &self,
        call_id: String,
        channel: Option<String>,
        chat_id: Option<String>,
    ) -> (String, oneshot::Receiver<(Answer, Answerer)>) {
        let (reply, receiver) = oneshot::channel();
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let code = loop {
            let code = shown::fresh_code();
            if !pending.contains_key(&code) {
                break code;
            }
        };
        pending.insert(code.clone(), Pending { call_id, channel, chat_id, sender: None, reply });
        (code, receiver)
    }

    /// Forgets the call under `code` (answered, timed out, or its turn stopped).
    fn forget(&self, code: &str) {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(code);
    }
}

/// Who or what allowed (or refused) one call, as the session file records it under
/// `approval` on the call's result.
#[derive(Debug, Clone, PartialEq)]
pub enum Grant {
    /// The policy says `allow` (or `ask`, in the terminal with `"terminal": "allow"`).
    Policy,
    /// A standing approval covers it.
    Standing(String),
    /// A person said yes (or "always").
    Person(Answerer),
}

impl Grant {
    /// The audit record of an allowed call with id `call_id`.
    pub fn record(&self, call_id: &str) -> Value {
        match self {
            Grant::Policy => json!({"allowed": true, "by": "policy", "call": call_id}),
            Grant::Standing(pattern) => json!({"allowed": true, "by": "standing", "pattern": pattern, "call": call_id}),
            Grant::Person(who) => json!({
                "allowed": true, "by": "person", "channel": who.channel, "chat_id": who.chat_id,
                "sender": who.sender_id, "call": call_id
            }),
        }
    }
}

/// An audit record (see [`Grant::record`] and [`refusal_record`]) in words, as `oxibot
/// approvals log` and the web UI's transcript show it: `allowed by alice on telegram (chat
/// 42)`, `allowed by the policy`, `refused (timeout: no answer in time)`, ….
pub fn audit_text(record: &Value) -> String {
    let text = |key: &str| record.get(key).and_then(Value::as_str).unwrap_or("");
    let verdict = if record.get("allowed").and_then(Value::as_bool) == Some(true) { "allowed" } else { "refused" };
    let by = match text("by") {
        "person" => format!("by {} on {} (chat {})", text("sender"), text("channel"), text("chat_id")),
        "standing" => format!("by the standing approval {}", text("pattern")),
        "policy" if verdict == "allowed" => "by the policy".to_owned(),
        other => format!("({other}: {})", text("reason")),
    };
    format!("{verdict} {by}")
}

/// The audit record of a refused call.
pub fn refusal_record(by: &str, reason: &str, call_id: &str) -> Value {
    json!({"allowed": false, "by": by, "reason": reason, "call": call_id})
}
