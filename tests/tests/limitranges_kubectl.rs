//! LimitRanges through the real kubectl, on two agents whose pods run in real
//! containers from a registry image: `kubectl create` stores
//! the range with kube's defaults in canonical form, `get limits` and `describe limits`
//! show kube's columns, a Deployment's pods get the defaults and the LimitRanger
//! annotation, and a Deployment whose pods break a bound gets FailedCreate with
//! kube-apiserver's message on its ReplicaSet while nothing is created.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support::registry_agents::two_registry_agents;

use std::time::Duration;

use common::cluster::*;
use testkit::{Kubectl, ok, stderr, wait_until};

const T: Duration = Duration::from_secs(90);

const LIMITS: &str = "apiVersion: v1
kind: LimitRange
metadata:
  name: limits
  namespace: default
spec:
  limits:
  - type: Container
    max: {cpu: \"1\", memory: 0.25Gi}
    defaultRequest: {cpu: 0.1, memory: 64Mi}
  - type: Pod
    max: {memory: 512Mi}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_ranges_default_and_bound_the_pods_of_a_namespace() {
    let Some(cluster) = two_registry_agents("limitranges kubectl").await else {
        return;
    };
    let (app, image) = (&cluster.app, cluster.image.as_str());
    let api = app.api();
    let k = Kubectl::new(&app.api_url());

    let out = k.run_stdin(&["create", "-f", "-"], Some(LIMITS)).await;
    assert!(
        ok(&out).contains("limitrange/limits created"),
        "{}",
        stderr(&out)
    );
    // kube's defaults (default ← max), in canonical form (0.25Gi is 256Mi, 0.1 is 100m).
    let stored = ok(&k
        .run(&[
            "get",
            "limits",
            "limits",
            "-o",
            "jsonpath={.spec.limits[0]}",
        ])
        .await);
    let stored: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(
        stored,
        serde_json::json!({"type": "Container",
            "max": {"cpu": "1", "memory": "256Mi"},
            "default": {"cpu": "1", "memory": "256Mi"},
            "defaultRequest": {"cpu": "100m", "memory": "64Mi"}})
    );
    let table = ok(&k.run(&["get", "limitranges"]).await);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "CREATED", "AT"], "{table}");
    let described = ok(&k.run(&["describe", "limits", "limits"]).await);
    let rows: Vec<Vec<&str>> = described
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        rows.contains(&vec!["Container", "cpu", "-", "1", "100m", "1", "-"]),
        "{described}"
    );
    assert!(
        rows.contains(&vec!["Pod", "memory", "-", "512Mi", "-", "-", "-"]),
        "{described}"
    );

    // A bad range is refused in kube's words.
    let bad = "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: bad\nspec:\n  limits:\n  - type: Container\n    min: {cpu: \"2\"}\n    max: {cpu: \"1\"}\n";
    let out = k.run_stdin(&["create", "-f", "-"], Some(bad)).await;
    assert!(
        stderr(&out).contains(
            "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1"
        ),
        "{out:?}"
    );

    // A Deployment's pods take the defaults, and say where they came from.
    let out = k
        .run_stdin(
            &["apply", "-f", "-"],
            Some(&deployment_yaml("web", 2, "", image)),
        )
        .await;
    assert!(
        ok(&out).contains("deployment.apps/web created"),
        "{}",
        stderr(&out)
    );
    // They run, in containers under the defaulted limits.
    let pods = wait_until(
        "web's 2 pods running",
        T,
        async || api.list_pods(Some("default"), "app=web", "").unwrap().items,
        |pods| pods.len() == 2 && pods.iter().all(|p| phase(p) == "Running"),
    )
    .await;
    for pod in &pods {
        cluster.assert_pulled(pod);
        let resources =
            serde_json::to_value(&pod.spec.as_ref().unwrap().containers[0].resources).unwrap();
        assert_eq!(
            resources,
            serde_json::json!({"limits": {"cpu": "1", "memory": "256Mi"},
                               "requests": {"cpu": "100m", "memory": "64Mi"}})
        );
        assert_eq!(
            pod.metadata.annotations.as_ref().unwrap()["kubernetes.io/limit-ranger"],
            "LimitRanger plugin set: cpu, memory request for container main; cpu, memory limit for container main"
        );
        assert_eq!(
            pod.status.as_ref().unwrap().qos_class.as_deref(),
            Some("Burstable")
        );
    }

    // One that asks past `max` is refused pod by pod: FailedCreate on its ReplicaSet.
    let greedy = deployment_yaml(
        "greedy",
        2,
        "        resources:\n          limits: {cpu: \"2\"}\n",
        image,
    );
    let out = k.run_stdin(&["apply", "-f", "-"], Some(&greedy)).await;
    assert!(
        ok(&out).contains("deployment.apps/greedy created"),
        "{}",
        stderr(&out)
    );
    let events = wait_until(
        "FailedCreate on greedy's ReplicaSet",
        T,
        async || event_messages(&k, "reason=FailedCreate,involvedObject.kind=ReplicaSet").await,
        |m| m.contains("forbidden"),
    )
    .await;
    assert!(
        events.contains("Error creating: pods \"greedy-")
            && events
                .contains("\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"),
        "{events}"
    );
    assert!(
        api.list_pods(Some("default"), "app=greedy", "")
            .unwrap()
            .items
            .is_empty()
    );

    // A bare pod past the Pod bound: 403 through kubectl.
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: twins\nspec:\n  containers:\n  - name: a\n    image: busybox:1.36\n    resources: {limits: {memory: 256Mi}}\n  - name: b\n    image: busybox:1.36\n    resources: {limits: {memory: 256Mi}}\n  - name: c\n    image: busybox:1.36\n    resources: {limits: {memory: 256Mi}}\n";
    let out = k.run_stdin(&["create", "-f", "-"], Some(pod)).await;
    assert!(
        stderr(&out).contains(
            "pods \"twins\" is forbidden: maximum memory usage per Pod is 512Mi, but limit is 768Mi"
        ),
        "{out:?}"
    );
}
