//! The checks every fuzz input goes through, shared by the afl targets and the corpus replay test.
//!
//! This file is compiled twice: as a module of the fuzz crate (whose `afl` targets call it on
//! every input) and, through `#[path]`, as a module of `proto/tests/fuzz_corpus.rs`, which replays
//! the checked-in corpus in a plain `cargo test`. It depends on nothing but `oxibot-proto`, the
//! standard library and `allocation-counter` (which must be the global allocator of the binary).
//!
//! Each check panics with a sentence naming the invariant that broke; afl counts the panic
//! (turned into an abort by its hook) as a crash, and the replay test as a failure. The
//! invariants, beyond "no panic, no hang":
//!
//! - A decoded message re-encodes, and the encoding decodes to the same value and encodes to
//!   the same bytes again (round trip, canonical form).
//! - A length prefix over the limit is refused as soon as its fourth byte has arrived, with no
//!   allocation the size of the announced body.
//! - A [`FrameDecoder`] fed the stream in any cutting yields exactly what the wire spec says the
//!   whole stream holds, each frame as soon as its last byte arrived, and never holds more than
//!   one frame's worth (limit + header) once drained; [`read_message`] agrees with it.

use std::io::{self, Read};

use oxibot_proto::{
    DEFAULT_MAX_FRAME_LEN, DecodeError, FrameDecoder, HEADER_LEN, Message, decode_body, encode, read_message,
};

/// Checks one frame body: decoding never panics, fails only as `Malformed`, and what decodes
/// survives a round trip.
pub fn check_body(body: &[u8]) {
    match decode_body(body) {
        Ok(message) => check_round_trip(&message),
        Err(DecodeError::Malformed(_)) => {}
        Err(other) => panic!("decode_body failed with something other than Malformed: {other}"),
    }
}

/// Checks one byte stream, laid out as [`FrameInput`] describes, through [`FrameDecoder`] and
/// [`read_message`] against the spec's reading of the whole stream.
pub fn check_frames(input: &[u8]) {
    let input = FrameInput::parse(input);
    let expected = expected_events(input.stream, input.max_len);
    check_frame_decoder(&input, &expected);
    check_read_message(&input, &expected);
}

/// Checks that `message` re-encodes into a frame that decodes to the same value and re-encodes
/// to the same bytes.
pub fn check_round_trip(message: &Message) {
    let frame = encode(message).unwrap_or_else(|error| panic!("a decoded message does not re-encode: {error}"));
    let prefix = frame.first_chunk::<HEADER_LEN>().expect("an encoded frame starts with its length prefix");
    assert_eq!(u32::from_be_bytes(*prefix) as usize, frame.len() - HEADER_LEN, "the prefix must count the body");
    let again = decode_body(&frame[HEADER_LEN..])
        .unwrap_or_else(|error| panic!("a re-encoded message does not decode: {error}\n{message:?}"));
    assert_eq!(&again, message, "a message changed on a round trip through the codec");
    let frame_again = encode(&again).expect("the same message encoded once already");
    assert_eq!(frame_again, frame, "the encoding of a decoded message is not stable");
}

/// The layout of a frame-target input: byte 0 picks the frame limit, byte 1 how the stream is cut
/// into reads, the rest is the stream the peer sent.
pub struct FrameInput<'a> {
    /// The largest body the decoders accept.
    pub max_len: usize,
    /// Seed of the cutting; see [`Cuts`].
    pub cut_seed: u8,
    /// The bytes on the wire.
    pub stream: &'a [u8],
}

