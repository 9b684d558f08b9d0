//! Approval requests as buttons. A channel that announces approvals
//! ([`crate::ChannelPlugin::approvals`]) gets each tool call waiting for a person's yes as a
//! [`ChannelEvent::Approval`](crate::ChannelEvent::Approval): an [`ApprovalRequest`] with the
//! text to show and the answers to offer. It draws one button per [`Choice`] and, when one is
//! pressed, submits the choice's `answer` text as an inbound from the person who pressed it:
//! the kernel then checks that person exactly as it checks a typed answer, so a button grants
//! nothing a typed reply could not. A channel that does not announce approvals gets the same
//! request as an ordinary outbound whose text says to reply `/approve CODE`.

use oxibot_proto::{ApprovalRequest, Outbound};
use serde_json::Value;

/// Outbound metadata key of an approval request sent as text (to a channel that did not
/// announce approvals).
pub const APPROVAL_KEY: &str = "approval";

/// One button of an approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The button's label.
    pub label: String,
    /// The text submitted when it is pressed (`/approve CODE`, …).
    pub answer: String,
    /// Whether it refuses (channels that colour buttons show it as dangerous).
    pub refuses: bool,
}

/// The buttons of `request`: one per answer a button may submit (an answer that is not one,
/// which no kernel sends, gets no button, so a press always fits the service's payload and
/// always passes [`is_approval_answer`]).
pub fn choices(request: &ApprovalRequest) -> Vec<Choice> {
    request
        .answers
        .iter()
        .filter(|answer| is_approval_answer(&answer.answer))
        .map(|answer| Choice { label: answer.label.clone(), answer: answer.answer.clone(), refuses: answer.refuses })
        .collect()
}

/// `request` as the reply a channel sends to show it: its text, to its chat, with the
/// metadata of the message that started the turn (thread, reply-to), under the request's id
/// (which its acknowledgement carries).
pub fn as_outbound(request: &ApprovalRequest) -> Outbound {
    Outbound {
        id: request.id,
        chat_id: request.chat_id.clone(),
        content: request.text.clone(),
        media: Vec::new(),
        stream_id: None,
        metadata: if request.metadata.is_object() {
            request.metadata.clone()
        } else {
            Value::Object(Default::default())
        },
    }
}

/// Whether `text` is an answer a button submits (so a channel takes a button press with that
/// payload, and nothing else, as a message).
pub fn is_approval_answer(text: &str) -> bool {
    let mut words = text.split_whitespace();
    let verb = words.next();
    let code_ok = words.next().is_some_and(|code| code.len() <= 16 && code.chars().all(|c| c.is_ascii_alphanumeric()));
    let rest: Vec<&str> = words.collect();
    match (verb, rest.as_slice()) {
        (Some("/approve"), [] | ["always"]) | (Some("/deny"), []) => code_ok,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxibot_proto::ApprovalAnswer;
    use serde_json::json;

    fn request(answers: &[(&str, &str, bool)]) -> ApprovalRequest {
        ApprovalRequest {
            id: 7,
            chat_id: "c1".into(),
            code: "AB12CD34".into(),
            tool: "exec".into(),
            shown: "exec: sh -c 'ls'".into(),
            timeout_secs: 300,
            text: "Approval needed".into(),
            answers: answers
                .iter()
                .map(|(label, answer, refuses)| ApprovalAnswer {
                    label: (*label).into(),
                    answer: (*answer).into(),
                    refuses: *refuses,
                })
                .collect(),
            metadata: json!({"thread": "t"}),
        }
    }

    #[test]
    fn a_request_gives_a_button_per_answer_and_none_for_anything_else() {
        let asked = request(&[
            ("Approve", "/approve AB12CD34", false),
            ("Deny", "/deny AB12CD34", true),
            ("Run", "rm -rf /", false),
        ]);
        let choices = choices(&asked);
        let answers: Vec<&str> = choices.iter().map(|c| c.answer.as_str()).collect();
        assert_eq!(answers, ["/approve AB12CD34", "/deny AB12CD34"]);
        assert!(choices[1].refuses && !choices[0].refuses);
        let shown = as_outbound(&asked);
        assert_eq!((shown.id, shown.chat_id.as_str(), shown.content.as_str()), (7, "c1", "Approval needed"));
        assert_eq!(shown.metadata, json!({"thread": "t"}));
    }

    #[test]
    fn only_button_answers_are_taken_as_answers() {
        assert!(is_approval_answer("/approve AB12CD34") && is_approval_answer("/deny AB12CD34"));
        assert!(is_approval_answer("/approve AB12CD34 always"));
        assert!(!is_approval_answer("/approve") && !is_approval_answer("rm -rf /") && !is_approval_answer("/deny A B"));
    }
}
