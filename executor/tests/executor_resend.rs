//! The scheduler's resend request (an agent back from a partition): every
//! live pod's status is reported again, as new updates.
#![allow(clippy::unwrap_used)]

mod common;

use common::agent::*;
use executor::{Exit, RESEND_STATUS_MESSAGE};
use mesos::proto::TaskState;
use mesos::proto::executor::{Event, event};

#[tokio::test]
async fn a_resend_message_reports_every_live_pod_again_with_new_uuids() {
    let mut h = start(false);
    let (_sub, conn) = h.subscribe().await;
    conn.send(Ok(launch("t1", simple_pod("p1", "sleep 30"))))
        .unwrap();
    let running = h.status_until(TaskState::TaskRunning).await;
    conn.send(Ok(Event {
        r#type: Some(event::Type::Message as i32),
        message: Some(event::Message {
            data: RESEND_STATUS_MESSAGE.to_vec(),
        }),
        ..Default::default()
    }))
    .unwrap();
    let again = h.next_status().await;
    assert_eq!(again.state(), TaskState::TaskRunning);
    assert_eq!(again.task_id, running.task_id);
    assert_ne!(
        again.uuid, running.uuid,
        "a new update, not a retransmission"
    );
    assert_eq!(again.data, running.data, "the pod's whole status");
    conn.send(Ok(shutdown())).unwrap();
    assert_eq!(ended(h.run).await, Ok(Exit::Shutdown));
}
