//! The in-memory [`Registry`], on two concurrent maps, and the read-only
//! [`RegistryReader`] every holder but the writer gets.
//!
//! `tasks` holds every task by id; `live` maps each pod to its live task and
//! is the dedup guard. Locks are always taken `live` before `tasks`, never
//! the other way round, so no two operations can wait on each other: paths
//! that start in `tasks` (status updates, unregister, gc) drop that lock
//! before they touch `live`. In the window between, `live` may still name a
//! task that has just finished; readers and `register` check the task's
//! state rather than trust the index, and the late cleanup removes the
//! index entry only if it still names that same task.

use std::time::SystemTime;

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use mesos::proto::{TaskId, TaskStatus};

use crate::machine::{self, Applied, StatusOutcome, Transition};
use crate::registry::{RegisterError, Registry, UpdateError};
use crate::retention::{self, Retention};
use crate::task::{PodKey, PodTask};

/// The live index's key: a pod's namespace, name and uid in one
/// allocation rather than three, as the index holds one per live task.
/// NUL cannot occur in any of the three (DNS names and UUIDs), so the
/// joined form is unambiguous.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct LiveKey(Box<str>);

impl LiveKey {
    fn of(key: &PodKey) -> Self {
        LiveKey(format!("{}\0{}\0{}", key.namespace, key.name, key.uid).into_boxed_str())
    }
}

/// The maps, shared by the writer and its readers.
#[derive(Debug, Default)]
struct Maps {
    tasks: DashMap<TaskId, PodTask>,
    live: DashMap<LiveKey, TaskId>,
}

impl Maps {
    fn get(&self, id: &TaskId) -> Option<PodTask> {
        self.tasks.get(id).map(|t| t.clone())
    }

    fn for_pod(&self, pod: &PodKey) -> Option<PodTask> {
        let id = self.live.get(&LiveKey::of(pod))?.clone();
        self.get(&id).filter(PodTask::is_live)
    }

    fn list(&self, filter: &dyn Fn(&PodTask) -> bool) -> Vec<PodTask> {
        self.tasks
            .iter()
            .filter(|t| filter(t.value()))
            .map(|t| t.value().clone())
            .collect()
    }
}

/// A [`Registry`] in memory, safe to share between threads.
///
/// It is not `Clone`: whoever owns it is the writer (in mesopod, the
/// scheduler core). Everyone else holds a [`RegistryReader`], which can
/// read the same tasks and has no way to change them.
#[derive(Debug, Default)]
pub struct InMemoryRegistry {
    maps: std::sync::Arc<Maps>,
    retention: Retention,
}

/// A read-only handle on an [`InMemoryRegistry`]: cheap to clone, sees
/// every change the writer makes, and cannot write.
///
/// # Caveats
/// Reads may be stale the moment they return; the writer may apply a
/// status update right after.
#[derive(Debug, Clone)]
pub struct RegistryReader {
    maps: std::sync::Arc<Maps>,
}

impl RegistryReader {
    /// The task with this id.
    pub fn get(&self, id: &TaskId) -> Option<PodTask> {
        self.maps.get(id)
    }

    /// The pod's live task, if it has one.
    pub fn for_pod(&self, pod: &PodKey) -> Option<PodTask> {
        self.maps.for_pod(pod)
    }

    /// Every task `filter` accepts (see [`Registry::list`]).
    pub fn list(&self, filter: &dyn Fn(&PodTask) -> bool) -> Vec<PodTask> {
        self.maps.list(filter)
    }

    /// How many tasks are registered, live or finished.
    pub fn len(&self) -> usize {
        self.maps.tasks.len()
    }

    /// Whether no task is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl InMemoryRegistry {
    /// An empty registry with the default [`Retention`].
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty registry that keeps finished tasks within `retention`.
    pub fn with_retention(retention: Retention) -> Self {
        InMemoryRegistry {
            retention,
            ..Self::default()
        }
    }

    /// The retention bounds in force.
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// A read-only handle on this registry.
    pub fn reader(&self) -> RegistryReader {
        RegistryReader {
            maps: std::sync::Arc::clone(&self.maps),
        }
    }

    /// Inserts into `tasks` unless the id is taken. Called with the pod's
    /// `live` entry held (or for a finished task, with nothing held).
    fn insert_task(&self, task: &PodTask) -> Result<(), RegisterError> {
        match self.maps.tasks.entry(task.id.clone()) {
            Entry::Occupied(_) => Err(RegisterError::DuplicateTaskId(task.id.clone())),
            Entry::Vacant(slot) => {
                slot.insert(task.clone());
                Ok(())
            }
        }
    }

    /// Drops the pod's index entry if it still names task `id`.
    fn unindex(&self, key: &PodKey, id: &TaskId) {
        self.maps
            .live
            .remove_if(&LiveKey::of(key), |_, live_id| live_id == id);
    }

    fn is_live(&self, id: &TaskId) -> bool {
        self.maps.tasks.get(id).is_some_and(|t| t.is_live())
    }
}

