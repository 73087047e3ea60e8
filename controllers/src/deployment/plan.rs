//! One Deployment sync in progress: the ReplicaSets as this sync has
//! changed them, the Deployment's working status, and the actions so far.
//!
//! KCM's sync writes each change as it goes and carries on with the
//! object the API returned. Here the change goes into the working copy and
//! an action; a second change to the same ReplicaSet in the same sync
//! (annotations synced, then scaled) amends the first action, so the
//! runner sends one PUT per ReplicaSet and never races its own
//! resourceVersion.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use k8s_openapi::jiff::Timestamp;

use super::params::Params;
use super::revision::{
    REVISION_ANNOTATION, replicas_annotations_need_update, set_replicas_annotations,
};
use super::status::normalized;
use crate::action::{Action, Event, Reconciled, Status};

/// Which way a scale goes, for the event's wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Up,
    Down,
}

pub(crate) struct Plan<'a> {
    pub(crate) d: &'a Deployment,
    pub(crate) p: Params,
    pub(crate) now: Timestamp,
    /// The Deployment's ReplicaSets as this sync has made them, oldest
    /// first (creation time, then name); one created this sync comes last.
    pub(crate) rses: Vec<ReplicaSet>,
    /// `d.status` with the conditions this sync has set so far (KCM mutates
    /// the Deployment's status in place as it goes).
    pub(crate) status: DeploymentStatus,
    /// The Deployment's revision annotation, once this sync has decided it.
    revision: Option<String>,
    actions: Vec<Action>,
}

impl<'a> Plan<'a> {
    pub(crate) fn new(d: &'a Deployment, p: Params, rses: &[ReplicaSet], now: Timestamp) -> Self {
        let mut rses = rses.to_vec();
        // KCM's FindNewReplicaSet sorts the list in place by creation time;
        // every later "oldest first" relies on that order.
        rses.sort_by(|a, b| {
            (&a.metadata.creation_timestamp, &a.metadata.name)
                .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
        });
        Plan {
            d,
            p,
            now,
            rses,
            status: d.status.clone().unwrap_or_default(),
            revision: None,
            actions: Vec::new(),
        }
    }

    /// Indices of every ReplicaSet but `new`, oldest first.
    pub(crate) fn olds(&self, new: Option<usize>) -> Vec<usize> {
        (0..self.rses.len()).filter(|i| Some(*i) != new).collect()
    }

    /// [`Plan::olds`] with spec.replicas > 0 (`FilterActiveReplicaSets`).
    pub(crate) fn active_olds(&self, new: Option<usize>) -> Vec<usize> {
        self.olds(new)
            .into_iter()
            .filter(|i| replicas(&self.rses[*i]) > 0)
            .collect()
    }

    /// Replace ReplicaSet `i` with `rs` and have the runner PUT it.
    pub(crate) fn put(&mut self, i: usize, rs: ReplicaSet) {
        let name = rs.metadata.name.clone();
        let pending = self.actions.iter_mut().find_map(|a| match a {
            Action::UpdateReplicaSet { rs: r } | Action::CreateReplicaSet { rs: r }
                if r.metadata.name == name =>
            {
                Some(r)
            }
            _ => None,
        });
        match pending {
            Some(r) => *r = rs.clone(),
            None => self
                .actions
                .push(Action::UpdateReplicaSet { rs: rs.clone() }),
        }
        self.rses[i] = rs;
    }

    /// Add `rs` (to be created) and return its index.
    pub(crate) fn create(&mut self, rs: ReplicaSet) -> usize {
        self.actions
            .push(Action::CreateReplicaSet { rs: rs.clone() });
        self.rses.push(rs);
        self.rses.len() - 1
    }

    pub(crate) fn delete(&mut self, rs: &ReplicaSet) {
        self.actions.push(Action::DeleteReplicaSet {
            name: rs.metadata.name.clone().unwrap_or_default(),
            uid: rs.metadata.uid.clone().unwrap_or_default(),
        });
    }

