//! The bytes of a session file: encoding the padded metadata line and message lines,
//! decoding a whole file (spotting a torn last line), timestamps and file names.

use serde::{Deserialize, Serialize};
use serde_json::error::Category;
use serde_json::{Map, Value};

use super::journal::Record;
use super::{DiskState, Session};
use crate::message::ChatMessage;

/// Width, newline included, that a metadata line is padded to when it is written whole.
/// Small metadata (the usual case) always fits, so updates go in place.
pub const HEADER_WIDTH: usize = 512;

/// Widest metadata line that is ever overwritten in place. A write inside the first page of
/// a file cannot be torn by the death of the writing process (the kernel copies a page at a
/// time and checks for fatal signals only between pages); wider lines are always replaced
/// through a whole-file rewrite instead.
pub const IN_PLACE_LIMIT: usize = 4096;

/// The current local time as nanobot writes it (`datetime.now().isoformat()`):
/// `2026-01-02T03:04:05.123456`.
pub fn now_timestamp() -> String {
    timestamp(&chrono::Local::now())
}

/// `at` as `YYYY-MM-DDTHH:MM:SS.ffffff`, written field by field: a format string would be
/// parsed again at every call, and a turn writes several timestamps.
fn timestamp<Tz: chrono::TimeZone>(at: &chrono::DateTime<Tz>) -> String {
    use chrono::{Datelike as _, Timelike as _};
    let micros = at.nanosecond() % 1_000_000_000 / 1_000;
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{micros:06}",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

/// The file name stem for a session key: every `:` and every character that is unsafe in a
/// file name (`<>"/\|?*` and control characters) becomes `_`, then surrounding whitespace
/// is trimmed, as nanobot does. `cli:direct` → `cli_direct`.
pub(super) fn file_stem(key: &str) -> String {
    let replaced: String = key.chars().map(|c| if unsafe_in_file_name(c) { '_' } else { c }).collect();
    match replaced.trim() {
        "" => "_".to_owned(),
        trimmed => trimmed.to_owned(),
    }
}

fn unsafe_in_file_name(c: char) -> bool {
    matches!(c, '<' | '>' | ':' | '"' | '/' | '\\' | '|' | '?' | '*') || c.is_control()
}

/// The metadata line as written, fields in nanobot's order.
#[derive(Serialize)]
struct HeaderOut<'a> {
    #[serde(rename = "_type")]
    kind: &'static str,
    key: &'a str,
    created_at: &'a str,
    updated_at: &'a str,
    metadata: &'a Map<String, Value>,
    last_consolidated: usize,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// The metadata line as read; everything is optional, as in nanobot's loader.
#[derive(Debug, Deserialize)]
pub(super) struct HeaderIn {
    /// Always `metadata`; declared so it is not mistaken for an unknown key.
    #[serde(rename = "_type")]
    _kind: String,
    /// The key the file was written for; the key asked for wins, as in nanobot.
    #[serde(default, rename = "key")]
    _key: Option<Value>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    last_consolidated: Option<usize>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// The metadata line's JSON, without padding or newline.
pub(super) fn header_json(session: &Session) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&HeaderOut {
        kind: "metadata",
        key: &session.key,
        created_at: &session.created_at,
        updated_at: &session.updated_at,
        metadata: &session.metadata,
        last_consolidated: session.last_consolidated,
        extra: &session.header_extra,
    })
}

/// The width to give a metadata line of `json_len` bytes when the file is written whole:
/// [`HEADER_WIDTH`], or for bigger metadata a multiple of it with a quarter to spare so a
/// growing counter does not force another rewrite, or no padding at all past
/// [`IN_PLACE_LIMIT`], where padding would buy nothing.
pub(super) fn width_for(json_len: usize) -> usize {
    let needed = json_len + 1;
    let roomy = (needed + needed / 4).div_ceil(HEADER_WIDTH) * HEADER_WIDTH;
    if roomy <= IN_PLACE_LIMIT {
        roomy
    } else if needed <= IN_PLACE_LIMIT {
        IN_PLACE_LIMIT
    } else {
        needed
    }
}

