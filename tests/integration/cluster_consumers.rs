//! The inbound stream's per-session consumers in cluster mode (issue 31) against a real
//! `nats-server`: a session's consumer goes away once no kernel reads it, and nothing waiting
//! for the session is lost with it.

use std::time::{Duration, Instant};

use oxibot_kernel::cluster::Taken;
use oxibot_tests::nats::NatsServer;
use tokio::sync::mpsc;

use super::cluster::node;

/// The next message handed to `taken`, acknowledged; its payload as text.
async fn next_acknowledged(taken: &mut mpsc::UnboundedReceiver<Taken>) -> String {
    let message = tokio::time::timeout(Duration::from_secs(10), taken.recv()).await;
    let message = message.expect("no message within 10 s").expect("the consumer stopped");
    message.done.send(true).unwrap();
    String::from_utf8(message.payload).unwrap()
}

#[tokio::test]
async fn a_released_sessions_consumer_is_removed_once_idle_and_its_waiting_and_later_messages_reach_the_next_owner() {
    let server = NatsServer::start();
    let (a, b) = (node(&server, "kernel-a").await, node(&server, "kernel-b").await);
    let key = "loopback:gone";
    let held = a.claim_session(key).await.unwrap().expect("the session is free");
    let (to, mut taken) = mpsc::unbounded_channel();
    let reading = a.consume_session(key, to).unwrap();
    a.publish_inbound(key, "m1", b"first".to_vec()).await.unwrap();
    assert_eq!(next_acknowledged(&mut taken).await, "first");
    tokio::time::sleep(Duration::from_millis(500)).await; // the acknowledgement reaches the server

    // Kernel a gives the session up, as it does when the session's actor stops.
    reading.abort();
    held.release().await.unwrap();
    let released = Instant::now();
    assert!(b.has_session_reader(key).await.unwrap(), "the consumer went at once");
    a.publish_inbound(key, "m2", b"second".to_vec()).await.unwrap(); // nobody reads it yet

    let idle = a.session_reader_idle();
    while b.has_session_reader(key).await.unwrap() {
        let waited = released.elapsed();
        assert!(waited < idle + Duration::from_secs(5), "the idle consumer is still there after {waited:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("the consumer was removed {:?} after its last read (threshold {idle:?})", released.elapsed());
    a.publish_inbound(key, "m3", b"third".to_vec()).await.unwrap();

    let _held = b.claim_session(key).await.unwrap().expect("the released session is free");
    let (to, mut taken) = mpsc::unbounded_channel();
    let _reading = b.consume_session(key, to).unwrap();
    assert_eq!(next_acknowledged(&mut taken).await, "second", "the message waiting while nobody read was lost");
    assert_eq!(next_acknowledged(&mut taken).await, "third");
    let again = tokio::time::timeout(Duration::from_secs(2), taken.recv()).await;
    assert!(again.is_err(), "a message came twice");
}
