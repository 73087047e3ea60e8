//! The effective resources of a pod, as admission hooks are shown them:
//! the same figures procurement asks offers for (Kubernetes' rule, limits
//! standing in for missing requests, the configured defaults), so a hook
//! caps exactly what the pod will be charged.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use procurement::PodResourcesProcurement;
use registry::PodTask;

use crate::admission::{Request, ResourceList};

const NAMES: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"];

/// Kubernetes quantities for Mesos amounts (cpus, mem MB, disk MB, gpus);
/// zero amounts are left out.
fn quantities(amounts: [f64; 4], keep: [bool; 4]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (i, v) in amounts.iter().enumerate() {
        if !keep[i] || *v <= 0.0 {
            continue;
        }
        let q = match i {
            0 => format!("{}m", (v * 1000.0).round()),
            1 | 2 => format!("{}Mi", v.round()),
            _ => format!("{}", v.round()),
        };
        out.insert(NAMES[i].to_owned(), q);
    }
    out
}

/// The pod's limits, where every container sets one (otherwise the pod
/// has no limit for that resource): the containers' limits summed by the
/// same rule as requests.
fn limits(needs: &PodResourcesProcurement, pod: &Pod) -> BTreeMap<String, String> {
    let Some(spec) = &pod.spec else {
        return BTreeMap::new();
    };
    let mut keep = [true; 4];
    for c in spec.containers.iter() {
        let l = c.resources.as_ref().and_then(|r| r.limits.as_ref());
        for (i, name) in NAMES.iter().enumerate() {
            keep[i] &= l.is_some_and(|l| l.contains_key(*name));
        }
    }
    if !keep.iter().any(|k| *k) {
        return BTreeMap::new();
    }
    let mut as_requests = pod.clone();
    if let Some(spec) = as_requests.spec.as_mut() {
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            if let Some(r) = c.resources.as_mut() {
                r.requests = r.limits.clone();
            }
        }
    }
    let Ok(task) = PodTask::new(Arc::new(as_requests), Vec::new(), std::time::UNIX_EPOCH) else {
        return BTreeMap::new();
    };
    needs
        .pod_needs(&task)
        .map(|a| quantities(a, keep))
        .unwrap_or_default()
}

/// The admission request for `task`'s attempt number `attempt` to place `pod`.
pub fn admission_request(
    needs: &PodResourcesProcurement,
    task: &PodTask,
    pod: &Pod,
    attempt: u32,
) -> Request {
    let requests = needs.pod_needs(task).ok();
    let cpu_millis = requests.map_or(0, |a| (a[0] * 1000.0).round().max(0.0) as u64);
    let resources = ResourceList {
        requests: requests
            .map(|a| quantities(a, [true; 4]))
            .unwrap_or_default(),
        limits: limits(needs, pod),
    };
    Request::for_pod(pod, &task.id.value, attempt, resources, cpu_millis)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use procurement::ResourceDefaults;

    fn pod(containers: serde_json::Value) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "team"},
                "spec": {"containers": containers}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn requests_sum_the_containers_and_limits_need_every_container() {
        let needs = PodResourcesProcurement::new(ResourceDefaults::default()).unwrap();
        let p = pod(serde_json::json!([
            {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"cpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1", "memory": "64Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}
        ]));
        let task = PodTask::new(p.clone(), Vec::new(), std::time::UNIX_EPOCH).unwrap();
        let req = admission_request(&needs, &task, &p, 3);
        assert_eq!(req.resources.requests["cpu"], "1500m");
        assert_eq!(req.resources.requests["memory"], "192Mi");
        assert_eq!(
            req.resources.limits.get("cpu").map(String::as_str),
            Some("3000m")
        );
        assert!(
            !req.resources.limits.contains_key("memory"),
            "container a has no memory limit"
        );
        assert_eq!(req.cpu_millis(), 1500);
        assert_eq!((req.tenant.as_str(), req.attempt), ("team", 3));
    }
}
