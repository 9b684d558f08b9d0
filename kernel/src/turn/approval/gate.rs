//! The one check a turn's tool execution makes before a call runs: [`admit`].

use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::shown::{call_id, describe};
use super::standing::StandingGrant;
use super::{Answer, ApprovalRequest, Approvals, Grant, TERMINAL_CHANNEL, UnattendedDenial, refusal_record};
use crate::config::approval::Outcome;
use crate::turn::builtin::{BuiltinContext, TurnSource};
use crate::turn::events::TurnEvent;

/// What a turn's calls are checked with: the kernel's approvals, where the person is asked
/// (the turn's events), and the turn's id (part of every call's id).
pub struct ApprovalGate<'a> {
    /// The kernel's approvals.
    pub approvals: &'a Approvals,
    /// The turn's caller, who asks the person.
    pub events: &'a UnboundedSender<TurnEvent>,
    /// The turn's random id.
    pub turn: &'a str,
}

/// Whether a call may run: `Ok(record)` runs it and records who allowed it; `Err((note,
/// record))` gives the model `note` instead. Without a gate every call runs unrecorded.
pub async fn admit(
    gate: Option<&ApprovalGate<'_>>,
    tool: &str,
    arguments: &Value,
    context: &BuiltinContext,
) -> Result<Option<Value>, (String, Value)> {
    let Some(gate) = gate else { return Ok(None) };
    let id = call_id(tool, arguments, gate.turn);
    let policy = gate.approvals.policy();
    match policy.rule(tool).decide(arguments, aims_elsewhere(tool, arguments, context)) {
        Outcome::Allow => return Ok(Some(Grant::Policy.record(&id))),
        Outcome::Deny => {
            let note =
                format!("the approval policy (tools.approval) does not allow {tool} calls here; the call was not run");
            return Err((note, refusal_record("policy", "denied by policy", &id)));
        }
        Outcome::Ask => {}
    }
    if let Some(grant) = gate.approvals.standing().covering(tool, arguments) {
        return Ok(Some(Grant::Standing(grant).record(&id)));
    }
    let in_terminal = context.call.channel.as_deref() == Some(TERMINAL_CHANNEL);
    if in_terminal && policy.terminal == Outcome::Allow && context.source == TurnSource::User {
        return Ok(Some(Grant::Policy.record(&id)));
    }
    if context.source != TurnSource::User {
        return Err(unattended(gate, tool, arguments, context, &id));
    }
    ask(gate, tool, arguments, context, id, policy.timeout_secs).await
}

/// Whether a call is aimed at another chat than the turn's (`message` with a `channel` or
/// `chat_id` of elsewhere).
fn aims_elsewhere(tool: &str, arguments: &Value, context: &BuiltinContext) -> bool {
    if tool != "message" {
        return false;
    }
    let differs = |name: &str, own: Option<&str>| {
        arguments.get(name).and_then(Value::as_str).is_some_and(|value| Some(value) != own)
    };
    differs("channel", context.call.channel.as_deref()) || differs("chat_id", context.call.chat_id.as_deref())
}

/// Refuses an `ask` call of a turn nobody watches, and tells the owner.
fn unattended(
    gate: &ApprovalGate<'_>,
    tool: &str,
    arguments: &Value,
    context: &BuiltinContext,
    id: &str,
) -> (String, Value) {
    let why = match context.source {
        TurnSource::Cron => "a scheduled job",
        TurnSource::Heartbeat => "the heartbeat",
        TurnSource::Subagent => "a background helper",
        TurnSource::System | TurnSource::User => "a turn nobody is watching",
    };
    let shown = describe(tool, arguments, context);
    gate.approvals.notify(UnattendedDenial {
        session: context.call.session_key.clone(),
        text: format!(
            "Not run: {why} wanted to call a tool that needs your approval.\n\n{shown}\n\nTo allow calls like it from now on, run `oxibot approvals grant {tool}` (see `oxibot approvals --help`)."
        ),
    });
    let note = format!(
        "{tool} needs a person's approval, and this turn runs unattended ({why}), so nobody can give it; the call was not run. The owner was told."
    );
    (note, refusal_record("unattended", why, id))
}

/// Asks the person and waits for the answer (or the timeout).
async fn ask(
    gate: &ApprovalGate<'_>,
    tool: &str,
    arguments: &Value,
    context: &BuiltinContext,
    id: String,
    timeout_secs: u64,
) -> Result<Option<Value>, (String, Value)> {
    let approvals = gate.approvals;
    let (code, answer) = approvals.wait_for(id.clone(), context.call.channel.clone(), context.call.chat_id.clone());
    // Whatever happens below (answer, timeout, the turn stopped), the code is used up.
    let _forget = Forget { approvals, code: code.clone() };
    let request = ApprovalRequest {
        code: code.clone(),
        tool: tool.to_owned(),
        shown: describe(tool, arguments, context),
        timeout_secs,
    };
    if gate.events.send(TurnEvent::ApprovalRequested(request)).is_err() {
        let note = format!("{tool} needs a person's approval and nobody can be asked; the call was not run");
        return Err((note, refusal_record("nobody", "no one to ask", &id)));
    }
    tracing::info!(%tool, %code, call = %id, "waiting for a person's approval");
    match tokio::time::timeout(Duration::from_secs(timeout_secs), answer).await {
        Ok(Ok((Answer::Yes, who))) => Ok(Some(Grant::Person(who).record(&id))),
        Ok(Ok((Answer::Always, who))) => {
            if let Err(error) = approvals.standing().add(StandingGrant::for_call(tool, arguments)) {
                tracing::warn!(%error, "cannot keep the standing approval; this call runs anyway");
            }
            Ok(Some(Grant::Person(who).record(&id)))
        }
        Ok(Ok((Answer::No, who))) => {
            let note = format!(
                "the person denied this {tool} call; it was not run. Do not retry it; ask them what to do instead"
            );
            let mut record = refusal_record("person", "denied", &id);
            record["sender"] = Value::String(who.sender_id);
            Err((note, record))
        }
        Ok(Err(_)) => {
            let note = format!("the approval request for {tool} was dropped; the call was not run");
            Err((note, refusal_record("nobody", "request dropped", &id)))
        }
        Err(_) => {
            let note = format!(
                "nobody approved this {tool} call within {timeout_secs} s, so it was not run (no answer counts as no)"
            );
            Err((note, refusal_record("timeout", "no answer in time", &id)))
        }
    }
}

/// Removes a pending call when its wait ends, however it ends.
struct Forget<'a> {
    approvals: &'a Approvals,
    code: String,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.approvals.forget(&self.code);
    }
}