impl<'a> FrameInput<'a> {
    /// Splits an input into its parts; missing control bytes count as zero.
    pub fn parse(input: &'a [u8]) -> FrameInput<'a> {
        let limit = input.first().copied().unwrap_or(0);
        FrameInput {
            // High bit clear: the real limit. Set: a small one (0..=2032), so that oversize
            // prefixes and frames near the limit are within reach of short inputs.
            max_len: if limit & 0x80 == 0 { DEFAULT_MAX_FRAME_LEN } else { usize::from(limit & 0x7f) * 16 },
            cut_seed: input.get(1).copied().unwrap_or(0),
            stream: input.get(2..).unwrap_or_default(),
        }
    }
}

/// A deterministic sequence of read sizes, and of interruptions, drawn from one seed byte.
///
/// Seed 0 delivers the whole stream in one piece. Otherwise the low three bits bound the size of
/// a piece (1 to 128 bytes) and, when the high bit is set, about one read in four first fails
/// with `Interrupted` (which a reader must retry).
pub struct Cuts {
    /// xorshift32 state; never zero.
    state: u32,
    /// Largest piece.
    max_piece: u32,
    /// Whether reads are sometimes interrupted.
    interrupts: bool,
}

impl Cuts {
    /// The cutting for `seed`.
    pub fn new(seed: u8) -> Cuts {
        Cuts {
            state: 0x9e37_79b9 ^ u32::from(seed),
            max_piece: if seed == 0 { 0 } else { 1 << (seed & 7) },
            interrupts: seed & 0x80 != 0,
        }
    }

    /// The size of the next piece.
    pub fn next_piece(&mut self) -> usize {
        if self.max_piece == 0 {
            return usize::MAX;
        }
        1 + (self.next_random() % self.max_piece) as usize
    }

    /// Whether the next read fails with `Interrupted` first.
    pub fn next_interrupts(&mut self) -> bool {
        self.interrupts && self.next_random() & 3 == 0
    }

    fn next_random(&mut self) -> u32 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 17;
        self.state ^= self.state << 5;
        self.state
    }
}

/// What a receiver must make of a stream: a message, or how the stream stops.
#[derive(Debug, PartialEq)]
pub enum Event {
    /// A whole frame holding a message.
    Message(Message),
    /// A length prefix over the limit.
    Oversize {
        /// The announced body length.
        len: usize,
    },
    /// A whole frame whose body is not a message.
    Malformed,
    /// The stream ended inside a frame.
    Truncated {
        /// Bytes the frame needed, prefix included.
        expected: usize,
        /// Bytes of it that arrived.
        got: usize,
    },
    /// The stream ended between frames.
    End,
}

impl Event {
    /// The event a decode error stands for.
    fn of_error(error: &DecodeError) -> Event {
        match error {
            DecodeError::Oversize { len, .. } => Event::Oversize { len: *len },
            DecodeError::Truncated { expected, got } => Event::Truncated { expected: *expected, got: *got },
            DecodeError::Malformed(_) => Event::Malformed,
            DecodeError::Io(error) => panic!("an in-memory stream cannot fail to read, yet: {error}"),
        }
    }

    /// Whether the stream is over after this event.
    fn is_last(&self) -> bool {
        !matches!(self, Event::Message(_))
    }
}

/// The spec's reading of a whole stream: each event with the number of stream bytes that must
/// have arrived before a receiver can know it (`usize::MAX` for the way a stream ends, which only
/// its end tells). The last event is never a message.
pub fn expected_events(stream: &[u8], max_len: usize) -> Vec<(usize, Event)> {
    let mut events = Vec::new();
    let mut at = 0;
    loop {
        let rest = &stream[at..];
        let Some(prefix) = rest.first_chunk::<HEADER_LEN>() else {
            let end =
                if rest.is_empty() { Event::End } else { Event::Truncated { expected: HEADER_LEN, got: rest.len() } };
            events.push((usize::MAX, end));
            return events;
        };
        let len = u32::from_be_bytes(*prefix) as usize;
        if len > max_len {
            events.push((at + HEADER_LEN, Event::Oversize { len }));
            return events;
        }
        let Some(body) = rest.get(HEADER_LEN..HEADER_LEN + len) else {
            events.push((usize::MAX, Event::Truncated { expected: HEADER_LEN + len, got: rest.len() }));
            return events;
        };
        at += HEADER_LEN + len;
        match decode_body(body) {
            Ok(message) => events.push((at, Event::Message(message))),
            Err(_) => {
                events.push((at, Event::Malformed));
                return events;
            }
        }
    }
}

