//! Codec tests: the same harsh suite every frame codec of ours must pass.

use std::path::PathBuf;

use serde_json::json;

use super::*;

/// One sample of every message type, named for its golden file.
pub(crate) fn samples() -> Vec<(&'static str, Message)> {
    let mut hello = Hello::new("fs", PeerKind::Tool, "0123abcd");
    hello.features = vec![Feature::Cancel, Feature::Other("telepathy".into())];
    vec![
        ("hello", Message::Hello(hello)),
        (
            "manifest",
            Message::Manifest(Manifest {
                tools: vec![ToolSpec {
                    name: "read_file".into(),
                    description: "Read a file".into(),
                    parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
                    read_only: true,
                    exclusive: false,
                    timeout_secs: Some(30),
                }],
                detail: None,
            }),
        ),
        (
            "call",
            Message::Call(Call {
                id: 7,
                tool: "read_file".into(),
                arguments: json!({"path": "README.md", "limit": 20}),
                context: CallContext {
                    session_key: Some("cli:direct".into()),
                    channel: Some("cli".into()),
                    chat_id: Some("direct".into()),
                    workspace: "/home/me/.oxibot/workspace".into(),
                    restrict_to_workspace: true,
                    idempotency_key: None,
                },
            }),
        ),
        ("result", Message::Result(ToolResult { id: 7, content: "1| hello".into(), is_error: false })),
        ("cancel", Message::Cancel(Cancel { id: 7 })),
        ("log", Message::Log(Log { level: "warn".into(), message: "disk almost full".into() })),
        ("ping", Message::Ping(Ping { nonce: 42 })),
        ("pong", Message::Pong(Ping { nonce: 42 })),
        ("goodbye", Message::Goodbye(Goodbye { reason: "shutting down".into() })),
        (
            "inbound",
            Message::Inbound(Inbound {
                id: "tg-1001".into(),
                channel: "telegram".into(),
                sender_id: "12345".into(),
                chat_id: "12345".into(),
                content: "hi there".into(),
                media: vec!["/tmp/photo.jpg".into()],
                metadata: json!({"message_id": 1001}),
            }),
        ),
        ("inbound_accepted", Message::InboundAccepted(InboundAccepted { id: "tg-1001".into() })),
        (
            "outbound",
            Message::Outbound(Outbound {
                id: 3,
                chat_id: "12345".into(),
                content: "**hello**".into(),
                media: vec![],
                stream_id: Some(9),
                metadata: json!({"reply_to": 1001}),
            }),
        ),
        ("delta", Message::Delta(Delta { stream_id: 9, chat_id: "12345".into(), text: "hel".into() })),
        (
            "delivery_ack",
            Message::DeliveryAck(DeliveryAck {
                id: 3,
                ok: false,
                error: Some("chat not found".into()),
                permanent: false,
            }),
        ),
        (
            "approval_request",
            Message::ApprovalRequest(ApprovalRequest {
                id: 4,
                chat_id: "12345".into(),
                code: "AB12CD34".into(),
                tool: "exec".into(),
                shown: "exec: sh -c 'ls'".into(),
                timeout_secs: 300,
                text: "Approval needed … /approve AB12CD34".into(),
                answers: vec![
                    ApprovalAnswer { label: "Approve".into(), answer: "/approve AB12CD34".into(), refuses: false },
                    ApprovalAnswer { label: "Deny".into(), answer: "/deny AB12CD34".into(), refuses: true },
                ],
                metadata: json!({"reply_to": 1001}),
            }),
        ),
    ]
}

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden").join(format!("{name}.hex"))
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(text: &str) -> Vec<u8> {
    let text = text.trim();
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

/// Encodes a raw MessagePack body (built with serde_json values) as a frame.
fn frame_of(body: &[u8]) -> Vec<u8> {
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}

#[test]
fn every_message_round_trips_through_a_frame() {
    for (name, message) in samples() {
        let frame = encode(&message).unwrap();
        let decoded = read_message(&mut frame.as_slice(), DEFAULT_MAX_FRAME_LEN).unwrap();
        assert_eq!(decoded, Some(message), "{name} changed on the way through the codec");
    }
}

#[test]
fn encoded_messages_match_the_checked_in_golden_bytes() {
    let bless = std::env::var_os("OXIBOT_BLESS").is_some();
    for (name, message) in samples() {
        let frame = encode(&message).unwrap();
        let path = golden_path(name);
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, to_hex(&frame) + "\n").unwrap();
            continue;
        }
        let golden = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with OXIBOT_BLESS=1 to create)", path.display()));
        assert_eq!(to_hex(&frame), golden.trim(), "wire bytes of {name} changed: bump PROTOCOL_VERSION if intended");
        let decoded = read_message(&mut from_hex(&golden).as_slice(), DEFAULT_MAX_FRAME_LEN).unwrap();
        assert_eq!(decoded, Some(message), "golden {name} no longer decodes to the same message");
    }
}

