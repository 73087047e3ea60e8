//! The launch protocol, decided here and only here: a round's placements
//! become durable bindings ([`Effect::Bind`]), the bound pods become
//! `TaskInfo`s packed into ACCEPTs that fit the master's size limit
//! ([`Effect::Accept`]), and the master's answers decide each task's fate.
//!
//! # What can go wrong, and what the pod sees
//!
//! - **A binding fails** (a conflict, a pod deleted or replaced, the store
//!   down): nothing reached Mesos; the task is forgotten and the pod waits
//!   again as the store has it now (`rebind`).
//! - **An offer's tasks outgrow one ACCEPT.** An offer can be accepted only
//!   once, so what does not fit under `max_accept_bytes` is not sent: its
//!   pods, bound already, go back to the queue pinned to their node and
//!   launch from its next offer. Placement keeps an estimate of each
//!   offer's bytes so that this is rare ([`Estimate`]). A single pod too
//!   large for any ACCEPT is the pod's fault: it fails, with the sizes.
//! - **The master refuses the ACCEPT** (413, 400, 503, or the call never
//!   left): none of its tasks launched, so their pods go back to the queue
//!   on their node, and the offer is declined so its resources come back.
//! - **The ACCEPT's answer is lost** (the connection broke after the call
//!   was sent): its tasks may be running. Nothing is launched again until
//!   the master says: an explicit reconciliation asks, and its agents are
//!   held from placement meanwhile (`relaunch`). A task the master does not
//!   know is launched again on its node; any other answer is an update.
//! - **The master drops a task** (TASK_DROPPED: a rescinded offer, an agent
//!   gone): it never ran, so its pod goes back to its node (`relaunch`).
//!
//! So a pod fails only for its own fault, and a bound pod is never placed
//! on a second node while its first launch may still land.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use apiserver::Binding;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use mesos::proto::offer::{Operation, operation};
use mesos::proto::scheduler::{Call, call};
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{Filters, OfferId, TaskId, TaskInfo, TaskState, TaskStatus};
use prost::Message as _;
use registry::{Flag, PodTask, Registry, save_recovery_info};

use super::Core;
use super::agents::executor_key;
use super::effect::{Accept, Bind, Effect, Placed, Write};
use super::launching::{AcceptOutcome, BoundPod, InFlight};
use crate::admission::{Changes, apply_changes};
use crate::objects::{PodRef, event_about};
use crate::podstatus::timestamp;

/// What an ACCEPT's call adds to its `TaskInfo`s: the framework id, the
/// offer id, the operation and filters (a few hundred bytes, rounded up).
const CALL_OVERHEAD: usize = 1024;

/// What a `TaskInfo` adds to its pod's JSON besides the executor info: the
/// ids, resources, labels and kill policy, plus what the binding adds to
/// the pod (node name, annotations, condition). Generous, for an estimate.
const TASK_OVERHEAD: usize = 2048;

/// The bytes placement expects each offer's ACCEPT to carry, so that a
/// round puts no more on one offer than one ACCEPT can launch. Pods past
/// the budget wait for the offer's leftovers to come back (`schedule`).
///
/// Measuring a pod costs a serialization, so an offer's first pod is
/// measured only once a second one comes: most offers of a round carry one
/// pod, and one pod always fits.
#[derive(Debug, Default)]
pub(super) struct Estimate {
    per_offer: HashMap<String, Carried>,
}

/// What one offer's ACCEPT carries so far.
#[derive(Debug)]
enum Carried {
    /// One pod, not measured yet, with its task.
    One(Arc<Pod>, Box<PodTask>),
    /// The estimated bytes of its pods.
    Bytes(usize),
}

impl Estimate {
    /// Whether `task`, placed on `offer`, still fits its ACCEPT; counts it
    /// if so. The first task of an offer always fits: one too large for any
    /// ACCEPT fails when its call is built, with the exact sizes.
    pub(super) fn admit(
        &mut self,
        offer: &str,
        task: &PodTask,
        pod: &Arc<Pod>,
        limit: usize,
    ) -> bool {
        let Some(carried) = self.per_offer.get_mut(offer) else {
            let first = Carried::One(Arc::clone(pod), Box::new(task.clone()));
            self.per_offer.insert(offer.to_owned(), first);
            return true;
        };
        let used = match carried {
            Carried::One(first, first_task) => estimated_bytes(first_task, first),
            Carried::Bytes(used) => *used,
        };
        let bytes = estimated_bytes(task, pod);
        if used + bytes > limit.saturating_sub(CALL_OVERHEAD) {
            *carried = Carried::Bytes(used);
            return false;
        }
        *carried = Carried::Bytes(used + bytes);
        true
    }
}

