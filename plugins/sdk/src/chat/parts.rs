//! What went out of a reply sent in parts: how many parts of a reply were posted (so the
//! kernel's retry posts only the rest, also after the plugin restarted), and the files a
//! channel that sends none leaves out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::Outbound;
use crate::chat::write_atomically;

/// How many partly delivered replies are remembered; past that the oldest (the smallest
/// outbound ids: the kernel's ids grow with the clock) are forgotten, and a retry of such a
/// reply sends it whole.
const REMEMBERED: usize = 100;

/// The file the record is kept in, inside the channel's state (media) directory.
pub const PARTS_SENT_FILE: &str = "parts-sent.json";

/// The parts already posted of replies not delivered whole yet, by outbound id; kept in a
/// file when made with [`PartsSent::kept_in`], so a retry after a plugin restart (the kernel
/// keeps a reply's outbound id through every attempt) posts only what is missing.
///
/// A channel asks [`already`](Self::already) before it posts and calls
/// [`posted`](Self::posted) after each part goes out. A reply in one part is never written
/// down; one in several costs a small file write per part but its last.
#[derive(Debug, Default)]
pub struct PartsSent {
    sent: BTreeMap<u64, usize>,
    /// Where the record is kept; `None` keeps it in this process only.
    file: Option<PathBuf>,
}

impl PartsSent {
    /// A record kept in [`PARTS_SENT_FILE`] inside `dir`, starting from what an earlier run
    /// wrote there. An unreadable file is reported and moved aside (never written over).
    pub fn kept_in(dir: &Path) -> PartsSent {
        let file = dir.join(PARTS_SENT_FILE);
        let sent = match std::fs::read(&file) {
            Ok(bytes) => parse(&bytes).unwrap_or_else(|| {
                let aside = file.with_extension("json.corrupt");
                crate::warn!("{} is unreadable: moved aside to {}", file.display(), aside.display());
                let _ = std::fs::rename(&file, &aside);
                BTreeMap::new()
            }),
            Err(_) => BTreeMap::new(),
        };
        PartsSent { sent, file: Some(file) }
    }

    /// How many parts of reply `id` were posted before.
    pub fn already(&self, id: u64) -> usize {
        self.sent.get(&id).copied().unwrap_or(0)
    }

    /// Notes that the first `count` of the `total` parts of reply `id` are posted: kept until
    /// the last one is, then forgotten.
    pub fn posted(&mut self, id: u64, count: usize, total: usize) {
        let changed = if count >= total {
            self.sent.remove(&id).is_some()
        } else {
            self.sent.insert(id, count);
            while self.sent.len() > REMEMBERED {
                self.sent.pop_first();
            }
            true
        };
        if changed {
            self.save();
        }
    }

    /// Writes the record to its file, if it has one; a failed write is reported (the next
    /// retry then may post a part again, as before the record existed).
    fn save(&self) {
        let Some(file) = &self.file else { return };
        let record: Vec<(u64, usize)> = self.sent.iter().map(|(id, count)| (*id, *count)).collect();
        let bytes = serde_json::to_vec(&record).unwrap_or_default();
        if let Err(error) = write_atomically(file, &bytes) {
            crate::warn!("cannot write {}: {error}", file.display());
        }
    }
}

/// The record in a file's bytes: a JSON list of `[outbound id, parts posted]`.
fn parse(bytes: &[u8]) -> Option<BTreeMap<u64, usize>> {
    serde_json::from_slice::<Vec<(u64, usize)>>(bytes).ok().map(|pairs| pairs.into_iter().collect())
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
    fn a_retry_resumes_after_the_parts_posted_and_a_reply_posted_whole_is_forgotten() {
        let mut sent = PartsSent::default();
        sent.posted(4, 2, 3);
        sent.posted(5, 1, 1);
        assert_eq!((sent.already(4), sent.already(5)), (2, 0));
        sent.posted(4, 3, 3);
        assert_eq!(sent.already(4), 0);
    }

    #[test]
    fn the_parts_posted_survive_a_restart_and_the_file_goes_away_with_the_last_reply() {
        let dir = std::env::temp_dir().join(format!("oxibot-parts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        PartsSent::kept_in(&dir).posted(7, 1, 3);
        let mut restarted = PartsSent::kept_in(&dir);
        assert_eq!(restarted.already(7), 1, "forgotten across the restart");
        restarted.posted(7, 3, 3);
        assert_eq!(PartsSent::kept_in(&dir).already(7), 0);
        assert_eq!(std::fs::read_to_string(dir.join(PARTS_SENT_FILE)).unwrap(), "[]");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_record_keeps_the_newest_replies_and_an_unreadable_file_is_moved_aside() {
        let dir = std::env::temp_dir().join(format!("oxibot-parts-bound-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut sent = PartsSent::kept_in(&dir);
        for id in 1..=(REMEMBERED as u64 + 5) {
            sent.posted(id, 1, 2);
        }
        let kept = PartsSent::kept_in(&dir);
        assert_eq!((kept.already(5), kept.already(6), kept.sent.len()), (0, 1, REMEMBERED));
        std::fs::write(dir.join(PARTS_SENT_FILE), b"{torn").unwrap();
        assert_eq!(PartsSent::kept_in(&dir).already(6), 0);
        assert_eq!(std::fs::read(dir.join("parts-sent.json.corrupt")).unwrap(), b"{torn");
        std::fs::remove_dir_all(dir).unwrap();
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
