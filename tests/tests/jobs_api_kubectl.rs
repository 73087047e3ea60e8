//! Jobs and CronJobs with the real kubectl, against a mesopod without agents (what the
//! Job and CronJob controllers do with them is not this test's): `create job`, `create
//! cronjob`, `create job --from=cronjob/x`, `get jobs,cronjobs` (and `-o wide`) with
//! kube-apiserver's columns, `explain`, a bad schedule refused with robfig's message,
//! `api-resources`, and the two deletes: kubectl's own, which always names a policy
//! (Background, no warning), and one without a policy (`delete --raw`), which answers
//! with kube's warning and whose pods the garbage collector orphans.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use apiserver::EventKind;
use common::cluster::*;
use common::{ISSUE_18_KUBECTLS, kubectl, kubectl_version, row};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use testkit::{Kubectl, ok, stderr};

const WARNING: &str = "Warning: child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning";

/// The table of a multi-kind `kubectl get` whose second column is `second_column`.
fn section<'a>(out: &'a str, second_column: &str) -> &'a str {
    out.split("\n\n")
        .find(|s| s.split_whitespace().nth(1) == Some(second_column))
        .unwrap_or_else(|| panic!("no table with {second_column} in {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_lists_explains_and_deletes_jobs_and_cronjobs() {
    let app = start(Setup {
        agents: vec![],
        ..Setup::default()
    })
    .await;
    let api = app.api();
    let k = Kubectl::new(&app.api_url());

    let out = k
        .run(&[
            "create",
            "job",
            "pi",
            "--image=busybox:1.36",
            "--",
            "echo",
            "3.14",
        ])
        .await;
    assert_eq!(ok(&out).trim(), "job.batch/pi created", "{}", stderr(&out));
    let out = k
        .run(&[
            "create",
            "cronjob",
            "tick",
            "--image=busybox:1.36",
            "--schedule=*/1 * * * *",
            "--",
            "date",
        ])
        .await;
    assert_eq!(
        ok(&out).trim(),
        "cronjob.batch/tick created",
        "{}",
        stderr(&out)
    );
    let out = k
        .run(&["create", "job", "manual", "--from=cronjob/tick"])
        .await;
    assert_eq!(
        ok(&out).trim(),
        "job.batch/manual created",
        "{}",
        stderr(&out)
    );
    let tick = api.get_cronjob("default", "tick").unwrap();
    let manual = api.get_job("default", "manual").unwrap();
    let annotations = manual.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("cronjob.kubernetes.io/instantiate")
            .map(String::as_str),
        Some("manual")
    );
    let owner = &manual.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), Some(&owner.uid)),
        ("CronJob", "tick", tick.metadata.uid.as_ref())
    );
    let spec = manual.spec.clone().unwrap();
    assert_eq!(
        spec.template.spec.unwrap().restart_policy.as_deref(),
        Some("OnFailure")
    );
    let uid = manual.metadata.uid.clone().unwrap();
    assert_eq!(
        spec.selector.unwrap().match_labels.unwrap()["batch.kubernetes.io/controller-uid"],
        uid
    );

    let out = ok(&k.run(&["get", "jobs,cronjobs"]).await);
    let (header, cells) = row(section(&out, "STATUS"), "job.batch/pi");
    assert_eq!(
        header,
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
        "{out}"
    );
    // Nothing runs it here: no start, so no duration yet.
    assert_eq!(cells[1..3], ["Running", "0/1"], "{out}");
    let (header, cells) = row(section(&out, "SCHEDULE"), "cronjob.batch/tick");
    assert_eq!(
        header,
        [
            "NAME",
            "SCHEDULE",
            "TIMEZONE",
            "SUSPEND",
            "ACTIVE",
            "LAST SCHEDULE",
            "AGE"
        ],
        "{out}"
    );
    assert_eq!(
        cells[1..6],
        ["*/1 * * * *", "<none>", "False", "0", "<none>"],
        "{out}"
    );

    let wide = ok(&k.run(&["get", "job", "manual", "-o", "wide"]).await);
    let (header, cells) = row(&wide, "manual");
    assert_eq!(header[5..], ["CONTAINERS", "IMAGES", "SELECTOR"], "{wide}");
    assert_eq!(
        cells[cells.len() - 3..],
        [
            "tick".to_owned(),
            "busybox:1.36".to_owned(),
            format!("batch.kubernetes.io/controller-uid={uid}")
        ],
        "{wide}"
    );
    let wide = ok(&k.run(&["get", "cj", "-o", "wide"]).await);
    let (header, cells) = row(&wide, "tick");
    assert_eq!(header[7..], ["CONTAINERS", "IMAGES", "SELECTOR"], "{wide}");
    assert_eq!(
        cells[cells.len() - 3..],
        ["tick", "busybox:1.36", "<none>"],
        "{wide}"
    );

    let explained = ok(&k.run(&["explain", "job.spec.completions"]).await);
    assert!(
        explained.contains("Job")
            && explained.contains("Specifies the desired number of successfully finished pods"),
        "{explained}"
    );
    let explained = ok(&k.run(&["explain", "cronjob.spec.schedule"]).await);
    assert!(
        explained.contains("CronJob") && explained.contains("The schedule in Cron format"),
        "{explained}"
    );

    let out = k
        .run(&[
            "create",
            "cronjob",
            "bad",
            "--image=busybox:1.36",
            "--schedule=61 * * * *",
        ])
        .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "error: failed to create cronjob: CronJob.batch \"bad\" is invalid: spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61"
        ),
        "{}",
        stderr(&out)
    );

    let resources = ok(&k.run(&["api-resources", "--api-group=batch"]).await);
    let (_, cj) = row(&resources, "cronjobs");
    assert_eq!(
        cj,
        ["cronjobs", "cj", "batch/v1", "true", "CronJob"],
        "{resources}"
    );
    let (_, jobs) = row(&resources, "jobs");
    assert_eq!(jobs, ["jobs", "batch/v1", "true", "Job"], "{resources}");

    // kubectl's delete names Background: the Job goes at once, without a warning.
    let out = k.run(&["delete", "job", "pi"]).await;
    assert_eq!(ok(&out).trim(), "job.batch \"pi\" deleted");
    assert!(!stderr(&out).contains("child pods"), "{}", stderr(&out));

    // A client that names no policy gets kube's warning, and the Job's pods stay,
    // without their owner, once the collector has orphaned them.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "manual-x", "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "Job", "name": "manual", "uid": uid,
            "controller": true, "blockOwnerDeletion": true
        }]},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .unwrap();
    api.create_pod("default", pod).await.unwrap();
    let from = api.resource_version();
    let out = k
        .run(&[
            "delete",
            "--raw",
            "/apis/batch/v1/namespaces/default/jobs/manual",
        ])
        .await;
    ok(&out);
    assert!(stderr(&out).contains(WARNING), "{}", stderr(&out));
    let mut jobs = api.watch_jobs(Some("default"), from).unwrap();
    let gone = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(ev) = jobs.next().await {
            let ev = ev.unwrap();
            if ev.kind == EventKind::Deleted && ev.object.metadata.name.as_deref() == Some("manual")
            {
                return;
            }
        }
    });
    gone.await
        .expect("the collector orphans the pods, then lets the Job go");
    let left = api.get_pod("default", "manual-x").unwrap();
    assert!(
        left.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty(),
        "orphaned"
    );

    let out = k.run(&["delete", "cronjob", "tick"]).await;
    assert_eq!(ok(&out).trim(), "cronjob.batch \"tick\" deleted");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_supported_kubectl_creates_and_lists_batch_objects() {
    let server = common::shim::Server::start().await;
    for program in ISSUE_18_KUBECTLS {
        let v = kubectl_version(program).replace('.', "-");
        let k = kubectl(program, &server.url);
        let (job, cj) = (format!("job-{v}"), format!("cj-{v}"));
        let out = k
            .run(&["create", "job", &job, "--image=busybox:1.36"])
            .await;
        assert!(
            ok(&out).contains(&format!("job.batch/{job} created")),
            "{v}"
        );
        let out = k
            .run(&[
                "create",
                "cronjob",
                &cj,
                "--image=busybox:1.36",
                "--schedule=@hourly",
            ])
            .await;
        assert!(
            ok(&out).contains(&format!("cronjob.batch/{cj} created")),
            "{v}"
        );
        let (job_ref, cj_ref) = (format!("job/{job}"), format!("cronjob/{cj}"));
        let out = ok(&k.run(&["get", &job_ref, &cj_ref, "-o", "name"]).await);
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            [format!("job.batch/{job}"), format!("cronjob.batch/{cj}")],
            "{v}"
        );
        let explained = ok(&k.run(&["explain", "cj.spec.timeZone"]).await);
        assert!(explained.contains("time zone"), "{v}: {explained}");
        // Applying a manifest again, changed or not, leaves the generated selector and
        // labels alone, client-side and server-side alike.
        let name = format!("applied-{v}");
        for (labels, extra) in [
            ("{}", "--server-side=false"),
            ("{team: a}", "--server-side=true"),
        ] {
            let manifest = format!(
                "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  labels: {labels}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: main\n        image: busybox:1.36\n"
            );
            for _ in 0..2 {
                let out = k
                    .run_stdin(&["apply", extra, "-f", "-"], Some(&manifest))
                    .await;
                assert!(out.status.success(), "{v} {extra}: {}", stderr(&out));
            }
        }
        let described = ok(&k.run(&["describe", "job", &name]).await);
        assert!(
            described.contains("Selector:")
                && described.contains("batch.kubernetes.io/controller-uid="),
            "{v}: {described}"
        );
        let described = ok(&k.run(&["describe", "cronjob", &cj]).await);
        assert!(described.contains("@hourly"), "{v}: {described}");
    }
    server.stop().await;
}
