//! A bound pod whose task never reached Mesos runs on its node anyway, as
//! a bound pod in Kubernetes always does (its kubelet runs it).
//!
//! The one way a task is bound and never launched: a leader bound the pod
//! (bind-before-accept) and died before its ACCEPT. The next leader
//! recovers the task from the pod's annotations, and explicit
//! reconciliation asks the master about it. The master answers for a task
//! it does not know on a registered agent with TASK_GONE, SOURCE_MASTER,
//! REASON_RECONCILIATION ("Task is unknown to the agent"; master.cpp, and
//! localmesos' `reconcile.rs`). If no update from the agent or executor
//! was ever applied to the task (it is still Pending), nothing of it ever
//! ran: the task is forgotten and its pod queued again, pinned to its node
//! by `spec.nodeName` (procurement's node rule). The dead leader cannot
//! send its ACCEPT any more (the master closed its subscription when this
//! one subscribed), so the new launch is the only one.
//!
//! Its launch writes the new task's recovery annotations before the ACCEPT
//! and no Binding (`launch`): a crash at any point leaves a pod
//! naming at most one task that may have reached Mesos.
//!
//! Until the master answers, such a task may or may not run on its agent,
//! and its pod is bound there: the agent is held from placement
//! ([`Core::held_agents`]), as kube-scheduler counts a bound pod's requests
//! on its node whether or not its kubelet runs it. Otherwise the pods a new
//! leader places from its first offers, in the moment before the answer,
//! could fill the node the pod must go back to, and it would wait for ever.
//!
//! A task the master drops (TASK_DROPPED: its offer was rescinded, its
//! agent went away) never ran either, and goes back the same way, after a
//! backoff; so does one whose ACCEPT the master refused (`launch`).
//!
//! A task whose executor died (the agent's TASK_FAILED, TASK_LOST or
//! TASK_GONE with REASON_EXECUTOR_TERMINATED, or with
//! REASON_EXECUTOR_REREGISTRATION_TIMEOUT for an executor that did not
//! come back to its recovered agent) while its pod runs on, or is being deleted,
//! goes back to its node too, at once and marked for adoption: its containers outlived the
//! executor (each has a shim of its own), and the agent's next executor
//! takes them over, as a restarted kubelet does its pods'. Its pod keeps
//! its status meanwhile. A terminating pod's KILL waits until the new
//! executor has the task (`Launching::unheard`): it then stops the
//! containers it adopted, and the pod goes once they are gone. With nothing to adopt, the new executor fails the
//! task itself (REASON_EXECUTOR_TERMINATED, from the executor), which is
//! applied as any update: the pod ends `ExecutorTerminated`.
//!
//! Any other answer (the agent's or executor's, TASK_UNREACHABLE,
//! TASK_UNKNOWN for an agent the master does not know, TASK_LOST) is an
//! ordinary update.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{TaskId, TaskState, TaskStatus};
use registry::{Flag, PodTask, Registry, State};

use super::Core;
use super::pods::is_finished;

/// Whether the update is the master saying, in answer to reconciliation,
/// that a registered agent has no such task.
fn unknown_to_the_agent(status: &TaskStatus) -> bool {
    status.state == TaskState::TaskGone as i32
        && status.source == Some(Source::SourceMaster as i32)
        && status.reason == Some(Reason::ReasonReconciliation as i32)
}

/// Whether the update is the agent's (or master's) word that the task's
/// executor ended, not the executor's own.
fn executor_died(status: &TaskStatus) -> bool {
    let state = TaskState::try_from(status.state).unwrap_or(TaskState::TaskUnknown);
    let reason = status.reason.and_then(|r| Reason::try_from(r).ok());
    matches!(
        state,
        TaskState::TaskFailed | TaskState::TaskLost | TaskState::TaskGone
    ) && matches!(
        reason,
        Some(Reason::ReasonExecutorTerminated | Reason::ReasonExecutorReregistrationTimeout)
    ) && status.source != Some(Source::SourceExecutor as i32)
}

/// Whether nothing of the task ever ran: bound, not deleted, Pending, and
/// no update applied since its launch.
fn never_ran(task: &PodTask) -> bool {
    task.state == State::Pending
        && task.last_status.is_none()
        && task.has(Flag::Bound)
        && !task.has(Flag::Deleted)
}

/// Whether `pod` is bound to `task`'s node.
fn on_its_node(pod: &Pod, task: &PodTask) -> bool {
    let host = task.spec.as_ref().map(|s| s.hostname.as_str());
    host.is_some() && pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == host
}

/// Whether `pod` is bound to `task`'s node, not finished and not being
/// deleted: what a pod must be to be launched again there.
fn waits_on_its_node(pod: &Pod, task: &PodTask) -> bool {
    on_its_node(pod, task) && !is_finished(pod) && pod.metadata.deletion_timestamp.is_none()
}

