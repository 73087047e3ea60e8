//! Builders shared by the integration tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{TaskId, TaskState, TaskStatus};
use registry::PodTask;

/// A point in time, `secs` after the epoch.
pub fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

/// A pod with a namespace, name and uid.
pub fn pod(ns: &str, name: &str, uid: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    })
}

/// A new task for pod `ns/name` (uid `name-uid`), created at time 0.
pub fn task(ns: &str, name: &str) -> PodTask {
    PodTask::new(
        pod(ns, name, &format!("{name}-uid")),
        vec!["*".into()],
        at(0),
    )
    .unwrap()
}

/// A status update as the master would relay an agent's: with a uuid.
#[derive(Clone, Debug)]
pub struct Update {
    pub status: TaskStatus,
}

impl Update {
    pub fn new(id: &TaskId, state: TaskState) -> Self {
        Update {
            status: TaskStatus {
                task_id: Some(id.clone()),
                state: state as i32,
                ..TaskStatus::default()
            },
        }
    }
    pub fn ts(mut self, secs: f64) -> Self {
        self.status.timestamp = Some(secs);
        self
    }
    pub fn uuid(mut self, n: u8) -> Self {
        self.status.uuid = Some(vec![n; 16]);
        self
    }
    pub fn source(mut self, s: Source) -> Self {
        self.status.source = Some(s as i32);
        self
    }
    pub fn reason(mut self, r: Reason) -> Self {
        self.status.reason = Some(r as i32);
        self
    }
}
