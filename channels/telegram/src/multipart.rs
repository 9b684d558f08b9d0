//! A `multipart/form-data` body for uploads (`sendPhoto`, `sendDocument`): text fields and one
//! file, built in memory with a boundary that does not occur in the parts.

use std::time::{SystemTime, UNIX_EPOCH};

/// A form under construction.
#[derive(Debug, Default)]
pub struct Form {
    /// `(name, value)` text fields, in order.
    fields: Vec<(String, String)>,
    /// `(field name, file name, bytes)` of the file, if any.
    file: Option<(String, String, Vec<u8>)>,
}

impl Form {
    /// An empty form.
    pub fn new() -> Form {
        Form::default()
    }

    /// Adds a text field.
    pub fn text(mut self, name: &str, value: impl Into<String>) -> Form {
        self.fields.push((name.to_owned(), value.into()));
        self
    }

    /// Sets the file part, sent under the field `name` as `file_name`.
    pub fn file(mut self, name: &str, file_name: &str, bytes: Vec<u8>) -> Form {
        self.file = Some((name.to_owned(), file_name.to_owned(), bytes));
        self
    }

    /// The `Content-Type` header value and the body.
    pub fn encode(self) -> (String, Vec<u8>) {
        let boundary = self.boundary();
        let mut body = Vec::new();
        for (name, value) in &self.fields {
            body.extend_from_slice(
                format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{}\"\r\n\r\n", quoted(name)).as_bytes(),
            );
            body.extend_from_slice(value.as_bytes());
            body.extend_from_slice(b"\r\n");
        }
        if let Some((name, file_name, bytes)) = &self.file {
            let head = format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{}\"; filename=\"{}\"\r\nContent-Type: application/octet-stream\r\n\r\n",
                quoted(name),
                quoted(file_name)
            );
            body.extend_from_slice(head.as_bytes());
            body.extend_from_slice(bytes);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        (format!("multipart/form-data; boundary={boundary}"), body)
    }

    /// A boundary found in no part: time-based, lengthened until it is unique.
    fn boundary(&self) -> String {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
        self.unique_boundary(format!("oxibot-{}-{nanos:x}", std::process::id()))
    }

    /// `candidate`, lengthened until no part contains it.
    fn unique_boundary(&self, candidate: String) -> String {
        let mut boundary = candidate;
        while self.contains(&boundary) {
            boundary.push('x');
        }
        boundary
    }

    fn contains(&self, needle: &str) -> bool {
        let needle = needle.as_bytes();
        let texts = self.fields.iter().flat_map(|(n, v)| [n.as_bytes(), v.as_bytes()]);
        let file = self.file.iter().flat_map(|(n, f, b)| [n.as_bytes(), f.as_bytes(), b.as_slice()]);
        texts.chain(file).any(|hay| hay.windows(needle.len()).any(|w| w == needle))
    }
}

/// A header parameter value: no quotes or line breaks inside.
fn quoted(value: &str) -> String {
    value.chars().map(|c| if matches!(c, '"' | '\r' | '\n' | '\\') { '_' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_holds_its_fields_then_the_file_between_boundaries() {
        let (content_type, body) =
            Form::new().text("chat_id", "42").file("document", "notes.txt", b"hello".to_vec()).encode();
        let boundary = content_type.strip_prefix("multipart/form-data; boundary=").unwrap();
        let text = String::from_utf8(body).unwrap();
        let expected = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n42\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"document\"; filename=\"notes.txt\"\r\nContent-Type: application/octet-stream\r\n\r\nhello\r\n\
             --{boundary}--\r\n"
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn a_boundary_that_occurs_in_the_file_is_lengthened_until_it_does_not() {
        let form = Form::new().file("photo", "a.png", b"--oxibot-1 and oxibot-1x".to_vec());
        assert_eq!(form.unique_boundary("oxibot-1".to_owned()), "oxibot-1xx");
        assert_eq!(Form::new().unique_boundary("oxibot-1".to_owned()), "oxibot-1");
    }

    #[test]
    fn quotes_and_line_breaks_cannot_escape_a_file_name() {
        let (_, body) = Form::new().file("document", "a\"b\r\nc.txt", vec![]).encode();
        assert!(String::from_utf8(body).unwrap().contains("filename=\"a_b__c.txt\""));
    }
}