impl Core {
    /// A launch whose binding (or, for a pod bound already, whose new
    /// task's annotations) could not be written: nothing of it reached
    /// Mesos, and the pod waits again as the store has it now, after a
    /// backoff. Without this a pod whose write lost a race (its watch event
    /// came while the task was still registered, and was taken as settled)
    /// or failed in the store would wait for nothing, for ever. A pod that
    /// is bound to the task's node (a relaunch, or a binding written though
    /// its answer was lost) goes back to that node; any other is judged as
    /// a new watch event would be.
    pub(super) fn rebind(&mut self, task: &PodTask, why: &str, now: SystemTime) {
        let key = task.pod_key();
        let Some(pod) = self.lookup.pod(&key) else {
            // Gone, or another pod of that name: its own events decide.
            return;
        };
        let names_it = || {
            registry::recover_from(&pod, now)
                .ok()
                .flatten()
                .is_some_and(|t| t.id == task.id)
        };
        if waits_on_its_node(&pod, task) && (task.has(Flag::Bound) || names_it()) {
            self.pending.push_bound(key.clone(), Arc::new(pod), now);
        } else {
            self.on_pod(Arc::new(pod), now);
        }
        if self.pending.pod(&key).is_some() {
            self.pending.queue_mut().backoff(&key, now, why.to_owned());
        }
    }

    /// The agents no pod is placed on for now: each holds a task the
    /// current reconciliation still waits to hear about and that never
    /// reported (see the module docs). Empty outside a reconciliation round.
    pub(super) fn held_agents(&self) -> HashSet<String> {
        self.subscription
            .reconciler
            .waiting()
            .filter_map(|id| self.registry.get(&TaskId::new(id)))
            .filter(|t| never_ran(t) && !self.launching.contains(&t.id))
            .filter_map(|t| t.spec.as_ref().map(|s| s.agent_id.value.clone()))
            .collect()
    }

    /// Queues the pod of a task the master says never reached its agent,
    /// when nothing of it ever ran (see the module docs); true then, and
    /// the update is not applied.
    pub(super) fn relaunch(&mut self, status: &TaskStatus, now: SystemTime) -> bool {
        if executor_died(status) {
            return self.relaunch_for_adoption(status, now);
        }
        // A drop is final whenever it comes, even before the ACCEPT's own
        // answer (the master sends it on the event stream, which can
        // overtake the call's response).
        let dropped = status.state == TaskState::TaskDropped as i32;
        if !unknown_to_the_agent(status) && !dropped {
            return false;
        }
        let Some(id) = &status.task_id else {
            return false;
        };
        let Some(task) = self.registry.get(id) else {
            return false;
        };
        if !never_ran(&task) || (self.launching.contains(id) && !dropped) {
            return false;
        }
        let key = task.pod_key();
        let host = task.spec.as_ref().map(|s| s.hostname.as_str());
        let Some(pod) = self.lookup.pod(&key) else {
            // Gone: the update ends the task as usual.
            return false;
        };
        if !waits_on_its_node(&pod, &task) {
            return false;
        }
        tracing::info!(
            task = %id,
            pod = %key,
            node = host.unwrap_or_default(),
            "the task never reached Mesos; launching its pod again on its node"
        );
        self.registry.unregister(id);
        self.launching.end(id);
        self.launching.forget_kill(id);
        self.subscription.reconciler.forget(&id.value);
        self.pending.push_bound(key.clone(), Arc::new(pod), now);
        if dropped {
            // The master may drop it again (an agent going away): each try
            // waits longer, as a failed binding's does.
            let why = status
                .message
                .clone()
                .unwrap_or_else(|| "dropped by Mesos".into());
            self.pending
                .queue_mut()
                .backoff(&key, now, format!("the task was dropped: {why}"));
        }
        self.observed.metrics.pods_queued.inc();
        true
    }

    /// Queues, for adoption on its node, the pod of a task whose executor
    /// died (see the module docs); true then, and the update is not
    /// applied. A pod being deleted, or a task that had ended, takes the
    /// update as usual.
    fn relaunch_for_adoption(&mut self, status: &TaskStatus, now: SystemTime) -> bool {
        let Some(id) = &status.task_id else {
            return false;
        };
        let Some(task) = self.registry.get(id) else {
            return false;
        };
        // A task that never ran has nothing to adopt: its update ends it.
        if task.state.is_terminal() || never_ran(&task) || self.launching.contains(id) {
            return false;
        }
        let key = task.pod_key();
        let Some(pod) = self.lookup.pod(&key) else {
            return false;
        };
        // A terminating pod too: its containers may run on, and only an
        // executor can stop them (it adopts them, then takes the KILL).
        if !on_its_node(&pod, &task) || is_finished(&pod) {
            return false;
        }
        tracing::info!(
            task = %id,
            pod = %key,
            node = task.spec.as_ref().map(|s| s.hostname.as_str()).unwrap_or_default(),
            "the task's executor died; launching its pod again on its node, for the next executor to adopt its containers"
        );
        // The executor's own FAILURE event comes after its tasks' updates:
        // until then, offers held from the agent still list it, and the pod
        // placed on one would count on an executor that is gone.
        if let Some(spec) = &task.spec
            && let Some(executor) = spec.executor.as_ref().and_then(|e| e.executor_id.clone())
        {
            self.drop_offers_listing(&spec.agent_id.value, &executor);
        }
        self.registry.unregister(id);
        self.launching.forget_kill(id);
        self.subscription.reconciler.forget(&id.value);
        self.pending.push_adopting(key, Arc::new(pod), now);
        self.observed.metrics.pods_queued.inc();
        true
    }
}
