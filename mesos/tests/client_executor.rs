//! The executor client against a scripted agent on loopback.
#![allow(clippy::unwrap_used, missing_docs)]

mod support;

use std::time::Duration;

use futures::StreamExt as _;
use mesos::client::{ClientError, ExecutorClient};
use mesos::codec::Codec;
use mesos::proto::executor::{Call, Event, call, event};
use mesos::proto::{
    AgentId, ExecutorId, FrameworkId, TaskId, TaskInfo, TaskState, TaskStatus, task_status,
};
use mesos::recordio;
use support::{Reply, Server, split};

const WAIT: Duration = Duration::from_secs(10);

fn base(kind: call::Type) -> Call {
    Call {
        executor_id: Some(ExecutorId::new("exec-1")),
        framework_id: Some(FrameworkId::new("fw-1")),
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

fn status(task: &str, state: TaskState) -> TaskStatus {
    TaskStatus {
        task_id: Some(TaskId::new(task)),
        state: state as i32,
        source: Some(task_status::Source::SourceExecutor as i32),
        uuid: Some(uuid::Uuid::new_v4().as_bytes().to_vec()),
        executor_id: Some(ExecutorId::new("exec-1")),
        ..Default::default()
    }
}

fn resubscribe() -> Call {
    Call {
        subscribe: Some(call::Subscribe {
            unacknowledged_tasks: vec![TaskInfo {
                name: "pod-a".into(),
                task_id: Some(TaskId::new("t-1")),
                agent_id: Some(AgentId::new("agent-1")),
                ..Default::default()
            }],
            unacknowledged_updates: vec![call::Update {
                status: Some(status("t-1", TaskState::TaskRunning)),
            }],
        }),
        ..base(call::Type::Subscribe)
    }
}

fn events() -> Vec<Event> {
    vec![
        Event {
            r#type: Some(event::Type::Subscribed as i32),
            subscribed: Some(event::Subscribed::default()),
            ..Default::default()
        },
        Event {
            r#type: Some(event::Type::Launch as i32),
            launch: Some(event::Launch {
                task: Some(TaskInfo {
                    name: "pod-b".into(),
                    task_id: Some(TaskId::new("t-2")),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        },
        Event {
            r#type: Some(event::Type::Acknowledged as i32),
            acknowledged: Some(event::Acknowledged {
                task_id: Some(TaskId::new("t-1")),
                uuid: vec![1; 16],
            }),
            ..Default::default()
        },
        Event {
            r#type: Some(event::Type::Shutdown as i32),
            ..Default::default()
        },
    ]
}

#[tokio::test]
async fn subscribe_sends_unacknowledged_work_and_streams_events() {
    for codec in [Codec::Protobuf, Codec::Json] {
        let mut wire = Vec::new();
        for e in events() {
            recordio::encode_into(&mut wire, &codec.encode(&e));
        }
        let agent = Server::start(vec![Reply::Stream {
            stream_id: None,
            content_type: codec.content_type().into(),
            chunks: split(&wire, 3),
        }])
        .await;
        // MESOS_AGENT_ENDPOINT is a bare ip:port
        let client = ExecutorClient::new(&agent.addr.to_string(), codec).unwrap();
        let call = resubscribe();
        let stream = client.subscribe(call.clone()).await.unwrap();
        let got: Vec<Event> = tokio::time::timeout(WAIT, stream.collect::<Vec<_>>())
            .await
            .unwrap()
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(got, events());

        let req = &agent.requests()[0];
        assert_eq!(req.path, "/api/v1/executor");
        assert_eq!(req.accept.as_deref(), Some(codec.content_type()));
        assert_eq!(req.content_type.as_deref(), Some(codec.content_type()));
        assert_eq!(req.stream_id, None);
        let sent: Call = codec.decode(&req.body).unwrap();
        assert_eq!(sent, call);
        let sub = sent.subscribe.unwrap();
        assert_eq!(sub.unacknowledged_tasks.len(), 1);
        assert_eq!(sub.unacknowledged_updates.len(), 1);
    }
}

#[tokio::test]
async fn update_and_message_are_accepted_with_202() {
    let agent = Server::start(vec![]).await;
    let client = ExecutorClient::new(&agent.url(), Codec::Json).unwrap();
    let update = Call {
        update: Some(call::Update {
            status: Some(status("t-1", TaskState::TaskRunning)),
        }),
        ..base(call::Type::Update)
    };
    let message = Call {
        message: Some(call::Message {
            data: b"hello".to_vec(),
        }),
        ..base(call::Type::Message)
    };
    client.call(update.clone()).await.unwrap();
    client.call(message.clone()).await.unwrap();
    let reqs = agent.requests();
    assert_eq!(Codec::Json.decode::<Call>(&reqs[0].body).unwrap(), update);
    assert_eq!(Codec::Json.decode::<Call>(&reqs[1].body).unwrap(), message);
    let json: serde_json::Value = serde_json::from_slice(&reqs[1].body).unwrap();
    assert_eq!(json["type"], "MESSAGE");
    assert_eq!(
        json["message"]["data"], "aGVsbG8=",
        "bytes are base64 in JSON"
    );
}

#[tokio::test]
async fn agent_refusals_are_typed() {
    let agent = Server::start(vec![
        Reply::Status(403, "Executor is not subscribed".into()),
        Reply::Status(400, "Unknown framework".into()),
        Reply::Status(503, "Agent has not finished recovery".into()),
    ])
    .await;
    let client = ExecutorClient::new(&agent.url(), Codec::Protobuf).unwrap();
    let update = Call {
        update: Some(call::Update {
            status: Some(status("t-1", TaskState::TaskRunning)),
        }),
        ..base(call::Type::Update)
    };
    let err = client.call(update.clone()).await.unwrap_err();
    assert!(
        matches!(&err, ClientError::Forbidden(b) if b == "Executor is not subscribed"),
        "{err}"
    );
    let err = client.call(update).await.unwrap_err();
    assert!(
        matches!(&err, ClientError::BadRequest(b) if b == "Unknown framework"),
        "{err}"
    );
    let Err(err) = client.subscribe(resubscribe()).await else {
        panic!("a recovering agent must refuse SUBSCRIBE")
    };
    assert!(matches!(&err, ClientError::ServiceUnavailable(_)), "{err}");
    assert!(err.is_transient());
}

#[tokio::test]
async fn an_unreachable_agent_is_an_http_error() {
    let dead = support::dead_address().await;
    let client = ExecutorClient::new(&dead, Codec::Protobuf).unwrap();
    let err = client.call(base(call::Type::Heartbeat)).await.unwrap_err();
    assert!(matches!(err, ClientError::Http(_)), "{err}");
}

#[test]
fn bad_agent_endpoints_are_rejected() {
    assert!(matches!(
        ExecutorClient::new("", Codec::Json),
        Err(ClientError::InvalidEndpoint(_))
    ));
    assert!(ExecutorClient::new("10.0.0.1:5051", Codec::Json).is_ok());
}
