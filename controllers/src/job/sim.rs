//! A small simulated world for driving a Job's reconcile step by step: the
//! API holds the Job and its pods, the "kubelet" moves pods through their
//! phases when a test says so, and every action a sync asks for is applied
//! as the API would (a delete of a pod with finalizers only sets its
//! deletionTimestamp; the pod goes once it is terminal and has none).
//!
//! Shared by the unit tests (`job::tests`) and the property tests
//! (`tests/job_props.rs`, which include this file); it names the crate's
//! items through `crate::job` and `crate::{Action, Status}`, which both
//! provide.
#![allow(dead_code, unreachable_pub, missing_docs, clippy::unwrap_used)]

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodCondition,
    PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::job::{
    BackoffRecord, FinalizerExpectations, JOB_TRACKING_FINALIZER, JobContext, JobSync, reconcile,
};
use crate::{Action, Event, Status};

pub const T0: &str = "2024-06-01T12:00:00Z";

pub fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

pub fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "batch.kubernetes.io/controller-uid".to_owned(),
            "job-uid".to_owned(),
        ),
        ("batch.kubernetes.io/job-name".to_owned(), "pi".to_owned()),
    ])
}

/// Job `ns/pi` (uid `job-uid`) as the API server stores it: the server-set
/// selector and template labels, restartPolicy Never, one container.
pub fn job(completions: Option<i32>, parallelism: i32) -> Job {
    Job {
        metadata: ObjectMeta {
            name: Some("pi".into()),
            namespace: Some("ns".into()),
            uid: Some("job-uid".into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(JobSpec {
            completions,
            parallelism: Some(parallelism),
            backoff_limit: Some(6),
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    "batch.kubernetes.io/controller-uid".to_owned(),
                    "job-uid".to_owned(),
                )])),
                match_expressions: None,
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels()),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    containers: vec![Container {
                        name: "main".into(),
                        image: Some("perl".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

pub fn spec(job: &mut Job) -> &mut JobSpec {
    job.spec.get_or_insert_with(Default::default)
}

pub struct World {
    pub job: Job,
    /// The pods the API holds, in creation order.
    pub pods: Vec<Pod>,
    pub now: Timestamp,
    pub backoff: BackoffRecord,
    pub finalizers: FinalizerExpectations,
    pub expectations_satisfied: bool,
    /// Every event the syncs emitted, in order.
    pub events: Vec<Event>,
    /// Names of the pods created, in order.
    pub created: Vec<String>,
    /// Names of the pods deleted, in order.
    pub deleted: Vec<String>,
    pub status_writes: usize,
    /// Uids as they entered `status.uncountedTerminatedPods`, in order.
    pub recorded_succeeded: Vec<String>,
    pub recorded_failed: Vec<String>,
    /// Uids that entered the uncounted lists a second time (must stay
    /// empty: a pod counted twice).
    pub recorded_twice: Vec<String>,
    /// The pods the API dropped, as they last were.
    pub gone: Vec<Pod>,
    /// Uids of the pods not yet terminal when the Job met its success
    /// criteria: KCM lets them go uncounted.
    pub unfinished_at_success: Vec<String>,
    /// Uids of the pods the controller let go and deleted for scale (or
    /// suspend): never counted.
    pub scaled_down: Vec<String>,
    next: u64,
}

impl World {
    pub fn new(job: Job) -> Self {
        World {
            job,
            pods: Vec::new(),
            now: ts(T0),
            backoff: BackoffRecord::NONE,
            finalizers: FinalizerExpectations::new(),
            expectations_satisfied: true,
            events: Vec::new(),
            created: Vec::new(),
            deleted: Vec::new(),
            status_writes: 0,
            recorded_succeeded: Vec::new(),
            recorded_failed: Vec::new(),
            recorded_twice: Vec::new(),
            gone: Vec::new(),
            unfinished_at_success: Vec::new(),
            scaled_down: Vec::new(),
            next: 0,
        }
    }

    pub fn status(&self) -> JobStatus {
        self.job.status.clone().unwrap_or_default()
    }

    pub fn advance(&mut self, secs: i64) {
        self.now = self
            .now
            .checked_add(SignedDuration::from_secs(secs))
            .unwrap();
    }

    /// One reconcile over what the API holds now (nothing applied).
    pub fn sync(&self) -> JobSync {
        self.sync_with(&self.pods.iter().collect::<Vec<_>>())
    }

    /// One reconcile over `pods` (a cache that differs from the API).
    pub fn sync_with(&self, pods: &[&Pod]) -> JobSync {
        let ctx = JobContext {
            expectations_satisfied: self.expectations_satisfied,
            finalizer_removals_pending: self.finalizers.pending("ns/pi"),
            backoff: &self.backoff,
        };
        reconcile(&self.job, pods, &ctx, self.now).unwrap()
    }

    /// Applies every action as the API would, and keeps the backoff
    /// record (every call succeeded).
    pub fn apply(&mut self, s: &JobSync) {
        let mut last_unfinalized = None;
        for a in &s.reconciled.actions {
            if let Action::DeletePod { uid, .. } = a
                && last_unfinalized == Some(uid)
            {
                self.scaled_down.push(uid.clone());
            }
            last_unfinalized = match a {
                Action::RemovePodFinalizer { uid, .. } => Some(uid),
                _ => None,
            };
            self.apply_action(a);
        }
        self.backoff = s.backoff;
    }

    /// Applies the first `n` actions only: the runner stopped there (a
    /// failed call, a crash). The backoff record is kept only if the status
    /// write went through.
    pub fn apply_prefix(&mut self, s: &JobSync, n: usize) {
        let done = &s.reconciled.actions[..n.min(s.reconciled.actions.len())];
        let mut partial = s.clone();
        partial.reconciled.actions = done.to_vec();
        let wrote = done.iter().any(|a| matches!(a, Action::WriteStatus(_)));
        let kept = self.backoff;
        self.apply(&partial);
        if !wrote && s.reconciled.status().is_some() {
            self.backoff = kept;
        }
    }

    /// A sync, applied.
    pub fn step(&mut self) -> JobSync {
        let s = self.sync();
        self.apply(&s);
        s
    }

    /// Steps until a sync asks for nothing (at most `max` steps); the
    /// number of steps taken.
    pub fn settle(&mut self, max: usize) -> usize {
        for n in 0..max {
            if self.step().reconciled.actions.is_empty() {
                return n;
            }
        }
        panic!("no steady state after {max} syncs: {:?}", self.sync());
    }

    fn apply_action(&mut self, a: &Action) {
        match a {
            Action::CreatePod { pod } => {
                let mut pod = pod.clone();
                self.next += 1;
                let name = format!(
                    "{}{:05}",
                    pod.metadata.generate_name.clone().unwrap_or_default(),
                    self.next
                );
                pod.metadata.name = Some(name.clone());
                pod.metadata.uid = Some(format!("uid-{}", self.next));
                pod.metadata.creation_timestamp = Some(Time(self.now));
                pod.status = Some(PodStatus {
                    phase: Some("Pending".into()),
                    ..Default::default()
                });
                self.created.push(name);
                self.pods.push(pod);
            }
            Action::DeletePod { name, uid } => {
                let now = self.now;
                if let Some(p) = self.find_uid(uid) {
                    if p.metadata.deletion_timestamp.is_none() {
                        p.metadata.deletion_timestamp = Some(Time(now));
                        p.metadata.deletion_grace_period_seconds = Some(0);
                    }
                    self.deleted.push(name.clone());
                }
                self.collect();
            }
            Action::RemovePodFinalizer { uid, .. } => {
                if let Some(p) = self.find_uid(uid)
                    && let Some(f) = p.metadata.finalizers.as_mut()
                {
                    f.retain(|f| f != JOB_TRACKING_FINALIZER);
                }
                self.collect();
            }
            Action::AdoptPod { uid, owner_ref, .. } => {
                if let Some(p) = self.find_uid(uid) {
                    p.metadata.owner_references = Some(vec![owner_ref.clone()]);
                    p.metadata
                        .finalizers
                        .get_or_insert_with(Vec::new)
                        .push(JOB_TRACKING_FINALIZER.into());
                }
            }
            Action::ReleasePod { uid, .. } => {
                if let Some(p) = self.find_uid(uid) {
                    p.metadata.owner_references = None;
                }
            }
            Action::WriteStatus(Status::Job(s)) => {
                // The API judges every status write by kube-apiserver's rules.
                let mut written = self.job.clone();
                written.status = Some(s.clone());
                if let Err(e) = apiserver::check_job_status_update(&written, &self.job) {
                    panic!(
                        "the API refuses this status write: {e}\nstored: {:?}\nwritten: {s:?}",
                        self.job.status
                    );
                }
                self.record_uncounted(s);
                let met = |s: Option<&JobStatus>| {
                    s.into_iter()
                        .flat_map(|s| s.conditions.iter().flatten())
                        .any(|c| c.type_ == "SuccessCriteriaMet" && c.status == "True")
                };
                if met(Some(s)) && !met(self.job.status.as_ref()) {
                    self.unfinished_at_success = self
                        .pods
                        .iter()
                        .filter(|p| !matches!(phase(p), "Succeeded" | "Failed"))
                        .filter_map(|p| p.metadata.uid.clone())
                        .collect();
                }
                self.job.status = Some(s.clone());
                self.status_writes += 1;
            }
            Action::Event(e) => self.events.push(e.clone()),
            other => panic!("a Job sync asked for {other:?}"),
        }
    }

    fn record_uncounted(&mut self, new: &JobStatus) {
        let lists = |s: Option<&JobStatus>| {
            let u = s
                .and_then(|s| s.uncounted_terminated_pods.clone())
                .unwrap_or_default();
            (
                u.succeeded.unwrap_or_default(),
                u.failed.unwrap_or_default(),
            )
        };
        let (old_s, old_f) = lists(self.job.status.as_ref());
        let (new_s, new_f) = lists(Some(new));
        for (new, old, into) in [(new_s, old_s, true), (new_f, old_f, false)] {
            for u in new.into_iter().filter(|u| !old.contains(u)) {
                if self.recorded_succeeded.contains(&u) || self.recorded_failed.contains(&u) {
                    self.recorded_twice.push(u.clone());
                }
                if into {
                    self.recorded_succeeded.push(u);
                } else {
                    self.recorded_failed.push(u);
                }
            }
        }
    }

    fn find_uid(&mut self, uid: &str) -> Option<&mut Pod> {
        self.pods
            .iter_mut()
            .find(|p| p.metadata.uid.as_deref() == Some(uid))
    }

    /// The API drops a deleted pod once it is terminal (or was never
    /// started) and has no finalizers left.
    fn collect(&mut self) {
        let (gone, kept): (Vec<Pod>, Vec<Pod>) =
            std::mem::take(&mut self.pods).into_iter().partition(|p| {
                p.metadata.deletion_timestamp.is_some()
                    && p.metadata.finalizers.as_ref().is_none_or(|f| f.is_empty())
                    && matches!(phase(p), "Succeeded" | "Failed" | "Pending")
            });
        self.pods = kept;
        self.gone.extend(gone);
    }

    /// Every pod the world ever held, as it last was.
    pub fn all_pods(&self) -> Vec<&Pod> {
        self.pods.iter().chain(self.gone.iter()).collect()
    }

    /// The runner restarts: no expectations, the backoff rebuilt from the
    /// pods.
    pub fn restart(&mut self) {
        self.finalizers = FinalizerExpectations::new();
        self.backoff = BackoffRecord::rebuild(&self.job, &self.pods.iter().collect::<Vec<_>>());
    }

    /// A sync over `stale` (the pods as an earlier snapshot has them) with
    /// what a runner whose pod watch lags would pass: the finalizer
    /// removals the snapshot does not show yet as pending, and
    /// expectations unsatisfied while pods were created or deleted since.
    /// Applied to the API, as the runner would.
    pub fn lagging_step(&mut self, stale: &[Pod]) -> JobSync {
        let api_uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
        let mut pending = FinalizerExpectations::new();
        for old in stale {
            let now = self.pods.iter().find(|p| api_uid(p) == api_uid(old));
            let had = old
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == JOB_TRACKING_FINALIZER);
            let has = now.is_some_and(|p| {
                p.metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == JOB_TRACKING_FINALIZER)
            });
            if had && !has {
                pending.expect_removals("ns/pi", [api_uid(old).as_str()]);
            }
        }
        let same_pods = self.pods.len() == stale.len()
            && self.pods.iter().all(|p| {
                stale.iter().any(|o| {
                    api_uid(o) == api_uid(p)
                        && o.metadata.deletion_timestamp.is_some()
                            == p.metadata.deletion_timestamp.is_some()
                })
            });
        let ctx = JobContext {
            expectations_satisfied: self.expectations_satisfied && same_pods,
            finalizer_removals_pending: pending.pending("ns/pi"),
            backoff: &self.backoff,
        };
        let s = reconcile(&self.job, &stale.iter().collect::<Vec<_>>(), &ctx, self.now).unwrap();
        self.apply(&s);
        s
    }

    pub fn pod(&self, name: &str) -> &Pod {
        self.pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no pod {name}"))
    }

    fn pod_mut(&mut self, name: &str) -> &mut Pod {
        self.pods
            .iter_mut()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no pod {name}"))
    }

    /// Names of the active pods (not terminal, not being deleted).
    pub fn active(&self) -> Vec<String> {
        self.pods
            .iter()
            .filter(|p| crate::is_active(p))
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    /// The kubelet starts a pod: Running and Ready.
    pub fn run(&mut self, name: &str) {
        let now = self.now;
        let p = self.pod_mut(name);
        p.spec.get_or_insert_with(Default::default).node_name = Some("agent-1".into());
        p.status = Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(Time(now)),
                ..Default::default()
            }]),
            ..Default::default()
        });
    }

    /// Starts every Pending pod.
    pub fn run_all(&mut self) {
        let pending: Vec<String> = self
            .pods
            .iter()
            .filter(|p| phase(p) == "Pending" && p.metadata.deletion_timestamp.is_none())
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        for n in pending {
            self.run(&n);
        }
    }

    /// The pod's container exits with `code` now: Succeeded on 0, else
    /// Failed.
    pub fn exit(&mut self, name: &str, code: i32) {
        let now = self.now;
        let p = self.pod_mut(name);
        p.status = Some(PodStatus {
            phase: Some(if code == 0 { "Succeeded" } else { "Failed" }.into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "False".into(),
                last_transition_time: Some(Time(now)),
                ..Default::default()
            }]),
            container_statuses: Some(vec![ContainerStatus {
                name: "main".into(),
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: code,
                        finished_at: Some(Time(now)),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        self.collect();
    }

    /// Mesos lost the pod with its agent: the framework marks it Failed
    /// with `DisruptionTarget` True.
    pub fn lose(&mut self, name: &str) {
        let now = self.now;
        let p = self.pod_mut(name);
        p.status = Some(PodStatus {
            phase: Some("Failed".into()),
            reason: Some("TaskLost".into()),
            conditions: Some(vec![PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("TaskLost".into()),
                last_transition_time: Some(Time(now)),
                ..Default::default()
            }]),
            ..Default::default()
        });
    }

    /// A user deletes the pod (the API sets its deletionTimestamp; its
    /// finalizer keeps it).
    pub fn user_delete(&mut self, name: &str) {
        let now = self.now;
        let p = self.pod_mut(name);
        p.metadata.deletion_timestamp = Some(Time(now));
        p.metadata.deletion_grace_period_seconds = Some(30);
    }

    /// The kubelet kills every pod being deleted that still runs (exit
    /// 137).
    pub fn kill_terminating(&mut self) {
        let names: Vec<String> = self
            .pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .filter(|p| !matches!(phase(p), "Succeeded" | "Failed"))
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        for n in names {
            self.exit(&n, 137);
        }
    }

    /// The condition of this type, if the Job has one.
    pub fn condition(&self, type_: &str) -> Option<JobCondition> {
        self.status()
            .conditions
            .into_iter()
            .flatten()
            .find(|c| c.type_ == type_)
    }

    /// `(type, status, reason, message)` of every condition, in order.
    pub fn conditions(&self) -> Vec<(String, String, String, String)> {
        self.status()
            .conditions
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c.type_,
                    c.status,
                    c.reason.unwrap_or_default(),
                    c.message.unwrap_or_default(),
                )
            })
            .collect()
    }

    pub fn finished(&self) -> bool {
        crate::job::is_finished(&self.job)
    }

    /// `(reason, message)` of every event so far.
    pub fn event_log(&self) -> Vec<(String, String)> {
        self.events
            .iter()
            .map(|e| (e.reason.clone(), e.message.clone()))
            .collect()
    }
}

pub fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}