/// `json` padded with spaces and a final newline to exactly `width` bytes.
/// The caller has checked that it fits.
pub(super) fn pad_line(mut json: Vec<u8>, width: usize) -> Vec<u8> {
    json.resize(width.saturating_sub(1).max(json.len()), b' ');
    json.push(b'\n');
    json
}

/// Appends one line per record to `out`.
pub(super) fn encode_records(records: &[Record], out: &mut Vec<u8>) -> serde_json::Result<()> {
    for record in records {
        serde_json::to_writer(&mut *out, record)?;
        out.push(b'\n');
    }
    Ok(())
}

/// Appends one line per message to `out`.
pub(super) fn encode_messages(messages: &[ChatMessage], out: &mut Vec<u8>) -> serde_json::Result<()> {
    for message in messages {
        serde_json::to_writer(&mut *out, message)?;
        out.push(b'\n');
    }
    Ok(())
}

/// A file's contents, decoded.
#[derive(Debug)]
pub(super) struct Decoded {
    /// The last metadata line found (nanobot accepts one anywhere; oxibot writes it first).
    pub header: Option<HeaderIn>,
    /// What the file looks like for the next write.
    pub disk: DiskState,
    /// Every message line, in order.
    pub messages: Vec<ChatMessage>,
    /// Every inbox and journal record, in order.
    pub records: Vec<Record>,
    /// A last line that does not parse: where it starts, its 1-based number and length.
    pub torn: Option<TornLine>,
    /// The file does not end with a newline (and nothing was torn).
    pub missing_newline: bool,
}

/// A last line cut short by a crash mid-append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TornLine {
    /// Byte offset of its first byte: where the file is cut back to.
    pub offset: usize,
    /// 1-based line number.
    pub line: usize,
    /// How many bytes it has.
    pub bytes: usize,
}

/// A damaged line that is not the last one.
#[derive(Debug)]
pub(super) struct Damaged {
    /// 1-based line number.
    pub line: usize,
    /// What the parser found.
    pub error: serde_json::Error,
}

/// One non-blank physical line.
struct RawLine<'a> {
    number: usize,
    start: usize,
    /// Length including the newline, if there is one.
    len: usize,
    terminated: bool,
    text: &'a [u8],
}

fn raw_lines(bytes: &[u8]) -> Vec<RawLine<'_>> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut number = 0;
    while start < bytes.len() {
        number += 1;
        let (end, terminated) = match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(at) => (start + at + 1, true),
            None => (bytes.len(), false),
        };
        let text = bytes[start..end].trim_ascii();
        if !text.is_empty() {
            lines.push(RawLine { number, start, len: end - start, terminated, text });
        }
        start = end;
    }
    lines
}

enum Line {
    Header(Box<HeaderIn>),
    Message(Box<ChatMessage>),
    /// An inbox or journal record of ours.
    Record(Box<Record>),
    /// A record of another `_type` (nanobot 0.3 keeps `provider_state` lines, a provider's
    /// conversation cache): not part of the conversation, so skipped.
    Other,
}

fn decode_line(text: &[u8]) -> serde_json::Result<Line> {
    match serde_json::from_slice::<ChatMessage>(text) {
        Ok(message) => Ok(Line::Message(Box::new(message))),
        // A metadata line has no `role`, so it fails as a message with a data error; only
        // then is it worth parsing a second time to look at `_type`.
        Err(error) if error.classify() == Category::Data => {
            let value: Value = serde_json::from_slice(text)?;
            match value.get("_type").and_then(Value::as_str) {
                Some("metadata") => Ok(Line::Header(Box::new(serde_json::from_value(value)?))),
                Some("inbox" | "call") => Ok(Line::Record(Box::new(serde_json::from_value(value)?))),
                Some(_) => Ok(Line::Other),
                None => Err(error),
            }
        }
        Err(error) => Err(error),
    }
}

