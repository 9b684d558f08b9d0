//! Downloading a message's attachments into the media directory, so the kernel gets local
//! paths.

use std::path::{Path, PathBuf};

use oxibot_plugin::warn;

use crate::api::Rest;
use crate::events::Attachment;

/// Attachments larger than this are not downloaded.
const MAX_ATTACHMENT_BYTES: u64 = 20 * 1024 * 1024;

/// What became of a message's attachments.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Downloaded {
    /// Local paths of the files downloaded.
    pub paths: Vec<PathBuf>,
    /// One line per attachment for the message text: its path, or why it is missing.
    pub notes: Vec<String>,
}

/// Downloads each attachment into `dir` as `<attachment id>_<file name>`.
pub async fn download_all(rest: &Rest, dir: &Path, attachments: &[Attachment]) -> Downloaded {
    let mut downloaded = Downloaded::default();
    if attachments.is_empty() {
        return downloaded;
    }
    if let Err(error) = tokio::fs::create_dir_all(dir).await {
        warn!("discord: cannot create the media directory {}: {error}", dir.display());
    }
    for attachment in attachments {
        let name = display_name(attachment);
        if attachment.size > MAX_ATTACHMENT_BYTES {
            downloaded.notes.push(format!("[attachment: {name} - too large to download]"));
            continue;
        }
        let path = dir.join(format!("{}_{}", safe_file_name(&attachment.id), safe_file_name(&name)));
        match rest.download(&attachment.url, &path).await {
            Ok(()) => {
                downloaded.notes.push(format!("[attachment: {}]", path.display()));
                downloaded.paths.push(path);
            }
            Err(error) => {
                warn!("discord: cannot download attachment {name}: {error}");
                downloaded.notes.push(format!("[attachment: {name} - download failed]"));
            }
        }
    }
    downloaded
}

fn display_name(attachment: &Attachment) -> String {
    if attachment.filename.is_empty() { "file".to_owned() } else { attachment.filename.clone() }
}

/// A file name that stays inside its directory: letters, digits, `.`, `-` and `_` only, and
/// no leading dot.
fn safe_file_name(name: &str) -> String {
    let cleaned: String =
        name.chars().map(|c| if c.is_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' }).collect();
    let cleaned = cleaned.trim_start_matches('.');
    if cleaned.is_empty() { "file".to_owned() } else { cleaned.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::safe_file_name;

    #[test]
    fn file_names_cannot_leave_the_media_directory() {
        assert_eq!(safe_file_name("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(safe_file_name("..."), "file");
        assert_eq!(safe_file_name("photo 1.png"), "photo_1.png");
    }
}
