//! The channel service: reads the config, learns who the bot is, then polls Telegram and
//! delivers the kernel's replies side by side until the kernel hangs up.

use oxibot_plugin::ChannelHandle;
use oxibot_plugin::{info, warn};

use crate::api::BotApi;
use crate::config::Config;
use crate::error::TelegramError;
use crate::incoming::Bot;
use crate::poll::{self, Poller};
use crate::replies::Deliverer;
use crate::target::LastMessages;

/// Runs the Telegram channel on `channel`.
pub async fn serve(channel: ChannelHandle) -> Result<(), TelegramError> {
    let config = Config::from_value(channel.config())?;
    let api = BotApi::new(&config)?;
    let bot = identify(&api).await?;
    info!("polling Telegram as @{} (media in {})", bot.username, config.media_dir.display());
    let typing = poll::typing_indicators();
    let last_messages = LastMessages::default();
    let deliverer = Deliverer::new(api.clone(), typing.clone(), last_messages.clone(), config.reply_to_message);
    let poller = Poller {
        api,
        channel: channel.clone(),
        bot,
        group_policy: config.group_policy,
        media_dir: config.media_dir,
        poll_timeout: config.poll_timeout,
        accept_timeout: config.accept_timeout,
        typing,
        last_messages,
    };
    tokio::select! {
        polled = poller.run() => polled,
        () = deliverer.run(&channel) => Ok(()),
    }
}

/// The bot's id and username from `getMe`, retried while Telegram cannot be reached; a refused
/// token ends the channel.
async fn identify(api: &BotApi) -> Result<Bot, TelegramError> {
    let mut backoff = poll::BACKOFF;
    loop {
        match api.get_me().await {
            Ok(me) => return Ok(Bot { id: me.id, username: me.username.unwrap_or_default() }),
            Err(error) if error.code() == Some(401) || error.code() == Some(404) => {
                return Err(TelegramError::Unauthorized);
            }
            Err(error) => {
                let wait = backoff.next_wait();
                warn!("{error}; asking again in {}s", wait.as_secs());
                tokio::time::sleep(wait).await;
            }
        }
    }
}
