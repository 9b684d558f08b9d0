//! A sans-IO parser of `text/event-stream` bodies (server-sent events): bytes in, whole events
//! out, as the HTML standard's "interpreting an event stream" describes.
//!
//! Lines end in CR LF, LF or CR; `event:` names the event (`message` when absent), each `data:`
//! line adds a line of data, a line starting with `:` is a comment, and a blank line dispatches
//! the event unless it has no data. `id:` and `retry:` are read and dropped: the legacy MCP SSE
//! transport does not resume a stream.

/// The most bytes one event may hold before the stream is refused.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field, `message` by default.
    pub name: String,
    /// The `data:` lines joined with newlines.
    pub data: String,
}

/// An event grew larger than [`MAX_EVENT_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an event of the stream is larger than {MAX_EVENT_BYTES} bytes")]
pub struct EventTooLarge;

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub struct EventParser {
    /// The bytes of the line being read.
    line: Vec<u8>,
    /// Whether the previous byte was a CR, so a following LF ends no second line.
    after_cr: bool,
    /// The `event:` field of the event being read.
    name: Option<String>,
    /// Its data so far, each line followed by a newline.
    data: String,
    /// Whether a `data:` field was seen.
    has_data: bool,
}

impl EventParser {
    /// Feeds `chunk`, appending every event it completes to `events`.
    pub fn feed(&mut self, chunk: &[u8], events: &mut Vec<Event>) -> Result<(), EventTooLarge> {
        for &byte in chunk {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => {}
                b'\r' | b'\n' => self.end_line(events),
                _ => {
                    self.line.push(byte);
                    if self.line.len() + self.data.len() > MAX_EVENT_BYTES {
                        return Err(EventTooLarge);
                    }
                }
            }
        }
        Ok(())
    }

    /// Handles the line just ended.
    fn end_line(&mut self, events: &mut Vec<Event>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(events);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let line = String::from_utf8_lossy(&line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.name = Some(value.to_owned()),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            _ => {}
        }
    }

    /// Ends the event being read: hands it out when it has data, and starts the next.
    fn dispatch(&mut self, events: &mut Vec<Event>) {
        let name = self.name.take().filter(|name| !name.is_empty()).unwrap_or_else(|| "message".to_owned());
        let mut data = std::mem::take(&mut self.data);
        if std::mem::take(&mut self.has_data) {
            data.pop();
            events.push(Event { name, data });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]]) -> Vec<Event> {
        let mut parser = EventParser::default();
        let mut events = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut events).unwrap();
        }
        events
    }

    fn event(name: &str, data: &str) -> Event {
        Event { name: name.to_owned(), data: data.to_owned() }
    }

    #[test]
    fn named_and_unnamed_events_are_dispatched_at_a_blank_line() {
        let events = parse(&[b"event: endpoint\ndata: /messages/?session_id=1\n\ndata: {\"a\":1}\n\n"]);
        assert_eq!(events, [event("endpoint", "/messages/?session_id=1"), event("message", "{\"a\":1}")]);
    }

    #[test]
    fn every_line_ending_works_and_a_crlf_split_across_chunks_ends_one_line() {
        assert_eq!(
            parse(&[b"data: a\r\n\r\ndata: b\r\rdata: c\n\n"]),
            [event("message", "a"), event("message", "b"), event("message", "c")]
        );
        assert_eq!(parse(&[b"data: x\r", b"\n\r", b"\n"]), [event("message", "x")]);
    }

    #[test]
    fn data_lines_join_with_newlines_and_comments_and_other_fields_are_skipped() {
        let events = parse(&[b": ping\nid: 7\nretry: 100\ndata: one\ndata:two\n\n"]);
        assert_eq!(events, [event("message", "one\ntwo")]);
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_and_a_partial_one_waits() {
        assert!(parse(&[b"event: endpoint\n\n: keepalive\n\n"]).is_empty());
        assert!(parse(&[b"data: half"]).is_empty());
        assert_eq!(parse(&[b"data: ha", b"lf\n", b"\n"]), [event("message", "half")]);
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut parser = EventParser::default();
        let chunk = vec![b'x'; 1024 * 1024];
        let result = (0..17).try_for_each(|_| parser.feed(&chunk, &mut Vec::new()));
        assert_eq!(result, Err(EventTooLarge));
    }
}
