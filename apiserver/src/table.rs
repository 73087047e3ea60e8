//! Server-side printing: `meta.k8s.io/v1` Tables with the columns kubectl users know.
//! Priority-0 columns always print; priority-1 columns only with `-o wide`.

use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use serde_json::{Value, json};

use crate::clock::{age, format_time};
use crate::resource::Resource;

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

fn col(name: &str, ty: &str, format: &str, priority: u8, description: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

/// The column definitions of `resource`.
pub fn columns(resource: Resource) -> Vec<Value> {
    let name = col(
        "Name",
        "string",
        "name",
        0,
        "Name must be unique within a namespace.",
    );
    let age = col(
        "Age",
        "string",
        "",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    match resource {
        Resource::Pods => vec![
            name,
            col(
                "Ready",
                "string",
                "",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            col(
                "Status",
                "string",
                "",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            col(
                "Restarts",
                "string",
                "",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            age,
            col(
                "IP",
                "string",
                "",
                1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            col(
                "Node",
                "string",
                "",
                1,
                "NodeName is a request to schedule this pod onto a specific node.",
            ),
            col(
                "Nominated Node",
                "string",
                "",
                1,
                "nominatedNodeName is set when this pod preempts other pods on the node.",
            ),
            col(
                "Readiness Gates",
                "string",
                "",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness.",
            ),
        ],
        Resource::Nodes => vec![
            name,
            col("Status", "string", "", 0, "The status of the node"),
            col("Roles", "string", "", 0, "The roles of the node"),
            age,
            col(
                "Version",
                "string",
                "",
                0,
                "Kubelet Version reported by the node.",
            ),
            col(
                "Internal-IP",
                "string",
                "",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ),
            col(
                "External-IP",
                "string",
                "",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ),
            col(
                "OS-Image",
                "string",
                "",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            col(
                "Kernel-Version",
                "string",
                "",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            col(
                "Container-Runtime",
                "string",
                "",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        Resource::Events => vec![
            col(
                "Last Seen",
                "string",
                "",
                0,
                "The time at which the most recent occurrence of this event was recorded.",
            ),
            col(
                "Type",
                "string",
                "",
                0,
                "Type of this event (Normal, Warning), new types could be added in the future",
            ),
            col(
                "Reason",
                "string",
                "",
                0,
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            col(
                "Object",
                "string",
                "",
                0,
                "The object that this event is about.",
            ),
            col(
                "Subobject",
                "string",
                "",
                1,
                "The field path of the involved object this event is about.",
            ),
            col(
                "Source",
                "string",
                "",
                1,
                "The component reporting this event.",
            ),
            col(
                "Message",
                "string",
                "",
                0,
                "A human-readable description of the status of this operation.",
            ),
            col(
                "First Seen",
                "string",
                "",
                1,
                "The time at which the event was first recorded.",
            ),
            col(
                "Count",
                "string",
                "",
                1,
                "The number of times this event has occurred.",
            ),
            col(
                "Name",
                "string",
                "name",
                1,
                "Name must be unique within a namespace.",
            ),
        ],
        Resource::Namespaces => vec![
            name,
            col("Status", "string", "", 0, "The status of the namespace"),
            age,
        ],
    }
}

fn none_if_empty(s: Option<&str>) -> String {
    match s {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "<none>".into(),
    }
}

fn created(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
}

fn pod_cells(obj: &Value, pod: &Pod, now: SystemTime) -> Vec<Value> {
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let statuses = status.container_statuses.clone().unwrap_or_default();
    let ready = statuses.iter().filter(|s| s.ready).count();
    let restarts: i32 = statuses.iter().map(|s| s.restart_count).sum();
    let readiness = spec.readiness_gates.as_ref().map(|gates| {
        let conds = status.conditions.clone().unwrap_or_default();
        let ok = gates
            .iter()
            .filter(|g| {
                conds
                    .iter()
                    .any(|c| c.type_ == g.condition_type && c.status == "True")
            })
            .count();
        format!("{ok}/{}", gates.len())
    });
    vec![
        json!(pod.metadata.name.clone().unwrap_or_default()),
        json!(format!("{ready}/{}", spec.containers.len())),
        json!(pod_status_reason(pod)),
        json!(restarts.to_string()),
        json!(age(created(obj), now)),
        json!(none_if_empty(status.pod_ip.as_deref())),
        json!(none_if_empty(spec.node_name.as_deref())),
        json!(none_if_empty(status.nominated_node_name.as_deref())),
        json!(readiness.unwrap_or_else(|| "<none>".into())),
    ]
}

/// The STATUS column of a pod, following kubectl's printer: container waiting/terminated
/// reasons, `Init:x/y` while init containers run, `Terminating` once deletion began.
pub fn pod_status_reason(pod: &Pod) -> String {
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let mut reason = status
        .reason
        .clone()
        .or(status.phase.clone())
        .unwrap_or_else(|| "Pending".into());
    let inits = status.init_container_statuses.clone().unwrap_or_default();
    let init_total = spec.init_containers.as_ref().map_or(0, Vec::len);
    let mut initializing = false;
    for (i, s) in inits.iter().enumerate() {
        let state = s.state.clone().unwrap_or_default();
        if let Some(t) = &state.terminated {
            if t.exit_code == 0 {
                continue;
            }
            reason = match t.reason.as_deref() {
                Some(r) if !r.is_empty() => format!("Init:{r}"),
                _ => format!("Init:ExitCode:{}", t.exit_code),
            };
        } else if let Some(w) = state.waiting.as_ref().filter(|w| {
            w.reason
                .as_deref()
                .is_some_and(|r| !r.is_empty() && r != "PodInitializing")
        }) {
            reason = format!("Init:{}", w.reason.clone().unwrap_or_default());
        } else {
            reason = format!("Init:{i}/{init_total}");
        }
        initializing = true;
        break;
    }
    if !initializing {
        let mut running = false;
        for s in status
            .container_statuses
            .clone()
            .unwrap_or_default()
            .iter()
            .rev()
        {
            let state = s.state.clone().unwrap_or_default();
            if let Some(w) = state
                .waiting
                .as_ref()
                .and_then(|w| w.reason.clone())
                .filter(|r| !r.is_empty())
            {
                reason = w;
            } else if let Some(t) = &state.terminated {
                reason = match t.reason.as_deref() {
                    Some(r) if !r.is_empty() => r.to_string(),
                    _ if t.signal.is_some_and(|s| s != 0) => {
                        format!("Signal:{}", t.signal.unwrap_or(0))
                    }
                    _ => format!("ExitCode:{}", t.exit_code),
                };
            } else if state.running.is_some() && s.ready {
                running = true;
            }
        }
        if reason == "Completed" && running {
            reason = "Running".into();
        }
    }
    if pod.metadata.deletion_timestamp.is_some() {
        reason = if status.reason.as_deref() == Some("NodeLost") {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    reason
}

fn node_cells(obj: &Value, node: &Node, now: SystemTime) -> Vec<Value> {
    let status = node.status.clone().unwrap_or_default();
    let mut state = match status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
    {
        Some(c) if c.status == "True" => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
    {
        state.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = node
        .metadata
        .labels
        .iter()
        .flatten()
        .filter_map(|(k, _)| {
            k.strip_prefix("node-role.kubernetes.io/")
                .map(str::to_string)
        })
        .filter(|r| !r.is_empty())
        .collect();
    roles.sort();
    let addr = |ty: &str| {
        status
            .addresses
            .iter()
            .flatten()
            .find(|a| a.type_ == ty)
            .map(|a| a.address.clone())
    };
    let info = status.node_info.clone().unwrap_or_default();
    vec![
        json!(node.metadata.name.clone().unwrap_or_default()),
        json!(state),
        json!(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }),
        json!(age(created(obj), now)),
        json!(info.kubelet_version),
        json!(addr("InternalIP").unwrap_or_else(|| "<none>".into())),
        json!(addr("ExternalIP").unwrap_or_else(|| "<none>".into())),
        json!(if info.os_image.is_empty() {
            "<unknown>".to_string()
        } else {
            info.os_image
        }),
        json!(if info.kernel_version.is_empty() {
            "<unknown>".to_string()
        } else {
            info.kernel_version
        }),
        json!(if info.container_runtime_version.is_empty() {
            "<unknown>".to_string()
        } else {
            info.container_runtime_version
        }),
    ]
}

fn event_cells(ev: &Event, now: SystemTime) -> Vec<Value> {
    let time = |t: Option<String>| {
        t.or_else(|| {
            ev.event_time.as_ref().map(|m| {
                format_time(crate::api::system_time(
                    &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(m.0),
                ))
            })
        })
    };
    let last = time(
        ev.last_timestamp
            .as_ref()
            .map(|t| format_time(crate::api::system_time(t))),
    );
    let first = time(
        ev.first_timestamp
            .as_ref()
            .map(|t| format_time(crate::api::system_time(t))),
    );
    let io = &ev.involved_object;
    let source = ev
        .source
        .as_ref()
        .and_then(|s| s.component.clone())
        .or_else(|| ev.reporting_component.clone())
        .unwrap_or_default();
    vec![
        json!(age(last.as_deref(), now)),
        json!(ev.type_.clone().unwrap_or_default()),
        json!(ev.reason.clone().unwrap_or_default()),
        json!(format!(
            "{}/{}",
            io.kind.clone().unwrap_or_default().to_lowercase(),
            io.name.clone().unwrap_or_default()
        )),
        json!(io.field_path.clone().unwrap_or_default()),
        json!(source),
        json!(ev.message.clone().unwrap_or_default()),
        json!(age(first.as_deref(), now)),
        json!(ev.count.unwrap_or(1).to_string()),
        json!(ev.metadata.name.clone().unwrap_or_default()),
    ]
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
        ] {
            let obj = json!({"metadata": {"name": "x"}, "involvedObject": {}});
            assert_eq!(cells(r, &obj, now).len(), columns(r).len(), "{r:?}");
        }
    }
}
