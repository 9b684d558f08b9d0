//! A sans-IO decoder for server-sent events: feed it body bytes as they arrive, get back
//! complete events. Both wire formats stream this way.

/// One complete server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when the server sent one (Anthropic does, OpenAI does not).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Splits a byte stream into events. Lines may be cut anywhere between chunks, including
/// inside a multi-byte character; `\n`, `\r\n` and `\r` all end a line.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the line not yet ended.
    pending: Vec<u8>,
    /// The `event:` of the event being read.
    event: Option<String>,
    /// The `data:` lines of the event being read.
    data: Vec<String>,
    /// The last byte fed was `\r`, so a following `\n` belongs to the same line end.
    after_cr: bool,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> SseDecoder {
        SseDecoder::default()
    }

    /// Consumes `bytes`, returning the events they complete. Invalid UTF-8 in a line is
    /// an error naming the offending text.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, String> {
        let mut events = Vec::new();
        for &byte in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => self.end_line(&mut events)?,
                _ => self.pending.push(byte),
            }
        }
        Ok(events)
    }

    /// Ends the stream: an event not followed by a blank line is still delivered.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, String> {
        let mut events = Vec::new();
        if !self.pending.is_empty() {
            self.end_line(&mut events)?;
        }
        self.end_line(&mut events)?;
        Ok(events.pop())
    }

    fn end_line(&mut self, events: &mut Vec<SseEvent>) -> Result<(), String> {
        let bytes = std::mem::take(&mut self.pending);
        let line = String::from_utf8(bytes)
            .map_err(|e| format!("stream line is not utf-8: {:?}", String::from_utf8_lossy(e.as_bytes())))?;
        if line.is_empty() {
            if !self.data.is_empty() {
                events.push(SseEvent { event: self.event.take(), data: std::mem::take(&mut self.data).join("\n") });
            }
            self.event = None;
            return Ok(());
        }
        let (field, value) = line.split_once(':').unwrap_or((line.as_str(), ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => self.data.push(value.to_owned()),
            "event" => self.event = Some(value.to_owned()),
            // Comments (`: keep-alive`), `id:` and `retry:` carry nothing a chat needs.
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_pieces(input: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut events: Vec<SseEvent> = input.chunks(piece).flat_map(|chunk| decoder.feed(chunk).unwrap()).collect();
        events.extend(decoder.finish().unwrap());
        events
    }

    #[test]
    fn events_come_out_whole_however_the_bytes_are_cut() {
        let input =
            "event: message_start\r\ndata: {\"a\":\"é\"}\r\n\r\n: keep-alive\n\ndata: one\ndata: two\n\ndata: [DONE]"
                .as_bytes();
        for piece in [1, 2, 3, 7, input.len()] {
            let events = decode_in_pieces(input, piece);
            assert_eq!(
                events,
                vec![
                    SseEvent { event: Some("message_start".into()), data: "{\"a\":\"é\"}".into() },
                    SseEvent { event: None, data: "one\ntwo".into() },
                    SseEvent { event: None, data: "[DONE]".into() },
                ],
                "piece size {piece}"
            );
        }
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let mut decoder = SseDecoder::new();
        assert!(decoder.feed(b"data: \xff\n").is_err());
    }
}