/// Decodes a whole file. A last line that is not even JSON is reported as torn; any other
/// bad line is an error.
pub(super) fn decode(bytes: &[u8]) -> Result<Decoded, Damaged> {
    let lines = raw_lines(bytes);
    let mut decoded = Decoded {
        header: None,
        disk: DiskState::default(),
        messages: Vec::with_capacity(lines.len()),
        records: Vec::new(),
        torn: None,
        missing_newline: false,
    };
    let last = lines.len().saturating_sub(1);
    for (index, line) in lines.iter().enumerate() {
        match decode_line(line.text) {
            Ok(Line::Message(message)) => decoded.messages.push(*message),
            Ok(Line::Record(record)) => decoded.records.push(*record),
            Ok(Line::Other) => {}
            Ok(Line::Header(header)) => {
                if line.start == 0 && line.terminated {
                    decoded.disk.header_width = line.len;
                }
                decoded.header = Some(*header);
            }
            Err(error) if index == last && matches!(error.classify(), Category::Eof | Category::Syntax) => {
                decoded.torn = Some(TornLine { offset: line.start, line: line.number, bytes: line.len });
            }
            Err(error) => return Err(Damaged { line: line.number, error }),
        }
    }
    decoded.missing_newline = decoded.torn.is_none() && bytes.last().is_some_and(|&b| b != b'\n');
    Ok(decoded)
}

/// The first `count` message lines of a session file, byte for byte (a whole-file rewrite of
/// a session that left its archived messages on disk copies them back from the old file).
pub(super) fn leading_message_lines(bytes: &[u8], count: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut found = 0;
    for line in raw_lines(bytes) {
        if found == count {
            break;
        }
        if let Ok(Line::Message(_)) = decode_line(line.text) {
            out.extend_from_slice(line.text);
            out.push(b'\n');
            found += 1;
        }
    }
    out
}

