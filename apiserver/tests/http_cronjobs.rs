//! CronJob (`batch/v1`) over HTTP, and what both batch kinds share with every served
//! kind: kube-apiserver 1.33's CronJob defaults and messages (robfig's schedule errors,
//! `TZ` in the schedule, the time zone, the 52-character name, the job template as a
//! Job's spec), generation and `/status`, the Table, discovery, OpenAPI, watch, dry run,
//! strict field validation, field selectors, and the etcd store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const CRONJOBS: &str = "/apis/batch/v1/namespaces/default/cronjobs";
const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";
const MERGE: &str = "application/merge-patch+json";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// A CronJob every minute whose Job runs one busybox container, as `kubectl create
/// cronjob` builds it.
fn cronjob(name: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "*/1 * * * *",
            "jobTemplate": {"metadata": {"name": name}, "spec": {"template": {"spec": {
                "restartPolicy": "OnFailure",
                "containers": [{"name": name, "image": "busybox:1.36"}]
            }}}}
        }
    })
}

/// `v` with `value` at `pointer` (whose parent exists).
fn with(mut v: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    v.pointer_mut(parent).unwrap()[key] = value;
    v
}

fn body(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

async fn refused(http: &Http, obj: &Value) -> Vec<String> {
    let (code, status) = http.json("POST", CRONJOBS, obj).await;
    assert_eq!(code, 422, "{status}");
    causes(&status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cronjob_gets_kubes_defaults_and_its_template_only_the_pods() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, c) = http.json("POST", CRONJOBS, &cronjob("hello")).await;
    assert_eq!(code, 201, "{c}");
    let spec = &c["spec"];
    assert_eq!(spec["concurrencyPolicy"], "Allow");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["successfulJobsHistoryLimit"], 3);
    assert_eq!(spec["failedJobsHistoryLimit"], 1);
    assert!(spec["timeZone"].is_null());
    assert_eq!(c["metadata"]["generation"], 1);
    let job = &spec["jobTemplate"]["spec"];
    // kube's generated defaulters give the template its pod's defaults, not a Job's:
    // the controller's create of each Job defaults it.
    for field in ["completions", "parallelism", "backoffLimit", "selector"] {
        assert!(job[field].is_null(), "{field}: {job}");
    }
    assert_eq!(job["template"]["spec"]["restartPolicy"], "OnFailure");
    assert_eq!(job["template"]["spec"]["dnsPolicy"], "ClusterFirst");

    // Spec changes count; /status writes only the status.
    let path = format!("{CRONJOBS}/hello");
    let (code, c) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            body(json!({"spec": {"suspend": true}})),
        )
        .await;
    assert_eq!(
        (code, &c["metadata"]["generation"]),
        (200, &json!(2)),
        "{c}"
    );
    let active = json!([{"kind": "Job", "namespace": "default", "name": "hello-1", "apiVersion": "batch/v1"}]);
    let (code, c) = http
        .send(
            "PATCH",
            &format!("{path}/status"),
            MERGE,
            body(json!({"status": {"active": active}, "spec": {"schedule": "@hourly"}})),
        )
        .await;
    assert_eq!(code, 200, "{c}");
    assert_eq!(c["status"]["active"][0]["name"], "hello-1");
    assert_eq!(c["spec"]["schedule"], "*/1 * * * *");
    assert_eq!(c["metadata"]["generation"], 2);
    let (_, c) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            body(json!({"status": {"active": null}})),
        )
        .await;
    assert_eq!(
        c["status"]["active"][0]["name"], "hello-1",
        "the main endpoint keeps it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_zones_names_and_policies_are_refused_with_kubes_messages() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let schedule = |s: &str| with(cronjob("a"), "/spec/schedule", json!(s));
    assert_eq!(
        refused(&http, &schedule("")).await,
        ["spec.schedule: Required value"]
    );
    assert_eq!(
        refused(&http, &schedule("*/1 * * *")).await,
        [
            "spec.schedule: Invalid value: \"*/1 * * *\": expected exactly 5 fields, found 4: [*/1 * * *]"
        ]
    );
    assert_eq!(
        refused(&http, &schedule("60 * * * *")).await,
        ["spec.schedule: Invalid value: \"60 * * * *\": end of range (60) above maximum (59): 60"]
    );
    assert_eq!(
        refused(&http, &schedule("@every soon")).await,
        [
            "spec.schedule: Invalid value: \"@every soon\": failed to parse duration @every soon: time: invalid duration \"soon\""
        ]
    );
    // robfig reads the zone prefix itself; kube refuses it for the timeZone field.
    assert_eq!(
        refused(&http, &schedule("CRON_TZ=Europe/Paris 0 9 * * *")).await,
        [
            "spec.schedule: Invalid value: \"CRON_TZ=Europe/Paris 0 9 * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
        ]
    );
    assert_eq!(
        refused(&http, &schedule("TZ=Mars/Olympus 0 9 * * *")).await,
        [
            "spec.schedule: Invalid value: \"TZ=Mars/Olympus 0 9 * * *\": provided bad location Mars/Olympus: unknown time zone Mars/Olympus",
            "spec.schedule: Invalid value: \"TZ=Mars/Olympus 0 9 * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ]
    );
    let zone = |z: &str| with(cronjob("a"), "/spec/timeZone", json!(z));
    assert_eq!(
        refused(&http, &zone("Mars/Olympus")).await,
        ["spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"]
    );
    assert_eq!(
        refused(&http, &zone("")).await,
        ["spec.timeZone: Invalid value: \"\": timeZone must be nil or non-empty string"]
    );
    assert_eq!(
        refused(&http, &zone("Local")).await,
        [
            "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
        ]
    );
    let (code, c) = http
        .json(
            "POST",
            CRONJOBS,
            &with(cronjob("paris"), "/spec/timeZone", json!("Europe/Paris")),
        )
        .await;
    assert_eq!(code, 201, "{c}");

    let long = "a".repeat(53);
    assert_eq!(
        refused(&http, &cronjob(&long)).await,
        [format!(
            "metadata.name: Invalid value: \"{long}\": must be no more than 52 characters"
        )]
    );
    let mut c = with(cronjob("a"), "/spec/concurrencyPolicy", json!("Sometimes"));
    c["spec"]["startingDeadlineSeconds"] = json!(-1);
    c["spec"]["successfulJobsHistoryLimit"] = json!(-1);
    c["spec"]["failedJobsHistoryLimit"] = json!(-2);
    assert_eq!(
        refused(&http, &c).await,
        [
            "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"",
            "spec.successfulJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
            "spec.failedJobsHistoryLimit: Invalid value: -2: must be greater than or equal to 0",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_template_is_validated_as_a_jobs_spec_without_a_selector() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let mut c = cronjob("a");
    let job = &mut c["spec"]["jobTemplate"]["spec"];
    job["parallelism"] = json!(-1);
    job["selector"] = json!({"matchLabels": {"app": "a"}});
    job["manualSelector"] = json!(true);
    let pod = job["template"]["spec"].as_object_mut().unwrap();
    pod.remove("restartPolicy");
    pod["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("image");
    let found = refused(&http, &c).await;
    for want in [
        "spec.jobTemplate.spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
        "spec.jobTemplate.spec.template.spec.containers[0].image: Required value",
        "spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
        "spec.jobTemplate.spec.manualSelector: Unsupported value: true: supported values: \"nil\", \"false\"",
    ] {
        assert!(found.contains(&want.to_owned()), "{want} not in {found:?}");
    }
    assert!(
        found.iter().any(|c| c
            .starts_with("spec.jobTemplate.spec.selector: Invalid value: v1.LabelSelector{")
            && c.ends_with("`selector` will be auto-generated")),
        "{found:?}"
    );
    let indexed = with(
        cronjob("a"),
        "/spec/jobTemplate/spec/completionMode",
        json!("Indexed"),
    );
    assert_eq!(
        refused(&http, &indexed).await,
        ["spec.jobTemplate.spec.completions: Required value: when completion mode is Indexed"]
    );
    // An update is validated as a create but for TZ and the name: TZ stays refused.
    let (code, _) = http.json("POST", CRONJOBS, &cronjob("u")).await;
    assert_eq!(code, 201);
    let (code, status) = http
        .send(
            "PATCH",
            &format!("{CRONJOBS}/u"),
            MERGE,
            body(json!({"spec": {"schedule": "TZ=UTC 0 * * * *"}})),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        [
            "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_has_kubes_cronjob_columns() {
    let (api, clock) = api_with_clock().await;
    let server = Server::serve(api).await;
    let http = Http::new(&server);
    let (code, _) = http.json("POST", CRONJOBS, &cronjob("plain")).await;
    assert_eq!(code, 201);
    let zoned = with(cronjob("zoned"), "/spec/timeZone", json!("Europe/Paris"));
    let (code, _) = http.json("POST", CRONJOBS, &zoned).await;
    assert_eq!(code, 201);
    let status = json!({"status": {
        "lastScheduleTime": "2023-11-14T22:13:20Z",
        "active": [{"kind": "Job", "namespace": "default", "name": "zoned-28333333", "apiVersion": "batch/v1"}]
    }});
    let (code, _) = http
        .send(
            "PATCH",
            &format!("{CRONJOBS}/zoned/status"),
            MERGE,
            body(status),
        )
        .await;
    assert_eq!(code, 200);
    clock.advance(Duration::from_secs(90));
    let t: Value = reqwest::Client::new()
        .get(format!("{}{CRONJOBS}", server.url))
        .header("accept", TABLE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
            "Schedule",
            "Timezone",
            "Suspend",
            "Active",
            "Last Schedule",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "plain",
            "*/1 * * * *",
            "<none>",
            "False",
            0,
            "<none>",
            "90s",
            "plain",
            "busybox:1.36",
            "<none>"
        ])
    );
    assert_eq!(
        t["rows"][1]["cells"],
        json!([
            "zoned",
            "*/1 * * * *",
            "Europe/Paris",
            "False",
            1,
            "90s",
            "90s",
            "zoned",
            "busybox:1.36",
            "<none>"
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_and_openapi_serve_batch_v1() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (_, groups) = http.get("/apis").await;
    let batch = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "batch")
        .cloned()
        .unwrap_or_else(|| panic!("no batch in {groups}"));
    assert_eq!(batch["preferredVersion"]["groupVersion"], "batch/v1");
    let (code, g) = http.get("/apis/batch").await;
    assert_eq!((code, &g["kind"]), (200, &json!("APIGroup")), "{g}");
    let (_, list) = http.get("/apis/batch/v1").await;
    let find = |n: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("{n} not in {list}"))
    };
    let all = json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ]);
    let cj = find("cronjobs");
    assert_eq!(
        (
            &cj["shortNames"],
            &cj["categories"],
            &cj["verbs"],
            &cj["kind"]
        ),
        (&json!(["cj"]), &json!(["all"]), &all, &json!("CronJob"))
    );
    let jobs = find("jobs");
    assert!(jobs["shortNames"].is_null(), "{jobs}");
    assert_eq!(
        (&jobs["categories"], &jobs["verbs"]),
        (&json!(["all"]), &all)
    );
    for sub in ["jobs/status", "cronjobs/status"] {
        assert_eq!(find(sub)["verbs"], json!(["get", "patch", "update"]));
    }

    let (_, index) = http.get("/openapi/v3").await;
    assert!(index["paths"]["apis/batch/v1"].is_object(), "{index}");
    let (_, v3) = http.get("/openapi/v3/apis/batch/v1").await;
    let schemas = &v3["components"]["schemas"];
    let job = &schemas["io.k8s.api.batch.v1.JobSpec"]["properties"];
    assert!(
        job["completions"]["description"]
            .as_str()
            .unwrap()
            .starts_with("Specifies the desired number of successfully finished pods"),
        "{job}"
    );
    assert!(schemas["io.k8s.api.batch.v1.CronJobSpec"]["properties"]["schedule"].is_object());
    assert_eq!(
        schemas["io.k8s.api.batch.v1.CronJob"]["x-kubernetes-group-version-kind"],
        json!([{"group": "batch", "kind": "CronJob", "version": "v1"}])
    );
    let (_, v2) = http.get("/openapi/v2").await;
    assert!(v2["definitions"]["io.k8s.api.batch.v1.Job"].is_object());
    assert!(v2["paths"]["/apis/batch/v1/namespaces/{namespace}/cronjobs/{name}"].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_dry_run_strict_decoding_and_field_selectors_work_for_jobs() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "w"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36"}]}}}
    });
    let (code, dry) = http.json("POST", &format!("{JOBS}?dryRun=All"), &job).await;
    assert_eq!(code, 201, "{dry}");
    assert!(dry["spec"]["selector"]["matchLabels"].is_object(), "{dry}");
    let (code, _) = http.get(&format!("{JOBS}/w")).await;
    assert_eq!(code, 404, "a dry run stores nothing");

    let mut typo = job.clone();
    typo["spec"]["completion"] = json!(2);
    let (code, status) = http
        .json("POST", &format!("{JOBS}?fieldValidation=Strict"), &typo)
        .await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("strict decoding error: unknown field \"spec.completion\""),
        "{status}"
    );

    let (code, j) = http.json("POST", JOBS, &job).await;
    assert_eq!(code, 201);
    let rv: u64 = j["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let resp = reqwest::Client::new()
        .get(format!(
            "{}{JOBS}?watch=1&resourceVersion={}",
            server.url,
            rv - 1
        ))
        .send()
        .await
        .unwrap();
    let mut stream = resp.bytes_stream();
    use futures::StreamExt as _;
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let ev: Value = serde_json::from_slice(first.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(
        (&ev["type"], &ev["object"]["metadata"]["name"]),
        (&json!("ADDED"), &json!("w"))
    );

    // Jobs also select by status.successful (their succeeded count, 0 until one is).
    let names = async |selector: &str| {
        let (code, list) = http.get(&format!("{JOBS}?fieldSelector={selector}")).await;
        assert_eq!(code, 200, "{list}");
        list["items"].as_array().unwrap().len()
    };
    assert_eq!(names("status.successful=0").await, 1);
    assert_eq!(names("status.successful=1").await, 0);
    let (code, status) = http.get(&format!("{JOBS}?fieldSelector=spec.x=1")).await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        "field label \"spec.x\" not supported for batchv1.Job"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_and_cronjobs_live_on_etcd_as_on_redb() {
    let Some(etcd) = testkit::etcd::Etcd::start("jobs_and_cronjobs_live_on_etcd_as_on_redb").await
    else {
        return;
    };
    let shim = async || {
        let config = apiserver::store::EtcdConfig::new(vec![etcd.url.clone()]);
        let store = apiserver::store::EtcdStore::connect(config, None)
            .await
            .unwrap();
        let api = apiserver::Api::start(
            Arc::new(store),
            Arc::new(apiserver::SystemClock),
            Arc::new(TestLogs),
        )
        .await
        .unwrap();
        Server::serve(api).await
    };
    let (a, b) = (shim().await, shim().await);
    let from = b.api.resource_version();
    let http = Http::new(&a);
    let (code, c) = http.json("POST", CRONJOBS, &cronjob("nightly")).await;
    assert_eq!(code, 201, "{c}");
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36"}]}}}
    });
    let (code, j) = http.json("POST", JOBS, &job).await;
    assert_eq!(code, 201, "{j}");
    // The other replica serves both from its etcd watch, in the order they were made.
    use futures::StreamExt as _;
    let mut watch = b.api.watch_jobs(Some("default"), from).unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("b sees a's Job")
        .unwrap()
        .unwrap();
    let selector = ev
        .object
        .spec
        .unwrap()
        .selector
        .unwrap()
        .match_labels
        .unwrap();
    assert_eq!(
        selector["batch.kubernetes.io/controller-uid"],
        j["metadata"]["uid"].as_str().unwrap()
    );
    let c = b.api.get_cronjob("default", "nightly").unwrap();
    assert_eq!(c.spec.unwrap().concurrency_policy.as_deref(), Some("Allow"));
}
