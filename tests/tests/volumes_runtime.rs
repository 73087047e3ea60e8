//! Volumes and env sources in real containers (runc), at the executor's
//! level with `StaticObjects`: what #17 asks of emptyDir, hostPath,
//! configMap, secret, downwardAPI, subPath and env, shown by the files and
//! output the containers see.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use containers_support::{IMAGE, RUNC, load_image, prerequisites};
use executor::backoff::Backoff;
use executor::layout::run_log;
use executor::logs::cri;
use executor::objects::StaticObjects;
use executor::oci::{ContainerSettings, RuntimeKind};
use executor::volumes::VolumeSettings;
use executor::{PodPlan, PodState, PodUpdate, Runtime, RuntimeConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use mesos::proto::TaskId;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

const WAIT: Duration = Duration::from_secs(60);

struct Setup {
    _dirs: Vec<tempfile::TempDir>,
    sandbox: PathBuf,
    allowed: PathBuf,
    objects: StaticObjects,
    rt: Runtime,
    rx: UnboundedReceiver<PodUpdate>,
}

async fn setup() -> Option<Setup> {
    if !prerequisites(true) {
        return None;
    }
    let (store_dir, sandbox_dir, allowed_dir) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    load_image(store_dir.path(), IMAGE).await;
    let objects = StaticObjects::default();
    let short = Backoff {
        initial: Duration::from_millis(200),
        max: Duration::from_millis(400),
    };
    let (rt, rx) = Runtime::new(RuntimeConfig {
        sandbox: sandbox_dir.path().to_path_buf(),
        host_ip: "127.0.0.1".into(),
        node_name: "agent-host".into(),
        backoff: short,
        containers: ContainerSettings {
            runtime: RuntimeKind::Cli(RUNC.into()),
            image_store: Some(store_dir.path().to_path_buf()),
            image_backoff: short,
            // The pod sandbox is made by `mesopod runtime sandbox`: this
            // test binary is not mesopod.
            mesopod_binary: Some(common::MESOPOD.into()),
            volumes: VolumeSettings {
                allowed_host_paths: vec![allowed_dir.path().to_path_buf()],
                resync_interval: Duration::from_millis(200),
                usage_interval: Duration::from_millis(200),
            },
            ..ContainerSettings::default()
        },
        objects: Arc::new(objects.clone()),
    });
    Some(Setup {
        sandbox: sandbox_dir.path().to_path_buf(),
        allowed: allowed_dir.path().to_path_buf(),
        _dirs: vec![store_dir, sandbox_dir, allowed_dir],
        objects,
        rt,
        rx,
    })
}

fn plan(name: &str, spec: Value) -> PodPlan {
    let pod = json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": spec,
    });
    PodPlan::from_task_data(Some(&serde_json::to_vec(&pod).unwrap())).unwrap()
}

