//! The scheduler endpoint's HTTP contract: status codes, the SUBSCRIBE
//! stream, `/version` and `/state`.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use localmesos::RestartOptions;
use mesos::codec::{Codec, JSON, PROTOBUF};
use mesos::proto::FrameworkId;
use mesos::proto::scheduler::{Call, call, event};

#[tokio::test]
async fn subscribe_streams_subscribed_then_heartbeat_at_once_and_every_interval() {
    let mut timing = fast_timing();
    timing.heartbeat_interval = Duration::from_millis(300);
    let cluster = cluster(vec![], timing).await;
    for codec in [Codec::Json, Codec::Protobuf] {
        let mut sub = subscribe(cluster.master_url(), codec, framework("hb", &[])).await;
        assert_eq!(sub.subscribed.heartbeat_interval_seconds, Some(0.3));
        let master = sub.subscribed.master_info.clone().unwrap();
        assert_eq!(master.port, u32::from(cluster.master_addr().port()));
        // A HEARTBEAT right after SUBSCRIBED, then one per interval.
        let first = sub
            .next_within(Duration::from_millis(250))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.kind(), Some(event::Type::Heartbeat));
        let start = tokio::time::Instant::now();
        let second = sub.next().await.unwrap();
        assert_eq!(second.kind(), Some(event::Type::Heartbeat));
        assert!(
            start.elapsed() >= Duration::from_millis(200),
            "heartbeat came too early"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn default_heartbeat_interval_is_fifteen_seconds() {
    let cluster = cluster(vec![], localmesos::Timing::default()).await;
    let sub = subscribe(cluster.master_url(), Codec::Json, framework("d", &[])).await;
    assert_eq!(sub.subscribed.heartbeat_interval_seconds, Some(15.0));
    cluster.shutdown().await;
}

#[tokio::test]
async fn status_codes_follow_mesos() {
    let cluster = simulated_cluster(1).await;
    let url = cluster.master_url().to_owned();
    let sub_body = Codec::Json.encode(&subscribe_call(framework("codes", &[])));

    // 405: not POST.
    let resp = reqwest::get(format!("{url}/api/v1/scheduler"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers().get("allow").unwrap(), "POST");
    // 400: no Content-Type; 415: another one.
    assert_eq!(
        post(&url, None, None, None, sub_body.clone())
            .await
            .status(),
        400
    );
    assert_eq!(
        post(&url, Some("text/plain"), None, None, sub_body.clone())
            .await
            .status(),
        415
    );
    // 400: garbage body, in both encodings.
    assert_eq!(
        post(&url, Some(JSON), None, None, b"{not json".to_vec())
            .await
            .status(),
        400
    );
    assert_eq!(
        post(&url, Some(PROTOBUF), None, None, vec![0xff, 0xff, 0xff])
            .await
            .status(),
        400
    );
    // 400: no type.
    assert_eq!(
        post(&url, Some(JSON), None, None, b"{}".to_vec())
            .await
            .status(),
        400
    );
    // 406: SUBSCRIBE accepting neither encoding.
    assert_eq!(
        post(&url, Some(JSON), Some("text/html"), None, sub_body.clone())
            .await
            .status(),
        406
    );
    // 400: SUBSCRIBE carrying a stream id.
    assert_eq!(
        post(&url, Some(JSON), None, Some("x"), sub_body.clone())
            .await
            .status(),
        400
    );
    // 400: a failover SUBSCRIBE whose framework_id differs from framework_info.id.
    let mut bad = subscribe_call(framework("codes", &[]));
    bad.subscribe
        .as_mut()
        .unwrap()
        .framework_info
        .as_mut()
        .unwrap()
        .id = Some(FrameworkId::new("a"));
    bad.framework_id = Some(FrameworkId::new("b"));
    assert_eq!(
        post(&url, Some(JSON), None, None, Codec::Json.encode(&bad))
            .await
            .status(),
        400
    );

    let sub = subscribe(&url, Codec::Json, framework("codes", &[])).await;
    let revive = |fw: Option<FrameworkId>| Call {
        framework_id: fw,
        r#type: Some(call::Type::Revive as i32),
        ..Default::default()
    };
    // 400: missing framework_id.
    let r = post(
        &url,
        Some(JSON),
        None,
        Some(&sub.stream_id),
        Codec::Json.encode(&revive(None)),
    )
    .await;
    assert_eq!(r.status(), 400);
    // 400: unknown framework.
    let r = post(
        &url,
        Some(JSON),
        None,
        Some(&sub.stream_id),
        Codec::Json.encode(&revive(Some(FrameworkId::new("nope")))),
    )
    .await;
    assert_eq!(r.status(), 400);
    // 400: missing or wrong stream id.
    let body = Codec::Json.encode(&revive(Some(sub.framework_id.clone())));
    assert_eq!(
        post(&url, Some(JSON), None, None, body.clone())
            .await
            .status(),
        400
    );
    assert_eq!(
        post(&url, Some(JSON), None, Some("wrong"), body.clone())
            .await
            .status(),
        400
    );
    // 400: a call without its message (ACCEPT without accept).
    let r = sub.simple(call::Type::Accept).await;
    assert_eq!(r, 400);
    // 202: accepted, in JSON and protobuf alike.
    assert_eq!(
        post(&url, Some(JSON), None, Some(&sub.stream_id), body.clone())
            .await
            .status(),
        202
    );
    let pbody = Codec::Protobuf.encode(&revive(Some(sub.framework_id.clone())));
    assert_eq!(
        post(&url, Some(PROTOBUF), None, Some(&sub.stream_id), pbody)
            .await
            .status(),
        202
    );

    // 403: known but not subscribed (stream closed, failover timeout running).
    let mut info = framework("codes2", &[]);
    info.failover_timeout = Some(3600.0);
    let sub2 = subscribe(&url, Codec::Json, info).await;
    let fw2 = sub2.framework_id.clone();
    let stream2 = sub2.stream_id.clone();
    sub2.close();
    let body2 = Codec::Json.encode(&revive(Some(fw2.clone())));
    let mut status = 0;
    for _ in 0..200 {
        status = post(&url, Some(JSON), None, Some(&stream2), body2.clone())
            .await
            .status()
            .as_u16();
        if status == 403 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, 403);

    // 503: while the master recovers.
    cluster.restart_master(RestartOptions {
        keep_state: true,
        recovery_ms: 60_000,
        agent_reregistration_ms: 0,
    });
    assert_eq!(
        post(&url, Some(JSON), None, None, sub_body).await.status(),
        503
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn version_and_state_are_operator_json() {
    let cluster = cluster(
        vec![
            localmesos::AgentConfig::from_flags(
                "cpus:4;mem:8192;ports:[31000-32000];cpus(prod):2",
                "rack:r{i}",
                0,
            )
            .unwrap()
            .simulated(None),
        ],
        fast_timing(),
    )
    .await;
    let v = get_json(&format!("{}/version", cluster.master_url())).await;
    assert_eq!(v["version"], "1.11.0");
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("st", &[])).await;
    let offers = sub.offers().await;
    let s = get_json(&format!("{}/state", cluster.master_url())).await;
    let agent = &s["slaves"][0];
    assert_eq!(agent["hostname"], "agent-0");
    assert_eq!(agent["resources"]["cpus"], 6.0);
    assert_eq!(agent["resources"]["ports"], "[31000-32000]");
    assert_eq!(agent["attributes"]["rack"], "r0");
    assert_eq!(agent["reserved_resources"]["prod"]["cpus"], 2.0);
    // The role-"*" framework was offered the unreserved part only.
    assert_eq!(agent["offered_resources"]["cpus"], 4.0);
    assert_eq!(agent["used_resources"]["cpus"], 0.0);
    let fw = &s["frameworks"][0];
    assert_eq!(fw["name"], "st");
    assert_eq!(fw["offers"].as_array().unwrap().len(), offers.len());

    let o = &offers[0];
    sub.launch(o, vec![command_task("t1", o, "cpus:1;mem:128", "true")])
        .await;
    let running = sub.update().await;
    assert_eq!(running.task_id.unwrap().value, "t1");
    let s = get_json(&format!("{}/state", cluster.master_url())).await;
    assert_eq!(s["slaves"][0]["used_resources"]["cpus"], 1.0);
    let task = &s["frameworks"][0]["tasks"][0];
    assert_eq!(task["id"], "t1");
    assert_eq!(task["state"], "TASK_RUNNING");
    assert_eq!(task["slave_id"], o.agent_id.clone().unwrap().value);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_master_that_is_not_the_leader_redirects_with_a_protocol_relative_location() {
    let cluster = localmesos::LocalMesos::start(localmesos::Config {
        redirect_to: Some("leader.example:5050".into()),
        ..localmesos::Config::default()
    })
    .await
    .unwrap();
    let body = Codec::Json.encode(&subscribe_call(framework("r", &[])));
    testkit::init_crypto();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let resp = client
        .post(format!("{}/api/v1/scheduler", cluster.master_url()))
        .header("Content-Type", JSON)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 307);
    assert_eq!(
        resp.headers().get("location").unwrap(),
        "//leader.example:5050/api/v1/scheduler"
    );
    cluster.shutdown().await;
}
