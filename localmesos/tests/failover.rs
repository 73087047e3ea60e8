//! Failover, TEARDOWN and master restarts.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use localmesos::RestartOptions;
use mesos::codec::Codec;
use mesos::proto::scheduler::{call, event};
use mesos::proto::{FrameworkInfo, TaskState};

fn with_failover(name: &str, secs: f64) -> FrameworkInfo {
    let mut f = framework(name, &[]);
    f.failover_timeout = Some(secs);
    f
}

fn again(sub: &Sub, info: &FrameworkInfo) -> FrameworkInfo {
    let mut i = info.clone();
    i.id = Some(sub.framework_id.clone());
    i
}

#[tokio::test]
async fn resubscribing_in_time_keeps_everything_and_fails_the_old_stream_over() {
    let cluster = simulated_cluster(1).await;
    let info = with_failover("fo", 60.0);
    let mut old = subscribe(cluster.master_url(), Codec::Json, info.clone()).await;
    let o = old.offers().await.remove(0);
    old.launch(&o, vec![command_task("t", &o, "cpus:1", "x")])
        .await;
    let running = old.update().await;
    // Not acknowledged yet: the new subscription gets it resent.
    let mut new = subscribe(cluster.master_url(), Codec::Json, again(&old, &info)).await;
    assert_eq!(new.framework_id, old.framework_id);
    let err = old.expect(event::Type::Error).await;
    assert_eq!(err.error.unwrap().message, "Framework failed over");
    assert!(
        old.next().await.is_none(),
        "the old stream ends after ERROR"
    );
    assert_eq!(new.update().await, running);
    new.ack(&running).await;
    assert_eq!(
        cluster.state().task("t").unwrap().state,
        TaskState::TaskRunning
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn resubscribing_rescinds_outstanding_offers() {
    let cluster = simulated_cluster(1).await;
    let info = with_failover("re", 60.0);
    let mut old = subscribe(cluster.master_url(), Codec::Json, info.clone()).await;
    let o = old.offers().await.remove(0);
    let mut new = subscribe(cluster.master_url(), Codec::Json, again(&old, &info)).await;
    let r = new.expect(event::Type::Rescind).await;
    assert_eq!(r.rescind.unwrap().offer_id, o.id);
    // The resources are offered again, under a new id.
    let o2 = new.offers().await.remove(0);
    assert_ne!(o2.id, o.id);
    cluster.shutdown().await;
}

#[tokio::test]
async fn failover_timeout_expiry_kills_tasks_and_removes_the_framework() {
    let cluster = simulated_cluster(1).await;
    let info = with_failover("exp", 0.3);
    let mut sub = subscribe(cluster.master_url(), Codec::Json, info.clone()).await;
    let o = sub.offers().await.remove(0);
    sub.launch(&o, vec![command_task("t", &o, "cpus:1", "x")])
        .await;
    sub.update().await;
    let fw = sub.framework_id.clone();
    sub.close();
    // Disconnected, still known, within the timeout.
    eventually(|| {
        cluster
            .state()
            .frameworks
            .first()
            .is_some_and(|f| !f.connected)
    })
    .await;
    eventually(|| cluster.state().removed_frameworks.contains(&fw.value)).await;
    let st = cluster.state();
    assert!(st.frameworks.is_empty());
    assert!(
        st.agents[0].used.is_empty(),
        "tasks were killed and their resources freed"
    );
    // A removed framework cannot come back.
    let mut back = info.clone();
    back.id = Some(fw.clone());
    let resp = post(
        cluster.master_url(),
        Some("application/json"),
        None,
        None,
        Codec::Json.encode(&subscribe_call(back)),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.unwrap();
    assert!(body.contains("Framework has been removed"), "{body}");
    cluster.shutdown().await;
}

#[tokio::test]
async fn teardown_removes_the_framework_and_ends_its_stream() {
    let cluster = simulated_cluster(1).await;
    let mut sub = subscribe(
        cluster.master_url(),
        Codec::Json,
        with_failover("td", 600.0),
    )
    .await;
    let o = sub.offers().await.remove(0);
    sub.launch(&o, vec![command_task("t", &o, "cpus:1", "x")])
        .await;
    sub.update().await;
    assert_eq!(sub.simple(call::Type::Teardown).await, 202);
    loop {
        match sub.next().await {
            None => break,
            Some(ev) => assert!(matches!(
                ev.kind(),
                Some(event::Type::Heartbeat | event::Type::Update | event::Type::Offers)
            )),
        }
    }
    let st = cluster.state();
    assert!(st.frameworks.is_empty());
    assert!(st.agents[0].used.is_empty());
    cluster.shutdown().await;
}

#[tokio::test]
async fn master_restart_keeping_state_drops_streams_then_recovers() {
    let cluster = simulated_cluster(1).await;
    let info = with_failover("rk", 60.0);
    let mut sub = subscribe(cluster.master_url(), Codec::Json, info.clone()).await;
    let o = sub.offers().await.remove(0);
    sub.launch(&o, vec![command_task("t", &o, "cpus:1", "x")])
        .await;
    let running = sub.update().await;
    cluster.restart_master(RestartOptions {
        keep_state: true,
        recovery_ms: 300,
        agent_reregistration_ms: 0,
    });
    // The stream ends (possibly after events already queued).
    while sub.next().await.is_some() {}
    let body = Codec::Json.encode(&subscribe_call(again(&sub, &info)));
    assert_eq!(
        post(
            cluster.master_url(),
            Some("application/json"),
            None,
            None,
            body
        )
        .await
        .status(),
        503
    );
    let mut back = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if !cluster.state().recovering {
            back = Some(subscribe(cluster.master_url(), Codec::Json, again(&sub, &info)).await);
            break;
        }
    }
    let mut back = back.expect("master recovered");
    assert_eq!(back.framework_id, sub.framework_id);
    // The unacknowledged update is still owed, and the task still runs.
    assert_eq!(back.update().await, running);
    assert_eq!(
        cluster.state().task("t").unwrap().state,
        TaskState::TaskRunning
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn master_restart_losing_state_forgets_tasks() {
    let cluster = simulated_cluster(1).await;
    let info = with_failover("rl", 60.0);
    let mut sub = subscribe(cluster.master_url(), Codec::Json, info.clone()).await;
    let o = sub.offers().await.remove(0);
    sub.launch(&o, vec![command_task("t", &o, "cpus:1", "x")])
        .await;
    sub.update().await;
    cluster.restart_master(RestartOptions {
        keep_state: false,
        recovery_ms: 0,
        agent_reregistration_ms: 0,
    });
    while sub.next().await.is_some() {}
    eventually(|| !cluster.state().recovering).await;
    // The old id is accepted (Mesos accepts frameworks it does not know).
    let mut back = subscribe(cluster.master_url(), Codec::Json, again(&sub, &info)).await;
    assert_eq!(back.framework_id, sub.framework_id);
    let agent = o.agent_id.clone().unwrap().value;
    back.reconcile(vec![("t", Some(&agent))]).await;
    assert_eq!(
        state_of(&back.update().await),
        TaskState::TaskLost,
        "GONE, as LOST without PARTITION_AWARE"
    );
    assert!(cluster.state().agents[0].used.is_empty());
    cluster.shutdown().await;
}
