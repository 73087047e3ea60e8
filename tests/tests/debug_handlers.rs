//! Every debug, health and metrics endpoint, against a running scheduler
//! whose pods are in several states.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use apiserver::Api;
use common::cluster::*;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

const T: Duration = Duration::from_secs(30);

fn pod(name: &str, host: Option<&str>, cpu: &str) -> Pod {
    let mut spec = serde_json::json!({"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "60"],
        "resources": {"requests": {"cpu": cpu, "memory": "32Mi"}}}]});
    if let Some(h) = host {
        spec["nodeSelector"] = serde_json::json!({"kubernetes.io/hostname": h});
    }
    serde_json::from_value(
        serde_json::json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec}),
    )
    .unwrap()
}

async fn get(url: &str, accept: Option<&str>) -> (u16, String) {
    testkit::init_crypto();
    let mut req = reqwest::Client::new().get(url);
    if let Some(a) = accept {
        req = req.header("Accept", a);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

async fn json(url: &str) -> Value {
    let (code, body) = get(url, None).await;
    assert_eq!(code, 200, "{url}: {body}");
    serde_json::from_str(&body).unwrap()
}

async fn scenario(api: &Api) {
    api.create_pod("default", pod("forever", Some("agent-0"), "100m"))
        .await
        .unwrap();
    api.create_pod("default", pod("quick", Some("agent-1"), "100m"))
        .await
        .unwrap();
    api.create_pod("default", pod("huge", None, "64"))
        .await
        .unwrap();
    wait_pod(api, "default", "forever", T, |p| phase(p) == "Running").await;
    wait_pod(api, "default", "quick", T, |p| phase(p) == "Succeeded").await;
    wait_pod(api, "default", "huge", T, |p| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| !c.is_empty())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_answers_against_a_live_scheduler() {
    let app = start(Setup {
        agents: vec![
            agent("cpus:4;mem:4096;ports:[31000-31010]", "", 0).simulated(None),
            agent("cpus:4;mem:4096;ports:[31000-31010]", "", 1)
                .simulated(Some(Duration::from_millis(300))),
        ],
        ..Setup::default()
    })
    .await;
    scenario(app.api()).await;
    let base = app.api_url();

    let tasks = json(&format!("{base}/debug/registry/tasks")).await;
    let tasks = tasks.as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    let running = tasks
        .iter()
        .find(|t| t["pod"] == "default/forever")
        .unwrap();
    assert_eq!(running["state"], "running");
    assert_eq!(running["hostname"], "agent-0");
    assert!(
        running["flags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "launched")
    );
    assert!(running["offer_id"].is_string() && running["age_seconds"].is_number());
    let finished = tasks.iter().find(|t| t["pod"] == "default/quick").unwrap();
    assert_eq!(finished["state"], "finished");

    let only = json(&format!("{base}/debug/registry/tasks?state=running")).await;
    assert_eq!(only.as_array().unwrap().len(), 1);
    let by_pod = json(&format!("{base}/debug/registry/tasks?pod=quick")).await;
    assert_eq!(by_pod[0]["pod"], "default/quick");

    for (url, accept) in [
        (format!("{base}/debug/registry/tasks"), Some("text/plain")),
        (format!("{base}/debug/registry/tasks?format=text"), None),
    ] {
        let (code, text) = get(&url, accept).await;
        assert_eq!(code, 200);
        let mut lines = text.lines();
        let header = lines.next().unwrap();
        assert!(
            header.starts_with("TASK") && header.contains("STATE") && header.contains("PORTS"),
            "{text}"
        );
        let state_col = header.find("STATE").unwrap();
        for line in lines {
            let state = line[state_col..].split_whitespace().next().unwrap();
            assert!(
                ["running", "finished"].contains(&state),
                "columns line up: {line}"
            );
        }
    }

    let id = running["id"].as_str().unwrap();
    let one = json(&format!("{base}/debug/registry/tasks/{id}")).await;
    assert_eq!(one["task"]["id"], id);
    assert_eq!(one["spec"]["hostname"], "agent-0");
    assert!(
        one["spec"]["resources"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    );
    let history = one["status_history"].as_array().unwrap();
    assert!(
        history.iter().any(|h| h["state"] == "TASK_RUNNING"
            && h["outcome"]
                .as_str()
                .is_some_and(|o| o.starts_with("applied: "))),
        "{history:?}"
    );
    let (code, _) = get(&format!("{base}/debug/registry/tasks/no-such-task"), None).await;
    assert_eq!(code, 404);

    let offers = json(&format!("{base}/debug/offers")).await;
    for o in offers.as_array().unwrap() {
        assert!(
            o["agent_id"].is_string()
                && o["ttl_left_seconds"].is_number()
                && o["resources"].is_string()
        );
    }
    // The debug snapshot trails the core by up to one publish interval.
    let end = std::time::Instant::now() + T;
    let huge = loop {
        let queue = json(&format!("{base}/debug/queue")).await;
        if let Some(h) = queue
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "huge" && e["attempts"].as_u64() >= Some(1))
        {
            break h.clone();
        }
        assert!(std::time::Instant::now() < end, "huge is queued: {queue}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(huge["attempts"].as_u64().unwrap() >= 1);
    assert!(
        huge["last_reason"]
            .as_str()
            .unwrap()
            .contains("insufficient cpus"),
        "{huge}"
    );
    assert!(huge["next_try_in_seconds"].is_number());

    let rec = json(&format!("{base}/debug/reconciliation")).await;
    assert!(rec["rounds_completed"].as_u64().unwrap() >= 1, "{rec}");
    assert!(
        rec["waiting"].is_array() && rec["last_implicit_unix"].is_number(),
        "{rec}"
    );
    let fw = json(&format!("{base}/debug/framework")).await;
    assert_eq!(fw["subscribed"], true);
    assert!(fw["framework_id"].is_string());
    assert_eq!(fw["master"].as_str(), Some(app.master_url()));
    assert!(fw["last_heartbeat_unix"].is_number(), "{fw}");

    testkit::init_crypto();
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{base}/debug/actions/reconcile?kind=implicit"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let r = client
        .post(format!("{base}/debug/actions/reconcile?kind=explicit"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let r = client
        .post(format!("{base}/debug/actions/reconcile?kind=sideways"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);

    assert_eq!(get(&format!("{base}/healthz"), None).await.0, 200);
    let (code, body) = get(&format!("{base}/readyz"), None).await;
    assert_eq!((code, body.as_str()), (200, "ok"));
    let (code, body) = get(&format!("{base}/readyz?verbose"), None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        "[+]ping ok\n[+]mesos-subscription ok\nreadyz check passed\n"
    );

    let (code, text) = get(&format!("{base}/metrics"), None).await;
    assert_eq!(code, 200);
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .expect("valid exposition");
    let value = |name: &str, label: Option<(&str, &str)>| -> f64 {
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => 0.0,
            })
            .sum()
    };
    assert!(value("mesopod_pods_scheduled_total", None) >= 2.0, "{text}");
    assert!(value("mesopod_offers_received_total", None) >= 2.0);
    assert_eq!(
        value("mesopod_registry_tasks", Some(("state", "running"))),
        1.0
    );
    assert_eq!(
        value("mesopod_registry_tasks", Some(("state", "finished"))),
        1.0
    );
    assert!(
        value(
            "mesopod_status_updates_total",
            Some(("state", "TASK_RUNNING"))
        ) >= 2.0
    );
    assert!(
        value(
            "mesopod_scheduling_attempts_total",
            Some(("result", "unschedulable"))
        ) >= 1.0
    );
    assert!(value("mesopod_subscriptions_total", None) >= 1.0);
    for hist in [
        "mesopod_scheduling_latency_seconds",
        "mesopod_pod_startup_latency_seconds",
    ] {
        assert!(
            scrape
                .samples
                .iter()
                .any(|s| s.metric == hist
                    && matches!(s.value, prometheus_parse::Value::Histogram(_))),
            "{hist} in {text}"
        );
    }

    let (code, html) = get(&format!("{base}/debug/"), None).await;
    assert_eq!(code, 200);
    assert!(
        html.contains("<table")
            && html.contains(id)
            && html.contains("/debug/offers")
            && html.contains("/metrics")
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_master_readyz_and_actions_say_so() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let app = start(Setup {
        masters: vec![url],
        ..Setup::default()
    })
    .await;
    let base = app.api_url();
    assert_eq!(get(&format!("{base}/healthz"), None).await.0, 200);
    // kube-apiserver's format: every check, the failing one's reason withheld.
    let (code, body) = get(&format!("{base}/readyz"), None).await;
    assert_eq!(code, 500);
    assert_eq!(
        body,
        "[+]ping ok\n[-]mesos-subscription failed: reason withheld\nreadyz check failed\n"
    );
    let (code, body) = get(&format!("{base}/readyz?exclude=mesos-subscription"), None).await;
    assert_eq!((code, body.as_str()), (200, "ok"));
    let (code, body) = get(&format!("{base}/readyz/mesos-subscription"), None).await;
    assert_eq!(code, 500);
    assert_eq!(
        body,
        "internal server error: not subscribed to a Mesos master\n"
    );
    testkit::init_crypto();
    let r = reqwest::Client::new()
        .post(format!("{base}/debug/actions/reconcile?kind=explicit"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    let fw = json(&format!("{base}/debug/framework")).await;
    assert_eq!(fw["subscribed"], false);
    app.shutdown().await;
}
