//! The cluster's two work queues in JetStream: `OXIBOT_IN` (subjects `oxibot.in.<session>`, a
//! channel's messages on their way to the kernel that owns their session) and `OXIBOT_OUT`
//! (`oxibot.out.<channel>`, replies on their way to the kernel that runs their channel). Both
//! keep a message until a consumer acknowledges it (work-queue retention), drop a second
//! publication of one message id within [`DEDUP_WINDOW`], and are read by durable pull
//! consumers that hold one message at a time.
//!
//! Consumer design: one durable consumer per session, made by the kernel that claims the
//! session and named after it, filtered on the session's subject. Holding one message at a time
//! and acknowledging it only once it is in the session's durable inbox keeps the session's
//! order; the consumer's name outlives its kernel, so the next owner goes on where the last one
//! acknowledged (a message handed out and never acknowledged comes again after the ack wait).
//! Readers pull with short requests ([`PULL_EXPIRES`]) and say "still working" while a message
//! is handled, under a short ack wait, so a dead kernel's reader stops being handed messages
//! within seconds.
//! A shared consumer with claim-or-nak was the other way: a refused (nak'd) message goes back
//! behind later ones of its session, so order would need a second mechanism; and every kernel
//! would see every message. Replies: one consumer per channel, run by the channel's owner.
//!
//! A session's consumer goes away by itself: JetStream deletes it once no kernel has pulled
//! from it for its inactivity threshold (`Node`'s `session_reader_idle`, a few TTLs), so a
//! cluster keeps one per session read lately, not one per session ever seen. The server does
//! it rather than the kernel deleting on release because a kernel that dies never releases,
//! and a threshold longer than a takeover (the TTL) never removes a consumer an owner reads.
//! Nothing is lost with it: in a work-queue stream a message stays until it is acknowledged,
//! whatever becomes of the consumer that was handed it, and the next owner's new consumer of
//! the same name starts at the session's first unacknowledged message.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt as _;
use tokio::sync::{mpsc, oneshot};

use super::error::ClusterError;
use super::keys::session_key;

/// The stream of channel messages on their way to their session's owner.
pub const INBOUND_STREAM: &str = "OXIBOT_IN";

/// The stream of replies on their way to their channel's owner.
pub const OUTBOUND_STREAM: &str = "OXIBOT_OUT";

/// How long JetStream remembers a message id, dropping a second publication of it.
const DEDUP_WINDOW: Duration = Duration::from_secs(120);

/// How long a consumer waits before retrying after a failed request.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// The subject of session `key`'s messages.
pub fn inbound_subject(key: &str) -> String {
    format!("oxibot.in.{}", session_key(key))
}

/// The subject of replies for channel `channel`.
pub fn outbound_subject(channel: &str) -> String {
    format!("oxibot.out.{}", session_key(channel))
}

/// One message taken from a stream and handed to the gateway, which answers on `done` whether
/// it was handled (then acknowledged) or must come again (dropping `done` says the same).
#[derive(Debug)]
pub struct Taken {
    /// What was published.
    pub payload: Vec<u8>,
    /// `true`: handled; `false`: to be delivered again.
    pub done: oneshot::Sender<bool>,
}

/// Opens stream `name` on `subjects`, creating it as a work queue on `replicas` servers.
pub(crate) async fn open_stream(
    jetstream: &jetstream::Context,
    name: &'static str,
    subjects: &str,
    replicas: usize,
) -> Result<stream::Stream, ClusterError> {
    if let Ok(stream) = jetstream.get_stream(name).await {
        return Ok(stream);
    }
    let config = stream::Config {
        name: name.to_owned(),
        subjects: vec![subjects.to_owned()],
        retention: stream::RetentionPolicy::WorkQueue,
        duplicate_window: DEDUP_WINDOW,
        num_replicas: replicas,
        ..stream::Config::default()
    };
    let created = jetstream.get_or_create_stream(config).await;
    let opened = jetstream.get_stream(name).await;
    opened.map_err(|error| match created {
        Err(created) => ClusterError::Bucket { bucket: name, source: created.into() },
        Ok(_) => ClusterError::Bucket { bucket: name, source: error.into() },
    })
}

/// Publishes `payload` on `subject` under message id `id` and waits for JetStream's
/// acknowledgement (the message is stored, on every replica).
pub(crate) async fn publish(
    jetstream: &jetstream::Context,
    subject: String,
    id: &str,
    payload: Vec<u8>,
) -> Result<(), ClusterError> {
    let message = jetstream::message::PublishMessage::build().payload(payload.into()).message_id(id);
    let ack = jetstream
        .send_publish(subject, message)
        .await
        .map_err(|error| ClusterError::request("publishing to a stream", error))?;
    ack.await.map_err(|error| ClusterError::request("waiting for a stream's acknowledgement", error))?;
    Ok(())
}

/// What a consumer reads and for how long a message it handed out is held before it comes again.
pub(crate) struct Reading {
    /// The durable consumer's name.
    pub name: String,
    /// Its subject.
    pub filter: String,
    /// How long a message handed out stays unacknowledged before it is delivered again.
    pub ack_wait: Duration,
    /// How long the consumer stays once nobody pulls from it; `None`: for ever.
    pub inactive_after: Option<Duration>,
}

