//! HA replicas in one process: several mesopods sharing one store elect a leader on
//! the Lease `kube-system/mesopod` against a standalone localmesos. Only the leader
//! schedules; a follower takes over when the leader stops; a leader whose lease was
//! taken while it was frozen writes nothing, and follows; `kubectl exec` reaches a
//! running pod through the new leader within seconds of a failover; a pod image
//! changed while no leader ran is restarted with it by the next leader.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use apiserver::store::{MemoryStore, Store};
use common::cluster::{Setup, app_config, fast_timing, phase, wait_pod};
use framework::app::App;
use framework::leader::{ElectionConfig, Leadership};
use k8s_openapi::api::core::v1::Pod;
use localmesos::{AgentConfig, Config, LocalMesos};

const T: Duration = Duration::from_secs(60);

/// Short durations so failover takes seconds (the same rules as the defaults').
fn election(identity: &str) -> ElectionConfig {
    ElectionConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
        ..ElectionConfig::with_defaults(identity.into())
    }
}

async fn cluster() -> LocalMesos {
    LocalMesos::start(Config {
        agents: vec![
            AgentConfig::from_flags("cpus:4;mem:4096;ports:[31000-31010]", "", 0).unwrap(),
        ],
        timing: fast_timing(),
        ..Config::default()
    })
    .await
    .unwrap()
}

async fn replica(mesos: &LocalMesos, store: &Arc<dyn Store>, identity: &str) -> App {
    let mut cfg = app_config(Setup {
        masters: vec![mesos.master_url().to_owned()],
        ..Setup::default()
    });
    cfg.ha.store = Some(store.clone());
    cfg.ha.election = Some(election(identity));
    App::start(cfg).await.expect("a replica starts")
}

async fn leads(app: &App) {
    let elector = app.elector().expect("leader election is on");
    tokio::time::timeout(T, elector.leading())
        .await
        .expect("the replica leads");
}

/// Replica `a` leading and `b` following on one store, with pod `first`
/// created through `a` and Running as `b` serves it.
async fn two_replicas_running_first() -> (LocalMesos, App, App, Pod) {
    let mesos = cluster().await;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new().unwrap());
    let a = replica(&mesos, &store, "a").await;
    leads(&a).await;
    let b = replica(&mesos, &store, "b").await;
    // Every replica serves the API; only the leader schedules.
    a.api()
        .create_pod("default", sleeper("first"))
        .await
        .unwrap();
    let first = wait_pod(b.api(), "default", "first", T, running).await;
    (mesos, a, b, first)
}

fn sleeper(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
            "command": ["/bin/sh", "-c", "sleep 600"],
            "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}}}]}
    }))
    .unwrap()
}

