//! The pending queue: unbound pods of ours waiting for a place, in
//! scheduling order, with the pod objects they will be placed as; and the
//! bound pods whose first launch never reached Mesos, waiting for their
//! node again (see `relaunch`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use registry::PodKey;

use crate::queue::{PodQueue, QueueEntry};

/// Unbound pods waiting to be placed.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    queue: PodQueue<PodKey>,
    /// The queued pods, by key.
    waiting: HashMap<PodKey, Arc<Pod>>,
    /// The queued pods that are bound already: launched again on their
    /// node, with no second Binding.
    bound: HashSet<PodKey>,
    /// Bound pods whose executor died: their next launch asks the new
    /// executor to adopt their containers (`executor::ADOPT_LABEL`). Kept
    /// past placement, until the launch's `TaskInfo` is made.
    adopting: HashSet<PodKey>,
}

impl Pending {
    /// Queues (or requeues) a pod.
    pub(crate) fn push(&mut self, key: PodKey, pod: Arc<Pod>, priority: i32, now: SystemTime) {
        let created = pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(std::time::UNIX_EPOCH, apiserver::system_time);
        self.queue.push(key.clone(), priority, created, now);
        self.waiting.insert(key, pod);
    }

    /// Queues a bound pod to be launched again on its node.
    pub(crate) fn push_bound(&mut self, key: PodKey, pod: Arc<Pod>, now: SystemTime) {
        let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        self.bound.insert(key.clone());
        self.push(key, pod, priority, now);
    }

    /// Queues a bound pod whose executor died, for its next executor to
    /// adopt its containers.
    pub(crate) fn push_adopting(&mut self, key: PodKey, pod: Arc<Pod>, now: SystemTime) {
        self.adopting.insert(key.clone());
        self.push_bound(key, pod, now);
    }

    /// Whether the pod waits to be launched for adoption.
    pub(crate) fn is_adopting(&self, key: &PodKey) -> bool {
        self.adopting.contains(key)
    }

    /// Whether the launch of this task's pod is an adoption (asked once).
    /// Free when nothing is adopted: no key is built on the launch path.
    pub(crate) fn take_adopting(&mut self, task: &registry::PodTask) -> bool {
        !self.adopting.is_empty() && self.adopting.remove(&task.pod_key())
    }

    /// The pods of a scheduling round: none when none is due; otherwise
    /// every queued bound pod first, due or waiting out a backoff, then the
    /// due ones, `limit` in all. A bound pod holds its place on its node, as
    /// kube-scheduler counts a bound pod on its node: offered first, its
    /// node's room cannot go to a pod that could run anywhere while it waits
    /// (after a failover, the new leader places hundreds of pods before the
    /// master's answer sends a pod back to its node).
    pub(crate) fn round(&self, now: SystemTime, limit: usize) -> Vec<PodKey> {
        let due = self.queue.ready_up_to(now, limit);
        if due.is_empty() || self.bound.is_empty() {
            return due;
        }
        let bound = self
            .queue
            .keys_in_order()
            .filter(|k| self.bound.contains(*k));
        let unbound = due.iter().filter(|k| !self.bound.contains(*k));
        bound.chain(unbound).take(limit).cloned().collect()
    }

    /// Whether the queued pod is bound already (a relaunch).
    pub(crate) fn is_bound(&self, key: &PodKey) -> bool {
        self.bound.contains(key)
    }

    /// Takes the pod out: placed, bound elsewhere, gone, or not ours.
    pub(crate) fn forget(&mut self, key: &PodKey) {
        self.queue.remove(key);
        self.waiting.remove(key);
        self.bound.remove(key);
    }

    /// A bound pod changed: it no longer waits, unless it waits to be
    /// launched again on its node.
    pub(crate) fn settled(&mut self, key: &PodKey) {
        if !self.bound.contains(key) {
            self.forget(key);
        }
    }

    /// The queued pod.
    pub(crate) fn pod(&self, key: &PodKey) -> Option<&Arc<Pod>> {
        self.waiting.get(key)
    }

    /// Keys of every queued pod.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &PodKey> {
        self.waiting.keys()
    }

    /// The queue itself (order, backoff, holds).
    pub(crate) fn queue(&self) -> &PodQueue<PodKey> {
        &self.queue
    }

    /// The queue, to book an attempt's outcome.
    pub(crate) fn queue_mut(&mut self) -> &mut PodQueue<PodKey> {
        &mut self.queue
    }

    /// The pod's queue entry.
    pub(crate) fn entry(&self, key: &PodKey) -> Option<&QueueEntry<PodKey>> {
        self.queue.get(key)
    }
}
