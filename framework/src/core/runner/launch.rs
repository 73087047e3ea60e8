//! A launch task: a round's durable bindings, then one ACCEPT per offer,
//! run beside the loop while the core places the next round. It reports
//! back as [`Input::Launch`], so every registry write stays the core's.
//!
//! Binding waits for the store's group commit and an ACCEPT for the
//! master; awaited inside the loop, a round of 2,048 pods held up every
//! status update and the next round's placement for a quarter of a second.
//! The order that makes it safe is the core's (`launching.rs`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use apiserver::{Api, Binding};
use futures::future::join_all;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use mesos::proto::offer::{Operation, operation};
use mesos::proto::scheduler::{Call, call};
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{Filters, OfferId, TaskId, TaskInfo, TaskState, TaskStatus};
use registry::{PodTask, save_recovery_info};
use tokio::sync::mpsc;

use crate::admission::{Changes, apply_changes};
use crate::core::agents::executor_key;
use crate::core::{Input, Launch, Placed, Round};
use crate::driver::MesosHandle;
use crate::launch::task_info;
use crate::objects::{PodRef, event_about};
use crate::observe::Observed;

/// What a launch task needs.
#[derive(Clone)]
pub(super) struct Launcher {
    pub(super) api: Api,
    pub(super) mesos: MesosHandle,
    pub(super) inputs: mpsc::UnboundedSender<Input>,
    pub(super) observed: Arc<Observed>,
}

/// A placed task once bound, with what the executor gets.
struct Bound {
    placed: Placed,
    /// The bound pod's JSON as stored.
    json: Vec<u8>,
    /// Its resourceVersion, for the Scheduled event.
    rv: Option<u64>,
}

/// Runs a round's launch on a task of its own.
pub(super) fn spawn(launcher: Launcher, round: Round) {
    let ids: Vec<TaskId> = round.placed.iter().map(|p| p.task.id.clone()).collect();
    let inputs = launcher.inputs.clone();
    let launch = tokio::spawn(async move {
        let t0 = std::time::Instant::now();
        let n = round.placed.len();
        let Round {
            placed,
            condition,
            executors,
            now,
        } = round;
        let bound = launcher.bind(placed, &condition, executors, now).await;
        let t1 = std::time::Instant::now();
        launcher.accept(bound, now).await;
        tracing::trace!(
            target: "mesopod::turns",
            pods = n,
            bind_us = (t1 - t0).as_micros() as u64,
            accept_us = t1.elapsed().as_micros() as u64,
            "launch"
        );
    });
    // A launch that never reports (a bug that panicked it) must not hold
    // its round's places for ever: the round is released as if every task
    // had reached Mesos, so held KILLs go out (one for a task Mesos never
    // got is answered as unknown), and reconciliation settles the rest.
    tokio::spawn(async move {
        if let Err(e) = launch.await
            && e.is_panic()
        {
            tracing::error!(
                pods = ids.len(),
                "a launch task failed; its round is released"
            );
            let _ = inputs.send(Input::Launch(Launch::Done {
                launched: ids,
                dropped: Vec::new(),
            }));
        }
    });
}

impl Launcher {
    /// Stores the executor infos the core asked for; concurrent writes
    /// share the store's group commits.
    async fn store_executors(&self, executors: BTreeMap<String, Vec<u8>>) {
        join_all(executors.into_iter().map(|(key, bytes)| async move {
            if let Err(e) = self.api.put_meta(&key, bytes).await {
                tracing::warn!(error = %e, "could not store an executor info");
            }
        }))
        .await;
    }

