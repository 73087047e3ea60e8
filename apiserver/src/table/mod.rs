//! Server-side printing: `meta.k8s.io/v1` Tables with the columns kubectl users know.
//! Priority-0 columns always print; priority-1 columns only with `-o wide`.

use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use serde_json::{Value, json};

use crate::clock::age;
use crate::resource::Resource;

mod columns;
mod printers;

pub use columns::columns;
pub(crate) use printers::created;
pub use printers::pod_status_reason;
use printers::{event_cells, node_cells, pod_cells};

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Include {
    /// Nothing.
    None,
    /// `PartialObjectMetadata` (kubectl's default).
    #[default]
    Metadata,
    /// The full object.
    Object,
}

impl Include {
    /// Parses `includeObject` (empty means Metadata).
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// The cells of one object's row (unreadable objects print their name and `<unknown>`).
pub fn cells(resource: Resource, obj: &Value, now: SystemTime) -> Vec<Value> {
    let name = obj
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    let fallback = || {
        let mut row = vec![name.clone()];
        row.resize(columns(resource).len(), json!("<unknown>"));
        row
    };
    match resource {
        Resource::Pods => Pod::deserialize_from(obj)
            .map(|p| pod_cells(obj, &p, now))
            .unwrap_or_else(fallback),
        Resource::Nodes => Node::deserialize_from(obj)
            .map(|n| node_cells(obj, &n, now))
            .unwrap_or_else(fallback),
        Resource::Events => Event::deserialize_from(obj)
            .map(|e| event_cells(&e, now))
            .unwrap_or_else(fallback),
        Resource::Namespaces => vec![
            name,
            json!(
                obj.pointer("/status/phase")
                    .and_then(Value::as_str)
                    .unwrap_or("Active")
            ),
            json!(age(created(obj), now)),
        ],
        other => crate::kinds::cells(other, obj, now).unwrap_or_else(fallback),
    }
}

trait FromValue: Sized {
    fn deserialize_from(v: &Value) -> Option<Self>;
}

impl<T: serde::de::DeserializeOwned> FromValue for T {
    fn deserialize_from(v: &Value) -> Option<Self> {
        T::deserialize(v).ok()
    }
}

/// `PartialObjectMetadata` of an object.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// One row.
pub fn row(resource: Resource, obj: &Value, now: SystemTime, include: Include) -> Value {
    let mut row = json!({"cells": cells(resource, obj, now)});
    match include {
        Include::None => {}
        Include::Metadata => row["object"] = partial_metadata(obj),
        Include::Object => row["object"] = obj.clone(),
    }
    row
}

/// A Table of `objs`; `with_columns` is false for watch events after the first.
pub fn table(
    resource: Resource,
    objs: &[Arc<Value>],
    rv: Option<u64>,
    now: SystemTime,
    include: Include,
    with_columns: bool,
) -> Value {
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": if with_columns { Value::Array(columns(resource)) } else { Value::Null },
        "rows": objs.iter().map(|o| row(resource, o, now, include)).collect::<Vec<_>>(),
    });
    if let Some(rv) = rv {
        t["metadata"]["resourceVersion"] = json!(rv.to_string());
    }
    t
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::clock::format_time;
    use std::time::Duration;

    #[test]
    fn pod_rows_show_ready_status_restarts_and_age() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let created = format_time(now - Duration::from_secs(75));
        let pod = json!({"metadata": {"name": "web", "creationTimestamp": created},
            "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "image": "x", "imageID": "", "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 1, "image": "y", "imageID": "", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let c = cells(Resource::Pods, &pod, now);
        assert_eq!(
            c,
            vec![
                json!("web"),
                json!("1/2"),
                json!("CrashLoopBackOff"),
                json!("3"),
                json!("75s"),
                json!("10.0.0.1"),
                json!("n1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn terminating_pods_say_so() {
        let pod = json!({"metadata": {"name": "a", "deletionTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a", "image": "x"}]}, "status": {"phase": "Running"}});
        assert_eq!(
            cells(Resource::Pods, &pod, SystemTime::now())[2],
            json!("Terminating")
        );
    }

    #[test]
    fn every_row_has_one_cell_per_column() {
        let now = SystemTime::now();
        for r in [
            Resource::Pods,
            Resource::Nodes,
            Resource::Events,
            Resource::Namespaces,
            Resource::ConfigMaps,
            Resource::Secrets,
            Resource::ServiceAccounts,
        ] {
            let obj = json!({"metadata": {"name": "x"}, "involvedObject": {}});
            assert_eq!(cells(r, &obj, now).len(), columns(r).len(), "{r:?}");
        }
    }
}