/// Which variant a message is; a variant added without a case here does not compile.
fn variant_index(message: &Message) -> usize {
    match message {
        Message::Hello(_) => 0,
        Message::Manifest(_) => 1,
        Message::Call(_) => 2,
        Message::Result(_) => 3,
        Message::Cancel(_) => 4,
        Message::Log(_) => 5,
        Message::Ping(_) => 6,
        Message::Pong(_) => 7,
        Message::Goodbye(_) => 8,
        Message::Inbound(_) => 9,
        Message::InboundAccepted(_) => 10,
        Message::Outbound(_) => 11,
        Message::Delta(_) => 12,
        Message::DeliveryAck(_) => 13,
        Message::Unknown => 14,
        Message::ApprovalRequest(_) => 15,
    }
}

#[test]
fn every_type_name_is_the_type_tag_the_message_is_written_with() {
    let messages: Vec<Message> = samples().into_iter().map(|(_, message)| message).chain([Message::Unknown]).collect();
    let mut seen: Vec<usize> = messages.iter().map(variant_index).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..=15).collect::<Vec<_>>(), "every variant needs a sample");
    for message in messages {
        let frame = encode(&message).unwrap();
        let body: serde_json::Value = rmp_serde::from_slice(&frame[HEADER_LEN..]).unwrap();
        assert_eq!(body["type"], message.type_name(), "type_name() of {message:?} is not its wire tag");
    }
    for (name, message) in samples() {
        assert_eq!(message.type_name(), name, "the golden file of {name} is named after another type");
    }
}

#[test]
fn clean_end_of_stream_between_frames_yields_none() {
    let mut empty: &[u8] = &[];
    assert!(read_message(&mut empty, DEFAULT_MAX_FRAME_LEN).unwrap().is_none());

    let frame = encode(&Message::Ping(Ping { nonce: 1 })).unwrap();
    let mut stream = frame.as_slice();
    assert!(read_message(&mut stream, DEFAULT_MAX_FRAME_LEN).unwrap().is_some());
    assert!(read_message(&mut stream, DEFAULT_MAX_FRAME_LEN).unwrap().is_none());
}

#[test]
fn stream_ending_inside_a_frame_is_a_truncation_error() {
    let frame = encode(&Message::Ping(Ping { nonce: 1 })).unwrap();
    for cut in 1..frame.len() {
        let err = read_message(&mut &frame[..cut], DEFAULT_MAX_FRAME_LEN).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated { .. }), "cut at {cut}: {err}");

        let mut decoder = FrameDecoder::default();
        decoder.extend(&frame[..cut]);
        assert!(decoder.next_message().unwrap().is_none());
        assert!(matches!(decoder.finish(), Err(DecodeError::Truncated { .. })));
    }
}

