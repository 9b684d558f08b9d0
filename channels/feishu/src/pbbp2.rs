//! The frames of Feishu's event long connection: protobuf (`pbbp2.Frame`, proto2) in binary
//! WebSocket messages, encoded and decoded here by hand — one message type does not need a
//! protobuf library.
//!
//! ```text
//! message Header { required string key = 1; required string value = 2; }
//! message Frame {
//!   required uint64 SeqID = 1;  required uint64 LogID = 2;
//!   required int32 service = 3; required int32 method = 4;   // 0 control, 1 data
//!   repeated Header headers = 5;
//!   optional string payload_encoding = 6; optional string payload_type = 7;
//!   optional bytes payload = 8;           optional string LogIDNew = 9;
//! }
//! ```
//!
//! A control frame carries `type: ping` (from the client, every `PingInterval` seconds) or
//! `type: pong` (from the server, its payload perhaps new client settings). A data frame
//! carries `type: event` (or `card`), `message_id`, `sum` and `seq` (a payload cut into `sum`
//! pieces) and `trace_id`; it is answered by sending the same frame back with a `biz_rt`
//! header and the payload `{"code":200,…}`.

use serde_json::json;

/// `method` of a control frame (ping, pong).
pub const CONTROL: i32 = 0;
/// `method` of a data frame (event, card).
pub const DATA: i32 = 1;

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frame {
    /// `SeqID`.
    pub seq_id: u64,
    /// `LogID`.
    pub log_id: u64,
    /// `service`: the connection's service id (from its URL) on pings.
    pub service: i32,
    /// `method`: [`CONTROL`] or [`DATA`].
    pub method: i32,
    /// `headers`, in order.
    pub headers: Vec<(String, String)>,
    /// `payload_encoding`.
    pub payload_encoding: Option<String>,
    /// `payload_type`.
    pub payload_type: Option<String>,
    /// `payload`.
    pub payload: Option<Vec<u8>>,
    /// `LogIDNew`.
    pub log_id_new: Option<String>,
}

/// Why bytes are not a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes end inside a field.
    #[error("the frame is truncated")]
    Truncated,
    /// A varint longer than ten bytes, or a wire type protobuf does not have.
    #[error("the frame is malformed: {0}")]
    Malformed(&'static str),
}

impl Frame {
    /// The ping the client sends on the connection of service `service`.
    pub fn ping(service: i32) -> Frame {
        Frame { service, method: CONTROL, headers: vec![("type".into(), "ping".into())], ..Frame::default() }
    }

    /// The value of header `key`, if present.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers.iter().find(|(name, _)| name == key).map(|(_, value)| value.as_str())
    }

    /// The answer to this data frame: the frame itself with `biz_rt` (how long handling took,
    /// in milliseconds) and a payload saying `code`.
    pub fn answer(&self, code: u16, biz_rt_millis: u128) -> Frame {
        let mut answer = self.clone();
        answer.headers.push(("biz_rt".into(), biz_rt_millis.to_string()));
        answer.payload = Some(json!({"code": code, "headers": null, "data": null}).to_string().into_bytes());
        answer
    }

    /// The frame as protobuf bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint_field(&mut out, 1, self.seq_id);
        put_varint_field(&mut out, 2, self.log_id);
        // int32 is sign-extended to 64 bits, as protobuf does.
        put_varint_field(&mut out, 3, i64::from(self.service) as u64);
        put_varint_field(&mut out, 4, i64::from(self.method) as u64);
        for (key, value) in &self.headers {
            let mut header = Vec::new();
            put_bytes_field(&mut header, 1, key.as_bytes());
            put_bytes_field(&mut header, 2, value.as_bytes());
            put_bytes_field(&mut out, 5, &header);
        }
        let optional: [(u32, Option<&[u8]>); 4] = [
            (6, self.payload_encoding.as_deref().map(str::as_bytes)),
            (7, self.payload_type.as_deref().map(str::as_bytes)),
            (8, self.payload.as_deref()),
            (9, self.log_id_new.as_deref().map(str::as_bytes)),
        ];
        for (field, bytes) in optional {
            if let Some(bytes) = bytes {
                put_bytes_field(&mut out, field, bytes);
            }
        }
        out
    }

    /// Reads a frame; unknown fields are skipped.
    pub fn decode(bytes: &[u8]) -> Result<Frame, DecodeError> {
        let mut frame = Frame::default();
        let mut reader = Reader { bytes };
        while let Some((field, value)) = reader.field()? {
            match (field, value) {
                (1, Value::Varint(n)) => frame.seq_id = n,
                (2, Value::Varint(n)) => frame.log_id = n,
                // Truncating to 32 bits undoes the sign extension of negative values.
                (3, Value::Varint(n)) => frame.service = n as i32,
                (4, Value::Varint(n)) => frame.method = n as i32,
                (5, Value::Bytes(header)) => frame.headers.push(decode_header(header)?),
                (6, Value::Bytes(text)) => frame.payload_encoding = Some(lossy(text)),
                (7, Value::Bytes(text)) => frame.payload_type = Some(lossy(text)),
                (8, Value::Bytes(payload)) => frame.payload = Some(payload.to_vec()),
                (9, Value::Bytes(text)) => frame.log_id_new = Some(lossy(text)),
                _ => {}
            }
        }
        Ok(frame)
    }
}

