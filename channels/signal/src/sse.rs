//! Server-sent events, sans I/O: bytes in as they arrive, whole events out. An event is its
//! `data:` lines joined by newlines, ended by a blank line; `event:` names and `:` comments
//! (keep-alives) are skipped.

/// Collects lines into events.
#[derive(Debug, Default)]
pub struct EventReader {
    /// Bytes of a line not ended yet.
    partial: Vec<u8>,
    /// The `data:` lines of the event being read.
    data: Vec<String>,
}

impl EventReader {
    /// Feeds `bytes`; returns the data of every event they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        for &byte in bytes {
            if byte != b'\n' {
                self.partial.push(byte);
                continue;
            }
            let line = String::from_utf8_lossy(&self.partial).trim_end_matches('\r').to_owned();
            self.partial.clear();
            if line.is_empty() {
                if !self.data.is_empty() {
                    events.push(self.data.join("\n"));
                    self.data.clear();
                }
            } else if let Some(data) = line.strip_prefix("data:") {
                // One space after the colon belongs to the syntax, not the data.
                self.data.push(data.strip_prefix(' ').unwrap_or(data).to_owned());
            }
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_end_at_blank_lines_and_may_arrive_in_pieces() {
        let mut reader = EventReader::default();
        assert!(reader.feed(b"event:receive\ndata:{\"a\"").is_empty());
        assert_eq!(reader.feed(b":1}\n\n"), ["{\"a\":1}"]);
        assert_eq!(reader.feed(b":\n\ndata: x\r\ndata: y\r\n\r\n"), ["x\ny"]);
    }
}
