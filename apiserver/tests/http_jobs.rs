//! Job (`batch/v1`) over HTTP: kube-apiserver 1.33's defaults and generated selector,
//! its validation messages and field paths, the fields an update may not change (with
//! the exceptions kube makes), `metadata.generation` and the `status` subresource, the
//! Table, and a delete without a policy that orphans the pods with kube's warning.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";
const MERGE: &str = "application/merge-patch+json";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const ORPHAN_WARNING: &str = "299 - \"child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning\"";

/// A Job with one busybox container that runs to completion once.
fn job(name: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36"}]
        }}}
    })
}

/// `job(name)` with `spec` merged into its spec.
fn job_with(name: &str, spec: Value) -> Value {
    let mut j = job(name);
    for (k, v) in spec.as_object().unwrap() {
        j["spec"][k] = v.clone();
    }
    j
}

fn body(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

/// The causes of a refused create of `obj`.
async fn refused(http: &Http, obj: &Value) -> Vec<String> {
    let (code, status) = http.json("POST", JOBS, obj).await;
    assert_eq!(code, 422, "{status}");
    causes(&status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_gets_kubes_defaults_and_a_selector_made_from_its_uid() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, j) = http.json("POST", JOBS, &job("pi")).await;
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
        .json("POST", JOBS, &job_with("queue", json!({"parallelism": 3})))
        .await;
    assert_eq!(code, 201, "{j}");
    assert!(j["spec"]["completions"].is_null(), "{j}");
    let indexed = json!({
        "completionMode": "Indexed", "completions": 4, "backoffLimitPerIndex": 1,
        "podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
        ]}
    });
    let (code, j) = http.json("POST", JOBS, &job_with("indexed", indexed)).await;
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
    let mut m = job_with("manual", manual);
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
async fn counts_modes_and_the_restart_policy_are_refused_with_kubes_messages() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let mut always = job("a");
    always["spec"]["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("restartPolicy");
    assert_eq!(
        refused(&http, &always).await,
        [
            "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
        ]
    );
    let negative = json!({
        "parallelism": -1, "completions": -2, "activeDeadlineSeconds": -3,
        "backoffLimit": -4, "ttlSecondsAfterFinished": -5
    });
    assert_eq!(
        refused(&http, &job_with("a", negative)).await,
        [
            "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
            "spec.completions: Invalid value: -2: must be greater than or equal to 0",
            "spec.activeDeadlineSeconds: Invalid value: -3: must be greater than or equal to 0",
            "spec.backoffLimit: Invalid value: -4: must be greater than or equal to 0",
            "spec.ttlSecondsAfterFinished: Invalid value: -5: must be greater than or equal to 0",
        ]
    );
    let indexed = json!({"completionMode": "Indexed", "parallelism": 100001});
    assert_eq!(
        refused(&http, &job_with("a", indexed)).await,
        [
            "spec.completions: Required value: when completion mode is Indexed",
            "spec.parallelism: Invalid value: 100001: must be less than or equal to 100000 when completion mode is Indexed",
        ]
    );
    assert_eq!(
        refused(&http, &job_with("a", json!({"completionMode": "Random"}))).await,
        [
            "spec.completionMode: Unsupported value: \"Random\": supported values: \"NonIndexed\", \"Indexed\""
        ]
    );
    let per_index = json!({"backoffLimitPerIndex": 1, "maxFailedIndexes": 1});
    assert_eq!(
        refused(&http, &job_with("a", per_index)).await,
        [
            "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode",
            "spec.maxFailedIndexes: Invalid value: 1: requires indexed completion mode",
        ]
    );
    let failed = json!({"completionMode": "Indexed", "completions": 2, "maxFailedIndexes": 3});
    assert_eq!(
        refused(&http, &job_with("a", failed)).await,
        [
            "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
            "spec.maxFailedIndexes: Invalid value: 3: must be less than or equal to completions",
        ]
    );
    let huge = json!({
        "completionMode": "Indexed", "completions": 200000, "parallelism": 20000,
        "backoffLimitPerIndex": 1
    });
    assert_eq!(
        refused(&http, &job_with("a", huge)).await,
        [
            "spec.maxFailedIndexes: Required value: must be specified when completions is above 100000",
            "spec.parallelism: Invalid value: 20000: must be less than or equal to 10000 when completions are above 100000 and used with backoff limit per index",
        ]
    );
    // kube sets no bound between an Indexed Job's completions and its parallelism:
    // fewer completions than parallelism is a Job that runs at most that many pods.
    let fewer = json!({"completionMode": "Indexed", "completions": 2, "parallelism": 5});
    let (code, j) = http.json("POST", JOBS, &job_with("fewer", fewer)).await;
    assert_eq!(code, 201, "{j}");
    // The last index's hostname must be a DNS label.
    let dotted = json!({"completionMode": "Indexed", "completions": 3});
    assert_eq!(
        refused(&http, &job_with("a.b", dotted)).await,
        [
            "metadata.name: Invalid value: \"a.b\": will not able to create pod with invalid DNS label: a.b-2"
        ]
    );
    let managed = json!({"managedBy": "mesopod"});
    assert_eq!(
        refused(&http, &job_with("a", managed)).await,
        [
            "spec.managedBy: Invalid value: \"mesopod\": must be a domain-prefixed path (such as \"acme.io/foo\")"
        ]
    );
    let mut bad = job("a");
    bad["spec"]["template"]["spec"]["restartPolicy"] = json!("Sometimes");
    let found = refused(&http, &bad).await;
    assert_eq!(
        found.last().unwrap(),
        "spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"OnFailure\", \"Never\"",
        "{found:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_failure_and_success_policies_are_refused_with_kubes_messages() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let policy = |rules: Value| json!({"podFailurePolicy": {"rules": rules}});
    let mut on_failure = job_with(
        "a",
        policy(json!([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}])),
    );
    on_failure["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    on_failure["spec"]["podReplacementPolicy"] = json!("TerminatingOrFailed");
    assert_eq!(
        refused(&http, &on_failure).await,
        [
            "spec.podReplacementPolicy: Unsupported value: \"TerminatingOrFailed\": supported values: \"Failed\"",
            "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified",
        ]
    );
    let rules = json!([
        {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [0, 3, 1, 1]}},
        {"action": "", "onExitCodes": {"operator": "", "containerName": "sidecar", "values": []}},
        {"action": "Retry", "onExitCodes": {"operator": "Between", "values": [1]},
         "onPodConditions": [{"type": "DisruptionTarget", "status": "Maybe"}]},
        {"action": "Ignore"},
    ]);
    assert_eq!(
        refused(&http, &job_with("a", policy(rules))).await,
        [
            "spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set",
            "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator",
            "spec.podFailurePolicy.rules[0].onExitCodes.values[3]: Duplicate value: 1",
            "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: []int32{0, 3, 1, 1}: must be ordered",
            "spec.podFailurePolicy.rules[1].action: Required value: valid values: [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]",
            "spec.podFailurePolicy.rules[1].onExitCodes.operator: Required value: valid values: [\"In\" \"NotIn\"]",
            "spec.podFailurePolicy.rules[1].onExitCodes.containerName: Invalid value: \"sidecar\": must be one of the container or initContainer names in the pod template",
            "spec.podFailurePolicy.rules[1].onExitCodes.values: Invalid value: []int32{}: at least one value is required",
            "spec.podFailurePolicy.rules[2].action: Unsupported value: \"Retry\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
            "spec.podFailurePolicy.rules[2].onExitCodes.operator: Unsupported value: \"Between\": supported values: \"In\", \"NotIn\"",
            "spec.podFailurePolicy.rules[2].onPodConditions[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
            "spec.podFailurePolicy.rules[2]: Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
            "spec.podFailurePolicy.rules[3]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
        ]
    );
    // FailIndex with a backoff limit per index, on exit codes of a named container.
    let mut fail_index = job_with(
        "fail-index",
        json!({"completionMode": "Indexed", "completions": 3, "backoffLimitPerIndex": 2}),
    );
    fail_index["spec"]["podFailurePolicy"] = json!({"rules": [{"action": "FailIndex",
        "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0, 1]}}]});
    let (code, j) = http.json("POST", JOBS, &fail_index).await;
    assert_eq!(code, 201, "{j}");

    let success = json!({"successPolicy": {"rules": [{"succeededCount": 1}]}});
    let found = refused(&http, &job_with("a", success)).await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("spec.successPolicy: Invalid value: ")
            && found[0].ends_with(": requires indexed completion mode"),
        "{found:?}"
    );
    let success = json!({
        "completionMode": "Indexed", "completions": 3,
        "successPolicy": {"rules": [
            {}, {"succeededIndexes": "0-9"}, {"succeededIndexes": "0,2", "succeededCount": 4}
        ]}
    });
    assert_eq!(
        refused(&http, &job_with("a", success)).await,
        [
            "spec.successPolicy.rules[0]: Required value: at least one of succeededCount or succeededIndexes must be specified",
            "spec.successPolicy.rules[1].succeededIndexes: Invalid value: \"0-9\": error parsing succeededIndexes: too large index: \"9\"",
            "spec.successPolicy.rules[2].succeededCount: Invalid value: 4: must be less than or equal to 3 (the number of specified completions)",
            "spec.successPolicy.rules[2].succeededCount: Invalid value: 4: must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_must_be_generated_or_given_and_select_the_template() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let manual = json!({"manualSelector": true});
    assert_eq!(
        refused(&http, &job_with("a", manual)).await,
        [
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: map[string]string(nil): `selector` does not match template `labels`",
        ]
    );
    let mut other = job_with(
        "a",
        json!({"manualSelector": true, "selector": {"matchLabels": {"app": "x"}}}),
    );
    other["spec"]["template"]["metadata"] = json!({"labels": {"app": "y"}});
    assert_eq!(
        refused(&http, &other).await,
        [
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"y\"}: `selector` does not match template `labels`"
        ]
    );
    // Without manualSelector a selector of the user's own is more than was generated.
    let mut own = job_with("a", json!({"selector": {"matchLabels": {"app": "x"}}}));
    own["spec"]["template"]["metadata"] = json!({"labels": {"app": "x"}});
    let found = refused(&http, &own).await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("spec.selector: Invalid value: v1.LabelSelector{")
            && found[0].ends_with("`selector` not auto-generated"),
        "{found:?}"
    );
    // A generated label the user set otherwise is judged, not overwritten.
    let mut named = job("a");
    named["spec"]["template"]["metadata"] = json!({"labels": {"job-name": "b"}});
    let found = refused(&http, &named).await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with(
            "spec.template.metadata.labels[job-name]: Invalid value: map[string]string{"
        ) && found[0].ends_with("\"job-name\":\"b\"}: must be 'a'"),
        "{found:?}"
    );
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
        .json("POST", JOBS, &job_with("s", json!({"suspend": true})))
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
    let (code, _) = http.json("POST", JOBS, &job_with("ix", indexed)).await;
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
    let (code, _) = http.json("POST", JOBS, &job("st")).await;
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
        let (code, j) = http.json("POST", JOBS, &job_with(name, spec)).await;
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
    status(
        "running",
        json!({"startTime": start, "succeeded": 3, "active": 2}),
    )
    .await;
    status("done", json!({"startTime": start, "completionTime": "2023-11-14T22:15:50Z", "succeeded": 1, "conditions": condition("Complete")})).await;
    status("failed", json!({"conditions": condition("Failed")})).await;
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
        let (code, _) = http.json("POST", JOBS, &job(name)).await;
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
        let (code, _) = http.json("POST", JOBS, &job(name)).await;
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
