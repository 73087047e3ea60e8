//! `PodTask`: one Kubernetes pod as one Mesos task.
//!
//! A task is a value: the registry hands out clones and takes values back.
//! The parts that never change once set (the pod object, the roles, the
//! procured spec) sit behind `Arc`, so a clone costs a few reference-count
//! bumps and a few short strings, not a deep copy of a pod. A launched task
//! lets go of its pod and keeps only the pod's key and grace period.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{AgentId, ExecutorId, ExecutorInfo, OfferId, Resource, TaskId, TaskState};
use serde::{Deserialize, Serialize};

use crate::state::{Flag, Flags, State};

/// The namespace Kubernetes assumes when an object names none.
const DEFAULT_NAMESPACE: &str = "default";

/// How many hex digits of randomness end a task id. 12 digits (48 bits) make
/// a collision between two tasks of the *same* pod name negligible, while
/// keeping ids short enough to read in the Mesos UI and in logs.
const ID_SUFFIX_LEN: usize = 12;

/// Why a task could not be made from a pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// The pod has no `metadata.name`.
    #[error("pod has no metadata.name")]
    MissingName,
    /// A task id was given but is empty.
    #[error("task id must not be empty")]
    EmptyTaskId,
    /// A pod given to a task is not the pod the task is for.
    #[error("the pod is not the task's pod")]
    OtherPod,
}

fn grace_of(pod: &Pod) -> Option<i64> {
    pod.spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
}

fn priority_of(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

fn labels_of(pod: &Pod) -> Option<Arc<BTreeMap<String, String>>> {
    pod.metadata
        .labels
        .as_ref()
        .filter(|l| !l.is_empty())
        .map(|l| Arc::new(l.clone()))
}

/// Which pod a task belongs to. The uid is part of the key: a pod deleted and
/// recreated under the same name is a different pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodKey {
    /// `metadata.namespace` (`default` when absent).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`; empty when the pod has none.
    pub uid: String,
}

impl PodKey {
    /// The key of `pod`.
    ///
    /// # Errors
    /// [`TaskError::MissingName`] when the pod has no name.
    pub fn of(pod: &Pod) -> Result<PodKey, TaskError> {
        let name = pod
            .metadata
            .name
            .as_deref()
            .filter(|n| !n.is_empty())
            .ok_or(TaskError::MissingName)?;
        Ok(Self::from_parts(
            pod.metadata.namespace.as_deref(),
            name,
            pod.metadata.uid.as_deref(),
        ))
    }

    /// The key of a pod known only by its metadata fields (e.g. read from
    /// its JSON without decoding it): an absent or empty namespace is
    /// `default`, an absent uid is empty.
    pub fn from_parts(namespace: Option<&str>, name: &str, uid: Option<&str>) -> PodKey {
        PodKey {
            namespace: namespace
                .filter(|n| !n.is_empty())
                .unwrap_or(DEFAULT_NAMESPACE)
                .to_owned(),
            name: name.to_owned(),
            uid: uid.unwrap_or_default().to_owned(),
        }
    }
}

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One container port published on the agent.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortMapping {
    /// The container's name.
    pub container: String,
    /// The port inside the container.
    pub container_port: u16,
    /// The port on the agent it is reachable at.
    pub host_port: u16,
    /// `TCP`, `UDP` or `SCTP`, as in the pod spec.
    pub protocol: String,
    /// The port's name in the pod spec, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Where and with what a task was placed: the procurement result.
/// Set once and then read-only, so it is shared behind an `Arc`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Spec {
    /// The agent it runs on.
    pub agent_id: AgentId,
    /// That agent's hostname (the Node name the pod is bound to).
    pub hostname: String,
    /// What the pod's task uses (not the executor's own resources).
    pub resources: Vec<Resource>,
    /// Host ports given to container ports.
    pub port_mappings: Vec<PortMapping>,
    /// The executor attached to the `TaskInfo`. Shared: every task on an
    /// agent names the same executor, and a copy per task was a third of
    /// the registry's memory.
    pub executor: Option<Arc<ExecutorInfo>>,
}

impl Spec {
    /// The executor's id, if an executor with an id is attached.
    pub fn executor_id(&self) -> Option<&ExecutorId> {
        self.executor.as_ref().and_then(|e| e.executor_id.as_ref())
    }
}

