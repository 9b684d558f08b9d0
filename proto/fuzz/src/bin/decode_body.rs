//! afl target: `decode_body` on arbitrary bytes, as a plugin could put inside one frame.
//!
//! Every input is a frame body; see `oxibot_proto_fuzz::checks::check_body` for what is checked.

fn main() {
    oxibot_proto_fuzz::on_small_stack(|| afl::fuzz!(|data: &[u8]| oxibot_proto_fuzz::checks::check_body(data)));
}