    pub(crate) fn event(&mut self, e: Event) {
        self.actions.push(Action::Event(e));
    }

    /// The Deployment's revision annotation becomes `revision`.
    pub(crate) fn set_revision(&mut self, revision: String) {
        self.revision = Some(revision);
    }

    /// KCM's `scaleReplicaSet`: write the new size and the replica
    /// annotations if either changed; a size change gets a
    /// `ScalingReplicaSet` event. True if the size changed.
    pub(crate) fn scale(&mut self, i: usize, new_scale: i32, direction: Direction) -> bool {
        let rs = &self.rses[i];
        let old_scale = replicas(rs);
        let resize = old_scale != new_scale;
        let (desired, max) = (self.p.replicas, self.p.max_total());
        if !resize && !replicas_annotations_need_update(rs, desired, max) {
            return false;
        }
        let mut rs = rs.clone();
        rs.spec.get_or_insert_with(Default::default).replicas = Some(new_scale);
        set_replicas_annotations(&mut rs, desired, max);
        let name = rs.metadata.name.clone().unwrap_or_default();
        self.put(i, rs);
        if resize {
            let verb = match direction {
                Direction::Up => "up",
                Direction::Down => "down",
            };
            self.event(Event::normal(
                "ScalingReplicaSet",
                format!("Scaled {verb} replica set {name} from {old_scale} to {new_scale}"),
            ));
        }
        resize
    }

    /// KCM's `scaleReplicaSetAndRecordEvent`: nothing if the size is
    /// already right, else [`Plan::scale`] in the direction of the change.
    pub(crate) fn scale_to(&mut self, i: usize, new_scale: i32) -> bool {
        let old = replicas(&self.rses[i]);
        if old == new_scale {
            return false;
        }
        let direction = if old < new_scale {
            Direction::Up
        } else {
            Direction::Down
        };
        self.scale(i, new_scale, direction)
    }

    /// The actions, then the Deployment's revision annotation and its
    /// status when they differ from what is stored.
    pub(crate) fn finish(
        mut self,
        status: DeploymentStatus,
        requeue_after: Option<std::time::Duration>,
    ) -> Reconciled {
        let stored = self
            .d
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION_ANNOTATION));
        if let Some(rev) = self.revision.take().filter(|r| Some(r) != stored) {
            self.actions.push(Action::SetOwnerAnnotation {
                key: REVISION_ANNOTATION.into(),
                value: rev,
            });
        }
        let current = self.d.status.clone().unwrap_or_default();
        if normalized(&status) != normalized(&current) {
            self.actions
                .push(Action::WriteStatus(Status::Deployment(normalized(&status))));
        }
        Reconciled {
            actions: self.actions,
            requeue_after,
        }
    }
}

/// `spec.replicas` of a ReplicaSet (the API defaults it to 1).
pub(crate) fn replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `status.replicas`, `readyReplicas`, `availableReplicas` (a negative
/// count, which no controller writes, reads as 0).
pub(crate) fn status_counts(rs: &ReplicaSet) -> (i32, i32, i32) {
    rs.status.as_ref().map_or((0, 0, 0), |s| {
        (
            s.replicas.max(0),
            s.ready_replicas.unwrap_or(0).max(0),
            s.available_replicas.unwrap_or(0).max(0),
        )
    })
}

/// `status.availableReplicas`.
pub(crate) fn available(rs: &ReplicaSet) -> i32 {
    status_counts(rs).2
}

pub(crate) fn name(rs: &ReplicaSet) -> &str {
    rs.metadata.name.as_deref().unwrap_or_default()
}

/// Sum as i64 (no overflow however many ReplicaSets), clamped back to i32.
pub(crate) fn sum(values: impl IntoIterator<Item = i32>) -> i32 {
    let total: i64 = values.into_iter().map(i64::from).sum();
    i32::try_from(total).unwrap_or(if total < 0 { i32::MIN } else { i32::MAX })
}
