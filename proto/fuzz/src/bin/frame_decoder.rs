//! afl target: `FrameDecoder` and `read_message` on an arbitrary byte stream cut into arbitrary reads.
//!
//! Byte 0 of an input picks the frame limit, byte 1 the cutting, the rest is the stream; see
//! `oxibot_proto_fuzz::checks::check_frames` for what is checked.

fn main() {
    oxibot_proto_fuzz::on_small_stack(|| afl::fuzz!(|data: &[u8]| oxibot_proto_fuzz::checks::check_frames(data)));
}
