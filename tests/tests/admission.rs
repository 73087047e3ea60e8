//! The admission hook, end to end through the scheduling loop: every
//! decision, webhooks that are slow, down, garbage or greedy, fail-open and
//! fail-closed, the hold window, and the contract's example hook.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
#[path = "../../framework/examples/tenant_hook.rs"]
#[allow(dead_code)]
mod tenant_hook;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use apiserver::{Api, ManualClock};
use axum::Json;
use axum::routing::post;
use common::cluster::*;
use framework::admission::{Admission, AdmissionConfig, Decision, Hook, HookFn, WebhookHook};
use framework::app::App;
use k8s_openapi::api::core::v1::Pod;

const T: Duration = Duration::from_secs(30);

fn simulated_agents() -> Vec<localmesos::AgentConfig> {
    vec![
        agent("cpus:16;mem:16384;ports:[31000-31010]", "tenant:acme", 0).simulated(None),
        agent("cpus:16;mem:16384;ports:[31000-31010]", "tenant:other", 1).simulated(None),
    ]
}

async fn with_hooks(hooks: Vec<Arc<dyn Hook>>, config: AdmissionConfig) -> App {
    start(Setup {
        agents: simulated_agents(),
        admission: Admission::new(hooks, config),
        ..Setup::default()
    })
    .await
}

fn quick() -> AdmissionConfig {
    AdmissionConfig {
        timeout: Duration::from_millis(300),
        ..AdmissionConfig::default()
    }
}

fn pod(ns: &str, name: &str, cpu: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "60"],
                 "resources": {"requests": {"cpu": cpu, "memory": "32Mi"}}}]}
    }))
    .unwrap()
}

async fn create(api: &Api, ns: &str, name: &str, cpu: &str) {
    if ns != "default" && api.get_namespace(ns).is_err() {
        let n = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
        api.create_namespace(n).await.unwrap();
    }
    api.create_pod(ns, pod(ns, name, cpu)).await.unwrap();
}

fn has_event(api: &Api, ns: &str, name: &str, reason: &str) -> bool {
    api.list_events(Some(ns), "", &format!("involvedObject.name={name}"))
        .unwrap()
        .items
        .iter()
        .any(|e| e.reason.as_deref() == Some(reason))
}

fn held(p: &Pod) -> bool {
    p.spec.as_ref().is_some_and(|s| s.node_name.is_none())
}

