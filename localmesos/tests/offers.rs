//! The allocator and ACCEPT/DECLINE over the scheduler API.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use localmesos::AgentConfig;
use mesos::codec::Codec;
use mesos::proto::framework_info::capability::Type as Cap;
use mesos::proto::offer::{Operation, operation};
use mesos::proto::scheduler::{Call, call, event};
use mesos::proto::task_status::Reason;
use mesos::proto::{ExecutorId, ExecutorInfo, OfferId, TaskGroupInfo, TaskState};
use mesos::resources::Resources;

fn offer_res(o: &mesos::proto::Offer) -> Resources {
    Resources::from_protos(o.resources.clone())
        .unwrap()
        .unallocated()
}

#[tokio::test]
async fn one_offer_per_agent_with_hostname_attributes_and_allocation_info() {
    let agents = (0..3)
        .map(|i| {
            AgentConfig::from_flags("cpus:4;mem:8192;ports:[31000-32000]", "rack:r{i}", i)
                .unwrap()
                .simulated(None)
        })
        .collect();
    let cluster = cluster(agents, fast_timing()).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Protobuf, framework("o", &[])).await;
    let offers = sub.offers().await;
    assert_eq!(offers.len(), 3);
    let agents: BTreeSet<_> = offers
        .iter()
        .map(|o| o.agent_id.clone().unwrap().value)
        .collect();
    assert_eq!(agents.len(), 3, "one offer per agent");
    let hosts: BTreeSet<_> = offers.iter().map(|o| o.hostname.clone()).collect();
    assert_eq!(
        hosts,
        BTreeSet::from(["agent-0".into(), "agent-1".into(), "agent-2".into()])
    );
    for o in &offers {
        let i = &o.hostname["agent-".len()..];
        assert_eq!(
            mesos::resources::attribute_text(&o.attributes[0]),
            format!("r{i}")
        );
        assert_eq!(o.framework_id, Some(sub.framework_id.clone()));
        assert_eq!(
            o.allocation_info.clone().unwrap().role.as_deref(),
            Some("*")
        );
        assert!(o.resources.iter().all(|r| r.allocation_info.is_some()));
        let r = offer_res(o);
        assert_eq!(r.scalar("cpus"), 4.0);
        assert_eq!(r.ranges("ports"), vec![(31000, 32000)]);
    }
    // Held offers are not offered again in the next rounds.
    sub.assert_none(event::Type::Offers, Duration::from_millis(300))
        .await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn static_reservations_go_only_to_their_role() {
    let agents = vec![agent("cpus:2;mem:1024;cpus(prod):3;mem(prod):512", true)];
    let cluster = cluster(agents, fast_timing()).await;
    let mut star = subscribe(cluster.master_url(), Codec::Json, framework("star", &[])).await;
    let o = star.offers().await.remove(0);
    assert_eq!(
        offer_res(&o).scalar("cpus"),
        2.0,
        "role * sees no reserved cpus"
    );
    assert_eq!(offer_res(&o).roles(), vec!["*".to_owned()]);

    let mut info = framework("prod", &[Cap::MultiRole]);
    info.roles = vec!["prod".into()];
    let mut prod = subscribe(cluster.master_url(), Codec::Json, info).await;
    let o = prod.offers().await.remove(0);
    let r = offer_res(&o);
    // The unreserved part is held by the other framework's offer.
    assert_eq!(r.scalar("cpus"), 3.0);
    assert_eq!(r.roles(), vec!["prod".to_owned()]);
    assert_eq!(o.allocation_info.unwrap().role.as_deref(), Some("prod"));
    assert!(
        o.resources
            .iter()
            .all(|x| x.allocation_info.as_ref().unwrap().role.as_deref() == Some("prod"))
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn accept_pools_several_offers_of_one_agent_across_several_operations() {
    let cluster = cluster(vec![agent("cpus:4;mem:1024", true)], fast_timing()).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("pool", &[])).await;
    let a = sub.offers().await.remove(0);
    // Use one cpu; refuse nothing so the rest comes back at once.
    let t1 = command_task("t1", &a, "cpus:1;mem:128", "sleep 100");
    assert_eq!(
        sub.accept(
            vec![a.id.clone().unwrap()],
            vec![launch(vec![t1])],
            Some(0.0)
        )
        .await,
        202
    );
    let b = sub.offers().await.remove(0);
    assert_eq!(offer_res(&b).scalar("cpus"), 3.0);
    let running = sub.update().await;
    assert_eq!(state_of(&running), TaskState::TaskRunning);
    sub.ack(&running).await;
    // Freeing t1 produces a second offer of the same agent.
    sub.kill("t1", None).await;
    let killed = sub.update().await;
    assert_eq!(state_of(&killed), TaskState::TaskKilled);
    sub.ack(&killed).await;
    let c = sub.offers().await.remove(0);
    assert_eq!(c.agent_id, b.agent_id);
    assert_eq!(offer_res(&c).scalar("cpus"), 1.0);
    // Two LAUNCH operations over both offers: 3.5 + 0.5 cpus.
    let t2 = command_task("t2", &b, "cpus:3.5;mem:512", "x");
    let t3 = command_task("t3", &b, "cpus:0.5;mem:512", "x");
    let code = sub
        .accept(
            vec![b.id.clone().unwrap(), c.id.clone().unwrap()],
            vec![launch(vec![t2]), launch(vec![t3])],
            None,
        )
        .await;
    assert_eq!(code, 202);
    let mut got = BTreeSet::new();
    for _ in 0..2 {
        let u = sub.update().await;
        assert_eq!(state_of(&u), TaskState::TaskRunning, "{u:?}");
        got.insert(u.task_id.unwrap().value);
    }
    assert_eq!(got, BTreeSet::from(["t2".to_owned(), "t3".to_owned()]));
    let st = cluster.state();
    assert_eq!(st.agents[0].used.scalar("cpus"), 4.0);
    cluster.shutdown().await;
}

#[tokio::test]
async fn invalid_tasks_get_task_error_while_valid_ones_launch() {
    let cluster = cluster(vec![agent("cpus:2;mem:1024", true)], fast_timing()).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("err", &[])).await;
    let o = sub.offers().await.remove(0);
    let too_big = command_task("big", &o, "cpus:3;mem:128", "x");
    let ok = command_task("ok", &o, "cpus:1;mem:128", "x");
    let mut both = command_task("both", &o, "cpus:0.1", "x");
    both.executor = Some(ExecutorInfo {
        executor_id: Some(ExecutorId::new("e")),
        command: both.command.clone(),
        ..Default::default()
    });
    let bad_id = command_task("a/b", &o, "cpus:0.1", "x");
    sub.launch(&o, vec![too_big, ok, both, bad_id]).await;
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..4 {
        let u = sub.update().await;
        seen.insert(
            u.task_id.clone().unwrap().value,
            (state_of(&u), u.reason, u.uuid.is_some()),
        );
    }
    let invalid = (
        TaskState::TaskError,
        Some(Reason::ReasonTaskInvalid as i32),
        false,
    );
    assert_eq!(seen["big"], invalid);
    assert_eq!(seen["both"], invalid);
    assert_eq!(seen["a/b"], invalid);
    assert_eq!(seen["ok"], (TaskState::TaskRunning, None, true));
    // A duplicate task id is invalid too.
    let o2 = sub.offers().await.remove(0);
    sub.launch(&o2, vec![command_task("ok", &o2, "cpus:0.5", "x")])
        .await;
    let u = sub.update().await;
    assert_eq!(
        (state_of(&u), u.reason),
        (TaskState::TaskError, Some(Reason::ReasonTaskInvalid as i32))
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn stale_offers_get_lost_or_dropped_when_partition_aware() {
    let cluster = cluster(vec![agent("cpus:2;mem:1024", true)], fast_timing()).await;
    for (caps, expected) in [
        (vec![], TaskState::TaskLost),
        (vec![Cap::PartitionAware], TaskState::TaskDropped),
    ] {
        let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("stale", &caps)).await;
        let o = sub.offers().await.remove(0);
        let mut stale = o.clone();
        stale.id = Some(OfferId::new("no-such-offer"));
        sub.launch(&stale, vec![command_task("t", &o, "cpus:1", "x")])
            .await;
        let u = sub.update().await;
        assert_eq!(state_of(&u), expected);
        assert_eq!(u.reason, Some(Reason::ReasonInvalidOffers as i32));
        assert!(u.uuid.is_none(), "master-generated updates carry no uuid");
        // The same offer used twice: the second time it is gone.
        sub.launch(&o, vec![command_task("t1", &o, "cpus:1", "x")])
            .await;
        assert_eq!(state_of(&sub.update().await), TaskState::TaskRunning);
        sub.launch(&o, vec![command_task("t2", &o, "cpus:0.5", "x")])
            .await;
        let u = sub.update().await;
        assert_eq!(
            (state_of(&u), u.reason),
            (expected, Some(Reason::ReasonInvalidOffers as i32))
        );
        sub.simple(call::Type::Teardown).await;
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn decline_filters_refuse_the_agent_until_they_expire_or_revive() {
    let cluster = cluster(vec![agent("cpus:2;mem:1024", true)], fast_timing()).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("dec", &[])).await;
    let o = sub.offers().await.remove(0);
    let decline = |ids: Vec<OfferId>, secs: Option<f64>| Call {
        r#type: Some(call::Type::Decline as i32),
        decline: Some(call::Decline {
            offer_ids: ids,
            filters: secs.map(|s| mesos::proto::Filters {
                refuse_seconds: Some(s),
            }),
        }),
        ..Default::default()
    };
    // Default filter: 5 s. Nothing comes back within a second...
    assert_eq!(
        sub.call(decline(vec![o.id.clone().unwrap()], None)).await,
        202
    );
    sub.assert_none(event::Type::Offers, Duration::from_secs(1))
        .await;
    // ...until REVIVE clears filters.
    assert_eq!(sub.simple(call::Type::Revive).await, 202);
    let o = sub.offers().await.remove(0);
    // A short filter expires by itself.
    sub.call(decline(vec![o.id.clone().unwrap()], Some(0.4)))
        .await;
    let start = tokio::time::Instant::now();
    sub.offers().await;
    assert!(
        start.elapsed() >= Duration::from_millis(350),
        "filter ignored"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn suppress_stops_offers_and_revive_restores_them() {
    let cluster = cluster(vec![agent("cpus:2;mem:1024", true)], fast_timing()).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("sup", &[])).await;
    let o = sub.offers().await.remove(0);
    assert_eq!(sub.simple(call::Type::Suppress).await, 202);
    sub.call(Call {
        r#type: Some(call::Type::Decline as i32),
        decline: Some(call::Decline {
            offer_ids: vec![o.id.clone().unwrap()],
            filters: Some(mesos::proto::Filters {
                refuse_seconds: Some(0.0),
            }),
        }),
        ..Default::default()
    })
    .await;
    sub.assert_none(event::Type::Offers, Duration::from_millis(500))
        .await;
    assert_eq!(
        cluster.state().frameworks[0].suppressed_roles,
        vec!["*".to_owned()]
    );
    sub.simple(call::Type::Revive).await;
    sub.offers().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn offer_timeout_rescinds_and_a_rescinded_offer_is_invalid() {
    let mut timing = fast_timing();
    timing.offer_timeout = Some(Duration::from_millis(300));
    let cluster = cluster(vec![agent("cpus:2;mem:1024", true)], timing).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("to", &[])).await;
    let o = sub.offers().await.remove(0);
    let ev = sub.expect(event::Type::Rescind).await;
    assert_eq!(ev.rescind.unwrap().offer_id, o.id);
    sub.launch(&o, vec![command_task("late", &o, "cpus:1", "x")])
        .await;
    let u = sub.update().await;
    assert_eq!(
        (state_of(&u), u.reason),
        (
            TaskState::TaskLost,
            Some(Reason::ReasonInvalidOffers as i32)
        )
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn offers_are_rescinded_when_the_agent_goes_away() {
    let cluster = simulated_cluster(1).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("gone", &[])).await;
    let o = sub.offers().await.remove(0);
    cluster
        .remove_agent(&o.agent_id.clone().unwrap().value)
        .unwrap();
    let ev = sub.expect(event::Type::Rescind).await;
    assert_eq!(ev.rescind.unwrap().offer_id, o.id);
    cluster.shutdown().await;
}

#[tokio::test]
async fn launch_group_starts_every_task_of_the_group_or_none() {
    let cluster = cluster(vec![agent("cpus:4;mem:1024", true)], fast_timing()).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("grp", &[])).await;
    let o = sub.offers().await.remove(0);
    let exec = ExecutorInfo {
        r#type: Some(mesos::proto::executor_info::Type::Default as i32),
        executor_id: Some(ExecutorId::new("pod-exec")),
        resources: res("cpus:0.1;mem:32"),
        ..Default::default()
    };
    let task = |id: &str, cpus: &str| {
        let mut t = command_task(id, &o, cpus, "x");
        t.command = None;
        t
    };
    let group = |tasks| Operation {
        r#type: Some(operation::Type::LaunchGroup as i32),
        launch_group: Some(operation::LaunchGroup {
            executor: Some(exec.clone()),
            task_group: Some(TaskGroupInfo { tasks }),
        }),
        ..Default::default()
    };
    // One task too big: the whole group fails.
    let bad = group(vec![task("g1", "cpus:1"), task("g2", "cpus:9")]);
    sub.accept(vec![o.id.clone().unwrap()], vec![bad], Some(0.0))
        .await;
    for _ in 0..2 {
        let u = sub.update().await;
        assert_eq!(
            (state_of(&u), u.reason),
            (
                TaskState::TaskError,
                Some(Reason::ReasonTaskGroupInvalid as i32)
            )
        );
    }
    let o = sub.offers().await.remove(0);
    let good = group(vec![task("g3", "cpus:1"), task("g4", "cpus:1")]);
    sub.accept(vec![o.id.clone().unwrap()], vec![good], None)
        .await;
    for _ in 0..2 {
        assert_eq!(state_of(&sub.update().await), TaskState::TaskRunning);
    }
    // Tasks plus the executor's own resources are held.
    assert_eq!(cluster.state().agents[0].used.scalar("cpus"), 2.1);
    cluster.shutdown().await;
}

#[tokio::test]
async fn gpu_agents_are_offered_only_to_gpu_capable_frameworks() {
    let cluster = cluster(
        vec![
            agent("cpus:2;mem:1024;gpus:1", true),
            agent("cpus:2;mem:1024", true),
        ],
        fast_timing(),
    )
    .await;
    let mut plain = subscribe(cluster.master_url(), Codec::Json, framework("cpu", &[])).await;
    let offers = plain.offers().await;
    assert_eq!(offers.len(), 1);
    assert_eq!(offer_res(&offers[0]).scalar("gpus"), 0.0);
    plain
        .assert_none(event::Type::Offers, Duration::from_millis(300))
        .await;
    let mut gpu = subscribe(
        cluster.master_url(),
        Codec::Json,
        framework("gpu", &[Cap::GpuResources]),
    )
    .await;
    let offers = gpu.offers().await;
    assert_eq!(offers.len(), 1);
    assert_eq!(offer_res(&offers[0]).scalar("gpus"), 1.0);
    cluster.shutdown().await;
}
