//! Fetching a user's files: `getFile`, then a download into the media directory under a stable
//! name (the file's unique id), so a message delivered again reuses the same path.

use std::path::{Path, PathBuf};

use crate::api::BotApi;
use crate::error::ApiError;
use crate::incoming::Attachment;

/// Downloads `attachment` into `dir` (created when missing) and returns the local path.
pub async fn fetch(api: &BotApi, dir: &Path, attachment: &Attachment) -> Result<PathBuf, ApiError> {
    let file = api.get_file(&attachment.file_id).await?;
    let Some(remote) = file.file_path else {
        return Err(ApiError::Malformed { method: "getFile".into(), reason: "the file has no download path".into() });
    };
    tokio::fs::create_dir_all(dir).await.map_err(|e| ApiError::File {
        method: "download".into(),
        reason: format!("cannot create {}: {e}", dir.display()),
    })?;
    let dest = dir.join(local_name(attachment, &remote));
    api.download(&remote, &dest).await?;
    Ok(dest)
}

/// `<unique id>.<extension>`: the extension from Telegram's path, else the sender's file name,
/// else the kind's usual one; only safe characters.
pub fn local_name(attachment: &Attachment, remote_path: &str) -> String {
    let stem = attachment.unique_id.as_deref().unwrap_or(&attachment.file_id);
    let extension = extension_of(remote_path)
        .or_else(|| attachment.file_name.as_deref().and_then(extension_of))
        .unwrap_or_else(|| attachment.kind.default_extension().to_owned());
    format!("{}.{}", safe(stem), safe(&extension))
}

fn extension_of(path: &str) -> Option<String> {
    let name = path.rsplit('/').next()?;
    let (_, extension) = name.rsplit_once('.')?;
    (!extension.is_empty() && extension.len() <= 8).then(|| extension.to_ascii_lowercase())
}

fn safe(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incoming::AttachmentKind;

    fn attachment(kind: AttachmentKind, unique_id: Option<&str>, file_name: Option<&str>) -> Attachment {
        Attachment {
            kind,
            file_id: "AgAC/id+1".into(),
            unique_id: unique_id.map(Into::into),
            file_name: file_name.map(Into::into),
        }
    }

    #[test]
    fn a_file_is_named_by_its_unique_id_and_telegrams_extension() {
        assert_eq!(
            local_name(&attachment(AttachmentKind::Image, Some("AQADx"), None), "photos/file_3.JPG"),
            "AQADx.jpg"
        );
    }

    #[test]
    fn without_an_extension_the_senders_name_or_the_kind_decides() {
        assert_eq!(
            local_name(&attachment(AttachmentKind::File, Some("u"), Some("report.pdf")), "documents/file_1"),
            "u.pdf"
        );
        assert_eq!(local_name(&attachment(AttachmentKind::Voice, Some("u"), None), "voice/file_2"), "u.ogg");
    }

    #[test]
    fn unsafe_characters_never_reach_the_file_system() {
        assert_eq!(local_name(&attachment(AttachmentKind::File, None, None), "x/y.t/z"), "AgAC_id_1.bin");
    }
}
