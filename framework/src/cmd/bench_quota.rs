//! `mesopod bench --quota-namespaces N`: a scenario's pods spread over N namespaces,
//! each under a ResourceQuota that covers them (their count, cpu and memory), so
//! every create is charged to a quota: #46's figure, `basic` with quotas in 10
//! namespaces, set against `basic` alone.

use std::time::Duration;

use anyhow::Context as _;
use apiserver::Api;
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};

/// Creates the namespaces `tenant-0` … `tenant-{n-1}`, each with a quota larger than
/// any run, and waits for the controller's first count of each (a quota charges
/// nothing before it); returns their names.
pub(super) async fn tenants(api: &Api, n: usize, timeout: Duration) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("tenant-{i}");
        let ns: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?;
        api.create_namespace(ns)
            .await
            .context("a tenant namespace")?;
        let quota: ResourceQuota = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "tenant"},
            "spec": {"hard": {"pods": "1000000", "requests.cpu": "100k", "requests.memory": "100Ti"}},
        }))?;
        api.create_resourcequota(&name, quota)
            .await
            .context("a tenant's quota")?;
        names.push(name);
    }
    for ns in &names {
        let current = api.get_resourcequota(ns, "tenant")?;
        let watch = api.watch_resourcequotas(Some(ns), api.resource_version())?;
        super::bench_measure::first_watched(
            "a tenant quota's first count",
            &current,
            watch,
            timeout,
            |q| Ok(q.status.as_ref().and_then(|s| s.used.as_ref()).is_some()),
        )
        .await?;
    }
    Ok(names)
}
