//! The cells of one row per resource, computed as kubectl's server-side printers do.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use serde_json::{Value, json};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::system_time;
use crate::clock::{age, since};

fn none_if_empty(s: Option<&str>) -> String {
    match s {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "<none>".into(),
    }
}

pub(crate) fn created(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
}

pub(crate) fn pod_cells(obj: &Value, pod: &Pod, now: SystemTime) -> Vec<Value> {
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

pub(crate) fn node_cells(obj: &Value, node: &Node, now: SystemTime) -> Vec<Value> {
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

pub(crate) fn event_cells(ev: &Event, now: SystemTime) -> Vec<Value> {
    // Events from the events.k8s.io API carry only eventTime.
    let micro = ev.event_time.as_ref().map(|m| system_time(&Time(m.0)));
    let last = ev.last_timestamp.as_ref().map(system_time).or(micro);
    let first = ev.first_timestamp.as_ref().map(system_time).or(micro);
    let io = &ev.involved_object;
    let source = ev
        .source
        .as_ref()
        .and_then(|s| s.component.clone())
        .or_else(|| ev.reporting_component.clone())
        .unwrap_or_default();
    vec![
        json!(since(last, now)),
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
        json!(since(first, now)),
        json!(ev.count.unwrap_or(1).to_string()),
        json!(ev.metadata.name.clone().unwrap_or_default()),
    ]
}