impl Registry for InMemoryRegistry {
    fn register(&self, task: PodTask) -> Result<PodTask, RegisterError> {
        if !task.is_live() {
            // A finished task (e.g. recovered from a finished pod) claims no pod.
            self.insert_task(&task)?;
            return Ok(task);
        }
        let key = task.pod_key();
        match self.maps.live.entry(LiveKey::of(&key)) {
            Entry::Occupied(mut claim) => {
                let existing = claim.get().clone();
                if existing != task.id && self.is_live(&existing) {
                    return Err(RegisterError::AlreadyLive { pod: key, existing });
                }
                if existing == task.id {
                    return Err(RegisterError::DuplicateTaskId(existing));
                }
                // The index still names a task that finished or left: take over.
                self.insert_task(&task)?;
                claim.insert(task.id.clone());
            }
            Entry::Vacant(claim) => {
                self.insert_task(&task)?;
                claim.insert(task.id.clone());
            }
        }
        tracing::debug!(task = %task.id, pod = %key, "task registered");
        Ok(task)
    }

    fn unregister(&self, id: &TaskId) -> Option<PodTask> {
        let (_, task) = self.maps.tasks.remove(id)?;
        self.unindex(&task.pod_key(), id);
        tracing::debug!(task = %id, "task unregistered");
        Some(task)
    }

    fn update(&self, task: PodTask) -> Result<PodTask, UpdateError> {
        let mut stored = self
            .maps
            .tasks
            .get_mut(&task.id)
            .ok_or_else(|| UpdateError::NotFound(task.id.clone()))?;
        if stored.key != task.key {
            return Err(UpdateError::PodMismatch {
                registered: Box::new(stored.pod_key()),
                given: Box::new(task.key),
                id: task.id,
            });
        }
        stored.pod = task.pod;
        stored.grace_period_seconds = task.grace_period_seconds;
        stored.priority = task.priority;
        stored.labels = task.labels;
        stored.roles = task.roles;
        stored.spec = task.spec;
        stored.offer_id = task.offer_id;
        stored.flags = stored.flags.union(task.flags);
        stored.updated = stored.updated.max(task.updated);
        Ok(stored.clone())
    }

    fn get(&self, id: &TaskId) -> Option<PodTask> {
        self.maps.get(id)
    }

    fn for_pod(&self, pod: &PodKey) -> Option<PodTask> {
        self.maps.for_pod(pod)
    }

    fn list(&self, filter: &dyn Fn(&PodTask) -> bool) -> Vec<PodTask> {
        self.maps.list(filter)
    }

    fn update_status(&self, status: &TaskStatus, now: SystemTime) -> StatusOutcome {
        let checked = match machine::check(status) {
            Ok(c) => c,
            Err(invalid) => {
                tracing::warn!(error = %invalid, "status update ignored");
                return StatusOutcome::Invalid(invalid);
            }
        };
        let Some(mut stored) = self.maps.tasks.get_mut(checked.task_id) else {
            tracing::debug!(task = %checked.task_id, state = %checked.state, "status for unknown task");
            return StatusOutcome::UnknownTask {
                task_id: checked.task_id.clone(),
                observed: checked.state,
            };
        };
        let applied = machine::apply(&mut stored, &checked, now);
        let task = stored.clone();
        // Release `tasks` before touching `live` (lock order: live, tasks).
        drop(stored);
        match applied {
            Applied::Moved { previous, current } => {
                if previous.is_live() && !current.is_live() {
                    self.unindex(&task.pod_key(), &task.id);
                }
                if previous != current {
                    tracing::debug!(task = %task.id, %previous, %current, mesos = %checked.state, "task state changed");
                }
                StatusOutcome::Applied(Transition {
                    previous,
                    current,
                    task,
                })
            }
            Applied::Duplicate => StatusOutcome::Duplicate { task },
            Applied::Stale(why) => {
                tracing::debug!(task = %task.id, ?why, "stale status update ignored");
                StatusOutcome::Stale { task, why }
            }
            Applied::Absorbed => StatusOutcome::Absorbed {
                task,
                observed: checked.state,
            },
        }
    }

    fn gc(&self, now: SystemTime) -> Vec<PodTask> {
        let finished: Vec<(TaskId, SystemTime)> = self
            .maps
            .tasks
            .iter()
            .filter(|t| !t.is_live())
            .map(|t| (t.id.clone(), t.finished_at().unwrap_or(t.updated)))
            .collect();
        let mut removed = Vec::new();
        for id in retention::select(&self.retention, finished, now) {
            // Finished is absorbing, so the check only guards against a
            // concurrent unregister having replaced nothing else.
            if let Some((_, task)) = self.maps.tasks.remove_if(&id, |_, t| !t.is_live()) {
                self.unindex(&task.pod_key(), &id);
                removed.push(task);
            }
        }
        if !removed.is_empty() {
            tracing::debug!(count = removed.len(), "finished tasks collected");
        }
        removed
    }

    fn len(&self) -> usize {
        self.maps.tasks.len()
    }
}
