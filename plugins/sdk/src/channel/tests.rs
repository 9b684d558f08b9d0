//! Unit tests of the channel handle over an in-memory queue: what goes to the kernel, what
//! comes back, and how a closed connection fails waiting submits.

use oxibot_proto::{FrameDecoder, InboundAccepted, Ping};
use serde_json::json;

use super::*;

/// A handle whose frames land in `outgoing` and whose events come from `events`.
struct Harness {
    handle: ChannelHandle,
    outgoing: mpsc::UnboundedReceiver<Outgoing>,
    events: mpsc::UnboundedSender<ChannelEvent>,
}

fn harness() -> Harness {
    let (out_tx, outgoing) = mpsc::unbounded_channel();
    let (events, events_rx) = mpsc::unbounded_channel();
    let handle = ChannelHandle::new("loop".into(), json!({"port": 1}), out_tx, events_rx);
    Harness { handle, outgoing, events }
}

impl Harness {
    /// The next message the handle queued for the kernel.
    async fn sent(&mut self) -> Message {
        let Some(Outgoing::Frame(frame)) = self.outgoing.recv().await else { panic!("expected a frame") };
        let mut decoder = FrameDecoder::default();
        decoder.extend(&frame);
        decoder.next_message().unwrap().unwrap()
    }

    fn receive(&self, message: Message) -> Flow {
        self.handle.route(message, &self.events)
    }
}

#[tokio::test]
async fn submit_resolves_once_the_kernel_accepts_the_inbound() {
    let mut h = harness();
    let handle = h.handle.clone();
    let submit = tokio::spawn(async move { handle.submit(handle.inbound("m1", "alice", "c1", "hi")).await });
    let Message::Inbound(inbound) = h.sent().await else { panic!("expected an inbound") };
    assert_eq!((inbound.id.as_str(), inbound.channel.as_str(), inbound.chat_id.as_str()), ("m1", "loop", "c1"));
    assert!(!submit.is_finished(), "submit must wait for the acceptance");
    h.receive(Message::InboundAccepted(InboundAccepted { id: "m1".into() }));
    assert_eq!(submit.await.unwrap(), Ok(()));
}

#[tokio::test]
async fn submit_fails_with_closed_when_the_kernel_hangs_up_before_accepting() {
    let mut h = harness();
    let handle = h.handle.clone();
    let submit = tokio::spawn(async move { handle.submit(handle.inbound("m1", "alice", "c1", "hi")).await });
    let _ = h.sent().await;
    h.handle.close();
    assert_eq!(submit.await.unwrap(), Err(ChannelError::Closed));
    let later = h.handle.submit(h.handle.inbound("m2", "alice", "c1", "again")).await;
    assert_eq!(later, Err(ChannelError::Closed));
    assert_eq!(h.handle.ack(1, Ok(())), Err(ChannelError::Closed));
}

#[tokio::test]
async fn an_acceptance_for_an_unknown_id_is_ignored() {
    let h = harness();
    assert_eq!(h.receive(Message::InboundAccepted(InboundAccepted { id: "nobody".into() })), Flow::Continue);
}

#[tokio::test]
async fn outbound_and_delta_arrive_as_events_in_order_and_end_when_the_kernel_hangs_up() {
    let h = harness();
    let delta = Delta { stream_id: 7, chat_id: "c1".into(), text: "he".into() };
    let outbound = Outbound {
        id: 3,
        chat_id: "c1".into(),
        content: "hello".into(),
        media: vec![],
        stream_id: Some(7),
        metadata: json!({}),
    };
    h.receive(Message::Delta(delta.clone()));
    h.receive(Message::Outbound(outbound.clone()));
    let Harness { handle, events, .. } = h;
    drop(events);
    assert_eq!(handle.next_event().await, Some(ChannelEvent::Delta(delta)));
    assert_eq!(handle.next_event().await, Some(ChannelEvent::Outbound(outbound)));
    assert_eq!(handle.next_event().await, None);
}

#[tokio::test]
async fn an_approval_request_arrives_as_an_approval_event() {
    let h = harness();
    let request = oxibot_proto::ApprovalRequest {
        id: 8,
        chat_id: "c1".into(),
        code: "AB12CD34".into(),
        tool: "exec".into(),
        shown: "exec: sh -c 'ls'".into(),
        timeout_secs: 300,
        text: "Approval needed".into(),
        answers: vec![],
        metadata: json!({}),
    };
    h.receive(Message::ApprovalRequest(request.clone()));
    let Harness { handle, events, .. } = h;
    drop(events);
    assert_eq!(handle.next_event().await, Some(ChannelEvent::Approval(request)));
}

#[tokio::test]
async fn ack_sends_a_delivery_ack_carrying_the_error_text() {
    let mut h = harness();
    h.handle.ack(4, Ok(())).unwrap();
    h.handle.ack(5, Err("chat not found".into())).unwrap();
    assert_eq!(h.sent().await, Message::DeliveryAck(DeliveryAck { id: 4, ok: true, error: None, permanent: false }));
    assert_eq!(
        h.sent().await,
        Message::DeliveryAck(DeliveryAck { id: 5, ok: false, error: Some("chat not found".into()), permanent: false })
    );
}

#[tokio::test]
async fn a_ping_is_answered_and_a_goodbye_stops_the_dispatcher() {
    let mut h = harness();
    assert_eq!(h.receive(Message::Ping(Ping { nonce: 9 })), Flow::Continue);
    assert_eq!(h.sent().await, Message::Pong(Ping { nonce: 9 }));
    assert_eq!(h.receive(Message::Goodbye(Goodbye { reason: "bye".into() })), Flow::Stop);
}

#[test]
fn the_config_is_an_empty_object_when_absent_and_an_error_when_not_json() {
    assert_eq!(parse_config(None).unwrap(), json!({}));
    assert_eq!(parse_config(Some("  ")).unwrap(), json!({}));
    assert_eq!(parse_config(Some(r#"{"port": 4}"#)).unwrap(), json!({"port": 4}));
    let error = parse_config(Some("{port")).unwrap_err();
    assert!(error.to_string().contains("OXIBOT_CHANNEL_CONFIG is not valid JSON"), "{error}");
}

#[test]
fn a_service_error_is_a_failure_and_unit_or_ok_is_not() {
    assert_eq!(().failure(), None);
    assert_eq!(Ok::<(), String>(()).failure(), None);
    assert_eq!(Err::<(), _>("no token").failure(), Some("no token".to_owned()));
}
