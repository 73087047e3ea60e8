//! The runtime's pod updates as reliable Mesos status updates: made, kept until
//! acknowledged, sent, and sent again after a reconnect.

use super::*;

impl<A: Agent> Executor<A> {
    pub(super) fn status_update(&mut self, update: PodUpdate) -> call::Update {
        let state = match update.state {
            PodState::Starting => TaskState::TaskStarting,
            PodState::Running => TaskState::TaskRunning,
            PodState::Finished => TaskState::TaskFinished,
            PodState::Failed => TaskState::TaskFailed,
            PodState::Killed => TaskState::TaskKilled,
            PodState::Error => TaskState::TaskError,
            PodState::NotAdopted => TaskState::TaskFailed,
        };
        let reason = match update.state {
            PodState::Error => Some(Reason::ReasonTaskInvalid),
            PodState::NotAdopted => Some(Reason::ReasonExecutorTerminated),
            _ if update.deadline_exceeded => Some(Reason::ReasonMaxCompletionTimeReached),
            _ => None,
        };
        if update.state.is_terminal() {
            self.kill_policies.remove(&update.task_id);
        }
        let labels = update.pod_dir.as_ref().map(|dir| Labels {
            labels: vec![Label {
                key: POD_DIR_LABEL.into(),
                value: Some(dir.display().to_string()),
            }],
        });
        let timestamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .ok();
        let terminal = update.state.is_terminal();
        let task_id = update.task_id.clone();
        let built = call::Update {
            status: Some(TaskStatus {
                task_id: Some(update.task_id),
                state: state as i32,
                message: update.message,
                source: Some(Source::SourceExecutor as i32),
                reason: reason.map(|r| r as i32),
                data: update
                    .status
                    .as_ref()
                    .and_then(|s| crate::events::task_data(s, &update.events)),
                agent_id: self.agent_id.clone(),
                executor_id: Some(self.env.executor_id.clone()),
                timestamp,
                uuid: Some(uuid::Uuid::new_v4().as_bytes().to_vec()),
                labels,
                ..Default::default()
            }),
        };
        if terminal {
            self.latest.remove(&task_id);
        } else {
            self.latest.insert(task_id, built.clone());
        }
        built
    }

    /// Sends every live pod's last status again, as new updates.
    pub(super) async fn resend_statuses(&mut self) {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .ok();
        let again: Vec<call::Update> = self.latest.values().cloned().collect();
        tracing::info!(
            pods = again.len(),
            "the scheduler asked for every pod's status"
        );
        for mut update in again {
            if let Some(status) = update.status.as_mut() {
                status.uuid = Some(uuid::Uuid::new_v4().as_bytes().to_vec());
                status.timestamp = now;
                status.agent_id.clone_from(&self.agent_id);
            }
            self.unacked.add_update(update.clone());
            self.undelivered.push_back(update);
        }
        if self.retry_at.is_none() {
            self.flush().await;
        }
    }

    pub(super) async fn send(&mut self, update: PodUpdate) {
        let update = self.status_update(update);
        // Kept before it is sent: if the call or the connection fails, the
        // next SUBSCRIBE carries it.
        self.unacked.add_update(update.clone());
        self.undelivered.push_back(update);
        if self.retry_at.is_none() {
            self.flush().await;
        }
    }

    /// Sends queued updates in order until one fails; a failure schedules
    /// the next attempt.
    pub(super) async fn flush(&mut self) {
        self.retry_at = None;
        while let Some(update) = self.undelivered.front().cloned() {
            let call = Call {
                executor_id: Some(self.env.executor_id.clone()),
                framework_id: Some(self.env.framework_id.clone()),
                r#type: Some(call::Type::Update as i32),
                update: Some(update),
                ..Default::default()
            };
            match self.agent.call(call).await {
                Ok(()) => {
                    self.undelivered.pop_front();
                }
                Err(e @ AgentError::Unreachable(_)) => {
                    tracing::warn!(error = %e, queued = self.undelivered.len(), "update not delivered; retrying");
                    self.retry_at = Some(Instant::now() + UPDATE_RETRY_INTERVAL);
                    return;
                }
                Err(e @ AgentError::Refused(_)) => {
                    // Sending it again would be refused again; it stays
                    // unacknowledged and travels in the next SUBSCRIBE.
                    tracing::error!(error = %e, "agent refused an update");
                    self.undelivered.pop_front();
                }
            }
        }
    }
}
