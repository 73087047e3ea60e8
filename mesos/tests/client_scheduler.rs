//! The scheduler client against scripted masters on loopback.
#![allow(clippy::unwrap_used, missing_docs)]

mod support;

use std::time::Duration;

use futures::StreamExt as _;
use mesos::client::{ClientError, SchedulerClient, SubscriptionHandle};
use mesos::codec::Codec;
use mesos::proto::scheduler::{Call, Event, call, event};
use mesos::proto::{FrameworkId, FrameworkInfo, Offer, OfferId};
use mesos::recordio;
use support::{Reply, Server, dead_address, split};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(10);

fn subscribe() -> Call {
    Call {
        r#type: Some(call::Type::Subscribe as i32),
        subscribe: Some(call::Subscribe {
            framework_info: Some(FrameworkInfo {
                user: "nobody".into(),
                name: "probe".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn revive() -> Call {
    Call {
        framework_id: Some(FrameworkId::new("fw-1")),
        r#type: Some(call::Type::Revive as i32),
        revive: Some(call::Revive::default()),
        ..Default::default()
    }
}

fn subscribed() -> Event {
    Event {
        r#type: Some(event::Type::Subscribed as i32),
        subscribed: Some(event::Subscribed {
            framework_id: Some(FrameworkId::new("fw-1")),
            heartbeat_interval_seconds: Some(15.0),
            master_info: None,
        }),
        ..Default::default()
    }
}

fn heartbeat() -> Event {
    Event {
        r#type: Some(event::Type::Heartbeat as i32),
        ..Default::default()
    }
}

fn offers(n: usize) -> Event {
    Event {
        r#type: Some(event::Type::Offers as i32),
        offers: Some(event::Offers {
            offers: (0..n)
                .map(|i| Offer {
                    id: Some(OfferId::new(format!("o-{i}"))),
                    hostname: format!("agent-{i}"),
                    ..Default::default()
                })
                .collect(),
        }),
        ..Default::default()
    }
}

fn stream(codec: Codec, events: &[Event]) -> Vec<u8> {
    let mut wire = Vec::new();
    for e in events {
        recordio::encode_into(&mut wire, &codec.encode(e));
    }
    wire
}

fn stream_reply(codec: Codec, events: &[Event], chunk: usize) -> Reply {
    Reply::Stream {
        stream_id: Some("stream-1".into()),
        content_type: codec.content_type().into(),
        chunks: split(&stream(codec, events), chunk),
    }
}

async fn collect(events: mesos::client::EventStream<Event>) -> Vec<Result<Event, ClientError>> {
    tokio::time::timeout(WAIT, events.collect::<Vec<_>>())
        .await
        .unwrap()
}

#[tokio::test]
async fn subscribe_yields_stream_id_and_typed_events_split_across_chunks() {
    for codec in [Codec::Protobuf, Codec::Json] {
        let sent = [subscribed(), heartbeat(), offers(3), heartbeat()];
        // 5-byte chunks: every record spans chunks; the small ones share one.
        let master = Server::start(vec![stream_reply(codec, &sent, 5)]).await;
        let client = SchedulerClient::new(vec![master.url()], codec).unwrap();
        let sub = client.subscribe(subscribe()).await.unwrap();
        assert_eq!(
            sub.handle,
            SubscriptionHandle {
                stream_id: "stream-1".into(),
                master: master.url()
            }
        );
        let got: Vec<Event> = collect(sub.events)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(got, sent);

        let req = &master.requests()[0];
        assert_eq!(req.path, "/api/v1/scheduler");
        assert_eq!(req.method, "POST");
        // Accept is explicit: reqwest's default */* would get JSON from Mesos.
        assert_eq!(req.accept.as_deref(), Some(codec.content_type()));
        assert_eq!(req.content_type.as_deref(), Some(codec.content_type()));
        assert_eq!(
            req.stream_id, None,
            "a SUBSCRIBE carrying a stream id gets 400"
        );
        assert_eq!(codec.decode::<Call>(&req.body).unwrap(), subscribe());
    }
}

#[tokio::test]
async fn subscribe_returns_before_the_stream_ends_and_events_arrive_live() {
    let (tx, rx) = mpsc::channel(4);
    let master = Server::start(vec![Reply::Live {
        stream_id: "live".into(),
        content_type: "application/x-protobuf".into(),
        chunks: rx,
    }])
    .await;
    let client = SchedulerClient::new(vec![master.url()], Codec::Protobuf).unwrap();
    tx.send(stream(Codec::Protobuf, &[subscribed()]))
        .await
        .unwrap();
    let mut sub = tokio::time::timeout(WAIT, client.subscribe(subscribe()))
        .await
        .unwrap()
        .unwrap();
    let first = tokio::time::timeout(WAIT, sub.events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first, subscribed());
    // half a record, then the rest
    let wire = stream(Codec::Protobuf, &[offers(2)]);
    tx.send(wire[..4].to_vec()).await.unwrap();
    tx.send(wire[4..].to_vec()).await.unwrap();
    let second = tokio::time::timeout(WAIT, sub.events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(second, offers(2));
    drop(tx);
    assert!(
        tokio::time::timeout(WAIT, sub.events.next())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn calls_carry_the_stream_id_and_202_is_success() {
    let master = Server::start(vec![stream_reply(Codec::Json, &[subscribed()], 64)]).await;
    let client = SchedulerClient::new(vec![master.url()], Codec::Json).unwrap();
    let sub = client.subscribe(subscribe()).await.unwrap();
    client.call(&sub.handle, revive()).await.unwrap();
    let req = &master.requests()[1];
    assert_eq!(req.stream_id.as_deref(), Some("stream-1"));
    assert_eq!(req.content_type.as_deref(), Some("application/json"));
    assert_eq!(req.accept.as_deref(), Some("application/json"));
    let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(body["type"], "REVIVE");
    assert_eq!(body["framework_id"]["value"], "fw-1");
}

/// The body a status error carries, if it is the expected variant.
type BodyOf = fn(&ClientError) -> Option<&str>;

/// The [`BodyOf`] of the variant `ClientError::$variant(body)`.
macro_rules! body_of {
    ($variant:ident) => {
        |e| match e {
            ClientError::$variant(b) => Some(b),
            _ => None,
        }
    };
}

#[tokio::test]
async fn error_statuses_become_typed_errors_with_the_body() {
    let cases: [(u16, BodyOf); 7] = [
        (400, body_of!(BadRequest)),
        (403, body_of!(Forbidden)),
        (405, body_of!(MethodNotAllowed)),
        (406, body_of!(NotAcceptable)),
        (415, body_of!(UnsupportedMediaType)),
        (503, body_of!(ServiceUnavailable)),
        (500, |e| match e {
            ClientError::UnexpectedStatus { status: 500, body } => Some(body),
            _ => None,
        }),
    ];
    let master = Server::start(vec![]).await;
    let client = SchedulerClient::new(vec![master.url()], Codec::Protobuf).unwrap();
    let handle = SubscriptionHandle {
        stream_id: "s".into(),
        master: master.url(),
    };
    for (status, body_of) in cases {
        let why = format!("Failed to validate call: reason {status}");
        master.push(Reply::Status(status, why.clone()));
        let err = client.call(&handle, revive()).await.unwrap_err();
        assert_eq!(body_of(&err), Some(why.as_str()), "{status}: {err:?}");
        assert_eq!(err.status(), Some(status));
    }
}

#[tokio::test]
async fn follows_a_protocol_relative_redirect_to_the_leader() {
    let leader = Server::start(vec![stream_reply(Codec::Protobuf, &[subscribed()], 64)]).await;
    let follower = Server::start(vec![Reply::Redirect(format!(
        "//{}/api/v1/scheduler",
        leader.addr
    ))])
    .await;
    let client = SchedulerClient::new(vec![follower.url()], Codec::Protobuf).unwrap();
    let sub = client.subscribe(subscribe()).await.unwrap();
    assert_eq!(
        sub.handle.master,
        leader.url(),
        "calls must go to the leader"
    );
    client.call(&sub.handle, revive()).await.unwrap();
    assert_eq!(follower.requests().len(), 1);
    let at_leader = leader.requests();
    assert_eq!(at_leader.len(), 2);
    // the redirected SUBSCRIBE is the same POST with the same body
    assert_eq!(
        Codec::Protobuf.decode::<Call>(&at_leader[0].body).unwrap(),
        subscribe()
    );
    assert_eq!(at_leader[1].stream_id.as_deref(), Some("stream-1"));
}

#[tokio::test]
async fn calls_follow_redirects_too() {
    let leader = Server::start(vec![]).await;
    let follower = Server::start(vec![Reply::Redirect(format!(
        "http://{}/api/v1/scheduler",
        leader.addr
    ))])
    .await;
    let client = SchedulerClient::new(vec![follower.url()], Codec::Json).unwrap();
    let handle = SubscriptionHandle {
        stream_id: "s".into(),
        master: follower.url(),
    };
    client.call(&handle, revive()).await.unwrap();
    assert_eq!(leader.requests()[0].stream_id.as_deref(), Some("s"));
}

#[tokio::test]
async fn a_redirect_loop_is_an_error_not_a_hang() {
    let master = Server::start(vec![]).await;
    for _ in 0..10 {
        master.push(Reply::Redirect("/api/v1/scheduler".into()));
    }
    let client = SchedulerClient::new(vec![master.url()], Codec::Json).unwrap();
    let err = client.subscribe(subscribe()).await.unwrap_err();
    assert!(
        matches!(&err, ClientError::NoMasterReachable(m) if m.contains("redirects")),
        "{err}"
    );
    assert_eq!(master.requests().len(), 6);
}

#[tokio::test]
async fn masters_are_tried_in_turn_past_dead_and_unavailable_ones() {
    let dead = dead_address().await;
    let recovering = Server::start(vec![Reply::Status(503, "recovering".into())]).await;
    let good = Server::start(vec![stream_reply(Codec::Protobuf, &[subscribed()], 64)]).await;
    let client =
        SchedulerClient::new(vec![dead, recovering.url(), good.url()], Codec::Protobuf).unwrap();
    let sub = client.subscribe(subscribe()).await.unwrap();
    assert_eq!(sub.handle.master, good.url());
    assert_eq!(recovering.requests().len(), 1);
}

#[tokio::test]
async fn a_master_that_never_answers_times_out_and_the_next_is_tried() {
    let stuck = Server::start(vec![Reply::Hang]).await;
    let good = Server::start(vec![stream_reply(Codec::Json, &[subscribed()], 64)]).await;
    let client = SchedulerClient::new(vec![stuck.url(), good.url()], Codec::Json)
        .unwrap()
        .with_timeout(Duration::from_millis(300));
    let sub = tokio::time::timeout(WAIT, client.subscribe(subscribe()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(sub.handle.master, good.url());
    assert_eq!(stuck.requests().len(), 1);

    // a call to a stuck master is a Timeout, not a hang
    let handle = SubscriptionHandle {
        stream_id: "s".into(),
        master: stuck.url(),
    };
    stuck.push(Reply::Hang);
    let err = client.call(&handle, revive()).await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout(_)), "{err}");
}

#[tokio::test]
async fn when_no_master_takes_it_the_error_names_each() {
    let dead = dead_address().await;
    let recovering = Server::start(vec![Reply::Status(503, "master is recovering".into())]).await;
    let client = SchedulerClient::new(vec![dead.clone(), recovering.url()], Codec::Json).unwrap();
    let err = client.subscribe(subscribe()).await.unwrap_err();
    let ClientError::NoMasterReachable(why) = &err else {
        panic!("{err:?}")
    };
    assert!(why.contains(dead.trim_start_matches("http://")), "{why}");
    assert!(why.contains("master is recovering"), "{why}");
    assert!(err.is_transient());
}

#[tokio::test]
async fn a_refused_subscribe_is_not_retried_elsewhere() {
    let strict = Server::start(vec![Reply::Status(400, "Failed to validate".into())]).await;
    let other = Server::start(vec![stream_reply(Codec::Json, &[subscribed()], 64)]).await;
    let client = SchedulerClient::new(vec![strict.url(), other.url()], Codec::Json).unwrap();
    let err = client.subscribe(subscribe()).await.unwrap_err();
    assert!(
        matches!(&err, ClientError::BadRequest(b) if b == "Failed to validate"),
        "{err}"
    );
    assert!(other.requests().is_empty());
}

#[tokio::test]
async fn a_subscribe_answer_without_stream_id_is_an_error() {
    let master = Server::start(vec![Reply::Stream {
        stream_id: None,
        content_type: "application/json".into(),
        chunks: vec![],
    }])
    .await;
    let client = SchedulerClient::new(vec![master.url()], Codec::Json).unwrap();
    let err = client.subscribe(subscribe()).await.unwrap_err();
    assert!(matches!(err, ClientError::MissingStreamId), "{err}");
}

#[tokio::test]
async fn broken_framing_ends_the_event_stream_with_a_typed_error() {
    let mut wire = stream(Codec::Json, &[subscribed()]);
    wire.extend_from_slice(b"12x\n");
    let master = Server::start(vec![Reply::Stream {
        stream_id: Some("s".into()),
        content_type: "application/json".into(),
        chunks: vec![wire],
    }])
    .await;
    let client = SchedulerClient::new(vec![master.url()], Codec::Json).unwrap();
    let got = collect(client.subscribe(subscribe()).await.unwrap().events).await;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].as_ref().unwrap(), &subscribed());
    assert!(matches!(
        got[1],
        Err(ClientError::RecordIo(
            mesos::recordio::RecordIoError::NotADigit { byte: b'x', .. }
        ))
    ));
}

#[tokio::test]
async fn a_stream_cut_inside_a_record_reports_truncation() {
    let wire = stream(Codec::Protobuf, &[subscribed(), offers(1)]);
    let master = Server::start(vec![Reply::Stream {
        stream_id: Some("s".into()),
        content_type: "application/x-protobuf".into(),
        chunks: vec![wire[..wire.len() - 3].to_vec()],
    }])
    .await;
    let client = SchedulerClient::new(vec![master.url()], Codec::Protobuf).unwrap();
    let got = collect(client.subscribe(subscribe()).await.unwrap().events).await;
    assert_eq!(got.len(), 2);
    assert!(matches!(
        got[1],
        Err(ClientError::RecordIo(
            mesos::recordio::RecordIoError::Truncated
        ))
    ));
}

#[tokio::test]
async fn an_undecodable_record_is_an_error_and_the_stream_goes_on() {
    let mut wire = Vec::new();
    recordio::encode_into(&mut wire, b"{not json");
    wire.extend(stream(Codec::Json, &[heartbeat()]));
    let master = Server::start(vec![Reply::Stream {
        stream_id: Some("s".into()),
        content_type: "application/json".into(),
        chunks: vec![wire],
    }])
    .await;
    let client = SchedulerClient::new(vec![master.url()], Codec::Json).unwrap();
    let got = collect(client.subscribe(subscribe()).await.unwrap().events).await;
    assert!(matches!(got[0], Err(ClientError::Decode(_))));
    assert_eq!(got[1].as_ref().unwrap(), &heartbeat());
}

#[tokio::test]
async fn the_stream_is_decoded_in_the_codec_the_master_declares() {
    // Asked for protobuf, a master that ignores Accept answers JSON: decode
    // what it says it sent rather than fail on every event.
    let master = Server::start(vec![stream_reply(Codec::Json, &[subscribed()], 64)]).await;
    let client = SchedulerClient::new(vec![master.url()], Codec::Protobuf).unwrap();
    let got = collect(client.subscribe(subscribe()).await.unwrap().events).await;
    assert_eq!(got[0].as_ref().unwrap(), &subscribed());
}

#[test]
fn bad_master_lists_are_rejected_up_front() {
    assert!(matches!(
        SchedulerClient::new(vec![], Codec::Json),
        Err(ClientError::InvalidEndpoint(_))
    ));
    assert!(matches!(
        SchedulerClient::new(vec!["ftp://m:1".into()], Codec::Json),
        Err(ClientError::InvalidEndpoint(m)) if m == "ftp://m:1"
    ));
    assert!(SchedulerClient::new(vec!["m1:5050".into()], Codec::Json).is_ok());
}
