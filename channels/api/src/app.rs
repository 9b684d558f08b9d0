//! `App`: what every request of the API channel needs — the kernel connection, the requests
//! waiting for replies, and the settings.

use std::sync::Arc;

use oxibot_plugin::ChannelHandle;

use crate::config::Config;
use crate::waiters::Waiters;

/// What every request needs.
pub struct App {
    /// The connection to the kernel.
    pub channel: ChannelHandle,
    /// Requests waiting for replies.
    pub waiters: Arc<Waiters>,
    /// The channel's settings.
    pub config: Config,
    /// When the channel started, reported as the model's `created`.
    pub started: u64,
}