/// A webhook served on loopback; `answer` maps the request to the reply.
async fn webhook(
    answer: impl Fn(serde_json::Value) -> (Duration, serde_json::Value) + Clone + Send + Sync + 'static,
) -> String {
    let app = axum::Router::new().route(
        "/admit",
        post(move |Json(req): Json<serde_json::Value>| {
            let answer = answer.clone();
            async move {
                let (delay, body) = answer(req);
                tokio::time::sleep(delay).await;
                Json(body)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/admit")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_example_places_tenants_holds_freezes_and_caps_cpu() {
    let frozen = Arc::new(AtomicBool::new(false));
    let flag = frozen.clone();
    let hook: Arc<dyn Hook> = Arc::new(tenant_hook::tenant_hook(Arc::new(move || {
        flag.load(Ordering::SeqCst)
    })));
    let app = with_hooks(vec![hook], quick()).await;
    let api = app.api().clone();

    create(&api, "acme", "etl", "500m").await;
    let placed = wait_pod(&api, "acme", "etl", T, |p| phase(p) == "Running").await;
    assert_eq!(
        placed.spec.as_ref().unwrap().node_name.as_deref(),
        Some("agent-0"),
        "acme's agent"
    );
    assert_eq!(
        placed.metadata.labels.as_ref().unwrap()["cost-center"],
        "acme"
    );

    create(&api, "acme", "greedy", "16").await;
    let refused = wait_pod(&api, "acme", "greedy", T, |p| phase(p) == "Failed").await;
    let status = refused.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("AdmissionRefused"));
    assert!(status.message.unwrap().contains("at most 8 CPUs"));
    assert!(has_event(&api, "acme", "greedy", "AdmissionRefused"));

    frozen.store(true, Ordering::SeqCst);
    create(&api, "acme", "during-freeze", "100m").await;
    let mut watch_until = std::time::Instant::now() + T;
    while !has_event(&api, "acme", "during-freeze", "AdmissionHeld") {
        assert!(
            std::time::Instant::now() < watch_until,
            "no AdmissionHeld event"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        held(&api.get_pod("acme", "during-freeze").unwrap()),
        "held, not placed"
    );
    frozen.store(false, Ordering::SeqCst);
    watch_until = std::time::Instant::now() + T;
    let _ = watch_until;
    wait_pod(&api, "acme", "during-freeze", T, |p| phase(p) == "Running").await;
    let m = app.observed().metrics.admissions.series();
    for kind in ["admitWith", "hold", "refuse"] {
        assert!(
            m.iter().any(|(l, n)| l[0] == kind && *n > 0),
            "{kind}: {m:?}"
        );
    }
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_decide_and_their_changes_reach_procurement() {
    let url = webhook(|req| {
        let tenant = req["tenant"].as_str().unwrap_or("").to_owned();
        assert!(req["resources"]["requests"]["cpu"].is_string(), "{req}");
        assert!(req.get("execution").is_some() && req["attempt"].as_u64() >= Some(1), "{req}");
        let body = match req["pod"].as_str() {
            Some("plain") => serde_json::json!({"decision": "admit"}),
            Some("steered") => serde_json::json!({"decision": "admitWith", "changes": {"nodeSelector": {"tenant": "other"}, "annotations": {"team": tenant}}}),
            Some("refused") => serde_json::json!({"decision": "refuse", "reason": "no budget left"}),
            _ => serde_json::json!({"decision": "hold", "reason": "budget resets at midnight"}),
        };
        (Duration::ZERO, body)
    })
    .await;
    let app = with_hooks(vec![Arc::new(WebhookHook::new(url))], quick()).await;
    let api = app.api().clone();
    create(&api, "default", "plain", "100m").await;
    create(&api, "default", "steered", "100m").await;
    create(&api, "default", "refused", "100m").await;
    create(&api, "default", "waiting", "100m").await;
    wait_pod(&api, "default", "plain", T, |p| phase(p) == "Running").await;
    let steered = wait_pod(&api, "default", "steered", T, |p| phase(p) == "Running").await;
    assert_eq!(steered.spec.unwrap().node_name.as_deref(), Some("agent-1"));
    let refused = wait_pod(&api, "default", "refused", T, |p| phase(p) == "Failed").await;
    assert_eq!(
        refused.status.unwrap().message.as_deref(),
        Some("no budget left")
    );
    // The debug snapshot trails the core by up to one publish interval.
    let end = std::time::Instant::now() + T;
    let waiting = loop {
        let q = app.observed().snapshot().queue;
        if let Some(w) = q.into_iter().find(|e| e.name == "waiting" && e.holds >= 1) {
            break w;
        }
        assert!(std::time::Instant::now() < end, "held pods stay queued");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(waiting.attempts, 0, "a hold is not a scheduling failure");
    assert_eq!(
        phase(&api.get_pod("default", "waiting").unwrap()),
        "Pending"
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_webhooks_hold_the_attempt_unless_fail_open() {
    testkit::init_crypto();
    let slow = webhook(|_| {
        (
            Duration::from_secs(5),
            serde_json::json!({"decision": "admit"}),
        )
    })
    .await;
    let garbage = webhook(|_| (Duration::ZERO, serde_json::json!({"verdict": "sure"}))).await;
    let greedy = webhook(|_| {
        (Duration::ZERO, serde_json::json!({"decision": "admitWith", "changes": {"labels": {"mesopod.io/task-id": "mine"}}}))
    })
    .await;
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        format!("http://{addr}/admit")
    };
    for (name, url, expect) in [
        ("slow", slow, "deadline"),
        ("garbage", garbage, "garbage"),
        ("down", down, "unreachable"),
        ("greedy", greedy, "reserved"),
    ] {
        let app = with_hooks(vec![Arc::new(WebhookHook::new(url.clone()))], quick()).await;
        let api = app.api().clone();
        create(&api, "default", name, "100m").await;
        let end = std::time::Instant::now() + T;
        let reason = loop {
            let snap = app.observed().snapshot();
            if let Some(r) = snap
                .queue
                .iter()
                .find(|e| e.name == name)
                .and_then(|e| e.last_reason.clone())
                && snap.queue.iter().any(|e| e.name == name && e.holds > 0)
            {
                break r;
            }
            assert!(std::time::Instant::now() < end, "{name}: never held");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(reason.contains(expect), "{name}: {reason}");
        assert!(
            held(&api.get_pod("default", name).unwrap()),
            "{name} must not run (fail closed)"
        );
        app.shutdown().await;

        if name == "greedy" {
            continue; // a rule-breaking change set is refused whole, even fail-open
        }
        let open = AdmissionConfig {
            fail_open: true,
            ..quick()
        };
        let app = with_hooks(vec![Arc::new(WebhookHook::new(url))], open).await;
        let api = app.api().clone();
        create(&api, "default", name, "100m").await;
        wait_pod(&api, "default", name, T, |p| phase(p) == "Running").await;
        assert!(
            has_event(&api, "default", name, "AdmissionFailOpen"),
            "{name}: warning event"
        );
        app.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_held_past_the_hold_window_fails_with_the_holds_reason() {
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let hook: Arc<dyn Hook> = Arc::new(HookFn::new(|_| {
        Ok(Decision::Hold("quota exhausted".into()))
    }));
    let mut config = app_config(Setup {
        agents: simulated_agents(),
        admission: Admission::new(vec![hook], quick()),
        ..Setup::default()
    });
    config.clock = clock.clone();
    let app = App::start(config).await.unwrap();
    let api = app.api().clone();
    create(&api, "default", "held", "100m").await;
    let end = std::time::Instant::now() + T;
    while !has_event(&api, "default", "held", "AdmissionHeld") {
        assert!(std::time::Instant::now() < end, "never held");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(phase(&api.get_pod("default", "held").unwrap()), "Pending");
    clock.advance(Duration::from_secs(11 * 60));
    let failed = wait_pod(&api, "default", "held", T, |p| phase(p) == "Failed").await;
    let status = failed.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("AdmissionHeld"));
    assert!(status.message.unwrap().contains("quota exhausted"));
    app.shutdown().await;
}
