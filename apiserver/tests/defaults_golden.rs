//! A golden test of every served kind's defaults: a minimal object goes in through
//! the HTTP API, and what comes back must hold what kube-apiserver 1.33 fills in.
//! The expectations are read from kube's defaulting code (`pkg/apis/*/v1/defaults.go`,
//! the `SetDefaults_*` named beside each), not from mesopod's output. Pod specs are
//! checked field by field in `api/pod_defaults/tests.rs`; a workload's template gets
//! the part of them mesopod has always given (that module's doc says why), checked
//! here.

use common::{Http, Server};
use serde_json::{Value, json};

use super::common;

const TEMPLATE: &str = r#"{"metadata": {"labels": {"app": "x"}},
    "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}"#;

fn template() -> Value {
    serde_json::from_str(TEMPLATE).unwrap()
}

/// What every defaulted pod template's spec holds beside its containers.
fn template_spec_defaults() -> Value {
    json!({
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "terminationGracePeriodSeconds": 30,
    })
}

/// What a pod's spec holds besides.
fn pod_spec_defaults() -> Value {
    let mut d = template_spec_defaults();
    d["securityContext"] = json!({});
    d["enableServiceLinks"] = json!(true);
    d
}

/// Asserts that `want`'s fields all hold in `got` (objects compared key by key, the
/// rest exactly), naming the path of the first difference.
fn holds(got: &Value, want: &Value, path: &str) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, wv) in w {
                let at = format!("{path}.{k}");
                let gv = g
                    .get(k)
                    .unwrap_or_else(|| panic!("{at} is missing in {got}"));
                holds(gv, wv, &at);
            }
        }
        _ => assert_eq!(got, want, "at {path}"),
    }
}

async fn created(http: &Http, path: &str, body: Value) -> Value {
    let (code, obj) = http.json("POST", path, &body).await;
    assert_eq!(code, 201, "{path}: {obj}");
    obj
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_comes_back_with_kube_apiservers_defaults() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let selector = json!({"matchLabels": {"app": "x"}});
    let template_defaults = json!({"spec": template_spec_defaults()});

    // SetDefaults_Deployment (apps/v1).
    let d = created(
        &http,
        "/apis/apps/v1/namespaces/default/deployments",
        json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": selector, "template": template()}}),
    )
    .await;
    holds(
        &d["spec"],
        &json!({
            "replicas": 1,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "strategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": template_defaults,
        }),
        "deployment.spec",
    );

    // SetDefaults_ReplicaSet: replicas only (apps/v1 takes no labels from the template).
    let rs = created(
        &http,
        "/apis/apps/v1/namespaces/default/replicasets",
        json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
        "spec": {"selector": selector, "template": template()}}),
    )
    .await;
    holds(
        &rs["spec"],
        &json!({"replicas": 1, "template": template_defaults}),
        "replicaset.spec",
    );
    assert!(rs["metadata"]["labels"].is_null(), "{rs}");

    // SetDefaults_DaemonSet.
    let ds = created(
        &http,
        "/apis/apps/v1/namespaces/default/daemonsets",
        json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"},
        "spec": {"selector": selector, "template": template()}}),
    )
    .await;
    holds(
        &ds["spec"],
        &json!({
            "revisionHistoryLimit": 10,
            "updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "template": template_defaults,
        }),
        "daemonset.spec",
    );

    // SetDefaults_StatefulSet.
    let sts = created(
        &http,
        "/apis/apps/v1/namespaces/default/statefulsets",
        json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "sts"},
        "spec": {"selector": selector, "serviceName": "sts", "template": template()}}),
    )
    .await;
    holds(
        &sts["spec"],
        &json!({
            "replicas": 1,
            "podManagementPolicy": "OrderedReady",
            "revisionHistoryLimit": 10,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "template": template_defaults,
        }),
        "statefulset.spec",
    );

    // SetDefaults_ReplicationController (core v1): selector and labels from the template.
    let rc = created(
        &http,
        "/api/v1/namespaces/default/replicationcontrollers",
        json!({
        "apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
        "spec": {"template": template()}}),
    )
    .await;
    holds(
        &rc["spec"],
        &json!({"replicas": 1, "selector": {"app": "x"},
        "template": template_defaults}),
        "replicationcontroller.spec",
    );
    assert_eq!(rc["metadata"]["labels"], json!({"app": "x"}));

    // SetDefaults_Job (batch/v1).
    let job_template = json!({"spec": {"restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox:1.36"}]}});
    let job = created(
        &http,
        "/apis/batch/v1/namespaces/default/jobs",
        json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"},
        "spec": {"template": job_template}}),
    )
    .await;
    holds(
        &job["spec"],
        &json!({
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 6,
            "completionMode": "NonIndexed",
            "suspend": false,
            "podReplacementPolicy": "TerminatingOrFailed",
            "manualSelector": false,
        }),
        "job.spec",
    );

    // SetDefaults_CronJob.
    let cj = created(
        &http,
        "/apis/batch/v1/namespaces/default/cronjobs",
        json!({
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": job_template}}}}),
    )
    .await;
    holds(
        &cj["spec"],
        &json!({
            "concurrencyPolicy": "Allow",
            "suspend": false,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
        }),
        "cronjob.spec",
    );

    // SetDefaults_Secret.
    let secret = created(
        &http,
        "/api/v1/namespaces/default/secrets",
        json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
    )
    .await;
    assert_eq!(secret["type"], "Opaque");

    // SetDefaults_Namespace and the namespace lifecycle's finalizer.
    let ns = created(
        &http,
        "/api/v1/namespaces",
        json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
    )
    .await;
    holds(
        &ns,
        &json!({"spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"},
        "metadata": {"labels": {"kubernetes.io/metadata.name": "team"}}}),
        "namespace",
    );

    // SetDefaults_PriorityClass.
    let pc = created(
        &http,
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "low"}, "value": 1}),
    )
    .await;
    assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");

    // SetDefaults_Pod and SetDefaults_PodSpec, with admission's fields.
    let pod = created(
        &http,
        "/api/v1/namespaces/default/pods",
        json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}),
    )
    .await;
    holds(&pod["spec"], &pod_spec_defaults(), "pod.spec");
    holds(
        &pod["spec"],
        &json!({"serviceAccountName": "default", "priority": 0,
        "preemptionPolicy": "PreemptLowerPriority"}),
        "pod.spec",
    );
    holds(
        &pod["status"],
        &json!({"phase": "Pending", "qosClass": "BestEffort"}),
        "pod.status",
    );
    server.stop().await;
}
