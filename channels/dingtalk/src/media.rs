//! Fetching the files users send into the media directory, under names made from the
//! message id, so a message delivered again reuses the same paths.

use std::path::{Path, PathBuf};

use crate::api::{ApiError, OpenApi};
use crate::incoming::Attachment;

/// Downloads attachment number `index` of message `message_id` into `dir` (created when
/// missing) and returns the local path.
pub async fn fetch(
    api: &OpenApi,
    dir: &Path,
    message_id: &str,
    index: usize,
    attachment: &Attachment,
) -> Result<PathBuf, ApiError> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|error| ApiError::File { path: dir.display().to_string(), reason: error.to_string() })?;
    let dest = dir.join(local_name(message_id, index, attachment));
    api.download(&attachment.download_code, &dest).await?;
    Ok(dest)
}

/// `<message id>-<index>.<extension>`: the extension of the sender's file name, else the
/// kind's usual one; only safe characters.
pub fn local_name(message_id: &str, index: usize, attachment: &Attachment) -> String {
    let extension = attachment
        .file_name
        .as_deref()
        .and_then(extension_of)
        .unwrap_or_else(|| attachment.kind.default_extension().to_owned());
    format!("{}-{index}.{}", safe(message_id), safe(&extension))
}

fn extension_of(name: &str) -> Option<String> {
    let (_, extension) = name.rsplit_once('.')?;
    let plain = extension.chars().all(|c| c.is_ascii_alphanumeric());
    (plain && !extension.is_empty() && extension.len() <= 8).then(|| extension.to_ascii_lowercase())
}

fn safe(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incoming::AttachmentKind;

    fn attachment(kind: AttachmentKind, file_name: Option<&str>) -> Attachment {
        Attachment { kind, download_code: "dc".into(), file_name: file_name.map(Into::into) }
    }

    #[test]
    fn a_file_is_named_after_its_message_and_keeps_the_senders_extension() {
        assert_eq!(local_name("msgA1", 0, &attachment(AttachmentKind::File, Some("Report.PDF"))), "msgA1-0.pdf");
        assert_eq!(local_name("msgA1", 1, &attachment(AttachmentKind::Image, None)), "msgA1-1.jpg");
    }

    #[test]
    fn unsafe_characters_never_reach_the_file_system() {
        assert_eq!(local_name("../m+1/=", 0, &attachment(AttachmentKind::Video, Some("x./y"))), "___m_1__-0.mp4");
    }
}
