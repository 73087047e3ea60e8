//! Two agents whose pods run in real containers, from an image pulled out of
//! a real `docker-registry`: the cluster of the sharing tests (quota,
//! LimitRange, preemption, disruption, cordon and drain, maintenance), which
//! move pods between two agents as a platform team's cluster does.

use std::time::Duration;

use framework::app::App;
use images::testing::Registry;
use k8s_openapi::api::core::v1::Pod;

use super::{prerequisites, test_image};
use crate::common::cluster::{Setup, agent, app_config};

/// The cluster, with what must outlive it.
pub struct RegistryAgents {
    pub app: App,
    /// The test image's reference in the registry (`127.0.0.1:<port>/test/busybox:1`).
    pub image: String,
    /// What a container's `imageID` starts with when it was pulled from there.
    pulled: String,
    // Dropped after the app: its executors may still pull while it stops.
    _registry: Registry,
}

/// `agent-0` and `agent-1`, 3 cpus each, on the embedded container runtime,
/// once both their Nodes exist; `None` (skipped loudly) outside CI where
/// root, busybox or docker-registry is missing, as [`prerequisites`] says.
///
/// Each agent keeps its own image store in its work directory, as a real
/// agent does, so each pulls the image the first time it runs a pod.
pub async fn two_registry_agents(test: &str) -> Option<RegistryAgents> {
    if !prerequisites(false) {
        return None;
    }
    let registry = Registry::start_or_skip(test).await?;
    let image = registry.push("test/busybox", "1", &test_image()).await;
    let pulled = format!("{}/test/busybox@sha256:", registry.host());
    let mut cfg = app_config(Setup {
        agents: (0..2)
            .map(|i| agent("cpus:3;mem:16384;disk:20480;ports:[31000-31100]", "", i))
            .collect(),
        ..Setup::default()
    });
    cfg.executor.args = vec!["--container-runtime=embedded".into()];
    let app = App::start(cfg).await.expect("mesopod starts");
    let api = app.api();
    testkit::wait_until(
        "both agents' Nodes",
        Duration::from_secs(60),
        async || api.list_nodes("", "").unwrap().items.len(),
        |n| *n == 2,
    )
    .await;
    Some(RegistryAgents {
        app,
        image,
        pulled,
        _registry: registry,
    })
}

impl RegistryAgents {
    /// Panics unless `pod`'s first container runs, in a container of the
    /// image pulled from the registry, as its status says.
    pub fn assert_pulled(&self, pod: &Pod) {
        let status = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.first());
        let running = status.is_some_and(|cs| {
            cs.image_id.starts_with(&self.pulled)
                && cs.container_id.is_some()
                && cs.state.as_ref().is_some_and(|s| s.running.is_some())
        });
        assert!(running, "not running from {}: {status:?}", self.pulled);
    }

    /// Stops the app, its executors and their containers, then the registry.
    pub async fn shutdown(self) {
        self.app.shutdown().await;
    }

    /// [`RegistryAgents::assert_pulled`] for each live Running pod in
    /// `default` that `selector` selects; how many there were.
    pub fn assert_all_pulled(&self, selector: &str) -> usize {
        let pods = self
            .app
            .api()
            .list_pods(Some("default"), selector, "")
            .unwrap()
            .items;
        let live = pods.iter().filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        });
        live.inspect(|p| self.assert_pulled(p)).count()
    }
}