fn decode_header(bytes: &[u8]) -> Result<(String, String), DecodeError> {
    let (mut key, mut value) = (String::new(), String::new());
    let mut reader = Reader { bytes };
    while let Some((field, found)) = reader.field()? {
        match (field, found) {
            (1, Value::Bytes(text)) => key = lossy(text),
            (2, Value::Bytes(text)) => value = lossy(text),
            _ => {}
        }
    }
    Ok((key, value))
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A field's value, by wire type.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// Reads fields off the front of a byte slice.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// The next field number and value, `None` at the end.
    fn field(&mut self) -> Result<Option<(u64, Value<'a>)>, DecodeError> {
        if self.bytes.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Value::Fixed
            }
            2 => {
                let length = usize::try_from(self.varint()?).map_err(|_| DecodeError::Truncated)?;
                Value::Bytes(self.take(length)?)
            }
            5 => {
                self.take(4)?;
                Value::Fixed
            }
            _ => return Err(DecodeError::Malformed("unknown wire type")),
        };
        Ok(Some((key >> 3, value)))
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for (index, shift) in (0..64).step_by(7).enumerate() {
            let Some((&byte, rest)) = self.bytes.split_first() else { return Err(DecodeError::Truncated) };
            self.bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
            if index == 9 {
                break;
            }
        }
        Err(DecodeError::Malformed("varint longer than ten bytes"))
    }

    fn take(&mut self, length: usize) -> Result<&'a [u8], DecodeError> {
        if self.bytes.len() < length {
            return Err(DecodeError::Truncated);
        }
        let (taken, rest) = self.bytes.split_at(length);
        self.bytes = rest;
        Ok(taken)
    }
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_varint_field(out: &mut Vec<u8>, field: u32, value: u64) {
    put_varint(out, u64::from(field) << 3);
    put_varint(out, value);
}

fn put_bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_varint(out, (u64::from(field) << 3) | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ping of service 7 as protobuf writes it: four required varints, one header.
    const PING_7: &[u8] = b"\x08\x00\x10\x00\x18\x07\x20\x00\x2a\x0c\x0a\x04type\x12\x04ping";

    #[test]
    fn a_ping_encodes_to_the_bytes_protobuf_writes() {
        assert_eq!(Frame::ping(7).encode(), PING_7);
        assert_eq!(Frame::decode(PING_7).unwrap(), Frame::ping(7));
    }

    #[test]
    fn every_field_round_trips_including_large_ids_and_a_negative_service() {
        let frame = Frame {
            seq_id: 300,
            log_id: u64::MAX,
            service: -2,
            method: DATA,
            headers: vec![("type".into(), "event".into()), ("message_id".into(), "ä1".into())],
            payload_encoding: Some("gzip".into()),
            payload_type: Some("json".into()),
            payload: Some(vec![0, 1, 2, 255]),
            log_id_new: Some("log-1".into()),
        };
        let bytes = frame.encode();
        assert_eq!(Frame::decode(&bytes).unwrap(), frame);
        // 300 is two varint bytes; -2 is ten.
        assert_eq!(&bytes[..3], b"\x08\xac\x02");
    }

    #[test]
    fn unknown_fields_are_skipped_and_broken_bytes_are_errors() {
        let mut bytes = PING_7.to_vec();
        bytes.extend_from_slice(b"\x50\x05\x59\x01\x02\x03\x04\x05\x06\x07\x08\x65\x01\x02\x03\x04");
        assert_eq!(Frame::decode(&bytes).unwrap(), Frame::ping(7));
        assert_eq!(Frame::decode(&PING_7[..PING_7.len() - 2]), Err(DecodeError::Truncated));
        assert_eq!(Frame::decode(b"\x08"), Err(DecodeError::Truncated));
        assert!(matches!(Frame::decode(b"\x0b\x00"), Err(DecodeError::Malformed(_))));
        assert!(matches!(
            Frame::decode(&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Err(DecodeError::Malformed(_))
        ));
        assert_eq!(Frame::decode(b"").unwrap(), Frame::default());
    }

    #[test]
    fn an_answer_is_the_frame_with_the_handling_time_and_a_code() {
        let event = Frame {
            method: DATA,
            headers: vec![("message_id".into(), "m1".into())],
            payload: Some(b"{}".to_vec()),
            ..Frame::default()
        };
        let answer = event.answer(200, 12);
        assert_eq!(answer.header("message_id"), Some("m1"));
        assert_eq!(answer.header("biz_rt"), Some("12"));
        let payload: serde_json::Value = serde_json::from_slice(answer.payload.as_deref().unwrap()).unwrap();
        assert_eq!(payload["code"], 200);
    }
}
