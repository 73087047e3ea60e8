//! A Deployment on real containers: a new image that cannot be pulled never becomes
//! available, the rollout ends in ProgressDeadlineExceeded (`kubectl rollout status`
//! fails) while the old pods keep serving, and `rollout undo` restores it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::containers_support;

use std::time::Duration;

use containers_support::*;
use images::testing::Registry;
use k8s_openapi::api::core::v1::Pod;
use testkit::{Kubectl, ok, stderr, wait_until};

const T: Duration = Duration::from_secs(90);

fn deployment(image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  progressDeadlineSeconds: 5\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: main\n        image: {image}\n        command: [\"sleep\", \"3600\"]\n"
    )
}

fn waiting_reason(p: &Pod) -> Option<String> {
    let cs = p.status.as_ref()?.container_statuses.as_ref()?.first()?;
    cs.state.as_ref()?.waiting.as_ref()?.reason.clone()
}

/// `(image, running and ready)` of each pod of the Deployment not being deleted.
fn pods(app: &framework::app::App) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = app
        .api()
        .list_pods(Some("default"), "app=web", "")
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let image = p.spec.unwrap().containers[0].image.clone().unwrap();
            (image, ready)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_image_exceeds_the_progress_deadline_and_undo_restores_availability() {
    if !prerequisites(false) {
        return;
    }
    let Some(registry) = Registry::start_or_skip("a Deployment's bad image").await else {
        return;
    };
    let (_keep, store) = store();
    let good = registry.push("test/web", "1", &test_image()).await;
    let bad = format!("{}/test/web:missing", registry.host());
    let app = cluster("embedded", &store).await;
    let k = Kubectl::new(&app.api_url());
    ok(&k
        .run_stdin(&["apply", "-f", "-"], Some(&deployment(&good)))
        .await);
    let out = k
        .run(&["rollout", "status", "deploy/web", "--timeout=90s"])
        .await;
    assert!(ok(&out).contains("successfully rolled out"));

    ok(&k
        .run(&["set", "image", "deploy/web", &format!("main={bad}")])
        .await);
    let out = k
        .run(&["rollout", "status", "deploy/web", "--timeout=90s"])
        .await;
    assert!(!out.status.success(), "{}", ok(&out));
    assert!(
        stderr(&out).contains("deployment \"web\" exceeded its progress deadline"),
        "{}",
        stderr(&out)
    );
    // The surge pod waits on its pull; the two old ones kept serving (25% of 2 may be
    // unavailable: none).
    let stuck = wait_until(
        "the new pod's pull to fail",
        T,
        async || {
            app.api()
                .list_pods(Some("default"), "app=web", "")
                .unwrap()
                .items
                .into_iter()
                .find(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some(&bad))
        },
        |p| p.as_ref().and_then(waiting_reason).is_some(),
    )
    .await
    .unwrap();
    let reason = waiting_reason(&stuck).unwrap();
    assert!(
        reason == "ErrImagePull" || reason == "ImagePullBackOff",
        "{reason}"
    );
    assert_eq!(
        pods(&app),
        vec![
            (good.clone(), true),
            (good.clone(), true),
            (bad.clone(), false)
        ]
    );
    let d = app.api().get_deployment("default", "web").unwrap();
    let status = d.status.unwrap();
    assert_eq!(status.available_replicas, Some(2));
    let progressing = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap();
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_deref()),
        ("False", Some("ProgressDeadlineExceeded"))
    );

    ok(&k.run(&["rollout", "undo", "deploy/web"]).await);
    let out = k
        .run(&["rollout", "status", "deploy/web", "--timeout=90s"])
        .await;
    assert!(ok(&out).contains("successfully rolled out"));
    wait_until(
        "the bad pod gone",
        T,
        async || pods(&app),
        |p| *p == vec![(good.clone(), true), (good.clone(), true)],
    )
    .await;
    app.shutdown().await;
}
