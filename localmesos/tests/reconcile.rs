//! RECONCILE per the reference table, and partitions.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use localmesos::RestartOptions;
use mesos::codec::Codec;
use mesos::proto::TaskState;
use mesos::proto::framework_info::capability::Type as Cap;
use mesos::proto::scheduler::event;
use mesos::proto::task_status::{Reason, Source};

/// How long an agent may miss pings before it is unreachable, by default:
/// `--agent_ping_timeout` × `--max_agent_ping_timeouts` (75 s).
const PING_BUDGET: Duration = Duration::from_secs(
    localmesos::DEFAULT_AGENT_PING_TIMEOUT.as_secs()
        * localmesos::DEFAULT_MAX_AGENT_PING_TIMEOUTS as u64,
);

#[tokio::test]
async fn implicit_reconciliation_reports_every_known_task_without_uuid() {
    let cluster = simulated_cluster(2).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("imp", &[])).await;
    let offers = sub.offers().await;
    for (i, o) in offers.iter().enumerate() {
        sub.launch(o, vec![command_task(&format!("t{i}"), o, "cpus:1", "x")])
            .await;
    }
    // Each task may report more than one update (STARTING, then RUNNING),
    // in any order between the two: read until both are RUNNING, so no
    // executor update is still in flight when the reconciliation answers.
    let mut running = std::collections::BTreeSet::new();
    while running.len() < 2 {
        let u = sub.update().await;
        sub.ack(&u).await;
        if state_of(&u) == TaskState::TaskRunning {
            running.insert(u.task_id.clone().unwrap().value);
        }
    }
    sub.reconcile(vec![]).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let u = sub.update().await;
        assert_eq!(state_of(&u), TaskState::TaskRunning);
        assert_eq!(u.source, Some(Source::SourceMaster as i32));
        assert_eq!(u.reason, Some(Reason::ReasonReconciliation as i32));
        assert!(u.uuid.is_none());
        ids.push(u.task_id.unwrap().value);
    }
    ids.sort();
    assert_eq!(ids, vec!["t0", "t1"]);
    cluster.shutdown().await;
}

