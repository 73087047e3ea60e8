//! ResourceQuotas through the real kubectl, on two agents whose pods run in real
//! containers from a registry image: `kubectl create
//! quota`, the controller's first count, `get quota` and `describe quota` in kube's
//! columns; a pod that does not say what it needs, refused; a Deployment held at the
//! quota with FailedCreate on its ReplicaSet in kube-apiserver's words; a scale-down
//! that gives the quota back; and object counts (`count/configmaps`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support::registry_agents::two_registry_agents;

use std::time::Duration;

use apiserver::Api;
use common::cluster::*;
use testkit::{Kubectl, ok, stderr, wait_until};

const T: Duration = Duration::from_secs(90);

/// The quota's `status.used` of `name`, as text.
fn used(api: &Api, name: &str) -> Option<String> {
    let q = api.get_resourcequota("default", "compute").ok()?;
    let used = q.status?.used?;
    used.get(name).map(|q| q.0.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_holds_a_namespace_to_its_hard_limits_and_gives_back_what_is_freed() {
    let Some(cluster) = two_registry_agents("a quota on real containers").await else {
        return;
    };
    let (app, image) = (&cluster.app, cluster.image.as_str());
    let api = app.api();
    let k = Kubectl::new(&app.api_url());

    let out = k
        .run(&[
            "create",
            "quota",
            "compute",
            "--hard=pods=2,requests.cpu=1,limits.memory=1Gi,count/configmaps=1",
        ])
        .await;
    assert!(
        ok(&out).contains("resourcequota/compute created"),
        "{}",
        stderr(&out)
    );
    // The controller's first count (kube-root-ca.crt is a ConfigMap of every namespace
    // in Kubernetes; mesopod's namespaces start empty).
    wait_until(
        "the first count",
        T,
        async || used(api, "pods"),
        |u| u.as_deref() == Some("0"),
    )
    .await;
    let table = ok(&k.run(&["get", "quota"]).await);
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["NAME", "AGE", "REQUEST", "LIMIT"], "{table}");
    assert!(
        lines[1].contains("count/configmaps: 0/1, pods: 0/2, requests.cpu: 0/1")
            && lines[1].contains("limits.memory: 0/1Gi"),
        "{table}"
    );
    let described = ok(&k.run(&["describe", "quota", "compute"]).await);
    let rows: Vec<Vec<&str>> = described
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        rows.contains(&vec!["requests.cpu", "0", "1"]),
        "{described}"
    );

    // Quota on cpu and memory: a pod must say what it needs.
    let out = k
        .run(&[
            "run",
            "bare",
            &format!("--image={image}"),
            "--",
            "sleep",
            "3600",
        ])
        .await;
    assert!(
        stderr(&out).contains(
            "pods \"bare\" is forbidden: failed quota: compute: must specify limits.memory for: bare; requests.cpu for: bare"
        ),
        "{out:?}"
    );

    // Three replicas fit twice: the third is refused, and the ReplicaSet says so.
    let web = deployment_yaml(
        "web",
        3,
        "        resources:\n          requests: {cpu: 400m, memory: 16Mi}\n          limits: {memory: 256Mi}\n",
        image,
    );
    let out = k.run_stdin(&["apply", "-f", "-"], Some(&web)).await;
    assert!(
        ok(&out).contains("deployment.apps/web created"),
        "{}",
        stderr(&out)
    );
    let events = wait_until(
        "FailedCreate on web's ReplicaSet",
        T,
        async || event_messages(&k, "reason=FailedCreate").await,
        |m| m.contains("exceeded quota"),
    )
    .await;
    assert!(
        events.contains(
            "\" is forbidden: exceeded quota: compute, requested: pods=1,requests.cpu=400m, used: pods=2,requests.cpu=800m, limited: pods=2,requests.cpu=1"
        ),
        "{events}"
    );
    let pods = api.list_pods(Some("default"), "app=web", "").unwrap().items;
    assert_eq!(pods.len(), 2);
    // The two the quota admits run, in their containers.
    let running = wait_until(
        "web's two admitted pods running",
        T,
        async || api.list_pods(Some("default"), "app=web", "").unwrap().items,
        |pods| pods.iter().filter(|p| phase(p) == "Running").count() == 2,
    )
    .await;
    running.iter().for_each(|p| cluster.assert_pulled(p));
    assert_eq!(used(api, "requests.cpu").as_deref(), Some("800m"));
    assert_eq!(used(api, "limits.memory").as_deref(), Some("512Mi"));

    // Scaling down gives the quota back, once the pod is gone.
    ok(&k.run(&["scale", "deployment", "web", "--replicas=1"]).await);
    wait_until(
        "one pod's worth used",
        T,
        async || used(api, "pods"),
        |u| u.as_deref() == Some("1"),
    )
    .await;
    assert_eq!(used(api, "requests.cpu").as_deref(), Some("400m"));

    // Object counts: the second ConfigMap is one too many, until the first goes.
    ok(&k.run(&["create", "configmap", "one"]).await);
    let out = k.run(&["create", "configmap", "two"]).await;
    assert!(
        stderr(&out).contains(
            "configmaps \"two\" is forbidden: exceeded quota: compute, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1"
        ),
        "{out:?}"
    );
    ok(&k.run(&["delete", "configmap", "one"]).await);
    wait_until(
        "the ConfigMap given back",
        T,
        async || used(api, "count/configmaps"),
        |u| u.as_deref() == Some("0"),
    )
    .await;
    ok(&k.run(&["create", "configmap", "two"]).await);
}
