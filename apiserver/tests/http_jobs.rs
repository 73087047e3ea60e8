//! Job (`batch/v1`) over HTTP: kube-apiserver 1.33's defaults and generated selector,
//! the fields an update may not change (with the exceptions kube makes),
//! `metadata.generation` and the `status` subresource, the Table, and a delete without
//! a policy that orphans the pods with kube's warning. Validation is in
//! `http_jobs_validation.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";
const MERGE: &str = "application/merge-patch+json";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const ORPHAN_WARNING: &str = "299 - \"child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning\"";

fn body(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_gets_kubes_defaults_and_a_selector_made_from_its_uid() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, j) = http.json("POST", JOBS, &batch_job("pi")).await;
    assert_eq!(code, 201, "{j}");
    let uid = j["metadata"]["uid"].as_str().unwrap();
    let spec = &j["spec"];
    for (field, want) in [
        ("parallelism", json!(1)),
        ("completions", json!(1)),
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("suspend", json!(false)),
        ("manualSelector", json!(false)),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
    ] {
        assert_eq!(spec[field], want, "{field}");
    }
    assert_eq!(
        spec["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    );
    let labels = json!({
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "pi",
        "controller-uid": uid,
        "job-name": "pi",
    });
    assert_eq!(spec["template"]["metadata"]["labels"], labels);
    assert_eq!(
        j["metadata"]["labels"], labels,
        "the Job's own, from its template"
    );
    assert_eq!(j["metadata"]["generation"], 1);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["containers"][0]["imagePullPolicy"], "IfNotPresent");

    // Parallelism alone leaves completions unset (a work queue); a backoff limit per
    // index takes the Job-wide one out of reach; a pod failure policy replaces pods
    // only once they failed, and its patterns match True unless told.
    let (code, j) = http
        .json(
            "POST",
            JOBS,
            &batch_job_with("queue", json!({"parallelism": 3})),
        )
        .await;
    assert_eq!(code, 201, "{j}");
    assert!(j["spec"]["completions"].is_null(), "{j}");
    let indexed = json!({
        "completionMode": "Indexed", "completions": 4, "backoffLimitPerIndex": 1,
        "podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
        ]}
    });
    let (code, j) = http
        .json("POST", JOBS, &batch_job_with("indexed", indexed))
        .await;
    assert_eq!(code, 201, "{j}");
    assert_eq!(j["spec"]["backoffLimit"], 2147483647);
    assert_eq!(j["spec"]["podReplacementPolicy"], "Failed");
    assert_eq!(
        j["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
        "True"
    );

    // A manual selector is the user's, kept as given; the Job's labels stay its own.
    let manual = json!({
        "manualSelector": true,
        "selector": {"matchLabels": {"app": "batch"}},
        "template": {"metadata": {"labels": {"app": "batch"}}, "spec": {
            "restartPolicy": "OnFailure",
            "containers": [{"name": "main", "image": "busybox:1.36"}]
        }}
    });
    let mut m = batch_job_with("manual", manual);
    m["metadata"]["labels"] = json!({"team": "a"});
    let (code, j) = http.json("POST", JOBS, &m).await;
    assert_eq!(code, 201, "{j}");
    assert_eq!(
        j["spec"]["selector"],
        json!({"matchLabels": {"app": "batch"}})
    );
    assert_eq!(
        j["spec"]["template"]["metadata"]["labels"],
        json!({"app": "batch"})
    );
    assert_eq!(j["metadata"]["labels"], json!({"team": "a"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_template_and_other_fields_are_immutable_but_where_kube_allows_changes() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let patch = async |name: &str, v: Value| {
        http.send("PATCH", &format!("{JOBS}/{name}"), MERGE, body(v))
            .await
    };
    let (code, _) = http
        .json("POST", JOBS, &batch_job_with("s", json!({"suspend": true})))
        .await;
    assert_eq!(code, 201);
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}}});
    let (code, status) = patch("s", image.clone()).await;
    assert_eq!(code, 422, "{status}");
    let found = causes(&status);
    assert!(
        found.len() == 1
            && found[0].starts_with("spec.template: Invalid value: ")
            && found[0].ends_with(": field is immutable"),
        "{found:?}"
    );
    // A suspended Job that never started may still be steered to other nodes.
    let steer = json!({"spec": {"template": {
        "metadata": {"annotations": {"queue": "a"}},
        "spec": {"nodeSelector": {"zone": "a"}, "tolerations": [{"key": "k", "operator": "Exists"}]}
    }}});
    let (code, j) = patch("s", steer).await;
    assert_eq!(code, 200, "{j}");
    assert_eq!(j["metadata"]["generation"], 2);
    assert_eq!(
        j["spec"]["template"]["spec"]["nodeSelector"],
        json!({"zone": "a"})
    );
    // Once started, no longer.
    let started = json!({"status": {"startTime": "2025-01-01T00:00:00Z"}});
    let (code, _) = http
        .send("PATCH", &format!("{JOBS}/s/status"), MERGE, body(started))
        .await;
    assert_eq!(code, 200);
    let (code, status) = patch(
        "s",
        json!({"spec": {"template": {"spec": {"nodeSelector": {"zone": "b"}}}}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    // Resuming is a spec change like any other.
    let (code, j) = patch("s", json!({"spec": {"suspend": false}})).await;
    assert_eq!(
        (code, &j["metadata"]["generation"]),
        (200, &json!(3)),
        "{j}"
    );
    let (code, j) = patch("s", json!({"metadata": {"labels": {"team": "a"}}})).await;
    assert_eq!(
        (code, &j["metadata"]["generation"]),
        (200, &json!(3)),
        "{j}"
    );

    let (code, status) = patch("s", json!({"spec": {"completions": 3}})).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        ["spec.completions: Invalid value: 3: field is immutable"]
    );
    // An Indexed Job's completions change along with its parallelism, or not at all.
    let indexed = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3});
    let (code, _) = http
        .json("POST", JOBS, &batch_job_with("ix", indexed))
        .await;
    assert_eq!(code, 201);
    let (code, j) = patch("ix", json!({"spec": {"completions": 4, "parallelism": 4}})).await;
    assert_eq!(code, 200, "{j}");
    let (code, status) = patch("ix", json!({"spec": {"completions": 5}})).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        [
            "spec.completions: Invalid value: 5: can only be modified in tandem with spec.parallelism"
        ]
    );
    for (change, field) in [
        (
            json!({"completionMode": "NonIndexed"}),
            "spec.completionMode: Invalid value: \"NonIndexed\": field is immutable",
        ),
        (
            json!({"backoffLimitPerIndex": 1}),
            "spec.backoffLimitPerIndex: Invalid value: 1: field is immutable",
        ),
        (
            json!({"managedBy": "example.com/queue"}),
            "spec.managedBy: Invalid value: \"example.com/queue\": field is immutable",
        ),
    ] {
        let (code, status) = patch("ix", json!({"spec": change})).await;
        assert_eq!(code, 422, "{status}");
        assert!(causes(&status).contains(&field.to_owned()), "{status}");
    }
    let pfp = json!({"spec": {"podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}, "podReplacementPolicy": "Failed"}});
    let (code, status) = patch("ix", pfp).await;
    assert_eq!(code, 422, "{status}");
    let found = causes(&status);
    assert!(
        found.len() == 1
            && found[0].starts_with("spec.podFailurePolicy: Invalid value: {")
            && found[0].ends_with("}: field is immutable"),
        "{found:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_subresource_writes_only_the_status() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, _) = http.json("POST", JOBS, &batch_job("st")).await;
    assert_eq!(code, 201);
    let path = format!("{JOBS}/st");
    let (code, j) = http
        .send(
            "PATCH",
            &format!("{path}/status"),
            MERGE,
            body(json!({"status": {"active": 1, "ready": 0}, "spec": {"parallelism": 9}})),
        )
        .await;
    assert_eq!(code, 200, "{j}");
    assert_eq!(j["status"]["active"], 1);
    assert_eq!(j["spec"]["parallelism"], 1);
    assert_eq!(j["metadata"]["generation"], 1);
    let (_, j) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            body(json!({"status": {"active": 7}})),
        )
        .await;
    assert_eq!(
        j["status"]["active"], 1,
        "the main endpoint keeps the status"
    );
    let (code, status) = http
        .send(
            "PATCH",
            &format!("{path}/status"),
            MERGE,
            body(json!({"status": {"failed": -1, "uncountedTerminatedPods": {"succeeded": ["u1"], "failed": ["u1", ""]}}})),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        [
            "status.failed: Invalid value: -1: must be greater than or equal to 0",
            "status.uncountedTerminatedPods.failed[0]: Duplicate value: \"u1\"",
            "status.uncountedTerminatedPods.failed[1]: Invalid value: \"\": must not be empty",
            // kube 1.33's transition rules (kinds/batch/status_rules.rs).
            "status.failed: Invalid value: -1: cannot decrease the failed counter",
        ]
    );
}

/// The Table of `path` on `server`, with every column (kubectl drops the wide ones).
async fn table(server: &Server, path: &str) -> Value {
    reqwest::Client::new()
        .get(format!("{}{path}", server.url))
        .header("accept", TABLE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Each row's cells by the object's name.
fn rows(t: &Value) -> std::collections::BTreeMap<String, Vec<Value>> {
    t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let cells = r["cells"].as_array().unwrap().clone();
            (cells[0].as_str().unwrap().to_owned(), cells)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_has_kubes_columns_status_completions_and_duration() {
    let (api, clock) = api_with_clock().await;
    let server = Server::serve(api).await;
    let http = Http::new(&server);
    let start = "2023-11-14T22:13:20Z"; // the clock's start
    for (name, spec) in [
        ("running", json!({"completions": 5})),
        ("queue", json!({"parallelism": 3})),
        ("done", json!({})),
        ("failed", json!({})),
        ("suspended", json!({"suspend": true})),
        ("target", json!({})),
        ("leaving", json!({})),
    ] {
        let (code, j) = http.json("POST", JOBS, &batch_job_with(name, spec)).await;
        assert_eq!(code, 201, "{j}");
    }
    let status = async |name: &str, s: Value| {
        let (code, j) = http
            .send(
                "PATCH",
                &format!("{JOBS}/{name}/status"),
                MERGE,
                body(json!({"status": s})),
            )
            .await;
        assert_eq!(code, 200, "{j}");
    };
    let condition = |t: &str| json!([{"type": t, "status": "True"}]);
    let conditions =
        |a: &str, b: &str| json!([{"type": a, "status": "True"}, {"type": b, "status": "True"}]);
    status(
        "running",
        json!({"startTime": start, "succeeded": 3, "active": 2}),
    )
    .await;
    // A Job ends as its controller ends it: the interim condition first.
    status(
        "done",
        json!({"startTime": start, "succeeded": 1, "conditions": condition("SuccessCriteriaMet")}),
    )
    .await;
    status("done", json!({"completionTime": "2023-11-14T22:15:50Z", "conditions": conditions("SuccessCriteriaMet", "Complete")})).await;
    status(
        "failed",
        json!({"startTime": start, "conditions": condition("FailureTarget")}),
    )
    .await;
    status(
        "failed",
        json!({"conditions": conditions("FailureTarget", "Failed")}),
    )
    .await;
    status("suspended", json!({"conditions": condition("Suspended")})).await;
    status("target", json!({"conditions": condition("FailureTarget")})).await;
    let (code, _) = http
        .send("DELETE", &format!("{JOBS}/leaving"), "", Vec::new())
        .await;
    assert_eq!(code, 200, "an orphaning delete holds the Job");
    clock.advance(Duration::from_secs(200));

    let t = table(&server, JOBS).await;
    let names: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Status",
            "Completions",
            "Duration",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    let rows = rows(&t);
    let row = |n: &str| rows[n][..5].to_vec();
    assert_eq!(
        row("running"),
        ["running", "Running", "3/5", "3m20s", "3m20s"]
    );
    assert_eq!(row("queue"), ["queue", "Running", "0/1 of 3", "", "3m20s"]);
    assert_eq!(row("done"), ["done", "Complete", "1/1", "2m30s", "3m20s"]);
    assert_eq!(row("failed")[1], "Failed");
    assert_eq!(row("suspended")[1], "Suspended");
    assert_eq!(row("target")[1], "FailureTarget");
    assert_eq!(row("leaving")[1], "Terminating");
    let (_, j) = http.get(&format!("{JOBS}/running")).await;
    let uid = j["metadata"]["uid"].as_str().unwrap();
    assert_eq!(
        rows["running"][5..],
        [
            json!("main"),
            json!("busybox:1.36"),
            json!(format!("batch.kubernetes.io/controller-uid={uid}"))
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_without_a_policy_orphans_the_pods_with_kubes_warning() {
    let server = Server::start().await;
    let http = Http::new(&server);
    for name in ["a", "b", "c", "d"] {
        let (code, _) = http.json("POST", JOBS, &batch_job(name)).await;
        assert_eq!(code, 201);
    }
    let delete = async |path: String, body: &str| {
        let resp = reqwest::Client::new()
            .delete(format!("{}{path}", server.url))
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        let warnings: Vec<String> = resp
            .headers()
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        let code = resp.status().as_u16();
        (code, warnings, resp.json::<Value>().await.unwrap())
    };
    // No policy: the orphan finalizer holds the Job until the collector has stripped
    // its pods' references, and kube's warning says so.
    let (code, warnings, j) = delete(format!("{JOBS}/a"), "").await;
    assert_eq!(code, 200, "{j}");
    assert_eq!(warnings, [ORPHAN_WARNING]);
    assert_eq!(j["metadata"]["finalizers"], json!(["orphan"]));
    assert!(j["metadata"]["deletionTimestamp"].is_string(), "{j}");
    // A policy, as kubectl always sends one: no warning.
    let (code, warnings, s) = delete(
        format!("{JOBS}/b"),
        r#"{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}"#,
    )
    .await;
    assert_eq!((code, &s["status"]), (200, &json!("Success")), "{s}");
    assert!(warnings.is_empty(), "{warnings:?}");
    let (code, warnings, j) = delete(format!("{JOBS}/c?propagationPolicy=Orphan"), "").await;
    assert_eq!(code, 200);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(j["metadata"]["finalizers"], json!(["orphan"]));
    // The legacy orphanDependents names a policy too.
    let (code, warnings, _) = delete(format!("{JOBS}/d?orphanDependents=false"), "").await;
    assert_eq!(code, 200);
    assert!(warnings.is_empty(), "{warnings:?}");
    // A missing Job: the warning comes before the 404, as kube-apiserver's does.
    let (code, warnings, _) = delete(format!("{JOBS}/gone"), "").await;
    assert_eq!((code, warnings), (404, vec![ORPHAN_WARNING.to_owned()]));
    // A collection delete warns once.
    for name in ["e", "f"] {
        let (code, _) = http.json("POST", JOBS, &batch_job(name)).await;
        assert_eq!(code, 201);
    }
    let (code, warnings, list) =
        delete(format!("{JOBS}?labelSelector=job-name%20in%20(e,f)"), "").await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(warnings, [ORPHAN_WARNING]);
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let (_, e) = http.get(&format!("{JOBS}/e")).await;
    assert_eq!(e["metadata"]["finalizers"], json!(["orphan"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_jobs_may_still_get_kubes_warnings() {
    let server = Server::start().await;
    let create = async |obj: Value| {
        let resp = reqwest::Client::new()
            .post(format!("{}{JOBS}", server.url))
            .json(&obj)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 201);
        resp.headers()
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    // A name that is a DNS subdomain but no label becomes odd pod hostnames.
    let warnings = create(batch_job("a.b")).await;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("299 - \"metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [a lowercase RFC 1123 label must consist of"),
        "{warnings:?}"
    );
    let big = json!({"completionMode": "Indexed", "completions": 200000, "parallelism": 20000});
    assert_eq!(
        create(batch_job_with("big", big)).await,
        [
            "299 - \"spec: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail\""
        ]
    );
    assert!(create(batch_job("quiet")).await.is_empty());
}