#[tokio::test]
async fn explicit_reconciliation_follows_the_table() {
    let cluster = simulated_cluster(3).await;
    let mut pa = subscribe(
        cluster.master_url(),
        Codec::Json,
        framework("pa", &[Cap::PartitionAware]),
    )
    .await;
    let mut offers = pa.offers().await;
    offers.sort_by_key(|o| o.hostname.clone());
    let ids: Vec<String> = offers
        .iter()
        .map(|o| o.agent_id.clone().unwrap().value)
        .collect();
    let o = &offers[0];
    pa.launch(o, vec![command_task("known", o, "cpus:1", "x")])
        .await;
    let r = pa.update().await;
    pa.ack(&r).await;

    let ask = async |sub: &mut Sub, task: &str, agent: Option<&str>| {
        sub.reconcile(vec![(task, agent)]).await;
        sub.update().await
    };
    // Known task: its state.
    assert_eq!(
        state_of(&ask(&mut pa, "known", Some(&ids[0])).await),
        TaskState::TaskRunning
    );
    // Registered agent, unknown task: GONE.
    assert_eq!(
        state_of(&ask(&mut pa, "nope", Some(&ids[1])).await),
        TaskState::TaskGone
    );
    // Unknown agent: UNKNOWN.
    assert_eq!(
        state_of(&ask(&mut pa, "nope", Some("no-agent")).await),
        TaskState::TaskUnknown
    );
    // Unreachable agent (silent past its ping timeouts): UNREACHABLE with
    // unreachable_time.
    cluster.partition_agent(&ids[1]).unwrap();
    cluster.advance_clock(PING_BUDGET);
    let u = ask(&mut pa, "nope", Some(&ids[1])).await;
    assert_eq!(state_of(&u), TaskState::TaskUnreachable);
    assert!(u.unreachable_time.is_some());
    // Removed by the operator: GONE_BY_OPERATOR.
    cluster.remove_agent(&ids[2]).unwrap();
    assert_eq!(
        state_of(&ask(&mut pa, "nope", Some(&ids[2])).await),
        TaskState::TaskGoneByOperator
    );

    // The same questions without PARTITION_AWARE: LOST.
    let mut plain = subscribe(cluster.master_url(), Codec::Json, framework("plain", &[])).await;
    for (task, agent) in [
        ("nope", Some(ids[0].as_str())),
        ("nope", Some("no-agent")),
        ("nope", Some(ids[1].as_str())),
        ("nope", Some(ids[2].as_str())),
    ] {
        assert_eq!(
            state_of(&ask(&mut plain, task, agent).await),
            TaskState::TaskLost,
            "{agent:?}"
        );
    }

    // An agent still re-registering after a master restart: no answer.
    cluster.restart_master(RestartOptions {
        keep_state: true,
        recovery_ms: 0,
        agent_reregistration_ms: 60_000,
    });
    eventually(|| !cluster.state().recovering).await;
    let mut back = subscribe(cluster.master_url(), Codec::Json, {
        let mut f = framework("late", &[Cap::PartitionAware]);
        f.failover_timeout = Some(60.0);
        f
    })
    .await;
    back.reconcile(vec![("nope", Some(&ids[0]))]).await;
    back.assert_none(event::Type::Update, Duration::from_millis(400))
        .await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn partition_makes_tasks_unreachable_or_lost_and_heal_brings_them_back() {
    let cluster = simulated_cluster(1).await;
    let mut pa = subscribe(
        cluster.master_url(),
        Codec::Json,
        framework("pa", &[Cap::PartitionAware]),
    )
    .await;
    let o = pa.offers().await.remove(0);
    let agent = o.agent_id.clone().unwrap().value;
    pa.launch(&o, vec![command_task("a", &o, "cpus:1", "x")])
        .await;
    let r = pa.update().await;
    pa.ack(&r).await;
    let mut plain = subscribe(cluster.master_url(), Codec::Json, framework("plain", &[])).await;
    let o2 = plain.offers().await.remove(0);
    plain
        .launch(&o2, vec![command_task("b", &o2, "cpus:1", "x")])
        .await;
    let r = plain.update().await;
    plain.ack(&r).await;

    cluster.partition_agent(&agent).unwrap();
    // The master notices only once the agent missed its pings.
    pa.assert_none(event::Type::Update, Duration::from_millis(200))
        .await;
    cluster.advance_clock(PING_BUDGET - Duration::from_secs(1));
    pa.assert_none(event::Type::Update, Duration::from_millis(200))
        .await;
    cluster.advance_clock(Duration::from_secs(1));
    let u = pa.update().await;
    assert_eq!(
        (state_of(&u), u.source),
        (
            TaskState::TaskUnreachable,
            Some(Source::SourceMaster as i32)
        )
    );
    assert!(u.unreachable_time.is_some());
    assert_eq!(state_of(&plain.update().await), TaskState::TaskLost);
    // No offers from an unreachable agent.
    pa.assert_none(event::Type::Offers, Duration::from_millis(300))
        .await;

    cluster.heal_agent(&agent).unwrap();
    // Since Mesos 1.5, every framework learns at once that its tasks are
    // back (REASON_AGENT_REREGISTERED, no uuid), partition-aware or not.
    for fw in [&mut pa, &mut plain] {
        let u = fw.update().await;
        assert_eq!(state_of(&u), TaskState::TaskRunning);
        assert_eq!(u.reason, Some(Reason::ReasonAgentReregistered as i32));
        assert_eq!(u.source, Some(Source::SourceMaster as i32));
        assert_eq!(
            u.message.as_deref(),
            Some("Unreachable agent re-reregistered")
        );
        assert!(u.uuid.is_none());
    }
    pa.reconcile(vec![("a", Some(&agent))]).await;
    assert_eq!(state_of(&pa.update().await), TaskState::TaskRunning);
    assert_eq!(
        cluster.state().task("b").map(|t| t.state),
        Some(TaskState::TaskRunning)
    );
    assert_eq!(cluster.state().agents[0].used.scalar("cpus"), 2.0);
    cluster.shutdown().await;
}
