//! The ACP approver: a call the kernel's approval gate holds for a person's yes
//! ([`ApprovalRequest`]) becomes a `session/request_permission` to the editor, and the option
//! the person picks there goes back to the kernel's approvals as their answer. The answer
//! travels from the editor to the kernel only, never through the model.

use std::sync::Arc;

use oxibot_kernel::session::SessionKey;
use oxibot_kernel::turn::approval::{Answer, Answerer, ApprovalRequest, Approvals};
use serde_json::{Value, json};

use super::rpc::Outbox;

/// The sender the editor's answers are recorded under.
const EDITOR: &str = "acp-client";

/// The options offered, by id: the id is also the ACP option kind.
const OPTIONS: [(&str, &str); 3] =
    [("allow_once", "Allow"), ("allow_always", "Always allow calls like it"), ("reject_once", "Reject")];

/// Asks the editor about the call waiting under `request.code` (the editor knows it as
/// `tool_call_id`) and gives the kernel the answer; no answer, an error or a cancelled prompt
/// is a no.
pub async fn ask(
    outbox: Outbox,
    approvals: Arc<Approvals>,
    key: SessionKey,
    tool_call_id: String,
    request: ApprovalRequest,
) {
    let params = json!({
        "sessionId": key.as_str(),
        "toolCall": {
            "toolCallId": tool_call_id,
            "title": format!("{} needs your approval", request.tool),
            "status": "pending",
            "content": [{"type": "content", "content": {"type": "text", "text": request.shown}}],
        },
        "options": OPTIONS.map(|(id, name)| json!({"optionId": id, "name": name, "kind": id})),
    });
    let answer = match outbox.request("session/request_permission", params).await {
        Ok(result) => answer_of(&result),
        Err(error) => {
            tracing::warn!(%error, code = %request.code, "the editor did not answer a permission request");
            Answer::No
        }
    };
    approvals.bind(&request.code, EDITOR);
    let from =
        Answerer { channel: key.channel().to_owned(), chat_id: key.chat_id().to_owned(), sender_id: EDITOR.into() };
    if let Err(error) = approvals.answer(&request.code, answer, &from) {
        // The call timed out or its turn was stopped while the editor asked.
        tracing::info!(%error, "the editor's answer came too late");
    }
}

/// The person's answer in a `RequestPermissionResponse`.
fn answer_of(result: &Value) -> Answer {
    let outcome = &result["outcome"];
    match (outcome["outcome"].as_str(), outcome["optionId"].as_str()) {
        (Some("selected"), Some("allow_once")) => Answer::Yes,
        (Some("selected"), Some("allow_always")) => Answer::Always,
        _ => Answer::No,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_selected_allow_option_allows() {
        let selected = |id: &str| json!({"outcome": {"outcome": "selected", "optionId": id}});
        assert_eq!(answer_of(&selected("allow_once")), Answer::Yes);
        assert_eq!(answer_of(&selected("allow_always")), Answer::Always);
        assert_eq!(answer_of(&selected("reject_once")), Answer::No);
        assert_eq!(answer_of(&selected("made_up")), Answer::No);
        assert_eq!(answer_of(&json!({"outcome": {"outcome": "cancelled"}})), Answer::No);
        assert_eq!(answer_of(&json!(null)), Answer::No);
    }
}
