//! Jobs with the real kubectl, pods in real containers from a registry image on the
//! embedded runtime, and time from an injected clock (the controllers', not the
//! executors'): a failing Job waits out its re-create backoff and ends
//! BackoffLimitExceeded; a podFailurePolicy FailJob exit code ends a Job at once; an
//! executor SIGKILLed under a Job's running pod costs it nothing (the next executor
//! adopts the container, and the Job completes with no failure); an Indexed Job runs each index once and each pod sees its index; a Job of 5
//! completions 2 at a time reaches Complete and its pods' exit codes and logs stay
//! readable until its TTL, which deletes them. (The backoff is checked first: the
//! executors stamp finish times by the real clock, and later steps move the injected
//! one far ahead of it.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::sync::Arc;
use std::time::Duration;

use apiserver::{Api, OffsetClock};
use common::cluster::*;
use containers_support::*;
use images::testing::Registry;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(90);

fn job(name: &str, image: &str, spec: &str, script: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\nspec:\n{spec}  template:\n    spec:\n      restartPolicy: Never\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: main\n        image: {image}\n        command: [\"/bin/sh\", \"-c\", {script:?}]\n        resources:\n          requests: {{cpu: 10m, memory: 16Mi}}\n"
    )
}

/// The Job once `pred` holds for it (read, then watched).
async fn job_when(api: &Api, name: &str, pred: impl Fn(&Job) -> bool) -> Job {
    wait_watched(
        api,
        name,
        |api| api.get_job("default", name).ok(),
        |api, rv| api.watch_jobs(Some("default"), rv).unwrap(),
        pred,
    )
    .await
}

fn condition<'a>(j: &'a Job, kind: &str) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    j.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
}

fn pods_of(api: &Api, job: &str) -> Vec<Pod> {
    api.list_pods(
        Some("default"),
        &format!("batch.kubernetes.io/job-name={job}"),
        "",
    )
    .unwrap()
    .items
}

fn exit_code(p: &Pod) -> Option<i32> {
    let s = p.status.as_ref()?.container_statuses.as_ref()?.first()?;
    Some(s.state.as_ref()?.terminated.as_ref()?.exit_code)
}

