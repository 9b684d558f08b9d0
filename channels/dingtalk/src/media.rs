//! How a file a user sent is labelled in the text and which extension it is saved with (the
//! chat kit's `fetch_each` names it after its message and fetches it).

use oxibot_plugin::chat;

use crate::incoming::Attachment;

impl chat::Attachment for Attachment {
    fn label(&self) -> String {
        self.kind.placeholder().to_owned()
    }

    /// The extension of the sender's file name, else the kind's usual one.
    fn extension(&self) -> String {
        self.file_name.as_deref().and_then(extension_of).unwrap_or_else(|| self.kind.default_extension().to_owned())
    }
}

fn extension_of(name: &str) -> Option<String> {
    let (_, extension) = name.rsplit_once('.')?;
    let plain = extension.chars().all(|c| c.is_ascii_alphanumeric());
    (plain && !extension.is_empty() && extension.len() <= 8).then(|| extension.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use oxibot_plugin::chat::{Attachment as _, media_file_name};

    use super::*;
    use crate::incoming::AttachmentKind;

    fn local_name(message_id: &str, index: usize, attachment: &Attachment) -> String {
        media_file_name(message_id, index, &attachment.extension())
    }

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
