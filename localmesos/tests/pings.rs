//! Agent ping timeouts on the master's clock: a partition is seen only
//! once the agent has missed `max_agent_ping_timeouts` pings; healed
//! before that, nothing happened to its tasks, and a later clock advance
//! does not mark it. `/state` counts it active until it is marked.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use localmesos::Timing;
use mesos::codec::Codec;
use mesos::proto::TaskState;
use mesos::proto::framework_info::capability::Type as Cap;
use mesos::proto::scheduler::event;

fn active(cluster: &localmesos::LocalMesos) -> bool {
    cluster.state_json()["slaves"][0]["active"] == true
}

#[tokio::test]
async fn a_partition_is_seen_only_after_the_ping_timeouts_and_a_heal_before_changes_nothing() {
    let timing = Timing {
        agent_ping_timeout: Duration::from_secs(10),
        max_agent_ping_timeouts: 3,
        ..fast_timing()
    };
    let cluster = cluster(vec![agent("cpus:4;mem:1024", true)], timing).await;
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

    // A blip: 29 s of silence, healed; then the clock runs on.
    cluster.partition_agent(&agent).unwrap();
    assert!(
        cluster.partition_agent(&agent).is_err(),
        "partitioned twice"
    );
    cluster.advance_clock(Duration::from_secs(29));
    assert!(active(&cluster));
    cluster.heal_agent(&agent).unwrap();
    cluster.advance_clock(Duration::from_secs(60));
    pa.assert_none(event::Type::Update, Duration::from_millis(300))
        .await;
    assert!(active(&cluster));
    assert!(cluster.heal_agent(&agent).is_err(), "nothing to heal");

    // A real partition: 30 s, three timeouts of 10 s.
    cluster.partition_agent(&agent).unwrap();
    cluster.advance_clock(Duration::from_secs(29));
    assert!(active(&cluster));
    cluster.advance_clock(Duration::from_secs(1));
    assert_eq!(state_of(&pa.update().await), TaskState::TaskUnreachable);
    assert!(!active(&cluster));
    cluster.heal_agent(&agent).unwrap();
    assert_eq!(state_of(&pa.update().await), TaskState::TaskRunning);
    assert!(active(&cluster));
    cluster.shutdown().await;
}
