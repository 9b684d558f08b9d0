//! How a file a user sent is labelled in the text and which extension it is saved with (the
//! chat kit's `fetch_each` names it after its message and fetches it).

use oxibot_plugin::chat;

use crate::incoming::Attachment;

impl chat::Attachment for Attachment {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn extension(&self) -> String {
        self.extension.clone()
    }
}
