//! StatefulSet and ControllerRevision (`apps/v1`) over HTTP: kube-apiserver's defaults
//! and validation messages, the fields that may not change, `volumeClaimTemplates` and
//! `maxUnavailable` refused at create with their field paths, `metadata.generation`
//! counting spec changes only, the `status` and `scale` subresources, discovery, the
//! Tables, and a ControllerRevision's immutable `data`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::{Value, json};

const SETS: &str = "/apis/apps/v1/namespaces/default/statefulsets";
const REVS: &str = "/apis/apps/v1/namespaces/default/controllerrevisions";
const MERGE: &str = "application/merge-patch+json";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

fn set(name: &str) -> Value {
    let mut set = apps_workload("StatefulSet", name);
    set["spec"]["serviceName"] = json!(name);
    set
}

fn body(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_is_defaulted_as_kube_does_and_its_generation_counts_spec_changes_only() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, s) = http.json("POST", SETS, &set("web")).await;
    assert_eq!(code, 201, "{s}");
    assert_eq!(s["metadata"]["generation"], 1);
    let spec = &s["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        spec["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(
        spec["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
    // Empty strings are unset to Go's defaulting.
    let mut empty = set("empty");
    empty["spec"]["podManagementPolicy"] = json!("");
    empty["spec"]["updateStrategy"] = json!({"type": ""});
    let (code, e) = http.json("POST", SETS, &empty).await;
    assert_eq!(code, 201, "{e}");
    assert_eq!(e["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        e["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );

    let path = format!("{SETS}/web");
    let (_, s) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            body(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await;
    assert_eq!(s["metadata"]["generation"], 1, "a label is not the spec");
    let (code, s) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            body(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}}}})),
        )
        .await;
    assert_eq!(code, 200, "{s}");
    assert_eq!(s["metadata"]["generation"], 2);

    // The main endpoint keeps the stored status; /status writes only the status.
    let (code, s) = http
        .send(
            "PATCH",
            &format!("{path}/status"),
            MERGE,
            body(json!({"status": {"replicas": 2, "readyReplicas": 2}, "spec": {"replicas": 9}})),
        )
        .await;
    assert_eq!(code, 200, "{s}");
    assert_eq!(s["status"]["replicas"], 2);
    assert_eq!(s["spec"]["replicas"], 1);
    assert_eq!(s["metadata"]["generation"], 2);
    let (_, s) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            body(json!({"status": {"replicas": 7}})),
        )
        .await;
    assert_eq!(s["status"]["replicas"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_statefulsets_get_kube_apiservers_messages() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let refused = async |s: Value| {
        let (code, status) = http.json("POST", SETS, &s).await;
        assert_eq!(code, 422, "{status}");
        causes(&status)
    };

    let mut s = set("web");
    s["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    s["spec"]["replicas"] = json!(-1);
    assert_eq!(
        refused(s).await,
        [
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`",
        ]
    );

    let mut s = set("web");
    s["spec"]["updateStrategy"] = json!({"type": "Sometimes"});
    s["spec"]["podManagementPolicy"] = json!("AllAtOnce");
    assert_eq!(
        refused(s).await,
        [
            "spec.podManagementPolicy: Invalid value: \"AllAtOnce\": must be 'OrderedReady' or 'Parallel'",
            "spec.updateStrategy: Invalid value: apps.StatefulSetUpdateStrategy{Type:\"Sometimes\", RollingUpdate:(*apps.RollingUpdateStatefulSetStrategy)(nil)}: must be 'RollingUpdate' or 'OnDelete'",
        ]
    );

    let mut s = set("web");
    s["spec"]["updateStrategy"] = json!({"type": "OnDelete", "rollingUpdate": {"partition": 1}});
    assert_eq!(
        refused(s).await,
        [
            "spec.updateStrategy.rollingUpdate: Invalid value: apps.RollingUpdateStatefulSetStrategy{Partition:1, MaxUnavailable:(*intstr.IntOrString)(nil)}: only allowed for updateStrategy 'RollingUpdate'"
        ]
    );

    let mut s = set("web");
    s["spec"]["updateStrategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": -2, "maxUnavailable": 2}});
    let found = refused(s).await;
    assert_eq!(
        found[0],
        "spec.updateStrategy.rollingUpdate.partition: Invalid value: -2: must be greater than or equal to 0"
    );
    assert!(
        found[1].starts_with(
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Forbidden: not supported by mesopod"
        ),
        "{found:?}"
    );

    // Persistent volumes do not exist yet: the claims are refused where they are.
    let mut s = set("web");
    s["spec"]["volumeClaimTemplates"] = json!([{
        "metadata": {"name": "www"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }]);
    assert_eq!(
        refused(s).await,
        [
            "spec.volumeClaimTemplates: Forbidden: not supported by mesopod: there are no persistent volumes"
        ]
    );

    let mut s = set("web");
    s["spec"]["selector"] = json!({});
    s["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    let found = refused(s).await;
    assert!(
        found.contains(&"spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{}, MatchExpressions:[]}: empty selector is invalid for statefulset".to_owned()),
        "{found:?}"
    );
    assert!(
        found.contains(&"spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"".to_owned()),
        "{found:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_fields_kube_lets_change_may_change() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, _) = http.json("POST", SETS, &set("web")).await;
    assert_eq!(code, 201);
    let path = format!("{SETS}/web");
    let forbidden = "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";
    for change in [
        json!({"spec": {"serviceName": "other"}}),
        json!({"spec": {"podManagementPolicy": "Parallel"}}),
    ] {
        let (code, status) = http.send("PATCH", &path, MERGE, body(change)).await;
        assert_eq!(code, 422, "{status}");
        assert_eq!(causes(&status), [forbidden]);
    }
    for change in [
        json!({"spec": {"replicas": 4, "minReadySeconds": 3, "revisionHistoryLimit": 2}}),
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}}}),
        json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}),
    ] {
        let (code, status) = http.send("PATCH", &path, MERGE, body(change)).await;
        assert_eq!(code, 200, "{status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scale_subresource_reads_and_writes_replicas() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, _) = http.json("POST", SETS, &set("web")).await;
    assert_eq!(code, 201);
    let path = format!("{SETS}/web/scale");
    let (code, scale) = http.get(&path).await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 1);
    assert_eq!(scale["status"]["selector"], "app=web");
    let (code, scale) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            body(json!({"spec": {"replicas": 3}})),
        )
        .await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(scale["spec"]["replicas"], 3);
    let (_, s) = http.get(&format!("{SETS}/web")).await;
    assert_eq!(s["spec"]["replicas"], 3);
    assert_eq!(s["metadata"]["generation"], 2);
    let (code, status) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            body(json!({"spec": {"replicas": -1}})),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_and_tables_have_kube_apiservers_names_and_columns() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (_, list) = http.get("/apis/apps/v1").await;
    let find = |n: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("{n} not in {list}"))
    };
    assert_eq!(find("statefulsets")["shortNames"], json!(["sts"]));
    assert_eq!(find("statefulsets/scale")["group"], "autoscaling");
    find("statefulsets/status");
    let revs = find("controllerrevisions");
    assert!(revs["shortNames"].is_null(), "{revs}");
    assert_eq!(revs["kind"], "ControllerRevision");

    let (code, _) = http.json("POST", SETS, &set("web")).await;
    assert_eq!(code, 201);
    let rev = json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "web-abc", "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u1", "controller": true
        }]},
        "data": {"spec": {"template": {"$patch": "replace"}}},
        "revision": 3
    });
    let (code, created) = http.json("POST", REVS, &rev).await;
    assert_eq!(code, 201, "{created}");

    let table = async |path: &str| -> Value {
        reqwest::Client::new()
            .get(format!("{}{path}", server.url))
            .header("accept", TABLE)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    };
    let names = |t: &Value| -> Vec<String> {
        t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let t = table(SETS).await;
    assert_eq!(names(&t), ["Name", "Ready", "Age", "Containers", "Images"]);
    let cells = &t["rows"][0]["cells"];
    assert_eq!(
        (&cells[0], &cells[1], &cells[4]),
        (&json!("web"), &json!("0/1"), &json!("busybox:1.36"))
    );
    let t = table(REVS).await;
    assert_eq!(names(&t), ["Name", "Controller", "Revision", "Age"]);
    let cells = &t["rows"][0]["cells"];
    assert_eq!(
        (&cells[0], &cells[1], &cells[2]),
        (&json!("web-abc"), &json!("statefulset.apps/web"), &json!(3))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_revisions_data_is_mandatory_and_immutable() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let rev = json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "web-1"}, "revision": 1
    });
    let (code, status) = http.json("POST", REVS, &rev).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(causes(&status), ["data: Required value: data is mandatory"]);

    let mut rev = rev;
    rev["data"] = json!({"a": 1});
    let (code, _) = http.json("POST", REVS, &rev).await;
    assert_eq!(code, 201);
    let path = format!("{REVS}/web-1");
    // The revision number may change (a rollback renumbers a revision), data may not.
    let (code, r) = http
        .send("PATCH", &path, MERGE, body(json!({"revision": 4})))
        .await;
    assert_eq!((code, &r["revision"]), (200, &json!(4)), "{r}");
    let (code, status) = http
        .send("PATCH", &path, MERGE, body(json!({"data": {"a": 2}})))
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        ["data: Invalid value: {\"a\":2}: field is immutable"]
    );
    // Strict field validation, as for every kind.
    let (code, status) = http
        .json(
            "POST",
            &format!("{REVS}?fieldValidation=Strict"),
            &json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "x"}, "data": {}, "revisions": 1}),
        )
        .await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"revisions\""),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_hostname_is_any_dns_label() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let pod = |hostname: &str| {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0"},
            "spec": {"hostname": hostname, "containers": [{"name": "main", "image": "busybox:1.36"}]}
        })
    };
    let pods = "/api/v1/namespaces/default/pods";
    let (code, status) = http.json("POST", pods, &pod("Not_A.Label")).await;
    assert_eq!(code, 422, "{status}");
    assert!(
        causes(&status)[0].starts_with(
            "spec.hostname: Invalid value: \"Not_A.Label\": a lowercase RFC 1123 label"
        ),
        "{status}"
    );
    let (code, created) = http.json("POST", pods, &pod("db-1")).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["hostname"], "db-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_create_answers_as_a_create_and_stores_nothing() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, s) = http
        .json("POST", &format!("{SETS}?dryRun=All"), &set("web"))
        .await;
    assert_eq!(code, 201, "{s}");
    assert_eq!(s["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(s["metadata"]["generation"], 1);
    let (code, _) = http.get(&format!("{SETS}/web")).await;
    assert_eq!(code, 404);
}
