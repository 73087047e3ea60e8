//! What the agent has not acknowledged yet: kept, and resent in the next
//! SUBSCRIBE, so a dropped connection loses no update.
//!
//! Mesos' rule: an update stays until an ACKNOWLEDGED event names its uuid;
//! a launched task stays "unacknowledged" until any of its updates is
//! acknowledged (then the agent knows the executor has it).

use mesos::proto::TaskId;
use mesos::proto::TaskInfo;
use mesos::proto::executor::call::{Subscribe, Update};

/// Unacknowledged tasks and updates, in the order they happened.
#[derive(Debug, Default, Clone)]
pub struct Unacknowledged {
    tasks: Vec<TaskInfo>,
    updates: Vec<Update>,
}

impl Unacknowledged {
    /// Remembers a launched task.
    pub fn add_task(&mut self, task: TaskInfo) {
        if !self.tasks.iter().any(|t| t.task_id == task.task_id) {
            self.tasks.push(task);
        }
    }

    /// Remembers an update sent (or about to be sent) to the agent.
    pub fn add_update(&mut self, update: Update) {
        self.updates.push(update);
    }

    /// Forgets the update with this uuid, and its task. Returns whether the
    /// update was known (a duplicate ACKNOWLEDGED is harmless).
    pub fn acknowledge(&mut self, task_id: Option<&TaskId>, uuid: &[u8]) -> bool {
        let before = self.updates.len();
        self.updates
            .retain(|u| u.status.as_ref().and_then(|s| s.uuid.as_deref()) != Some(uuid));
        if let Some(task_id) = task_id {
            self.tasks.retain(|t| t.task_id.as_ref() != Some(task_id));
        }
        self.updates.len() != before
    }

    /// The SUBSCRIBE payload: everything still unacknowledged.
    pub fn subscribe(&self) -> Subscribe {
        Subscribe {
            unacknowledged_tasks: self.tasks.clone(),
            unacknowledged_updates: self.updates.clone(),
        }
    }

    /// Number of updates not yet acknowledged.
    pub fn pending_updates(&self) -> usize {
        self.updates.len()
    }

    /// Whether nothing waits for an acknowledgement.
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mesos::proto::TaskStatus;

    fn update(task: &str, uuid: u8) -> Update {
        Update {
            status: Some(TaskStatus {
                task_id: Some(TaskId::new(task)),
                uuid: Some(vec![uuid; 16]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn updates_stay_until_their_uuid_is_acknowledged() {
        let mut u = Unacknowledged::default();
        u.add_task(TaskInfo {
            task_id: Some(TaskId::new("t1")),
            ..Default::default()
        });
        u.add_update(update("t1", 1));
        u.add_update(update("t1", 2));
        let sub = u.subscribe();
        assert_eq!(sub.unacknowledged_tasks.len(), 1);
        assert_eq!(sub.unacknowledged_updates.len(), 2);

        assert!(u.acknowledge(Some(&TaskId::new("t1")), &[1; 16]));
        assert!(
            !u.acknowledge(Some(&TaskId::new("t1")), &[1; 16]),
            "a duplicate ack changes nothing"
        );
        let sub = u.subscribe();
        assert!(
            sub.unacknowledged_tasks.is_empty(),
            "an acked update acknowledges its task"
        );
        assert_eq!(sub.unacknowledged_updates, vec![update("t1", 2)]);
    }
}
