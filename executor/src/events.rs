//! Container lifecycle events (kubelet's `Pulling`, `Pulled`, `Created`,
//! `Started`, `Killing`, `BackOff`, `Failed`), carried to the scheduler in
//! `TaskStatus.data` beside the pod status: the JSON object is the
//! `PodStatus` with one more member, [`EVENTS_KEY`], which Kubernetes'
//! decoders ignore. The scheduler writes them as Events.

use k8s_openapi::api::core::v1::PodStatus;
use serde::{Deserialize, Serialize};

/// The member of `TaskStatus.data` that holds the events.
pub const EVENTS_KEY: &str = "mesopodEvents";

/// One event about a container of the pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerEvent {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// kubelet's reason.
    pub reason: String,
    /// kubelet's message.
    pub message: String,
    /// `spec.containers{name}` (or `spec.initContainers{name}`); empty for
    /// the pod itself.
    #[serde(default)]
    pub field_path: String,
    /// When, in RFC 3339 (so a resent update is recognised); the last
    /// time when `count` is more than 1.
    pub time: String,
    /// How many times it happened since the last update (identical events
    /// of one update are sent once, counted).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// Identical events (type, reason, message and field path) merged into
/// the first, counted, with the last one's time; order kept.
pub fn coalesce(events: Vec<ContainerEvent>) -> Vec<ContainerEvent> {
    let mut out: Vec<ContainerEvent> = Vec::with_capacity(events.len());
    for e in events {
        let same = |o: &&mut ContainerEvent| {
            o.reason == e.reason
                && o.message == e.message
                && o.field_path == e.field_path
                && o.type_ == e.type_
        };
        match out.iter_mut().find(|o| same(o)) {
            Some(o) => {
                o.count = o.count.saturating_add(e.count);
                o.time = e.time;
            }
            None => out.push(e),
        }
    }
    out
}

impl ContainerEvent {
    /// An event now.
    pub fn new(type_: &str, reason: &str, message: String, field_path: String) -> ContainerEvent {
        let time = crate::status::time(std::time::SystemTime::now())
            .map(|t| t.0.to_string())
            .unwrap_or_default();
        ContainerEvent {
            type_: type_.to_owned(),
            reason: reason.to_owned(),
            message,
            field_path,
            time,
            count: 1,
        }
    }
}

/// `TaskStatus.data`: the status, with the events when there are any.
pub fn task_data(status: &PodStatus, events: &[ContainerEvent]) -> Option<Vec<u8>> {
    if events.is_empty() {
        return serde_json::to_vec(status).ok();
    }
    let mut value = serde_json::to_value(status).ok()?;
    let object = value.as_object_mut()?;
    object.insert(EVENTS_KEY.to_owned(), serde_json::to_value(events).ok()?);
    serde_json::to_vec(&value).ok()
}

/// The events in a `TaskStatus.data` (none when absent or malformed).
pub fn from_task_data(data: &[u8]) -> Vec<ContainerEvent> {
    #[derive(Deserialize)]
    struct Only {
        #[serde(rename = "mesopodEvents", default)]
        events: Vec<ContainerEvent>,
    }
    serde_json::from_slice::<Only>(data)
        .map(|o| o.events)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn events_ride_beside_the_status_and_do_not_disturb_it() {
        let status = PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        };
        let ev = ContainerEvent::new("Normal", "Pulled", "x".into(), "spec.containers{c}".into());
        let data = task_data(&status, std::slice::from_ref(&ev)).unwrap();
        let back: PodStatus = serde_json::from_slice(&data).unwrap();
        assert_eq!(back.phase.as_deref(), Some("Pending"));
        assert_eq!(from_task_data(&data), vec![ev]);
        assert!(from_task_data(&task_data(&status, &[]).unwrap()).is_empty());
    }

    #[test]
    fn identical_events_are_sent_once_with_their_count() {
        let ev = |m: &str| {
            ContainerEvent::new(
                "Warning",
                "Unhealthy",
                m.into(),
                "spec.containers{c}".into(),
            )
        };
        let merged = coalesce(vec![ev("a"), ev("b"), ev("a"), ev("a")]);
        let seen: Vec<(&str, u32)> = merged
            .iter()
            .map(|e| (e.message.as_str(), e.count))
            .collect();
        assert_eq!(seen, [("a", 3), ("b", 1)]);
        let data = task_data(&PodStatus::default(), &merged).unwrap();
        assert_eq!(from_task_data(&data), merged, "the count survives the wire");
    }
}