/// A task's bytes in an ACCEPT, estimated before its binding exists.
fn estimated_bytes(task: &PodTask, pod: &Pod) -> usize {
    let executor = task
        .spec
        .as_ref()
        .and_then(|s| s.executor.as_ref())
        .map_or(0, |e| e.encoded_len());
    json_len(pod) + executor + TASK_OVERHEAD
}

/// The length of a value's JSON, without keeping it.
fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // A pod serializes without error; a failure only makes the estimate low.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

impl Core {
    /// Takes the round's offers, starts each task's launch and asks for the
    /// bindings. Each agent's executor info rides in the binding of the
    /// round's first pod on that agent: one write instead of two, and
    /// durable before any ACCEPT names that executor.
    pub(super) fn launch(&mut self, placed: Vec<Placed>, now: SystemTime) {
        let mut executors = self.agents.remember_executors(&placed);
        let condition = PodCondition {
            type_: "PodScheduled".into(),
            status: "True".into(),
            last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                timestamp(now),
            )),
            ..Default::default()
        };
        let mut binds = Vec::with_capacity(placed.len());
        for p in placed {
            self.offers.take(&p.offer.value);
            let carried = p
                .task
                .spec
                .as_ref()
                .and_then(|s| executors.remove_entry(&executor_key(&s.agent_id.value)));
            binds.push(binding(&p, &condition, carried, now));
            let flight = InFlight {
                offer: p.offer,
                queued: p.queued,
                changes: p.changes,
                relaunch: p.bound,
                rv: None,
            };
            self.launching.start(p.task.id, flight);
        }
        self.emit(Effect::Bind(binds));
    }

    /// The bindings asked for came back: each bound task gets its
    /// `TaskInfo`, packed into one ACCEPT per offer; a pod that could not
    /// be bound waits again (`rebind`); an offer left with nothing to
    /// launch is declined.
    pub(super) fn on_bound(
        &mut self,
        results: Vec<(TaskId, Result<BoundPod, String>)>,
        now: SystemTime,
    ) {
        let mut offers: BTreeMap<String, (OfferId, Vec<TaskInfo>)> = BTreeMap::new();
        for (id, result) in results {
            let Some(flight) = self.launching.get_mut(&id) else {
                continue;
            };
            let offer = flight.offer.clone();
            let entry = offers
                .entry(offer.value.clone())
                .or_insert_with(|| (offer, Vec::new()));
            match result {
                Ok(bound) => {
                    flight.rv = bound.rv;
                    // Needed no more once the binding is written.
                    let changes = std::mem::take(&mut flight.changes);
                    if let Some(info) = self.bound_task_info(&id, bound.json, &changes, now) {
                        entry.1.push(info);
                    }
                }
                Err(e) => {
                    tracing::info!(task = %id, error = %e, "pod could not be bound; not launching");
                    self.launching.end(&id);
                    let task = self.registry.get(&id);
                    self.registry.unregister(&id);
                    if let Some(task) = task {
                        self.rebind(&task, &format!("binding failed: {e}"), now);
                    }
                }
            }
        }
        let mut accepts = Vec::new();
        let mut unused = Vec::new();
        for (offer, infos) in offers.into_values() {
            let infos = self.fit_one_accept(infos, now);
            if infos.is_empty() {
                unused.push(offer);
                continue;
            }
            let tasks = infos.iter().filter_map(|i| i.task_id.clone()).collect();
            accepts.push(Accept {
                call: accept_call(offer.clone(), infos),
                offer,
                tasks,
            });
        }
        // Nothing will be launched on them: their resources go back now.
        self.decline_refusing(unused, 0.0);
        if !accepts.is_empty() {
            self.emit(Effect::Accept(accepts));
        }
    }

    /// The `TaskInfo` of a task whose pod is bound; the registry keeps only
    /// what a launched task needs. `None` if the task is gone, or failed
    /// here (its pod's JSON cannot be what the executor runs).
    fn bound_task_info(
        &mut self,
        id: &TaskId,
        json: Vec<u8>,
        changes: &Changes,
        now: SystemTime,
    ) -> Option<TaskInfo> {
        let Some(mut task) = self.registry.get(id) else {
            tracing::warn!(task = %id, "task vanished before launch");
            self.launching.end(id);
            return None;
        };
        task.set(Flag::Bound);
        let adopt = self.pending.take_adopting(&task);
        if adopt {
            self.launching.unheard.insert(id.clone(), None);
        }
        let info = for_executor(json, changes)
            .and_then(|json| crate::launch::task_info(&task, json).map_err(|e| e.to_string()))
            .map(|mut info| {
                if adopt {
                    crate::launch::ask_to_adopt(&mut info);
                }
                info
            });
        task.release_pod();
        if let Err(e) = self.registry.update(task.clone()) {
            tracing::warn!(error = %e, "task vanished before launch");
        }
        match info {
            Ok(info) => Some(info),
            Err(e) => {
                self.fail_launch(&task, &format!("cannot build the task: {e}"), now);
                None
            }
        }
    }

    /// The tasks of one offer that fit one ACCEPT under the master's limit,
    /// in order. The others are not sent: their pods go back to their node
    /// for its next offer. A task too large for an ACCEPT on its own fails.
    fn fit_one_accept(&mut self, infos: Vec<TaskInfo>, now: SystemTime) -> Vec<TaskInfo> {
        let limit = self.config.max_accept_bytes;
        let mut fit = Vec::with_capacity(infos.len());
        let mut bytes = CALL_OVERHEAD;
        for info in infos {
            let Some(id) = info.task_id.clone() else {
                continue;
            };
            // The operation's repeated field adds a tag and a length.
            let size = info.encoded_len() + 8;
            if bytes + size <= limit {
                bytes += size;
                fit.push(info);
                continue;
            }
            let Some(task) = self.registry.get(&id) else {
                self.launching.end(&id);
                continue;
            };
            if CALL_OVERHEAD + size > limit {
                let why = format!(
                    "the pod's task is {size} bytes, more than one ACCEPT may carry \
                     ({limit} bytes, --max-accept-bytes)"
                );
                self.fail_launch(&task, &why, now);
            } else {
                self.requeue_on_node(&task, "its offer's ACCEPT was full", now);
            }
        }
        fit
    }

    /// The master answered the ACCEPTs (see the module docs for what each
    /// answer means).
    pub(super) fn on_accepted(
        &mut self,
        results: Vec<(OfferId, Vec<TaskId>, AcceptOutcome)>,
        now: SystemTime,
    ) {
        let mut reconcile = false;
        let mut decline = Vec::new();
        for (offer, tasks, outcome) in results {
            match outcome {
                AcceptOutcome::Taken => {
                    for id in tasks {
                        self.launched(&id, now);
                    }
                }
                AcceptOutcome::Refused(why) => {
                    tracing::warn!(offer = %offer.value, error = %why, "ACCEPT refused; its pods go back to their nodes");
                    let why = format!("the ACCEPT call to Mesos failed: {why}");
                    for id in tasks {
                        if let Some(task) = self.registry.get(&id) {
                            self.requeue_on_node(&task, &why, now);
                        } else {
                            self.launching.end(&id);
                        }
                    }
                    decline.push(offer);
                }
                AcceptOutcome::Unknown(why) => {
                    tracing::warn!(offer = %offer.value, error = %why, "no answer to an ACCEPT; asking the master about its tasks");
                    for id in tasks {
                        self.end_launch(&id, now);
                    }
                    // Declining an offer the ACCEPT used is refused
                    // harmlessly; one it did not use comes back.
                    decline.push(offer);
                    reconcile = true;
                }
            }
        }
        self.decline_refusing(decline, 0.0);
        if reconcile {
            self.start_explicit_reconciliation(now);
        }
    }

    /// A task the master took: launching no more, with its latency counted
    /// and, for a pod launched again on its node, the Scheduled event its
    /// first binding could not carry.
    fn launched(&mut self, id: &TaskId, now: SystemTime) {
        let Some(flight) = self.end_launch(id, now) else {
            return;
        };
        let latency = now.duration_since(flight.queued).unwrap_or_default();
        self.observed.metrics.scheduled(latency);
        if flight.relaunch
            && let Some(task) = self.registry.get(id)
        {
            let event = scheduled_event(&task, flight.rv, now);
            self.emit(Effect::Store(vec![Write::Event(Box::new(event))]));
        }
    }

    /// Ends a task's launch; a KILL held back for it goes out now.
    fn end_launch(&mut self, id: &TaskId, now: SystemTime) -> Option<InFlight> {
        let (flight, held) = self.launching.end(id);
        if let Some((grace, why)) = held
            && let Some(task) = self.registry.get(id)
        {
            self.kill(&task, grace, why, now);
        }
        flight
    }

    /// A bound pod whose task certainly never reached Mesos goes back to
    /// the queue, pinned to its node, with a new task to come. A pod being
    /// deleted is not launched again: the task ends as dropped, which
    /// finalizes it as any ending does.
    pub(super) fn requeue_on_node(&mut self, task: &PodTask, why: &str, now: SystemTime) {
        let (_, held) = self.launching.end(&task.id);
        if held.is_some() || task.has(Flag::Deleted) {
            self.apply_update(dropped_status(task, why), now);
            return;
        }
        self.registry.unregister(&task.id);
        self.launching.forget_kill(&task.id);
        self.subscription.reconciler.forget(&task.id.value);
        self.rebind(task, why, now);
    }

    /// Fails a task for its pod's own fault, as the master fails an invalid
    /// task (TASK_ERROR): the pod's status says why.
    fn fail_launch(&mut self, task: &PodTask, why: &str, now: SystemTime) {
        tracing::warn!(task = %task.id, error = %why, "not launching a pod");
        self.launching.end(&task.id);
        let status = TaskStatus {
            state: TaskState::TaskError as i32,
            reason: Some(Reason::ReasonTaskInvalid as i32),
            ..dropped_status(task, why)
        };
        self.apply_update(status, now);
    }
}

