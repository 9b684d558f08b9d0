//! A sans-IO decoder for server-sent events: feed it body bytes as they arrive, get back
//! complete events. Both wire formats stream this way. Lines are found with `memchr` and
//! read in place; only a line cut between two chunks is copied.

/// One complete server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when the server sent one (Anthropic does, OpenAI does not).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// One complete server-sent event, borrowed from the decoder's buffers (which the next event
/// reuses, so a stream's events cost no allocation once the buffers are big enough).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEventRef<'a> {
    /// The `event:` field, when the server sent one.
    pub event: Option<&'a str>,
    /// The `data:` lines joined with `\n`.
    pub data: &'a str,
}

impl SseEventRef<'_> {
    /// The event, owned.
    pub fn to_owned_event(self) -> SseEvent {
        SseEvent { event: self.event.map(str::to_owned), data: self.data.to_owned() }
    }
}

/// A line of the stream that is not UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stream line is not utf-8: {0:?}")]
pub struct SseError(String);

impl From<SseError> for String {
    fn from(error: SseError) -> String {
        error.to_string()
    }
}

/// Splits a byte stream into events. Lines may be cut anywhere between chunks, including
/// inside a multi-byte character; `\n`, `\r\n` and `\r` all end a line.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the line not yet ended (only a line cut between two chunks lands here).
    pending: Vec<u8>,
    /// The `event:` of the event being read, when `has_event`.
    event: String,
    /// An `event:` line came for the event being read.
    has_event: bool,
    /// The `data:` lines of the event being read, joined with `\n`.
    data: String,
    /// How many `data:` lines came for the event being read (an event needs one).
    data_lines: usize,
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
        self.feed_with(bytes, |event| {
            events.push(event.to_owned_event());
            Ok::<_, SseError>(false)
        })?;
        Ok(events)
    }

    /// Consumes `bytes`, handing each event they complete to `on_event` without copying it;
    /// stops, returning `true`, as soon as `on_event` returns `true` (the stream's end marker).
    pub fn feed_with<E: From<SseError>>(
        &mut self,
        bytes: &[u8],
        mut on_event: impl FnMut(SseEventRef<'_>) -> Result<bool, E>,
    ) -> Result<bool, E> {
        let mut rest = bytes;
        if !rest.is_empty() && std::mem::take(&mut self.after_cr) && rest[0] == b'\n' {
            rest = &rest[1..];
        }
        while let Some(end) = memchr::memchr2(b'\n', b'\r', rest) {
            let (line, ending) = (&rest[..end], rest[end]);
            rest = &rest[end + 1..];
            if ending == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            if self.line_ended(line, &mut on_event)? {
                return Ok(true);
            }
        }
        self.pending.extend_from_slice(rest);
        Ok(false)
    }

    /// Ends the stream: an event not followed by a blank line is still delivered.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, String> {
        let mut last = None;
        self.finish_with(|event| {
            last = Some(event.to_owned_event());
            Ok::<_, SseError>(false)
        })?;
        Ok(last)
    }

    /// Ends the stream, handing a last event not followed by a blank line to `on_event`;
    /// returns what `on_event` did (`false` when no event was left).
    pub fn finish_with<E: From<SseError>>(
        &mut self,
        mut on_event: impl FnMut(SseEventRef<'_>) -> Result<bool, E>,
    ) -> Result<bool, E> {
        if !self.pending.is_empty() && self.line_ended(&[], &mut on_event)? {
            return Ok(true);
        }
        self.dispatch(&mut on_event)
    }

    /// Reads the line made of the pending bytes and `tail`.
    fn line_ended<E: From<SseError>>(
        &mut self,
        tail: &[u8],
        on_event: &mut impl FnMut(SseEventRef<'_>) -> Result<bool, E>,
    ) -> Result<bool, E> {
        if self.pending.is_empty() {
            return self.read_line(tail, on_event);
        }
        let mut line = std::mem::take(&mut self.pending);
        line.extend_from_slice(tail);
        let outcome = self.read_line(&line, on_event);
        line.clear();
        self.pending = line;
        outcome
    }

    fn read_line<E: From<SseError>>(
        &mut self,
        bytes: &[u8],
        on_event: &mut impl FnMut(SseEventRef<'_>) -> Result<bool, E>,
    ) -> Result<bool, E> {
        let line = std::str::from_utf8(bytes).map_err(|_| SseError(String::from_utf8_lossy(bytes).into_owned()))?;
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => {
                if self.data_lines > 0 {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.data_lines += 1;
            }
            "event" => {
                self.event.clear();
                self.event.push_str(value);
                self.has_event = true;
            }
            // Comments (`: keep-alive`), `id:` and `retry:` carry nothing a chat needs.
            _ => {}
        }
        Ok(false)
    }

    /// A blank line: the event read so far, if it has data, goes to `on_event`.
    fn dispatch<E>(&mut self, on_event: &mut impl FnMut(SseEventRef<'_>) -> Result<bool, E>) -> Result<bool, E> {
        let outcome = if self.data_lines > 0 {
            on_event(SseEventRef { event: self.has_event.then_some(self.event.as_str()), data: &self.data })
        } else {
            Ok(false)
        };
        self.data.clear();
        self.data_lines = 0;
        self.has_event = false;
        outcome
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

    #[test]
    fn borrowed_events_match_the_owned_ones_and_the_end_marker_stops_the_feed() {
        let input = b"data: a\r\n\r\nevent: e\rdata: b\r\rdata: stop\n\ndata: after\n\n";
        for piece in [1, 2, 5, input.len()] {
            let mut decoder = SseDecoder::new();
            let mut seen = Vec::new();
            let mut stopped = false;
            for chunk in input.chunks(piece) {
                stopped = decoder
                    .feed_with(chunk, |event| {
                        seen.push(event.to_owned_event());
                        Ok::<_, SseError>(event.data == "stop")
                    })
                    .unwrap();
                if stopped {
                    break;
                }
            }
            assert!(stopped, "piece size {piece}");
            assert_eq!(
                seen,
                vec![
                    SseEvent { event: None, data: "a".into() },
                    SseEvent { event: Some("e".into()), data: "b".into() },
                    SseEvent { event: None, data: "stop".into() },
                ],
                "piece size {piece}"
            );
        }
    }

    #[test]
    fn an_event_cut_by_the_end_of_the_stream_is_still_delivered() {
        let mut decoder = SseDecoder::new();
        assert_eq!(decoder.feed(b"event: x\ndata: {\"a\"").unwrap(), vec![]);
        assert_eq!(decoder.feed(b"").unwrap(), vec![]);
        assert_eq!(decoder.finish().unwrap(), Some(SseEvent { event: Some("x".into()), data: "{\"a\"".into() }));
    }
}
