//! Reliable status updates, KILL, and the status-update faults.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use localmesos::UpdateFault;
use mesos::codec::Codec;
use mesos::proto::TaskState;
use mesos::proto::framework_info::capability::Type as Cap;
use mesos::proto::scheduler::event;
use mesos::proto::task_status::{Reason, Source};

async fn cluster_with_duration(ms: u64) -> localmesos::LocalMesos {
    let a = agent("cpus:4;mem:1024", false).simulated(Some(Duration::from_millis(ms)));
    cluster(vec![a], fast_timing()).await
}

#[tokio::test]
async fn updates_flow_one_at_a_time_in_order_retried_until_acknowledged() {
    for codec in [Codec::Json, Codec::Protobuf] {
        reliable_delivery(codec).await;
    }
}

async fn reliable_delivery(codec: Codec) {
    let cluster = cluster_with_duration(100).await;
    let mut sub = subscribe(cluster.master_url(), codec, framework("rel", &[])).await;
    let o = sub.offers().await.remove(0);
    sub.launch(&o, vec![command_task("t", &o, "cpus:1", "x")])
        .await;
    let running = sub.update().await;
    assert_eq!(state_of(&running), TaskState::TaskRunning);
    assert_eq!(running.source, Some(Source::SourceExecutor as i32));
    assert_eq!(running.agent_id, o.agent_id);
    assert_eq!(running.uuid.as_ref().map(Vec::len), Some(16));
    // Not acknowledged: the same update comes again (retry), never FINISHED,
    // although the task finished after 100 ms.
    let again = sub.update().await;
    assert_eq!(again, running);
    assert_eq!(
        cluster.state().task("t").unwrap().state,
        TaskState::TaskFinished
    );
    // Acknowledged: the next one goes out.
    assert_eq!(sub.ack(&running).await, 202);
    let finished = loop {
        let u = sub.update().await;
        if u.uuid != running.uuid {
            break u;
        }
    };
    assert_eq!(state_of(&finished), TaskState::TaskFinished);
    assert_eq!(sub.ack(&finished).await, 202);
    eventually(|| {
        let st = cluster.state();
        st.frameworks[0].tasks.is_empty() && st.frameworks[0].completed_tasks.len() == 1
    })
    .await;
    // Resources came back.
    assert!(cluster.state().agents[0].used.is_empty());
    cluster.shutdown().await;
}

#[tokio::test]
async fn retries_back_off_exponentially() {
    let cluster = cluster_with_duration(60_000).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("bo", &[])).await;
    let o = sub.offers().await.remove(0);
    sub.launch(&o, vec![command_task("t", &o, "cpus:1", "x")])
        .await;
    let t0 = tokio::time::Instant::now();
    sub.update().await;
    sub.update().await;
    let t1 = t0.elapsed();
    sub.update().await;
    let t2 = t0.elapsed();
    // 300 ms, then 600 ms.
    assert!(t1 >= Duration::from_millis(250), "{t1:?}");
    assert!(t2 - t1 >= Duration::from_millis(500), "{:?}", t2 - t1);
    cluster.shutdown().await;
}

#[tokio::test]
async fn dropped_updates_arrive_on_retry_duplicates_twice_delayed_late() {
    let cluster = cluster_with_duration(60_000).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("f", &[])).await;
    let o = sub.offers().await.remove(0);

    cluster.set_update_fault(UpdateFault {
        drop: 1,
        ..UpdateFault::default()
    });
    let t0 = tokio::time::Instant::now();
    sub.launch(&o, vec![command_task("d", &o, "cpus:0.5", "x")])
        .await;
    let u = sub.update().await;
    assert!(
        t0.elapsed() >= Duration::from_millis(250),
        "the dropped send was not the one seen"
    );
    sub.ack(&u).await;

    cluster.set_update_fault(UpdateFault {
        duplicate: 1,
        ..UpdateFault::default()
    });
    let o = sub.offers().await.remove(0);
    sub.launch(&o, vec![command_task("dup", &o, "cpus:0.5", "x")])
        .await;
    let a = sub.update().await;
    let b = sub
        .next_within(Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.kind(), Some(event::Type::Update));
    assert_eq!(b.update.unwrap().status.unwrap(), a);
    sub.ack(&a).await;

    cluster.set_update_fault(UpdateFault {
        delay: 1,
        delay_ms: 200,
        ..UpdateFault::default()
    });
    let o = sub.offers().await.remove(0);
    let t0 = tokio::time::Instant::now();
    sub.launch(&o, vec![command_task("late", &o, "cpus:0.5", "x")])
        .await;
    let u = sub.update().await;
    let waited = t0.elapsed();
    assert_eq!(u.task_id.unwrap().value, "late");
    // Held back by the delay (the retry, at 300 ms, resends the same update).
    assert!(waited >= Duration::from_millis(180), "{waited:?}");
    cluster.shutdown().await;
}

#[tokio::test]
async fn kill_of_an_unknown_task_answers_like_reconciliation() {
    let cluster = simulated_cluster(1).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("k", &[])).await;
    let o = sub.offers().await.remove(0);
    let agent = o.agent_id.clone().unwrap().value;
    assert_eq!(sub.kill("ghost", Some(&agent)).await, 202);
    let u = sub.update().await;
    assert_eq!(state_of(&u), TaskState::TaskLost);
    assert_eq!(u.reason, Some(Reason::ReasonReconciliation as i32));
    assert!(u.uuid.is_none());
    let mut aware = subscribe(
        cluster.master_url(),
        Codec::Json,
        framework("k2", &[Cap::PartitionAware]),
    )
    .await;
    aware.kill("ghost", Some(&agent)).await;
    assert_eq!(state_of(&aware.update().await), TaskState::TaskGone);
    aware.kill("ghost", None).await;
    assert_eq!(state_of(&aware.update().await), TaskState::TaskUnknown);
    cluster.shutdown().await;
}

#[tokio::test]
async fn kill_moves_a_running_task_to_killed() {
    let cluster = simulated_cluster(1).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Protobuf, framework("k", &[])).await;
    let o = sub.offers().await.remove(0);
    sub.launch(&o, vec![command_task("t", &o, "cpus:1", "x")])
        .await;
    let r = sub.update().await;
    sub.ack(&r).await;
    sub.kill("t", None).await;
    let k = sub.update().await;
    assert_eq!(state_of(&k), TaskState::TaskKilled);
    sub.ack(&k).await;
    eventually(|| cluster.state().agents[0].used.is_empty()).await;
    cluster.shutdown().await;
}
