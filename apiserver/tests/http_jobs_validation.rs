//! Job (`batch/v1`) validation over HTTP: kube-apiserver 1.33's messages and field
//! paths for the counts, the completion modes and their limits, the restart policy,
//! the pod failure and success policies, and the selector, generated or given.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::{Value, json};

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";

/// The causes of a refused create of `obj`.
async fn refused(http: &Http, obj: &Value) -> Vec<String> {
    let (code, status) = http.json("POST", JOBS, obj).await;
    assert_eq!(code, 422, "{status}");
    causes(&status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_modes_and_the_restart_policy_are_refused_with_kubes_messages() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let mut always = batch_job("a");
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
        refused(&http, &batch_job_with("a", negative)).await,
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
        refused(&http, &batch_job_with("a", indexed)).await,
        [
            "spec.completions: Required value: when completion mode is Indexed",
            "spec.parallelism: Invalid value: 100001: must be less than or equal to 100000 when completion mode is Indexed",
        ]
    );
    assert_eq!(
        refused(
            &http,
            &batch_job_with("a", json!({"completionMode": "Random"}))
        )
        .await,
        [
            "spec.completionMode: Unsupported value: \"Random\": supported values: \"NonIndexed\", \"Indexed\""
        ]
    );
    let per_index = json!({"backoffLimitPerIndex": 1, "maxFailedIndexes": 1});
    assert_eq!(
        refused(&http, &batch_job_with("a", per_index)).await,
        [
            "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode",
            "spec.maxFailedIndexes: Invalid value: 1: requires indexed completion mode",
        ]
    );
    let failed = json!({"completionMode": "Indexed", "completions": 2, "maxFailedIndexes": 3});
    assert_eq!(
        refused(&http, &batch_job_with("a", failed)).await,
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
        refused(&http, &batch_job_with("a", huge)).await,
        [
            "spec.maxFailedIndexes: Required value: must be specified when completions is above 100000",
            "spec.parallelism: Invalid value: 20000: must be less than or equal to 10000 when completions are above 100000 and used with backoff limit per index",
        ]
    );
    // kube sets no bound between an Indexed Job's completions and its parallelism:
    // fewer completions than parallelism is a Job that runs at most that many pods.
    let fewer = json!({"completionMode": "Indexed", "completions": 2, "parallelism": 5});
    let (code, j) = http
        .json("POST", JOBS, &batch_job_with("fewer", fewer))
        .await;
    assert_eq!(code, 201, "{j}");
    // The last index's hostname must be a DNS label.
    let dotted = json!({"completionMode": "Indexed", "completions": 3});
    assert_eq!(
        refused(&http, &batch_job_with("a.b", dotted)).await,
        [
            "metadata.name: Invalid value: \"a.b\": will not able to create pod with invalid DNS label: a.b-2"
        ]
    );
    let managed = json!({"managedBy": "mesopod"});
    assert_eq!(
        refused(&http, &batch_job_with("a", managed)).await,
        [
            "spec.managedBy: Invalid value: \"mesopod\": must be a domain-prefixed path (such as \"acme.io/foo\")"
        ]
    );
    let mut bad = batch_job("a");
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
    let mut on_failure = batch_job_with(
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
        refused(&http, &batch_job_with("a", policy(rules))).await,
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
    let mut fail_index = batch_job_with(
        "fail-index",
        json!({"completionMode": "Indexed", "completions": 3, "backoffLimitPerIndex": 2}),
    );
    fail_index["spec"]["podFailurePolicy"] = json!({"rules": [{"action": "FailIndex",
        "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0, 1]}}]});
    let (code, j) = http.json("POST", JOBS, &fail_index).await;
    assert_eq!(code, 201, "{j}");

    let success = json!({"successPolicy": {"rules": [{"succeededCount": 1}]}});
    let found = refused(&http, &batch_job_with("a", success)).await;
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
        refused(&http, &batch_job_with("a", success)).await,
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
        refused(&http, &batch_job_with("a", manual)).await,
        [
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: map[string]string(nil): `selector` does not match template `labels`",
        ]
    );
    let mut other = batch_job_with(
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
    let mut own = batch_job_with("a", json!({"selector": {"matchLabels": {"app": "x"}}}));
    own["spec"]["template"]["metadata"] = json!({"labels": {"app": "x"}});
    let found = refused(&http, &own).await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("spec.selector: Invalid value: v1.LabelSelector{")
            && found[0].ends_with("`selector` not auto-generated"),
        "{found:?}"
    );
    // A generated label the user set otherwise is judged, not overwritten.
    let mut named = batch_job("a");
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