    /// Binds every placed pod durably, concurrently, with the executor
    /// infos the core asked to store, and reports the outcome to the core
    /// before anything is sent to Mesos.
    ///
    /// Each info rides in the binding of the first pod that launches on its
    /// agent, and the Scheduled event in each binding: on etcd every
    /// transaction is a revision of its own, and one write per binding
    /// instead of up to three (binding, event, info) is most of what the
    /// etcd store's throughput gained. An
    /// info whose carrier did not bind is written on its own, since other
    /// pods on that agent may still launch with it.
    async fn bind(
        &self,
        placed: Vec<Placed>,
        condition: &PodCondition,
        mut executors: BTreeMap<String, Vec<u8>>,
        now: SystemTime,
    ) -> Vec<Bound> {
        let carried: Vec<Option<(String, Vec<u8>)>> = placed
            .iter()
            .map(|p| {
                let spec = p.task.spec.as_ref().filter(|_| !p.bound)?;
                executors.remove_entry(&executor_key(&spec.agent_id.value))
            })
            .collect();
        let results = join_all(
            (placed.iter().zip(&carried))
                .map(|(p, meta)| self.bind_one(p, condition, meta.as_ref(), now)),
        )
        .await;
        for (meta, result) in carried.into_iter().zip(&results) {
            if let (Some((key, value)), Err(_)) = (meta, result) {
                executors.insert(key, value);
            }
        }
        self.store_executors(executors).await;
        let mut report = Vec::with_capacity(placed.len());
        let mut bound = Vec::with_capacity(placed.len());
        for (p, result) in placed.into_iter().zip(results) {
            match result {
                Ok((json, rv)) => {
                    report.push((p.task.id.clone(), Ok(())));
                    bound.push(Bound {
                        placed: p,
                        json,
                        rv,
                    });
                }
                Err(e) => report.push((p.task.id, Err(e.to_string()))),
            }
        }
        // Sent before any ACCEPT: the core sees the binding before any
        // update Mesos sends about these tasks.
        let _ = self.inputs.send(Input::Launch(Launch::Bound(report)));
        bound
    }