fn sh(name: &str, script: &str, extra: Value) -> Value {
    let mut c = json!({"name": name, "image": IMAGE, "command": ["/bin/sh", "-c", script]});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn config_map(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns"}, "data": data}))
        .unwrap()
}

fn log(sandbox: &Path, pod: &str, container: &str) -> String {
    let path = sandbox.join(run_log("ns", pod, &format!("uid-{pod}"), container, 0));
    cri::texts(
        &std::fs::read(path).unwrap_or_default(),
        Some(cri::Stream::Stdout),
    )
}

async fn until(
    rx: &mut UnboundedReceiver<PodUpdate>,
    pred: impl Fn(&PodUpdate) -> bool,
) -> PodUpdate {
    loop {
        let u = tokio::time::timeout(WAIT, rx.recv())
            .await
            .expect("an update in time")
            .expect("runtime alive");
        if pred(&u) {
            return u;
        }
        assert!(!u.state.is_terminal(), "ended before the condition: {u:?}");
    }
}

async fn wait_log(sandbox: &Path, pod: &str, container: &str, needle: &str) -> String {
    let what = format!("{pod}/{container} to print {needle:?}");
    testkit::wait_until(
        &what,
        WAIT,
        async || log(sandbox, pod, container),
        |l| l.contains(needle),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_containers_share_an_empty_dir_and_it_goes_with_the_pod() {
    let Some(mut s) = setup().await else { return };
    let mount = json!({"volumeMounts": [{"name": "shared", "mountPath": "/data"}]});
    let reader_mounts = json!({
        "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "volumeMounts": [
            {"name": "shared", "mountPath": "/data"},
            {"name": "shared", "mountPath": "/mine", "subPathExpr": "$(POD)"}]});
    let p = plan(
        "share",
        json!({"restartPolicy": "Never", "volumes": [{"name": "shared", "emptyDir": {}}],
            "containers": [
                sh("writer", "echo hello-from-writer > /data/.msg && mv /data/.msg /data/msg", mount),
                sh("reader", "while [ ! -f /data/msg ]; do sleep 0.1; done; cat /data/msg; echo sub > /mine/f", reader_mounts)]}),
    );
    s.rt.launch(TaskId::new("t-share"), p).unwrap();
    let end = until(&mut s.rx, |u| u.state.is_terminal()).await;
    assert_eq!(end.state, PodState::Finished, "{end:?}");
    assert!(log(&s.sandbox, "share", "reader").contains("hello-from-writer"));
    let pod_dir = end.pod_dir.unwrap();
    assert!(
        !pod_dir.join("volumes").exists(),
        "the emptyDir is removed with the pod"
    );
    assert!(pod_dir.join("reader").join("0.log").exists(), "logs stay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_empty_dir_past_its_size_limit_evicts_the_pod() {
    let Some(mut s) = setup().await else { return };
    let p = plan(
        "fill",
        json!({"volumes": [{"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}],
            "containers": [sh("c", "grep -q ' /cache tmpfs' /proc/mounts && echo tmpfs; dd if=/dev/zero of=/cache/big bs=1024 count=2048; sleep 3600",
                json!({"volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}))]}),
    );
    s.rt.launch(TaskId::new("t-fill"), p).unwrap();
    let end = until(&mut s.rx, |u| u.state.is_terminal()).await;
    assert_eq!(end.state, PodState::Failed, "{end:?}");
    let status = end.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("Evicted"));
    assert_eq!(
        status.message.as_deref(),
        Some("Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". ")
    );
    assert!(
        log(&s.sandbox, "fill", "c").contains("tmpfs"),
        "medium Memory is a tmpfs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_paths_work_only_under_the_allowed_prefixes() {
    let Some(mut s) = setup().await else { return };
    let outside = plan(
        "outside",
        json!({"volumes": [{"name": "etc", "hostPath": {"path": "/etc"}}],
            "containers": [sh("c", "cat /host/passwd", json!({"volumeMounts": [{"name": "etc", "mountPath": "/host"}]}))]}),
    );
    s.rt.launch(TaskId::new("t-outside"), outside).unwrap();
    let refused = until(&mut s.rx, |u| u.state.is_terminal()).await;
    assert_eq!(refused.state, PodState::Error);
    let msg = refused.message.unwrap();
    assert!(
        msg.contains("spec.volumes[0].hostPath") && msg.contains("--allowed-host-paths"),
        "{msg}"
    );

    std::fs::write(s.allowed.join("in.txt"), "from-the-host").unwrap();
    let dir = s.allowed.display().to_string();
    let inside = plan(
        "inside",
        json!({"restartPolicy": "Never", "volumes": [
                {"name": "h", "hostPath": {"path": dir, "type": "Directory"}},
                {"name": "made", "hostPath": {"path": format!("{dir}/made"), "type": "DirectoryOrCreate"}}],
            "containers": [sh("c", "cat /host/in.txt; echo from-the-pod > /made/out.txt",
                json!({"volumeMounts": [{"name": "h", "mountPath": "/host", "readOnly": true},
                                        {"name": "made", "mountPath": "/made"}]}))]}),
    );
    s.rt.launch(TaskId::new("t-inside"), inside).unwrap();
    let end = until(&mut s.rx, |u| u.state.is_terminal()).await;
    assert_eq!(end.state, PodState::Finished, "{end:?}");
    assert!(log(&s.sandbox, "inside", "c").contains("from-the-host"));
    assert_eq!(
        std::fs::read_to_string(s.allowed.join("made/out.txt")).unwrap(),
        "from-the-pod\n"
    );
    assert!(
        s.allowed.join("in.txt").exists(),
        "host files stay after the pod"
    );

    let wrong_type = plan(
        "wrongtype",
        json!({"volumes": [{"name": "h", "hostPath": {"path": format!("{dir}/in.txt"), "type": "Directory"}}],
            "containers": [sh("c", "true", json!({"volumeMounts": [{"name": "h", "mountPath": "/h"}]}))]}),
    );
    s.rt.launch(TaskId::new("t-wrongtype"), wrong_type).unwrap();
    let msg = format!(
        "MountVolume.SetUp failed for volume \"h\" : hostPath type check failed: {dir}/in.txt is not a directory"
    );
    let failed = until(&mut s.rx, |u| has_failed_mount(u, &msg)).await;
    assert_eq!(
        waiting_reason(&failed).as_deref(),
        Some("ContainerCreating")
    );
    assert_eq!(failed.state, PodState::Starting, "the pod stays Pending");
    // kubelet's volume manager retries: another FailedMount follows.
    until(&mut s.rx, |u| has_failed_mount(u, &msg)).await;
    assert!(s.rt.kill(&TaskId::new("t-wrongtype"), Some(Duration::ZERO)));
    until(&mut s.rx, |u| u.state.is_terminal()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_maps_and_secrets_reach_files_and_env_and_updates_reach_the_volume() {
    let Some(mut s) = setup().await else { return };
    s.objects.set_secret(
        serde_json::from_value::<Secret>(json!({"metadata": {"name": "creds", "namespace": "ns"},
            "data": {"password": "aHVudGVyMg=="}}))
        .unwrap(),
    );
    let script = "echo env=$COLOR/$PASSWORD/$CFG_size; grep -q ' /secret tmpfs' /proc/mounts && echo secret-on-tmpfs; \
        stat -c 'mode=%a' /secret/..data/pw; touch /cfg/x 2>/dev/null || echo cfg-read-only; \
        while true; do echo \"vol=$(cat /cfg/color) sub=$(cat /sub-color)\"; sleep 0.1; done";
    let p = plan(
        "cfg",
        json!({"volumes": [
                {"name": "cfg", "configMap": {"name": "settings"}},
                {"name": "secret", "secret": {"secretName": "creds", "defaultMode": 256,
                    "items": [{"key": "password", "path": "pw"}]}}],
            "containers": [sh("c", script, json!({
                "env": [{"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "color"}}},
                        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}],
                "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
                "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"},
                                 {"name": "cfg", "mountPath": "/sub-color", "subPath": "color"},
                                 {"name": "secret", "mountPath": "/secret"}]}))]}),
    );
    s.rt.launch(TaskId::new("t-cfg"), p).unwrap();
    // The ConfigMap does not exist yet: the pod waits in ContainerCreating
    // and says why in a FailedMount event, with kubelet's words.
    let failed = until(&mut s.rx, |u| {
        has_failed_mount(
            u,
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"settings\" not found",
        )
    })
    .await;
    assert_eq!(
        waiting_reason(&failed).as_deref(),
        Some("ContainerCreating")
    );
    s.objects.set_config_map(config_map(
        "settings",
        json!({"color": "blue", "size": "L"}),
    ));
    wait_log(&s.sandbox, "cfg", "c", "vol=blue sub=blue").await;
    let first = log(&s.sandbox, "cfg", "c");
    assert!(first.contains("env=blue/hunter2/L"), "{first}");
    assert!(first.contains("secret-on-tmpfs"), "{first}");
    assert!(first.contains("mode=400"), "{first}");
    assert!(first.contains("cfg-read-only"), "{first}");

    s.objects
        .set_config_map(config_map("settings", json!({"color": "red", "size": "L"})));
    wait_log(&s.sandbox, "cfg", "c", "vol=red sub=blue").await;

    assert!(s.rt.kill(&TaskId::new("t-cfg"), Some(Duration::ZERO)));
    until(&mut s.rx, |u| u.state.is_terminal()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_downward_api_shows_the_pods_name_and_node() {
    let Some(mut s) = setup().await else { return };
    let p = plan(
        "downward",
        json!({"restartPolicy": "Never", "volumes": [{"name": "info", "downwardAPI": {"items": [
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                {"path": "node", "fieldRef": {"fieldPath": "spec.nodeName"}},
                {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}}]}}],
            "containers": [sh("c", "echo \"$(cat /info/name) $(cat /info/node) $(cat /info/mem)Mi\"",
                json!({"resources": {"limits": {"memory": "32Mi"}},
                       "volumeMounts": [{"name": "info", "mountPath": "/info"}]}))]}),
    );
    s.rt.launch(TaskId::new("t-downward"), p).unwrap();
    let end = until(&mut s.rx, |u| u.state.is_terminal()).await;
    assert_eq!(end.state, PodState::Finished, "{end:?}");
    assert_eq!(
        log(&s.sandbox, "downward", "c"),
        "downward agent-host 32Mi\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_path_symlink_cannot_lead_out_of_its_volume() {
    let Some(mut s) = setup().await else { return };
    let mount = |sub: Option<&str>, at: &str| match sub {
        Some(sub) => json!({"name": "shared", "mountPath": at, "subPath": sub}),
        None => json!({"name": "shared", "mountPath": at}),
    };
    let p = plan(
        "escape",
        json!({"restartPolicy": "Never", "volumes": [{"name": "shared", "emptyDir": {}}],
            "initContainers": [sh("plant", "ln -s / /data/evil && ln -s ../../.. /data/up && touch /data/marker",
                json!({"volumeMounts": [mount(None, "/data")]}))],
            "containers": [sh("c", "ls /a; ls /b",
                json!({"volumeMounts": [mount(Some("evil"), "/a"), mount(Some("up"), "/b")]}))]}),
    );
    s.rt.launch(TaskId::new("t-escape"), p).unwrap();
    let end = until(&mut s.rx, |u| u.state.is_terminal()).await;
    assert_eq!(end.state, PodState::Finished, "{end:?}");
    let out = log(&s.sandbox, "escape", "c");
    // Both links resolve to the volume's own root, not the host's.
    assert_eq!(out.matches("marker").count(), 2, "{out}");
    assert!(!out.contains("proc") && !out.contains("usr"), "{out}");
}

/// `fsGroup`: a non-root container reads a 0400 secret through the group
/// (the file becomes 0440, group fsGroup), has the group among its
/// supplemental groups, and what it creates in an emptyDir inherits the
/// group from the setgid directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_group_lets_a_non_root_container_read_its_secret() {
    let Some(mut s) = setup().await else { return };
    s.objects.set_secret(
        serde_json::from_value::<Secret>(json!({"metadata": {"name": "creds", "namespace": "ns"},
            "data": {"password": "aHVudGVyMg=="}}))
        .unwrap(),
    );
    let script = "stat -c 'file=%a/%g' /secret/..data/pw; echo \"groups=$(id -G)\"; \
        echo \"read=$(cat /secret/pw)\"; touch /scratch/new; stat -c 'new=%g' /scratch/new; stat -c 'dir=%a' /scratch; \
        exec sleep 3600";
    let p = plan(
        "fsgroup",
        json!({"securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000},
            "volumes": [
                {"name": "secret", "secret": {"secretName": "creds", "defaultMode": 256,
                    "items": [{"key": "password", "path": "pw"}]}},
                {"name": "scratch", "emptyDir": {}}],
            "containers": [sh("c", script, json!({"volumeMounts": [
                {"name": "secret", "mountPath": "/secret"},
                {"name": "scratch", "mountPath": "/scratch"}]}))]}),
    );
    s.rt.launch(TaskId::new("t-fsgroup"), p).unwrap();
    let out = wait_log(&s.sandbox, "fsgroup", "c", "dir=").await;
    assert!(out.contains("file=440/2000"), "{out}");
    assert!(out.contains("read=hunter2"), "{out}");
    let groups = out
        .lines()
        .find_map(|l| l.strip_prefix("groups="))
        .unwrap_or_default();
    assert!(groups.split(' ').any(|g| g == "2000"), "{out}");
    assert!(out.contains("new=2000"), "{out}");
    assert!(out.contains("dir=2777"), "{out}");
    assert!(s.rt.kill(&TaskId::new("t-fsgroup"), Some(Duration::ZERO)));
    until(&mut s.rx, |u| u.state.is_terminal()).await;
}

/// Whether `u` carries kubelet's `FailedMount` Warning on the pod with `message`.
fn has_failed_mount(u: &PodUpdate, message: &str) -> bool {
    u.events.iter().any(|e| {
        e.type_ == "Warning"
            && e.reason == "FailedMount"
            && e.message == message
            && e.field_path.is_empty()
    })
}

/// The first container's waiting reason.
fn waiting_reason(u: &PodUpdate) -> Option<String> {
    u.status.as_ref()?.container_statuses.as_ref()?[0]
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}