/// Fills `session` from a decoded metadata line.
pub(super) fn apply_header(session: &mut Session, header: HeaderIn) {
    if let Some(created_at) = header.created_at {
        session.created_at = created_at;
    }
    if let Some(updated_at) = header.updated_at {
        session.updated_at = updated_at;
    }
    session.metadata = header.metadata.unwrap_or_default();
    session.last_consolidated = header.last_consolidated.unwrap_or(0);
    session.header_extra = header.extra;
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_timestamp_reads_as_the_iso_format_nanobot_writes() {
        use chrono::TimeZone as _;
        let offset = chrono::FixedOffset::east_opt(5 * 3600 + 1800).unwrap();
        for (nanos, written) in [(0, "2026-03-04T05:06:07.000000"), (123_456_789, "2026-03-04T05:06:07.123456")] {
            let at = offset.with_ymd_and_hms(2026, 3, 4, 5, 6, 7).unwrap() + chrono::Duration::nanoseconds(nanos);
            assert_eq!(super::timestamp(&at), written);
            assert_eq!(super::timestamp(&at), at.format("%Y-%m-%dT%H:%M:%S%.6f").to_string());
        }
        let year_one = chrono::Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0).unwrap();
        assert_eq!(super::timestamp(&year_one), year_one.format("%Y-%m-%dT%H:%M:%S%.6f").to_string());
    }

    use super::*;
    use crate::message::Role;
    use serde_json::json;

    #[test]
    fn file_stem_turns_the_channel_separator_and_unsafe_characters_into_underscores() {
        assert_eq!(file_stem("cli:direct"), "cli_direct");
        assert_eq!(file_stem("telegram:123:456"), "telegram_123_456");
        assert_eq!(file_stem("web:../../etc/passwd"), "web_.._.._etc_passwd");
        assert_eq!(file_stem("a<b>c\"d\\e|f?g*h\ni"), "a_b_c_d_e_f_g_h_i");
        assert_eq!(file_stem("  slack:C1  "), "slack_C1");
        assert_eq!(file_stem("matrix:!room:example.org"), "matrix_!room_example.org");
        assert_eq!(file_stem("  "), "_");
    }

    #[test]
    fn timestamps_look_like_python_isoformat_with_microseconds() {
        let stamp = now_timestamp();
        assert_eq!(stamp.len(), "2026-01-02T03:04:05.123456".len(), "{stamp}");
        assert_eq!(&stamp[10..11], "T");
        assert_eq!(&stamp[19..20], ".");
        assert!(chrono::NaiveDateTime::parse_from_str(&stamp, "%Y-%m-%dT%H:%M:%S%.f").is_ok());
    }

    #[test]
    fn a_padded_header_is_exactly_its_width_and_still_parses() {
        let session = Session::new("cli:direct");
        let line = pad_line(header_json(&session).unwrap(), HEADER_WIDTH);
        assert_eq!(line.len(), HEADER_WIDTH);
        assert_eq!(line.last(), Some(&b'\n'));
        let value: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["_type"], "metadata");
        assert_eq!(value["key"], "cli:direct");
    }

    #[test]
    fn header_width_grows_in_steps_and_stops_padding_past_the_in_place_limit() {
        assert_eq!(width_for(100), HEADER_WIDTH);
        assert_eq!(width_for(511), 1024);
        assert_eq!(width_for(900), 1536);
        assert_eq!(width_for(3500), IN_PLACE_LIMIT);
        assert_eq!(width_for(10_000), 10_001);
    }

    #[test]
    fn header_keys_come_out_in_nanobots_order_with_unknown_keys_after() {
        let mut session = Session::new("cli:direct");
        session.header_extra.insert("zz_custom".into(), json!(1));
        let text = String::from_utf8(header_json(&session).unwrap()).unwrap();
        let positions: Vec<usize> =
            ["_type", "key", "created_at", "updated_at", "metadata", "last_consolidated", "zz_custom"]
                .iter()
                .map(|k| text.find(&format!("\"{k}\":")).unwrap())
                .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
    }

    #[test]
    fn decode_reports_a_torn_last_line_and_a_damaged_middle_line_differently() {
        let good = b"{\"role\":\"user\",\"content\":\"a\"}\n";
        let mut torn = good.to_vec();
        torn.extend_from_slice(b"{\"role\":\"assistant\",\"con");
        let decoded = decode(&torn).unwrap();
        assert_eq!(decoded.messages.len(), 1);
        assert_eq!(decoded.torn, Some(TornLine { offset: good.len(), line: 2, bytes: 24 }));

        let mut middle = b"{\"role\":\"user\",\"con\n".to_vec();
        middle.extend_from_slice(good);
        assert_eq!(decode(&middle).unwrap_err().line, 1);
    }

    #[test]
    fn a_last_line_with_a_valid_shape_error_is_damage_not_a_tear() {
        let bytes = b"{\"role\":\"user\",\"content\":\"a\"}\n{\"role\":\"wizard\"}\n";
        assert_eq!(decode(bytes).unwrap_err().line, 2);
    }

    #[test]
    fn a_metadata_line_is_found_anywhere_but_only_one_at_offset_zero_is_overwritable() {
        let bytes = b"{\"role\":\"user\",\"content\":\"a\"}\n{\"_type\":\"metadata\",\"last_consolidated\":1}\n";
        let decoded = decode(bytes).unwrap();
        assert_eq!(decoded.messages.len(), 1);
        assert_eq!(decoded.header.unwrap().last_consolidated, Some(1));
        assert_eq!(decoded.disk.header_width, 0);
    }

    #[test]
    fn records_of_another_type_such_as_nanobots_provider_state_are_skipped() {
        let bytes = concat!(
            "{\"_type\": \"metadata\", \"key\": \"cli:direct\"}\n",
            "{\"role\": \"user\", \"content\": \"a\"}\n",
            "{\"_type\": \"provider_state\", \"provider\": \"openai\", \"state\": {\"id\": \"resp_1\"}}\n",
        );
        let decoded = decode(bytes.as_bytes()).unwrap();
        assert_eq!(decoded.messages.len(), 1);
        assert!(decoded.torn.is_none());
    }

    #[test]
    fn blank_lines_and_crlf_endings_are_tolerated() {
        let bytes = b"{\"_type\":\"metadata\"}\r\n\r\n{\"role\":\"user\",\"content\":\"a\"}\r\n";
        let decoded = decode(bytes).unwrap();
        assert_eq!(decoded.messages[0].role, Role::User);
        assert!(!decoded.missing_newline);
    }
}