async fn debug_framework(app: &App) -> serde_json::Value {
    reqwest::get(format!("{}/debug/framework", app.api_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn running(p: &Pod) -> bool {
    phase(p) == "Running"
}

fn task_id(p: &Pod) -> String {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("mesopod.io/task-id"))
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_takes_over_when_the_leader_stops_and_nothing_is_launched_twice() {
    let (mesos, a, b, first) = two_replicas_running_first().await;
    let a_page = debug_framework(&a).await;
    assert_eq!(a_page["role"], "leader", "{a_page}");
    testkit::wait_until(
        "b to follow a",
        T,
        async || debug_framework(&b).await,
        |page| page["role"] == "follower" && page["holder"] == "a",
    )
    .await;
    for app in [&a, &b] {
        let ready = reqwest::get(format!("{}/readyz", app.api_url()))
            .await
            .unwrap();
        assert_eq!(ready.status(), 200);
        let out = testkit::ok(
            &common::kubectl(testkit::KUBECTL, &app.api_url())
                .run(&["get", "lease", "-n", "kube-system"])
                .await,
        );
        let row = out
            .lines()
            .find(|l| l.starts_with("mesopod "))
            .unwrap_or_default();
        assert!(
            out.starts_with("NAME") && out.contains("HOLDER") && row.contains(" a "),
            "{out}"
        );
    }

    // The leader stops (and releases the lease): b leads at its next round, well
    // within the lease duration, and subscribes with the stored framework id.
    let framework_id = a.api().get_meta(framework::driver::FRAMEWORK_ID_KEY);
    let stopped = std::time::Instant::now();
    a.shutdown().await;
    leads(&b).await;
    let took = stopped.elapsed();
    assert!(took < Duration::from_secs(3), "b took {took:?} to lead");
    b.api()
        .create_pod("default", sleeper("second"))
        .await
        .unwrap();
    wait_pod(b.api(), "default", "second", T, running).await;
    assert_eq!(
        b.api().get_meta(framework::driver::FRAMEWORK_ID_KEY),
        framework_id
    );
    // The first pod kept its task: b recovered it instead of launching it again.
    let still = b.api().get_pod("default", "first").unwrap();
    assert!(running(&still), "{:?}", still.status);
    assert_eq!(task_id(&still), task_id(&first));
    let page = debug_framework(&b).await;
    assert_eq!(page["role"], "leader", "{page}");
    b.shutdown().await;
    mesos.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_frozen_past_its_lease_writes_nothing_and_steps_down() {
    let mesos = cluster().await;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new().unwrap());
    let a = replica(&mesos, &store, "a").await;
    leads(&a).await;
    let b = replica(&mesos, &store, "b").await;

    // a is frozen: it renews nothing, and b takes the lease after the lease duration.
    a.elector().unwrap().pause(true);
    leads(&b).await;
    let lease = b
        .api()
        .get_lease("kube-system", "mesopod")
        .unwrap()
        .unwrap()
        .0;
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));

    // Thawed, a's scheduler still believes it leads: its next write (the framework
    // id, as its driver saves it) is refused by the fence, and the store is unchanged.
    let key = framework::driver::FRAMEWORK_ID_KEY;
    // Only the key it wrote is compared: b, the leader now, writes too.
    let before = store.get_meta(key);
    let refused = a
        .scheduler_api()
        .put_meta(key, b"stale-framework-id".to_vec())
        .await
        .expect_err("a frozen leader's write must be refused");
    assert!(
        refused
            .to_string()
            .contains("does not hold the leader lease"),
        "{refused}"
    );
    assert_eq!(store.get_meta(key), before);

    // And on its next round it sees it lost, and its scheduler stops; once it has,
    // a competes again, as a follower of b (the process goes on). `Lost` itself
    // may pass before anyone looks (a rejoins as soon as its term has stopped),
    // so what is awaited is where it ends: following b.
    a.elector().unwrap().pause(false);
    let following = Leadership::Follower {
        holder: Some("b".into()),
    };
    testkit::wait_until(
        "a to follow b",
        T,
        async || a.elector().unwrap().leadership(),
        |l| *l == following,
    )
    .await;
    // The core stepped down on an input (not dropped mid-turn): the loss of the
    // lease, or Mesos' word that b's subscription failed it over, whichever came
    // first (b subscribes as soon as it leads, while a is still paused).
    let ended = a.last_term_end().expect("a's scheduler term ended");
    assert!(
        ended == framework::core::CoreError::LostLease.to_string()
            || ended.starts_with("another mesopod took over this framework"),
        "{ended}"
    );
    let page = debug_framework(&a).await;
    assert_eq!(page["role"], "follower", "{page}");
    assert_eq!(page["subscribed"], false, "{page}");
    // b schedules meanwhile, and a still serves the API.
    b.api()
        .create_pod("default", sleeper("after"))
        .await
        .unwrap();
    wait_pod(a.api(), "default", "after", T, running).await;
    a.shutdown().await;
    b.shutdown().await;
    mesos.shutdown().await;
}

/// `kubectl exec first -- echo ARG` through `app`: its exit code and output.
async fn exec_echo(app: &App, arg: &str) -> (Option<i32>, String, String) {
    let out = common::kubectl(testkit::KUBECTL, &app.api_url())
        .run(&["exec", "first", "--", "echo", arg])
        .await;
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_a_failover_exec_reaches_running_pods_through_the_new_leader_within_seconds() {
    let (mesos, a, b, _first) = two_replicas_running_first().await;
    testkit::wait_until(
        "exec through the leader",
        T,
        async || exec_echo(&a, "a").await,
        |(code, out, _)| *code == Some(0) && out == "a\n",
    )
    .await;

    // The executor registered with a, whose endpoints and stream key go with it; b
    // asks it to register again as soon as it subscribes.
    a.shutdown().await;
    leads(&b).await;
    testkit::wait_until(
        "exec through the new leader within 5 s",
        Duration::from_secs(5),
        async || exec_echo(&b, "b").await,
        |(code, out, _)| *code == Some(0) && out == "b\n",
    )
    .await;
    b.shutdown().await;
    mesos.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_image_changed_while_no_leader_runs_is_sent_by_the_next_leader() {
    let mesos = cluster().await;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new().unwrap());
    let a = replica(&mesos, &store, "a").await;
    leads(&a).await;
    a.api()
        .create_pod("default", sleeper("first"))
        .await
        .unwrap();
    wait_pod(a.api(), "default", "first", T, running).await;
    a.shutdown().await;

    // No scheduler runs: the change reaches the store and nobody else.
    let plain = apiserver::Api::start(
        store.clone(),
        Arc::new(apiserver::SystemClock),
        Arc::new(apiserver::NoLogs),
    )
    .await
    .unwrap();
    let patch =
        serde_json::json!({"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}});
    plain
        .patch_pod(
            "default",
            "first",
            apiserver::patch::PatchType::Strategic,
            &patch,
        )
        .await
        .unwrap();

    // The next leader finds the pod running the old image and tells its executor.
    let b = replica(&mesos, &store, "b").await;
    leads(&b).await;
    let changed = wait_pod(b.api(), "default", "first", T, |p| {
        let c = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first());
        c.is_some_and(|c| {
            c.image == "busybox:1.37"
                && c.restart_count == 1
                && c.state.as_ref().is_some_and(|s| s.running.is_some())
        })
    })
    .await;
    assert!(running(&changed), "{:?}", changed.status);
    let events = testkit::ok(
        &common::kubectl(testkit::KUBECTL, &b.api_url())
            .run(&[
                "get",
                "events",
                "--field-selector",
                "involvedObject.name=first",
            ])
            .await,
    );
    assert!(
        events.contains("Container main definition changed, will be restarted"),
        "{events}"
    );
    b.shutdown().await;
    mesos.shutdown().await;
}