#[test]
fn garbage_body_is_a_decode_error() {
    let garbage = frame_of(&[0xc1, 0xff, 0x00, 0x13]);
    let err = read_message(&mut garbage.as_slice(), DEFAULT_MAX_FRAME_LEN).unwrap_err();
    assert!(matches!(err, DecodeError::Malformed(_)), "{err}");

    let not_a_message = frame_of(&rmp_serde::to_vec_named(&json!([1, 2, 3])).unwrap());
    let err = read_message(&mut not_a_message.as_slice(), DEFAULT_MAX_FRAME_LEN).unwrap_err();
    assert!(matches!(err, DecodeError::Malformed(_)), "{err}");
}

#[test]
fn oversize_prefix_is_refused_before_the_body_arrives() {
    let prefix = (u32::MAX).to_be_bytes();
    let err = read_message(&mut prefix.as_slice(), DEFAULT_MAX_FRAME_LEN).unwrap_err();
    assert!(matches!(err, DecodeError::Oversize { len, .. } if len == u32::MAX as usize), "{err}");

    let mut decoder = FrameDecoder::new(1024);
    decoder.extend(&2048u32.to_be_bytes());
    assert!(matches!(decoder.next_message(), Err(DecodeError::Oversize { len: 2048, max: 1024 })));
    assert_eq!(decoder.buffered(), 4, "the decoder must not have reserved room for the body");
}

#[test]
fn encoder_refuses_a_message_over_the_limit() {
    let big = Message::Result(ToolResult { id: 1, content: "x".repeat(200), is_error: false });
    let mut out = Vec::new();
    assert!(matches!(encode_into(&big, &mut out, 100), Err(EncodeError::Oversize { .. })));
    assert!(out.is_empty(), "a refused frame must leave no bytes behind");
}

#[test]
fn unknown_message_type_decodes_as_unknown() {
    let body = rmp_serde::to_vec_named(&json!({"type": "teleport", "where": "mars"})).unwrap();
    let decoded = read_message(&mut frame_of(&body).as_slice(), DEFAULT_MAX_FRAME_LEN).unwrap();
    assert_eq!(decoded, Some(Message::Unknown));
}

#[test]
fn unknown_fields_and_features_are_tolerated() {
    let body = rmp_serde::to_vec_named(&json!({
        "type": "hello", "protocol": "oxibot", "version": 1, "name": "py", "kind": "gizmo",
        "features": ["cancel", "time-travel"], "token": "t", "colour": "blue"
    }))
    .unwrap();
    let Some(Message::Hello(hello)) = read_message(&mut frame_of(&body).as_slice(), DEFAULT_MAX_FRAME_LEN).unwrap()
    else {
        panic!("not a hello");
    };
    assert_eq!(hello.kind, PeerKind::Other("gizmo".into()));
    assert_eq!(hello.features, vec![Feature::Cancel, Feature::Other("time-travel".into())]);
}

#[test]
fn optional_fields_may_be_absent() {
    let body = rmp_serde::to_vec_named(&json!({"type": "call", "id": 1, "tool": "t", "arguments": {}})).unwrap();
    let Some(Message::Call(call)) = read_message(&mut frame_of(&body).as_slice(), DEFAULT_MAX_FRAME_LEN).unwrap()
    else {
        panic!("not a call");
    };
    assert!(call.context.restrict_to_workspace, "restriction must default to on");
    assert_eq!(call.context.workspace, "");
}

#[test]
fn decoder_yields_frames_split_across_arbitrary_reads() {
    let mut stream = Vec::new();
    for (_, message) in samples() {
        encode_into(&message, &mut stream, DEFAULT_MAX_FRAME_LEN).unwrap();
    }
    let mut decoder = FrameDecoder::default();
    let mut decoded = Vec::new();
    for chunk in stream.chunks(7) {
        decoder.extend(chunk);
        while let Some(message) = decoder.next_message().unwrap() {
            decoded.push(message);
        }
    }
    decoder.finish().unwrap();
    let expected: Vec<Message> = samples().into_iter().map(|(_, m)| m).collect();
    assert_eq!(decoded, expected);
}
