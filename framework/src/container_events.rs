//! The scheduler's side of the executor's container events: the kubelet
//! events an executor put in `TaskStatus.data` (see
//! [`executor::events`]) become core/v1 Events about the pod, written by
//! the core (the one writer) when the update is applied, so a resent
//! update (a duplicate) writes nothing twice. They are recorded through
//! `Api::record_event`: repeats are aggregated into one Event with a
//! count, and a crash-looping pod's flood is rate-limited.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Event, EventSource};
use mesos::proto::TaskStatus;
use registry::PodTask;

use crate::objects::{PodRef, event_about};

/// The component kubelet's events name.
const KUBELET: &str = "kubelet";

/// The Events an applied update carries for `task`'s pod.
pub fn events(status: &TaskStatus, task: &PodTask, now: SystemTime) -> Vec<Event> {
    let Some(data) = status.data.as_deref() else {
        return Vec::new();
    };
    let found = executor::events::from_task_data(data);
    if found.is_empty() {
        return Vec::new();
    }
    let key = task.pod_key();
    let host = task.spec.as_ref().map(|s| s.hostname.clone());
    let about = PodRef {
        namespace: &key.namespace,
        name: &key.name,
        uid: Some(key.uid.as_str()).filter(|u| !u.is_empty()),
        resource_version: None,
    };
    found
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            // Events of one update share `now`: the index keeps their names apart.
            let at = now + std::time::Duration::from_nanos(u64::try_from(i).unwrap_or(0));
            let mut ev = event_about(&about, &e.type_, &e.reason, e.message, at);
            if !e.field_path.is_empty() {
                ev.involved_object.field_path = Some(e.field_path);
            }
            ev.source = Some(EventSource {
                component: Some(KUBELET.into()),
                host: host.clone(),
            });
            ev.reporting_component = Some(KUBELET.into());
            ev.reporting_instance = host.clone();
            // Repeats the executor merged; the shim's correlator adds them up.
            ev.count = Some(i32::try_from(e.count).unwrap_or(i32::MAX));
            ev
        })
        .collect()
}