/// Feeds the stream to a [`FrameDecoder`] piece by piece, draining it after each piece, and
/// checks every event against `expected`, including when it came out.
fn check_frame_decoder(input: &FrameInput<'_>, expected: &[(usize, Event)]) {
    let mut decoder = FrameDecoder::new(input.max_len);
    let mut cuts = Cuts::new(input.cut_seed);
    let mut next = 0;
    let mut fed = 0;
    let mut rest = input.stream;
    loop {
        let piece = cuts.next_piece().min(rest.len());
        decoder.extend(&rest[..piece]);
        rest = &rest[piece..];
        fed += piece;
        loop {
            let (ready_at, event) = &expected[next];
            let (result, allocated) = measure(|| decoder.next_message());
            match result {
                Ok(Some(message)) => {
                    assert_eq!(event, &Event::Message(message), "the decoder and the spec disagree on a frame");
                    assert!(*ready_at <= fed, "the decoder returned a frame before its last byte arrived");
                    if let Event::Message(message) = event {
                        check_round_trip(message);
                    }
                    next += 1;
                }
                Ok(None) => {
                    assert!(
                        *ready_at > fed,
                        "the decoder waits for more bytes, but {fed} bytes already decide {event:?}"
                    );
                    let consumed = next.checked_sub(1).map_or(0, |last| expected[last].0);
                    assert_eq!(decoder.buffered(), fed - consumed, "the decoder lost count of its bytes");
                    assert!(
                        decoder.buffered() <= input.max_len + HEADER_LEN,
                        "a drained decoder holds {} bytes, over limit + header",
                        decoder.buffered()
                    );
                    break;
                }
                Err(error) => {
                    let got = Event::of_error(&error);
                    assert_eq!(&got, event, "the decoder failed where the spec does not: {error}");
                    assert!(*ready_at <= fed, "the decoder failed before the bytes that decide it arrived");
                    if let Event::Oversize { len } = got {
                        assert!(allocated < len, "refusing a {len}-byte frame allocated {allocated} bytes");
                    }
                    // After an error the stream is out of sync: a receiver drops it here.
                    return;
                }
            }
        }
        if rest.is_empty() {
            break;
        }
    }
    let (_, end) = &expected[next];
    assert!(end.is_last(), "the stream ended, yet the spec sees a whole frame the decoder did not return");
    match decoder.finish() {
        Ok(()) => assert_eq!(end, &Event::End, "finish accepted a stream the spec says is cut off"),
        Err(error) => assert_eq!(&Event::of_error(&error), end, "finish disagrees with the spec: {error}"),
    }
}

/// Reads the stream with [`read_message`] through a reader that returns it piece by piece, and
/// checks the messages and the way the stream stops against `expected`.
fn check_read_message(input: &FrameInput<'_>, expected: &[(usize, Event)]) {
    let mut reader = PieceReader { rest: input.stream, cuts: Cuts::new(input.cut_seed) };
    for (_, event) in expected {
        let (result, allocated) = measure(|| read_message(&mut reader, input.max_len));
        let got = match result {
            Ok(Some(message)) => Event::Message(message),
            Ok(None) => Event::End,
            Err(error) => Event::of_error(&error),
        };
        assert_eq!(&got, event, "read_message and the spec disagree");
        if let Event::Oversize { len } = got {
            assert!(allocated < len, "refusing a {len}-byte frame allocated {allocated} bytes");
        }
    }
}

/// A reader that hands out a stream in the pieces [`Cuts`] draws, sometimes interrupted.
struct PieceReader<'a> {
    /// What is left to read.
    rest: &'a [u8],
    /// Sizes of the reads.
    cuts: Cuts,
}

impl Read for PieceReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cuts.next_interrupts() {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = self.cuts.next_piece().min(buf.len()).min(self.rest.len());
        buf[..n].copy_from_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        Ok(n)
    }
}

/// Runs `f` and returns its result with the most bytes it held allocated at once (on this thread).
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let mut result = None;
    let info = allocation_counter::measure(|| result = Some(f()));
    (result.expect("measure runs the closure"), usize::try_from(info.bytes_max).unwrap_or(usize::MAX))
}
