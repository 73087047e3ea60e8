//! The pending queue: unbound pods of ours waiting for a place, in
//! scheduling order, with the pod objects they will be placed as.

use std::collections::HashMap;
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

    /// Takes the pod out: placed, bound elsewhere, gone, or not ours.
    pub(crate) fn forget(&mut self, key: &PodKey) {
        self.queue.remove(key);
        self.waiting.remove(key);
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