/// Reads `reading` from `stream` one message at a time, handing each to `to` and acknowledging
/// it when handled (else asking for it again after `RETRY_AFTER`), while `keep()` holds and
/// `to` is open. Runs until then (or until its task is aborted); requests that fail are retried.
pub(crate) async fn consume(
    stream: stream::Stream,
    reading: Reading,
    to: mpsc::UnboundedSender<Taken>,
    keep: impl Fn() -> bool,
) {
    let config = consumer::pull::Config {
        durable_name: Some(reading.name.clone()),
        filter_subject: reading.filter.clone(),
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait: reading.ack_wait,
        max_ack_pending: 1,
        inactive_threshold: reading.inactive_after.unwrap_or_default(),
        // As many replicas as the stream (the default): with one, nats-server 2.9 acknowledged
        // the messages to the reader but kept them in the work queue.
        ..consumer::pull::Config::default()
    };
    while keep() && !to.is_closed() {
        let messages = match stream.get_or_create_consumer(&reading.name, config.clone()).await {
            Ok(consumer) => pull_one_at_a_time(&consumer).await.map_err(|error| error.to_string()),
            Err(error) => Err(error.to_string()),
        };
        let mut messages = match messages {
            Ok(messages) => messages,
            Err(error) => {
                tracing::warn!(consumer = %reading.name, %error, "cannot read a stream; trying again");
                tokio::time::sleep(RETRY_AFTER).await;
                continue;
            }
        };
        while let Some(message) = messages.next().await {
            let message = match message {
                Ok(message) => message,
                Err(error) => {
                    tracing::debug!(consumer = %reading.name, %error, "reading a stream paused");
                    continue;
                }
            };
            if !keep() {
                let _ = message.ack_with(jetstream::AckKind::Nak(None)).await;
                return;
            }
            let (done, handled) = oneshot::channel();
            if to.send(Taken { payload: message.payload.to_vec(), done }).is_err() {
                let _ = message.ack_with(jetstream::AckKind::Nak(None)).await;
                return;
            }
            let answer = if still_working_until(&message, handled, reading.ack_wait).await {
                message.double_ack().await
            } else {
                message.ack_with(jetstream::AckKind::Nak(Some(RETRY_AFTER))).await
            };
            if let Err(error) = answer {
                tracing::warn!(consumer = %reading.name, %error, "cannot acknowledge a stream's message; it comes again");
            }
        }
    }
}

/// Waits for the gateway's answer on `handled` (`true`: handled), telling the server every
/// third of `ack_wait` that the message is still being worked on, so a slow delivery is not
/// handed out again while a short ack wait still frees the message of a reader that died.
async fn still_working_until(
    message: &jetstream::Message,
    mut handled: oneshot::Receiver<bool>,
    ack_wait: Duration,
) -> bool {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + ack_wait / 3, ack_wait / 3);
    loop {
        tokio::select! {
            answer = &mut handled => return answer.unwrap_or(false),
            _ = ticks.tick() => {
                if let Err(error) = message.ack_with(jetstream::AckKind::Progress).await {
                    tracing::debug!(%error, "cannot say a stream's message is still being handled");
                }
            }
        }
    }
}

/// How long one pull request of a consumer's reader waits at the server. A reader that dies
/// leaves its request behind, and the server hands the next message to it (where nobody reads
/// it, so it comes again only after the ack wait, and to the dead request again while it
/// lasts): a short request bounds that to a few seconds, for a pull every two seconds per
/// consumer while nothing comes.
const PULL_EXPIRES: Duration = Duration::from_secs(2);

/// A consumer's messages, pulled one at a time with requests that expire after [`PULL_EXPIRES`].
async fn pull_one_at_a_time(
    consumer: &consumer::Consumer<consumer::pull::Config>,
) -> Result<consumer::pull::Stream, consumer::StreamError> {
    consumer.stream().max_messages_per_batch(1).expires(PULL_EXPIRES).heartbeat(PULL_EXPIRES / 2).messages().await
}

/// Whether `stream` has a consumer named `name` (the server may have removed an idle one).
pub(crate) async fn has_consumer(stream: &stream::Stream, name: &str) -> Result<bool, ClusterError> {
    match stream.consumer_info(name).await {
        Ok(_) => Ok(true),
        Err(error) if error.kind() == jetstream::context::ConsumerInfoErrorKind::NotFound => Ok(false),
        Err(error) => Err(ClusterError::request("looking a consumer up", error)),
    }
}

/// The sessions with messages waiting in `stream` (no consumer took them yet), by subject.
pub(crate) async fn waiting_subjects(stream: &stream::Stream) -> Result<Vec<String>, ClusterError> {
    let mut subjects = stream
        .info_with_subjects("oxibot.in.>")
        .await
        .map_err(|error| ClusterError::request("listing a stream's subjects", error))?;
    let mut waiting = Vec::new();
    while let Some(subject) = subjects.next().await {
        let (subject, count) = subject.map_err(|error| ClusterError::request("listing a stream's subjects", error))?;
        if count > 0 {
            waiting.push(subject);
        }
    }
    Ok(waiting)
}
