//! Why the WeCom channel stops: errors that no reconnecting can fix.

use crate::config::ConfigError;

/// A reason to end the channel service (the kernel then restarts it, and gives up after a few
/// quick failures).
#[derive(Debug, thiserror::Error)]
pub enum WeComError {
    /// The `channels.wecom` section cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// WeCom refused to subscribe the bot.
    #[error("wecom refused the bot's credentials (channels.wecom.botId, secret): errcode {errcode}, {errmsg}")]
    Credentials {
        /// WeCom's error code.
        errcode: i64,
        /// WeCom's words.
        errmsg: String,
    },
    /// WeCom moved the bot to another connection (another process subscribed with the same
    /// `botId`).
    #[error(
        "another connection subscribed channels.wecom.botId and took the bot over (is another oxibot or nanobot running with it?)"
    )]
    TakenOver,
}