async fn scenario(registry: &Registry) {
    let (_keep, store) = store();
    let image = registry.push("test/jobs", "1", &test_image()).await;
    let image = image.as_str();
    // The clock runs, and jumps where the test says: the scheduler's core reads
    // it too, and under a standing clock its one REVIVE per second never came
    // again once it had revived at that instant, so a pod made after the next
    // SUPPRESS waited for ever (twice in CI).
    let clock = Arc::new(OffsetClock::new());
    let app = cluster_with("embedded", &store, |cfg| cfg.clock = clock.clone()).await;
    let api = app.api();
    let k = Kubectl::new(&app.api_url());

    // A failing Job: its second pod waits out the 10 s re-create backoff, by the
    // injected clock; then the Job fails.
    k.apply(&job(
        "fails",
        image,
        "  backoffLimit: 1\n",
        "echo failing; exit 3",
    ))
    .await;
    wait_until(
        "the first pod failed",
        T,
        async || pods_of(api, "fails"),
        |pods| pods.len() == 1 && phase(&pods[0]) == "Failed",
    )
    .await;
    // Three sweeps of the controller's clock happen here: none may create a pod.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        pods_of(api, "fails").len(),
        1,
        "a pod made inside the backoff"
    );
    // The executor stamps the failure by the real clock, a little after this
    // clock's start: two minutes on is past it plus the backoff.
    clock.advance(Duration::from_secs(120));
    let failed = job_when(api, "fails", |j| condition(j, "Failed").is_some()).await;
    let c = condition(&failed, "Failed").unwrap();
    assert_eq!(c.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(
        c.message.as_deref(),
        Some("Job has reached the specified backoff limit")
    );
    assert_eq!(pods_of(api, "fails").len(), 2);
    assert_eq!(failed.status.unwrap().failed, Some(2));

    // podFailurePolicy: exit code 42 fails the Job at once, whatever backoffLimit says.
    k.apply(&job(
        "policy",
        image,
        "  backoffLimit: 6\n  podFailurePolicy:\n    rules:\n    - action: FailJob\n      onExitCodes:\n        operator: In\n        values: [42]\n",
        "exit 42",
    ))
    .await;
    let failed = job_when(api, "policy", |j| condition(j, "Failed").is_some()).await;
    let c = condition(&failed, "Failed").unwrap();
    assert_eq!(c.reason.as_deref(), Some("PodFailurePolicy"));
    assert!(
        c.message.as_deref().unwrap_or("").contains("exit code 42"),
        "{c:?}"
    );
    assert_eq!(pods_of(api, "policy").len(), 1);

    // The executor SIGKILLed under a running pod: the agent's next executor adopts
    // the container, which finishes; nothing failed, nothing ran twice.
    k.apply(&job(
        "survives",
        image,
        "  backoffLimit: 0\n",
        "echo started; sleep 6; echo finished",
    ))
    .await;
    // Should a pod never be placed again, the scheduler's pages say why.
    let base = app.api_url();
    testkit::wait_until_explained(
        "the pod running",
        T,
        async || pods_of(api, "survives"),
        |pods| pods.len() == 1 && phase(&pods[0]) == "Running",
        async || scheduler_pages(&base).await,
    )
    .await;
    let work = app.local().unwrap().work_dir().to_path_buf();
    let old = kill_the_executor(&work);
    let done = job_when(api, "survives", |j| {
        condition(j, "Complete").is_some() || condition(j, "Failed").is_some()
    })
    .await;
    assert!(condition(&done, "Complete").is_some(), "{:?}", done.status);
    assert_eq!(done.status.unwrap().failed, None);
    assert!(!executors_under(&work).contains(&old));
    let pods = pods_of(api, "survives");
    assert_eq!(pods.len(), 1, "the pod ran once");
    let log = ok(&k
        .run(&["logs", pods[0].metadata.name.as_deref().unwrap()])
        .await);
    assert_eq!(log.lines().collect::<Vec<_>>(), ["started", "finished"]);

    // Indexed: each index once, each pod seeing its own.
    k.apply(&job(
        "indexed",
        image,
        "  completions: 3\n  parallelism: 3\n  completionMode: Indexed\n",
        "echo index=$JOB_COMPLETION_INDEX host=$(hostname)",
    ))
    .await;
    let done = job_when(api, "indexed", |j| condition(j, "Complete").is_some()).await;
    assert_eq!(
        done.status.unwrap().completed_indexes.as_deref(),
        Some("0-2")
    );
    let mut seen = Vec::new();
    for p in pods_of(api, "indexed") {
        let index =
            p.metadata.annotations.as_ref().unwrap()["batch.kubernetes.io/job-completion-index"]
                .clone();
        let log = ok(&k.run(&["logs", p.metadata.name.as_deref().unwrap()]).await);
        assert_eq!(log.trim(), format!("index={index} host=indexed-{index}"));
        seen.push(index);
    }
    seen.sort();
    assert_eq!(seen, ["0", "1", "2"]);

    // Five completions, two at a time: Complete, each pod's exit code and log kept.
    k.apply(&job(
        "five",
        image,
        "  completions: 5\n  parallelism: 2\n  ttlSecondsAfterFinished: 600\n",
        "echo done by $(hostname)",
    ))
    .await;
    let done = job_when(api, "five", |j| condition(j, "Complete").is_some()).await;
    let status = done.status.clone().unwrap();
    assert_eq!(
        (status.succeeded, status.failed),
        (Some(5), None),
        "{status:?}"
    );
    let complete = condition(&done, "Complete").unwrap();
    assert_eq!(complete.reason.as_deref(), Some("CompletionsReached"));
    let table = ok(&k.run(&["get", "job", "five", "--no-headers"]).await);
    assert!(
        table.contains("Complete") && table.contains("5/5"),
        "{table}"
    );
    let pods = pods_of(api, "five");
    assert_eq!(pods.len(), 5, "one pod per completion");
    for p in &pods {
        assert_eq!(exit_code(p), Some(0));
        assert!(
            p.metadata
                .finalizers
                .iter()
                .flatten()
                .all(|f| f != "batch.kubernetes.io/job-tracking"),
            "a counted pod keeps no tracking finalizer"
        );
        let name = p.metadata.name.as_deref().unwrap();
        let log = ok(&k.run(&["logs", name]).await);
        assert!(log.starts_with("done by "), "{log}");
    }
    let events = ok(&k
        .run(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=five",
        ])
        .await);
    assert!(
        events.contains("Completed") && events.contains("Job completed"),
        "{events}"
    );

    // Its TTL, by the injected clock: the Job and its pods go (Foreground).
    clock.advance(Duration::from_secs(601));
    wait_until(
        "the Job and its pods gone after their TTL",
        T,
        async || {
            (
                api.get_job("default", "five").is_err(),
                pods_of(api, "five").len(),
            )
        },
        |(gone, pods)| *gone && *pods == 0,
    )
    .await;

    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_complete_fail_by_backoff_and_policy_and_index_their_pods() {
    if prerequisites(false)
        && let Some(registry) = Registry::start_or_skip("jobs on the embedded runtime").await
    {
        scenario(&registry).await;
    }
}
