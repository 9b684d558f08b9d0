//! Fetching the files users send into the media directory, under names made from the message
//! id, so a message delivered again reuses the same paths.

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
    let dest = dir.join(local_name(message_id, index, &attachment.extension));
    api.download(message_id, &attachment.key, attachment.kind, &dest).await?;
    Ok(dest)
}

/// `<message id>-<index>.<extension>`, with only safe characters.
pub fn local_name(message_id: &str, index: usize, extension: &str) -> String {
    format!("{}-{index}.{}", safe(message_id), safe(extension))
}

fn safe(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_named_after_its_message_with_only_safe_characters() {
        assert_eq!(local_name("om_abc123", 0, "jpg"), "om_abc123-0.jpg");
        assert_eq!(local_name("../om/1", 2, "p.df"), "___om_1-2.p_df");
    }
}