/// What the last applied Mesos status update said, for display and for
/// deciding a pod's phase (FINISHED vs FAILED both end in
/// [`State::Finished`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LastStatus {
    /// The Mesos state.
    #[serde(serialize_with = "wire_name")]
    pub state: TaskState,
    /// Who sent it, if known.
    #[serde(serialize_with = "wire_name_opt")]
    pub source: Option<Source>,
    /// Why, if known.
    #[serde(serialize_with = "wire_name_opt")]
    pub reason: Option<Reason>,
    /// The update's timestamp (seconds since the epoch), if it had a usable one.
    pub timestamp: Option<f64>,
    /// The health-check verdict, if any.
    pub healthy: Option<bool>,
}

fn wire_name<E: mesos::proto::json::WireEnum, S: serde::Serializer>(
    v: &E,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.wire_name())
}

fn wire_name_opt<E: mesos::proto::json::WireEnum, S: serde::Serializer>(
    v: &Option<E>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(e) => s.serialize_some(e.wire_name()),
        None => s.serialize_none(),
    }
}

/// Bookkeeping the state machine needs to order status updates. Private so
/// nobody but the machine can move it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct StatusOrder {
    /// Timestamp of the newest applied update that carried a finite one.
    pub(crate) last_timestamp: Option<f64>,
    /// The same, among updates with a UUID only (the agent's and its
    /// executors', all stamped by the agent host's clock).
    pub(crate) last_reliable_timestamp: Option<f64>,
    /// UUID of the last applied update ([`uuid_key`]); a redelivery
    /// carries the same one.
    pub(crate) last_uuid: Option<u64>,
    /// The furthest the task has progressed (Pending < Running < Killing);
    /// an update may not take it back below this, except a partition heal.
    pub(crate) progress: Progress,
    /// When the task became Finished (drives retention).
    pub(crate) finished_at: Option<SystemTime>,
}

/// A status UUID as a 64-bit fingerprint, kept inline rather than on the
/// heap (it is stored once per task). The same bytes always give the same
/// fingerprint, so a redelivery is always recognised; two different UUIDs
/// of one task collide with odds of about 2^-64 per update.
pub(crate) fn uuid_key(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// How far a task got, for the no-going-back rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[allow(
    dead_code,
    reason = "the status state machine lands in the next commit"
)]
pub(crate) enum Progress {
    #[default]
    Pending,
    Running,
    Killing,
}

/// One pod, one Mesos task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PodTask {
    /// Readable and unique: `<namespace>.<name>.<random hex>`.
    pub id: TaskId,
    /// Which pod: fixed for the task's life.
    pub(crate) key: PodKey,
    /// The whole pod, shared and never mutated in place, until
    /// [`PodTask::release_pod`]: placing a pod needs all of it, a launched
    /// task only its identity and grace period (the executor got the pod,
    /// the store holds it). A typed pod is over 2 KB even when nearly empty,
    /// more than the rest of a task; at 50,000 tasks that was 100 MB.
    pub(crate) pod: Option<Arc<Pod>>,
    /// The pod's `terminationGracePeriodSeconds`, kept past the release.
    pub(crate) grace_period_seconds: Option<i64>,
    /// The pod's `spec.priority` (0 when unset), kept past the release:
    /// preemption weighs running pods by it.
    pub(crate) priority: i32,
    /// The pod's labels, copied at the release (until then the pod has
    /// them): preemption matches running pods against disruption budgets'
    /// selectors. `None` when it has none, or is not released.
    #[serde(skip)]
    pub(crate) labels: Option<Arc<BTreeMap<String, String>>>,
    /// The roles the pod may use, in order of preference.
    pub roles: Arc<[String]>,
    /// The procured placement, once placed.
    pub spec: Option<Arc<Spec>>,
    /// The offer the task was launched with.
    pub offer_id: Option<OfferId>,
    /// Where the task is in its life. Only the registry's status path
    /// changes it; [`crate::Registry::update`] keeps the stored state.
    pub state: State,
    /// Launched, Bound, Deleted.
    pub flags: Flags,
    /// The last Mesos status applied, if any.
    pub last_status: Option<LastStatus>,
    /// When the task was made.
    pub created: SystemTime,
    /// When the task last changed.
    pub updated: SystemTime,
    #[serde(skip)]
    pub(crate) order: StatusOrder,
}

impl PodTask {
    /// A new pending task for `pod`, with a generated id.
    ///
    /// # Errors
    /// [`TaskError::MissingName`] when the pod has no name.
    pub fn new(pod: Arc<Pod>, roles: Vec<String>, now: SystemTime) -> Result<PodTask, TaskError> {
        let key = PodKey::of(&pod)?;
        let random = uuid::Uuid::new_v4().simple().to_string();
        let suffix = random.get(..ID_SUFFIX_LEN).unwrap_or(&random);
        let id = TaskId::new(format!("{}.{}.{suffix}", key.namespace, key.name));
        Self::with_id(id, pod, roles, now)
    }