/// A placed pod's binding: a new binding with its condition and Scheduled
/// event, or for a pod bound already, the new task's annotations only.
/// Either way only for that pod (by uid), and with the hooks' labels.
fn binding(
    p: &Placed,
    condition: &PodCondition,
    carried: Option<(String, Vec<u8>)>,
    now: SystemTime,
) -> Bind {
    let key = p.task.pod_key();
    let mut annotations = p.changes.annotations.clone();
    annotations.extend(save_recovery_info(&p.task));
    let binding = Binding {
        node_name: p
            .task
            .spec
            .as_ref()
            .map(|s| s.hostname.clone())
            .unwrap_or_default(),
        annotations,
        // The core decides the condition; the store only writes it.
        condition: (!p.bound).then(|| condition.clone()),
        event: (!p.bound).then(|| scheduled_event(&p.task, None, now)),
        meta: carried.into_iter().collect(),
        labels: p.changes.labels.clone(),
        uid: Some(key.uid.clone()).filter(|u| !u.is_empty()),
        relaunch: p.bound,
    };
    Bind {
        task: p.task.id.clone(),
        offer: p.offer.clone(),
        key,
        binding,
    }
}

/// kube-scheduler's event for a pod placed on a node; `rv` is the pod's
/// resourceVersion it names (a binding fills in the one it bound).
pub(super) fn scheduled_event(
    task: &PodTask,
    rv: Option<u64>,
    now: SystemTime,
) -> k8s_openapi::api::core::v1::Event {
    let key = task.pod_key();
    let host = task.spec.as_ref().map_or("", |s| s.hostname.as_str());
    let msg = format!(
        "Successfully assigned {}/{} to {host}",
        key.namespace, key.name
    );
    let about = PodRef {
        namespace: &key.namespace,
        name: &key.name,
        uid: Some(key.uid.as_str()).filter(|u| !u.is_empty()),
        resource_version: rv.map(|rv| rv.to_string()),
    };
    event_about(&about, "Normal", "Scheduled", msg, now)
}