    /// Binds one pod and returns its bound JSON for the executor.
    async fn bind_one(
        &self,
        p: &Placed,
        condition: &PodCondition,
        executor: Option<&(String, Vec<u8>)>,
        now: SystemTime,
    ) -> Result<(Vec<u8>, Option<u64>), apiserver::ApiError> {
        let key = p.task.pod_key();
        let mut annotations = p.changes.annotations.clone();
        annotations.extend(save_recovery_info(&p.task));
        if p.bound {
            let pod = self.annotate_bound(p, &annotations).await?;
            let rv = pod
                .metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok());
            return encode_bound(for_executor(&pod, &p.changes).as_ref(), rv);
        }
        let binding = Binding {
            node_name: p
                .task
                .spec
                .as_ref()
                .map(|s| s.hostname.clone())
                .unwrap_or_default(),
            annotations,
            // The core decided the condition; the store only writes it.
            condition: Some(condition.clone()),
            event: Some(scheduled_event(&p.task, None, now)),
            meta: executor.cloned().into_iter().collect(),
        };
        let pod = self
            .api
            .bind_pod_raw(&key.namespace, &key.name, &binding)
            .await?;
        // The hooks' annotations came with the binding: only labels and
        // spec changes need more than the stored pod.
        if p.changes.labels.is_empty() && !p.changes.changes_spec() {
            return encode_bound(pod.as_ref(), apiserver::store::object_rv(&pod));
        }
        let pod = if p.changes.labels.is_empty() {
            serde_json::from_value::<Pod>((*pod).clone()).map_err(|e| {
                apiserver::ApiError::Internal(format!("cannot read a bound pod: {e}"))
            })?
        } else {
            // The hook's labels are kept on the stored pod, as a mutating
            // admission webhook's would be.
            let patch = serde_json::json!({"metadata": {"labels": p.changes.labels}});
            self.api
                .patch_pod(
                    &key.namespace,
                    &key.name,
                    apiserver::patch::PatchType::Merge,
                    &patch,
                )
                .await?
        };
        let rv = pod
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok());
        encode_bound(for_executor(&pod, &p.changes).as_ref(), rv)
    }

    /// A pod bound already (its first task never reached Mesos): writes
    /// the new task's recovery annotations, and the hooks' labels and
    /// annotations, in one write, only while it is the same pod, bound to
    /// the task's node and not being deleted. The pod's resourceVersion is
    /// the write's precondition, so nothing is written over a change the
    /// check did not see; a lost race is checked again on a fresh read.
    async fn annotate_bound(
        &self,
        p: &Placed,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Pod, apiserver::ApiError> {
        let key = p.task.pod_key();
        let host = p.task.spec.as_ref().map(|s| s.hostname.as_str());
        let mut lost = None;
        for _ in 0..3 {
            let live = self.api.get_pod(&key.namespace, &key.name)?;
            let same_pod =
                key.uid.is_empty() || live.metadata.uid.as_deref() == Some(key.uid.as_str());
            let on_node =
                host.is_some() && live.spec.as_ref().and_then(|s| s.node_name.as_deref()) == host;
            if !same_pod || !on_node || live.metadata.deletion_timestamp.is_some() {
                return Err(apiserver::ApiError::Conflict {
                    resource: "pods".into(),
                    name: key.name.clone(),
                    detail: "the pod is no longer the one bound to this task's node".into(),
                });
            }
            let patch = serde_json::json!({"metadata": {
                "resourceVersion": live.metadata.resource_version,
                "annotations": annotations,
                "labels": p.changes.labels,
            }});
            match self
                .api
                .patch_pod(
                    &key.namespace,
                    &key.name,
                    apiserver::patch::PatchType::Merge,
                    &patch,
                )
                .await
            {
                Err(e @ apiserver::ApiError::Conflict { .. }) => lost = Some(e),
                other => return other,
            }
        }
        Err(lost.unwrap_or_else(|| apiserver::ApiError::stale("pods", &key.name)))
    }

    /// One ACCEPT per offer with every LAUNCH for it; then the outcome to
    /// the core, and the Scheduled events of relaunched pods (a binding
    /// carried the others').
    async fn accept(&self, bound: Vec<Bound>, now: SystemTime) {
        let mut by_offer: BTreeMap<String, (OfferId, Vec<Bound>)> = BTreeMap::new();
        for b in bound {
            by_offer
                .entry(b.placed.offer.value.clone())
                .or_insert_with(|| (b.placed.offer.clone(), Vec::new()))
                .1
                .push(b);
        }
        let mut calls = Vec::with_capacity(by_offer.len());
        for (offer_id, mut tasks) in by_offer.into_values() {
            let infos: Vec<TaskInfo> = tasks
                .iter_mut()
                .filter_map(|b| task_info(&b.placed.task, std::mem::take(&mut b.json)).ok())
                .collect();
            calls.push((accept_call(offer_id, infos), tasks));
        }
        let results = join_all(calls.iter_mut().map(|(call, _)| {
            let mesos = self.mesos.clone();
            let call = std::mem::take(call);
            async move { mesos.call(call).await }
        }))
        .await;
        let mut launched = Vec::new();
        let mut dropped = Vec::new();
        let mut events = Vec::new();
        for ((_, tasks), result) in calls.into_iter().zip(results) {
            match result {
                Ok(()) => {
                    for b in tasks {
                        let latency = now.duration_since(b.placed.queued).unwrap_or_default();
                        self.observed.metrics.scheduled(latency);
                        if b.placed.bound {
                            events.push(scheduled_event(&b.placed.task, b.rv, now));
                        }
                        launched.push(b.placed.task.id);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "ACCEPT failed; its tasks are dropped");
                    let why = format!("the ACCEPT call to Mesos failed: {e}");
                    dropped.extend(tasks.iter().map(|b| dropped_status(&b.placed.task, &why)));
                }
            }
        }
        let _ = self
            .inputs
            .send(Input::Launch(Launch::Done { launched, dropped }));
        // Nothing waits on the events.
        join_all(events.into_iter().map(|ev| {
            let api = self.api.clone();
            async move {
                let ns = ev.metadata.namespace.clone().unwrap_or_default();
                if let Err(e) = api.create_event(&ns, ev).await {
                    tracing::debug!(error = %e, "could not record an event");
                }
            }
        }))
        .await;
    }
}

/// kube-scheduler's event for a pod placed on a node; `rv` is the pod's
/// resourceVersion it names (a binding fills in the one it bound).
fn scheduled_event(
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
/// labels and annotations are on the stored pod already, and merging them
/// again changes nothing.
fn for_executor<'a>(bound: &'a Pod, changes: &Changes) -> Cow<'a, Pod> {
    if changes.changes_spec() {
        Cow::Owned(apply_changes(bound, changes))
    } else {
        Cow::Borrowed(bound)
    }
}

/// The bound pod's JSON for the executor, with its resourceVersion.
fn encode_bound(
    pod: &impl serde::Serialize,
    rv: Option<u64>,
) -> Result<(Vec<u8>, Option<u64>), apiserver::ApiError> {
    serde_json::to_vec(pod)
        .map(|json| (json, rv))
        .map_err(|e| apiserver::ApiError::Internal(format!("cannot encode a bound pod: {e}")))
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

/// The update mesopod applies itself when a launch never reached Mesos.
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
