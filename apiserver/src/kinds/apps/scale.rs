//! The `scale` subresource: a workload's `spec.replicas` as an `autoscaling/v1` Scale,
//! which is what `kubectl scale` and autoscalers read and write.

use k8s_openapi::api::autoscaling::v1::Scale;
use serde_json::{Value, json};

use super::Workload;

/// The Scale of `obj`: its name, namespace, uid, resourceVersion and creation time, the
/// desired replicas, the observed ones and the selector as a string.
pub(crate) fn of<K: Workload>(obj: &K) -> Value {
    let m = obj.metadata();
    let selector = obj.selector_string();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m.name,
            "namespace": m.namespace,
            "uid": m.uid,
            "resourceVersion": m.resource_version,
            "creationTimestamp": m.creation_timestamp,
        },
        "spec": {"replicas": obj.replicas()},
        "status": {"replicas": obj.status_replicas(), "selector": selector},
    })
}

/// The replicas a Scale asks for (`spec.replicas`, 0 when absent, as Go's zero value).
pub(crate) fn replicas(scale: &Scale) -> i32 {
    scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}
