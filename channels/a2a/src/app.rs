//! `App`: what every request of the A2A channel needs — the kernel connection, the tasks, and
//! the settings.

use oxibot_plugin::ChannelHandle;

use crate::config::Config;
use crate::tasks::Tasks;

/// What every request needs.
pub struct App {
    /// The connection to the kernel.
    pub channel: ChannelHandle,
    /// Every task, with its watchers.
    pub tasks: Tasks,
    /// The channel's settings.
    pub config: Config,
}