/// The pod the executor runs: the bound pod as stored, with the admission
/// hooks' changes to its spec (a service account, node selectors,
/// tolerations, a priority class). The store keeps the spec as the user
/// wrote it, as Kubernetes keeps a pod's spec fixed once created; the
/// labels and annotations are on the stored pod already.
fn for_executor(json: Vec<u8>, changes: &Changes) -> Result<Vec<u8>, String> {
    if !changes.changes_spec() {
        return Ok(json);
    }
    let pod: Pod =
        serde_json::from_slice(&json).map_err(|e| format!("cannot read the bound pod: {e}"))?;
    serde_json::to_vec(&apply_changes(&pod, changes))
        .map_err(|e| format!("cannot encode the bound pod: {e}"))
}

fn accept_call(offer_id: OfferId, task_infos: Vec<TaskInfo>) -> Call {
    Call {
        r#type: Some(call::Type::Accept as i32),
        accept: Some(call::Accept {
            offer_ids: vec![offer_id],
            operations: vec![Operation {
                r#type: Some(operation::Type::Launch as i32),
                launch: Some(operation::Launch { task_infos }),
                ..Default::default()
            }],
            // What is left of the offer comes back at the next allocation:
            // more pods may be waiting for it.
            filters: Some(Filters {
                refuse_seconds: Some(0.0),
            }),
        }),
        ..Default::default()
    }
}

/// The update mesopod applies itself to a launch that never reached Mesos.
fn dropped_status(task: &PodTask, message: &str) -> TaskStatus {
    TaskStatus {
        task_id: Some(task.id.clone()),
        state: TaskState::TaskDropped as i32,
        source: Some(Source::SourceMaster as i32),
        reason: Some(Reason::ReasonInvalidOffers as i32),
        message: Some(message.into()),
        agent_id: task.spec.as_ref().map(|s| s.agent_id.clone()),
        ..Default::default()
    }
}
