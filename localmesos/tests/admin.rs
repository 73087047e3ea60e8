//! The fault injection routes under `/admin/`, over HTTP.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use mesos::codec::Codec;
use mesos::proto::TaskState;
use mesos::proto::framework_info::capability::Type as Cap;
use mesos::proto::scheduler::event;

/// A cluster serving the fault routes (`--enable-faults`).
async fn faulty_cluster(agents: Vec<localmesos::AgentConfig>) -> localmesos::LocalMesos {
    localmesos::LocalMesos::start(localmesos::Config {
        agents,
        timing: fast_timing(),
        security: localmesos::Security {
            enable_faults: true,
            ..localmesos::Security::default()
        },
        ..localmesos::Config::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn without_enable_faults_the_admin_routes_are_not_served() {
    let cluster = cluster(vec![], fast_timing()).await;
    let url = cluster.master_url().to_owned();
    for path in ["agents", "master/restart", "faults/status-updates"] {
        assert_eq!(admin(&url, path, "").await.status(), 404, "{path}");
    }
    assert!(cluster.state().agents.is_empty(), "nothing was added");
    cluster.shutdown().await;
}

async fn admin(url: &str, path: &str, body: &str) -> reqwest::Response {
    testkit::init_crypto();
    reqwest::Client::new()
        .post(format!("{url}/admin/{path}"))
        .header("Content-Type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn admin_routes_inject_agent_master_and_update_faults() {
    let cluster = faulty_cluster(vec![]).await;
    let url = cluster.master_url().to_owned();
    // Add an agent.
    let resp = admin(
        &url,
        "agents",
        r#"{"resources":"cpus:2;mem:512","attributes":"rack:r{i}","simulated":true}"#,
    )
    .await;
    assert_eq!(resp.status(), 200);
    let agent = resp.json::<serde_json::Value>().await.unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        admin(&url, "agents", r#"{"resources":"cpus:"}"#)
            .await
            .status(),
        400
    );
    assert_eq!(admin(&url, "agents", "{not json").await.status(), 400);

    let mut sub = subscribe(&url, Codec::Json, framework("adm", &[Cap::PartitionAware])).await;
    let o = sub.offers().await.remove(0);
    assert_eq!(o.hostname, "agent-0");
    // Status update faults: the first send is dropped, the retry delivers.
    assert_eq!(
        admin(&url, "faults/status-updates", r#"{"drop":1}"#)
            .await
            .status(),
        200
    );
    sub.launch(&o, vec![command_task("t", &o, "cpus:1", "x")])
        .await;
    let r = sub.update().await;
    assert_eq!(state_of(&r), TaskState::TaskRunning);
    sub.ack(&r).await;
    testkit::init_crypto();
    let cleared = reqwest::Client::new()
        .delete(format!("{url}/admin/faults/status-updates"))
        .send()
        .await
        .unwrap();
    assert_eq!(cleared.status(), 200);

    // Partition, heal, remove. The partitioned agent is unreachable once
    // the master's clock passed its ping timeouts (15 s x 5).
    assert_eq!(
        admin(&url, &format!("agents/{agent}/partition"), "")
            .await
            .status(),
        200
    );
    for bad in [r#"{"seconds":-1}"#, r#"{"minutes":1}"#, "\"soon\""] {
        assert_eq!(
            admin(&url, "clock/advance", bad).await.status(),
            400,
            "{bad}"
        );
    }
    assert_eq!(
        admin(&url, "clock/advance", r#"{"seconds":75}"#)
            .await
            .status(),
        200
    );
    assert_eq!(state_of(&sub.update().await), TaskState::TaskUnreachable);
    assert_eq!(
        admin(&url, &format!("agents/{agent}/partition"), "")
            .await
            .status(),
        409
    );
    assert_eq!(
        admin(&url, &format!("agents/{agent}/heal"), "")
            .await
            .status(),
        200
    );
    // The heal re-registers the agent: its task is RUNNING again.
    assert_eq!(state_of(&sub.update().await), TaskState::TaskRunning);
    assert_eq!(
        admin(&url, &format!("agents/{agent}/remove"), "")
            .await
            .status(),
        200
    );
    assert_eq!(state_of(&sub.update().await), TaskState::TaskGoneByOperator);
    assert_eq!(admin(&url, "agents/nope/remove", "").await.status(), 404);
    assert_eq!(
        admin(
            &url,
            "executors/kill",
            r#"{"agent_id":"nope","framework_id":"f","executor_id":"e"}"#
        )
        .await
        .status(),
        404
    );

    // Master restart: the stream ends.
    assert_eq!(
        admin(
            &url,
            "master/restart",
            r#"{"keep_state":true,"recovery_ms":10}"#
        )
        .await
        .status(),
        200
    );
    loop {
        match sub.next().await {
            None => break,
            Some(ev) => assert_ne!(ev.kind(), Some(event::Type::Error)),
        }
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn admin_kill_executor_fails_a_simulated_executors_tasks() {
    let cluster = faulty_cluster(vec![agent(
        "cpus:4;mem:8192;disk:20480;ports:[31000-32000]",
        true,
    )])
    .await;
    let url = cluster.master_url().to_owned();
    let mut sub = subscribe(&url, Codec::Json, framework("k", &[])).await;
    let o = sub.offers().await.remove(0);
    let exec = mesos::proto::ExecutorInfo {
        executor_id: Some(mesos::proto::ExecutorId::new("e")),
        command: Some(mesos::proto::CommandInfo {
            value: Some("x".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    sub.launch(&o, vec![executor_task("t", &o, "cpus:1", exec)])
        .await;
    let r = sub.update().await;
    sub.ack(&r).await;
    let body = format!(
        r#"{{"agent_id":"{}","framework_id":"{}","executor_id":"e"}}"#,
        o.agent_id.clone().unwrap().value,
        sub.framework_id.value
    );
    assert_eq!(admin(&url, "executors/kill", &body).await.status(), 200);
    assert_eq!(state_of(&sub.update().await), TaskState::TaskFailed);
    sub.expect(event::Type::Failure).await;
    cluster.shutdown().await;
}