    /// A new pending task for `pod` with a given id (recovery, tests).
    ///
    /// # Errors
    /// [`TaskError::MissingName`] when the pod has no name,
    /// [`TaskError::EmptyTaskId`] when the id is empty.
    pub fn with_id(
        id: TaskId,
        pod: Arc<Pod>,
        roles: Vec<String>,
        now: SystemTime,
    ) -> Result<PodTask, TaskError> {
        let key = PodKey::of(&pod)?;
        if id.value.is_empty() {
            return Err(TaskError::EmptyTaskId);
        }
        Ok(PodTask {
            id,
            key,
            grace_period_seconds: grace_of(&pod),
            priority: priority_of(&pod),
            labels: None,
            pod: Some(pod),
            roles: roles.into(),
            spec: None,
            offer_id: None,
            state: State::Pending,
            flags: Flags::empty(),
            last_status: None,
            created: now,
            updated: now,
            order: StatusOrder::default(),
        })
    }

    /// The pod this task belongs to.
    pub fn pod_key(&self) -> PodKey {
        self.key.clone()
    }

    /// The whole pod; `None` once released at launch.
    pub fn pod(&self) -> Option<&Arc<Pod>> {
        self.pod.as_ref()
    }

    /// Replaces the pod with a changed copy of itself (e.g. what admission
    /// hooks made of it).
    ///
    /// # Errors
    /// [`TaskError::OtherPod`] if `pod` is not the task's pod (another
    /// namespace, name or uid); the task is left as it was.
    pub fn set_pod(&mut self, pod: Arc<Pod>) -> Result<(), TaskError> {
        if PodKey::of(&pod)? != self.key {
            return Err(TaskError::OtherPod);
        }
        self.grace_period_seconds = grace_of(&pod);
        self.priority = priority_of(&pod);
        self.labels = None;
        self.pod = Some(pod);
        Ok(())
    }

    /// Lets go of the whole pod, keeping its identity, grace period,
    /// priority and labels: what a launched task needs.
    pub fn release_pod(&mut self) {
        if let Some(pod) = self.pod.take() {
            self.labels = labels_of(&pod);
        }
    }

    /// The pod's `terminationGracePeriodSeconds`, if it sets one.
    pub fn grace_period_seconds(&self) -> Option<i64> {
        self.grace_period_seconds
    }

    /// The pod's `spec.priority` (0 when unset).
    pub fn priority(&self) -> i32 {
        self.priority
    }

    /// The pod's labels; empty when it has none.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        static NONE: BTreeMap<String, String> = BTreeMap::new();
        self.pod
            .as_ref()
            .and_then(|p| p.metadata.labels.as_ref())
            .or(self.labels.as_deref())
            .unwrap_or(&NONE)
    }

    /// Whether flag `f` is set.
    pub fn has(&self, f: Flag) -> bool {
        self.flags.contains(f)
    }

    /// Sets flag `f`.
    pub fn set(&mut self, f: Flag) {
        self.flags.insert(f);
    }

    /// Forgets a placement that did not happen: clears the spec and the offer.
    /// Flags stay: they record facts that remain true.
    pub fn reset(&mut self) {
        self.spec = None;
        self.offer_id = None;
    }

    /// Whether the task may still run somewhere (not Finished).
    pub fn is_live(&self) -> bool {
        self.state.is_live()
    }

    /// The roles the pod may use.
    pub fn roles(&self) -> &[String] {
        &self.roles
    }

    /// When the task became Finished, if it has.
    pub fn finished_at(&self) -> Option<SystemTime> {
        self.order.finished_at
    }
}

