//! Automation: the assistant acting on its own — messages it sends unprompted, turns the
//! kernel starts itself (scheduled jobs, the heartbeat, helpers' results).
//!
//! Code map: [`dispatch`] is how tools and schedulers ask whoever runs the kernel (the
//! gateway, the interactive agent) to run a turn or send a message; [`message`] is the
//! `message` built-in tool.

pub mod dispatch;
pub mod heartbeat;
pub mod message;
pub mod spawn;
pub mod supervised;
