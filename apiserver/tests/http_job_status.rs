//! A Job's status through `/status` under kube-apiserver 1.33's transition rules
//! (`kinds/batch/status_rules.rs`): kubectl's status patch that completes a Job out of
//! order is refused with kube's message, while the Job controller's own sequence,
//! written through the typed in-process API it uses, goes through; and a finished Job
//! stays finished.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use testkit::{Kubectl, ok, stderr};

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";

/// The clock's start (`api_with_clock`), as the controller writes times.
const START: &str = "2023-11-14T22:13:20Z";

fn condition(ty: &str) -> JobCondition {
    JobCondition {
        type_: ty.to_owned(),
        status: "True".to_owned(),
        ..JobCondition::default()
    }
}

fn time(t: &str) -> Time {
    Time(t.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_condition_out_of_order_is_refused_and_the_controllers_sequence_is_not() {
    let (api, _clock) = api_with_clock().await;
    let server = Server::serve(api).await;
    let (code, j) = Http::new(&server).json("POST", JOBS, &batch_job("x")).await;
    assert_eq!(code, 201, "{j}");
    let kubectl = Kubectl::new(&server.url);
    let patch = |body: &'static str| {
        let kubectl = &kubectl;
        async move {
            kubectl
                .run(&[
                    "patch",
                    "job",
                    "x",
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    body,
                ])
                .await
        }
    };

    let refused = patch(r#"{"status":{"conditions":[{"type":"Complete","status":"True"}]}}"#).await;
    assert!(!refused.status.success());
    let err = stderr(&refused);
    for message in [
        "status.completionTime: Required value: completionTime is required for Complete jobs",
        "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
        "status.startTime: Required value: startTime is required for finished job",
    ] {
        assert!(err.contains(message), "{message} in {err}");
    }
    assert!(err.contains(r#"The Job "x" is invalid"#), "{err}");

    // The controller's writes: started, the success criteria met, then Complete.
    let api = &server.api;
    let mut job = api.get_job("default", "x").unwrap();
    let status = job.status.get_or_insert_with(JobStatus::default);
    status.start_time = Some(time(START));
    status.active = Some(1);
    status.ready = Some(0);
    let mut job = api.replace_job_status("default", "x", job).await.unwrap();
    let status = job.status.get_or_insert_with(JobStatus::default);
    status.active = None;
    status.succeeded = Some(1);
    status.conditions = Some(vec![condition("SuccessCriteriaMet")]);
    let mut job = api.replace_job_status("default", "x", job).await.unwrap();
    let status = job.status.get_or_insert_with(JobStatus::default);
    status.completion_time = Some(time("2023-11-14T22:14:00Z"));
    status
        .conditions
        .get_or_insert_with(Vec::new)
        .push(condition("Complete"));
    api.replace_job_status("default", "x", job).await.unwrap();
    let shown = ok(&kubectl
        .run(&[
            "get",
            "job",
            "x",
            "-o",
            "jsonpath={.status.conditions[*].type}",
        ])
        .await);
    assert_eq!(shown, "SuccessCriteriaMet Complete");

    // Finished is final: neither kubectl nor the typed API takes it back.
    let refused = patch(r#"{"status":{"conditions":null,"completionTime":null}}"#).await;
    let err = stderr(&refused);
    assert!(
        err.contains(
            "status.conditions: Invalid value: cannot disable the terminal Complete=True condition"
        ) && err.contains(
            "status.conditions: Invalid value: cannot disable the SuccessCriteriaMet=True condition"
        ),
        "{err}"
    );
    let mut job = api.get_job("default", "x").unwrap();
    job.status.as_mut().unwrap().succeeded = Some(0);
    let err = api
        .replace_job_status("default", "x", job)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("status.succeeded: Invalid value: 0: cannot decrease the succeeded counter"),
        "{err}"
    );
}