/// One line for debug pages and logs:
/// `<id> <state> [<flags>] <namespace>/<name> on <hostname>`.
impl std::fmt::Display for PodTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key = self.pod_key();
        let host = self.spec.as_ref().map_or("-", |s| s.hostname.as_str());
        write!(
            f,
            "{} {} [{}] {} on {host}",
            self.id, self.state, self.flags, key
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(ns: Option<&str>, name: Option<&str>) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                namespace: ns.map(str::to_owned),
                name: name.map(str::to_owned),
                uid: Some("u-1".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
    }

    #[test]
    fn a_released_task_keeps_its_pods_key_grace_period_priority_and_labels() {
        let now = SystemTime::UNIX_EPOCH;
        let mut with_grace = (*pod(Some("web"), Some("nginx"))).clone();
        with_grace.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            termination_grace_period_seconds: Some(7),
            priority: Some(1000),
            ..Default::default()
        });
        with_grace.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
        let mut t = PodTask::new(pod(Some("web"), Some("nginx")), vec![], now).unwrap();
        assert_eq!(t.grace_period_seconds(), None);
        t.set_pod(Arc::new(with_grace)).unwrap();
        assert_eq!(t.grace_period_seconds(), Some(7));
        let key = t.pod_key();
        t.release_pod();
        assert!(t.pod().is_none());
        assert_eq!(t.pod_key(), key);
        assert_eq!(t.grace_period_seconds(), Some(7));
        // Preemption weighs a running pod by these, long after the release.
        assert_eq!(t.priority(), 1000);
        assert_eq!(t.labels().get("app").map(String::as_str), Some("web"));
        // Another pod (here: another namespace) is refused, and nothing changes.
        assert_eq!(
            t.set_pod(pod(Some("other"), Some("nginx"))),
            Err(TaskError::OtherPod)
        );
        assert!(t.pod().is_none());
        assert_eq!(t.pod_key(), key);
    }

    #[test]
    fn new_task_is_pending_with_a_readable_unique_id() {
        let now = SystemTime::UNIX_EPOCH;
        let a = PodTask::new(pod(Some("web"), Some("nginx")), vec!["*".into()], now).unwrap();
        let b = PodTask::new(pod(Some("web"), Some("nginx")), vec!["*".into()], now).unwrap();
        assert!(a.id.value.starts_with("web.nginx."), "{}", a.id);
        assert_eq!(a.id.value.len(), "web.nginx.".len() + ID_SUFFIX_LEN);
        assert_ne!(a.id, b.id);
        assert_eq!(a.state, State::Pending);
        assert!(a.flags.is_empty());
        assert_eq!(a.roles(), ["*".to_owned()]);
        assert_eq!(
            a.pod_key(),
            PodKey {
                namespace: "web".into(),
                name: "nginx".into(),
                uid: "u-1".into()
            }
        );
    }

    #[test]
    fn missing_namespace_means_default_and_missing_name_is_an_error() {
        let t = PodTask::new(pod(None, Some("p")), vec![], SystemTime::UNIX_EPOCH).unwrap();
        assert!(t.id.value.starts_with("default.p."));
        assert_eq!(
            PodTask::new(pod(None, None), vec![], SystemTime::UNIX_EPOCH),
            Err(TaskError::MissingName)
        );
        assert_eq!(
            PodTask::with_id(
                TaskId::new(""),
                pod(None, Some("p")),
                vec![],
                SystemTime::UNIX_EPOCH
            ),
            Err(TaskError::EmptyTaskId)
        );
    }

    #[test]
    fn reset_clears_placement_but_keeps_flags() {
        let mut t = PodTask::new(pod(None, Some("p")), vec![], SystemTime::UNIX_EPOCH).unwrap();
        t.spec = Some(Arc::new(Spec {
            hostname: "h1".into(),
            ..Spec::default()
        }));
        t.offer_id = Some(OfferId::new("o1"));
        t.set(Flag::Launched);
        assert_eq!(
            t.to_string(),
            format!("{} pending [launched] default/p on h1", t.id)
        );
        t.reset();
        assert!(t.spec.is_none());
        assert!(t.offer_id.is_none());
        assert!(t.has(Flag::Launched));
        assert!(!t.has(Flag::Bound));
    }

    #[test]
    fn a_key_from_parts_reads_like_the_key_of_the_pod() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".into());
        pod.metadata.namespace = Some(String::new());
        assert_eq!(
            PodKey::of(&pod).ok(),
            Some(PodKey::from_parts(Some(""), "web", None))
        );
        let key = PodKey::from_parts(Some("team"), "web", Some("u1"));
        assert_eq!((key.namespace.as_str(), key.uid.as_str()), ("team", "u1"));
    }

    #[test]
    fn uuid_keys_are_stable_and_tell_uuids_apart() {
        let a = [1u8; 16];
        let mut b = a;
        b[15] = 2;
        assert_ne!(uuid_key(&a), uuid_key(&b));
        assert_eq!(uuid_key(&a), uuid_key(&[1u8; 16]));
        assert_eq!(uuid_key(b"short"), uuid_key(b"short"));
        assert_ne!(uuid_key(b"short"), uuid_key(b"other"));
    }

    #[test]
    fn port_mapping_is_camel_case_json() {
        let m = PortMapping {
            container: "web".into(),
            container_port: 80,
            host_port: 31000,
            protocol: "TCP".into(),
            name: Some("http".into()),
        };
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(
            json,
            r#"{"container":"web","containerPort":80,"hostPort":31000,"protocol":"TCP","name":"http"}"#
        );
        assert_eq!(serde_json::from_str::<PortMapping>(&json).unwrap(), m);
    }
}
