//! An agent's image store on its Node, as kubelet reports it: once a pod
//! has run an image pulled from a registry, `kubectl get node` shows the
//! image in `status.images` (its digest name and its tag, a nonzero size),
//! and the Node's `ephemeral-storage` allocatable is the agent's offered
//! disk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::time::Duration;

use common::cluster::*;
use containers_support::*;
use images::testing::Registry;
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(60);

/// The one Node, as kubectl shows it.
async fn node(k: &Kubectl) -> serde_json::Value {
    let list: serde_json::Value =
        serde_json::from_str(&ok(&k.run(&["get", "nodes", "-o", "json"]).await)).unwrap();
    list["items"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pulled_image_shows_on_its_node_with_its_names_and_size() {
    if !prerequisites(false) {
        return;
    }
    let Some(registry) = Registry::start_or_skip("node images").await else {
        return;
    };
    let image = registry.push("test/nodeimages", "1", &test_image()).await;
    let (_keep, store) = store();
    let app = cluster("embedded", &store).await;
    let k = Kubectl::new(&app.api_url());
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pulled\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    command: [\"true\"]\n"
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    let done = wait_pod(app.api(), "default", "pulled", T, |p| {
        phase(p) == "Succeeded" || phase(p) == "Failed"
    })
    .await;
    assert_eq!(phase(&done), "Succeeded", "{:?}", done.status);

    let digest_name = format!("{}/test/nodeimages@sha256:", registry.host());
    let listed = |n: &serde_json::Value| {
        n["status"]["images"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| {
                i["names"]
                    .as_array()
                    .is_some_and(|names| names.iter().any(|x| x == image.as_str()))
            })
            .cloned()
    };
    let seen = wait_until(
        "the pulled image on the Node",
        T,
        async || node(&k).await,
        |n| listed(n).is_some(),
    )
    .await;
    let entry = listed(&seen).unwrap();
    let names: Vec<&str> = entry["names"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        names[0].starts_with(&digest_name),
        "the digest name first, as kubelet lists them: {names:?}"
    );
    assert!(names.contains(&image.as_str()), "{names:?}");
    assert!(entry["sizeBytes"].as_i64().unwrap() > 0, "{entry}");
    // The agent offers disk:20480 (MiB): what pods may use.
    assert_eq!(
        seen["status"]["allocatable"]["ephemeral-storage"], "20480Mi",
        "{}",
        seen["status"]
    );
    assert!(
        seen["status"]["capacity"]["ephemeral-storage"].is_string(),
        "{}",
        seen["status"]
    );

    ok(&k.run(&["delete", "pod", "pulled", "--wait=false"]).await);
    app.shutdown().await;
}
