//! What went out of a reply sent in parts: how many parts of a reply whose delivery failed
//! halfway were sent (so the kernel's retry sends only the rest), and the files a channel that
//! sends none leaves out.

use std::collections::HashMap;

use crate::Outbound;

/// How many partly delivered replies are remembered; past that the oldest notes are dropped
/// (all at once), and a retry of such a reply sends it whole.
const REMEMBERED: usize = 100;

/// The parts already sent of replies whose delivery failed halfway, by outbound id.
#[derive(Debug, Default)]
pub struct PartsSent {
    sent: HashMap<u64, usize>,
}

impl PartsSent {
    /// How many parts of reply `id` were sent before; forgotten with this call.
    pub fn take(&mut self, id: u64) -> usize {
        self.sent.remove(&id).unwrap_or(0)
    }

    /// Notes that the first `count` parts of reply `id` were sent.
    pub fn remember(&mut self, id: u64, count: usize) {
        if count == 0 {
            return;
        }
        if self.sent.len() >= REMEMBERED {
            self.sent.clear();
        }
        self.sent.insert(id, count);
    }
}

/// For a channel that sends no files: logs that `outbound`'s files are left out, and fails
/// with the reason when the reply is files alone (`has_text` false).
pub fn leave_files_out(outbound: &Outbound, has_text: bool, channel: &str) -> Result<(), String> {
    if outbound.media.is_empty() {
        return Ok(());
    }
    crate::warn!(
        "reply {}: {} attachment(s) not sent (the {channel} channel cannot send files)",
        outbound.id,
        outbound.media.len()
    );
    if has_text { Ok(()) } else { Err(format!("the {channel} channel cannot send files")) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_retry_resumes_after_the_parts_sent_and_only_once() {
        let mut sent = PartsSent::default();
        sent.remember(4, 2);
        sent.remember(5, 0);
        assert_eq!((sent.take(4), sent.take(4), sent.take(5)), (2, 0, 0));
    }

    #[test]
    fn a_reply_of_files_alone_fails_and_one_with_text_goes_without_them() {
        let outbound = |media: Vec<String>| Outbound {
            id: 1,
            chat_id: "c".into(),
            content: String::new(),
            media,
            stream_id: None,
            metadata: json!({}),
        };
        assert_eq!(leave_files_out(&outbound(vec![]), false, "x"), Ok(()));
        assert_eq!(leave_files_out(&outbound(vec!["/f".into()]), true, "x"), Ok(()));
        assert_eq!(
            leave_files_out(&outbound(vec!["/f".into()]), false, "x"),
            Err("the x channel cannot send files".into())
        );
    }
}
