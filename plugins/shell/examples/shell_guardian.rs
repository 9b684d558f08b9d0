//! The shell plugin as an executable of its own, for this crate's tests: they start it in
//! guardian mode (`shell_guardian __guard … -- sh -c …`). The `oxibot` executable runs the same
//! entry; this crate cannot build that one.

fn main() -> std::process::ExitCode {
    oxibot_tool_shell::run()
}
