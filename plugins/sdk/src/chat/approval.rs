//! Approval requests as buttons. The kernel asks a person to approve a tool call with an
//! ordinary outbound whose metadata holds the request under `approval` (`code`, `tool`,
//! `shown`, `timeout_secs`); its text already says to reply `/approve CODE` or `/deny CODE`.
//! A channel that can draw buttons adds one per [`Choice`] and, when one is pressed, submits
//! the choice's `answer` text as an inbound from the person who pressed it: the kernel then
//! checks that person exactly as it checks a typed answer, so a button grants nothing a typed
//! reply could not.

use serde_json::Value;

/// Outbound metadata key of an approval request.
pub const APPROVAL_KEY: &str = "approval";

/// One button of an approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The button's label.
    pub label: &'static str,
    /// The text submitted when it is pressed (`/approve CODE`, …).
    pub answer: String,
    /// Whether it refuses (channels that colour buttons show it as dangerous).
    pub refuses: bool,
}

/// The buttons for the approval request in `metadata`, when it holds one (none for every
/// other outbound). The code is kept to the characters a code has, so an answer fits in any
/// service's button payload.
pub fn approval_choices(metadata: &Value) -> Option<Vec<Choice>> {
    let code = metadata.get(APPROVAL_KEY)?.get("code")?.as_str()?;
    if code.is_empty() || code.len() > 16 || !code.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    Some(vec![
        Choice { label: "Approve", answer: format!("/approve {code}"), refuses: false },
        Choice { label: "Always", answer: format!("/approve {code} always"), refuses: false },
        Choice { label: "Deny", answer: format!("/deny {code}"), refuses: true },
    ])
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
    use serde_json::json;

    #[test]
    fn a_request_gives_three_buttons_and_anything_else_none() {
        let choices = approval_choices(&json!({"approval": {"code": "AB12CD34"}})).unwrap();
        let answers: Vec<&str> = choices.iter().map(|c| c.answer.as_str()).collect();
        assert_eq!(answers, ["/approve AB12CD34", "/approve AB12CD34 always", "/deny AB12CD34"]);
        assert!(approval_choices(&json!({"message_id": 3})).is_none());
        assert!(approval_choices(&json!({"approval": {"code": "x y"}})).is_none());
    }

    #[test]
    fn only_button_answers_are_taken_as_answers() {
        assert!(is_approval_answer("/approve AB12CD34") && is_approval_answer("/deny AB12CD34"));
        assert!(is_approval_answer("/approve AB12CD34 always"));
        assert!(!is_approval_answer("/approve") && !is_approval_answer("rm -rf /") && !is_approval_answer("/deny A B"));
    }
}
