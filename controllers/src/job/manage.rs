//! Step 4 of a sync: the pod writes (KCM's `deleteActivePods` for a Job
//! that ends, `manageJob` otherwise) and the `Suspended` condition.

use k8s_openapi::api::core::v1::Pod;

use super::backoff::remaining;
use super::conditions::{self, REASON_COMPLETIONS_REACHED, REASON_RESUMED, REASON_SUSPENDED};
use super::create::{IndexedPod, base_pod, with_index};
use super::failure_policy::failure_counts;
use super::indexed::{self, Intervals, active_pods_for_removal, first_pending_indexes};
use super::pods::{
    finished_at, index_absolute_failure_count, index_failure_count, index_ignored_failure_count,
    is_terminating, name, uid,
};
use super::{Finish, MAX_POD_CREATE_DELETE_PER_SYNC, MIN_BACKOFF_REQUEUE, Sync, remove_finalizer};
use crate::action::{Action, Event};
use crate::error::ReconcileError;
use crate::pod_state::is_ready;
use crate::replicaset::rank::pods_to_delete;
use crate::time::wire_time;

impl<'a> Sync<'a> {
    /// The pod writes of this sync, and the success and `Suspended`
    /// decisions that depend on them.
    pub(super) fn act(
        &mut self,
        expectations_satisfied: bool,
    ) -> Result<Vec<Action>, ReconcileError> {
        let mut out = Vec::new();
        if self.finish.is_some() {
            // Ending: every active pod goes, keeping its finalizer (it is
            // counted as failed, or not at all after a success, below).
            let active = std::mem::take(&mut self.active);
            for p in &active {
                out.push(delete(p));
            }
            self.note_deleted(&active);
            self.active = active;
            if !expectations_satisfied {
                // Pods may exist that the cache has not shown yet: the
                // condition waits for a sync that sees them all.
                self.finish = None;
            }
            return Ok(out);
        }
        let mut managed = false;
        if expectations_satisfied && !self.v.deleting {
            out = self.manage()?;
            managed = true;
        }
        let complete = match self.v.completions {
            None => self.succeeded > 0 && self.active_count == 0,
            Some(c) => self.succeeded >= c && self.active_count == 0,
        };
        if complete {
            self.finish = Some(Finish::Success {
                reason: REASON_COMPLETIONS_REACHED.to_owned(),
                message: conditions::MESSAGE_COMPLETIONS_REACHED.to_owned(),
            });
        } else if managed {
            self.suspended_condition();
        }
        Ok(out)
    }

    /// `Suspended` True while suspended; False (and `startTime` anew, so
    /// the activeDeadline counts from the resume) once resumed.
    fn suspended_condition(&mut self) {
        let conds = self.status.conditions.get_or_insert_with(Vec::new);
        if self.v.suspended {
            if conditions::ensure(
                conds,
                conditions::SUSPENDED,
                "True",
                REASON_SUSPENDED,
                "Job suspended",
                self.now,
            ) {
                self.events
                    .push(Event::normal("Suspended", "Job suspended".into()));
            }
        } else if conditions::ensure(
            conds,
            conditions::SUSPENDED,
            "False",
            REASON_RESUMED,
            "Job resumed",
            self.now,
        ) {
            self.events
                .push(Event::normal("Resumed", "Job resumed".into()));
            self.status.start_time = Some(wire_time(self.now));
        }
    }

    /// KCM's `manageJob`.
    fn manage(&mut self) -> Result<Vec<Action>, ReconcileError> {
        let active_n = self.active.len();
        if self.v.suspended {
            let gone = self.for_removal(active_n);
            return Ok(self.delete_uncounted(&gone));
        }
        let parallelism = usize::try_from(self.v.parallelism).unwrap_or(0);
        let want = match self.v.completions {
            None if self.succeeded > 0 => active_n,
            None => parallelism,
            Some(c) => usize::try_from(c.saturating_sub(self.succeeded))
                .unwrap_or(0)
                .min(parallelism),
        };
        let mut gone = self.for_removal(active_n.saturating_sub(want));
        gone.truncate(MAX_POD_CREATE_DELETE_PER_SYNC);
        if !gone.is_empty() {
            // A sync deletes or creates, never both; deletes first.
            return Ok(self.delete_uncounted(&gone));
        }
        let waiting = if self.v.only_replace_failed {
            usize::try_from(self.terminating).unwrap_or(0)
        } else {
            0
        };
        let diff = want.saturating_sub(waiting).saturating_sub(active_n);
        if diff == 0 {
            return Ok(Vec::new());
        }
        if self.v.backoff_limit_per_index.is_none() {
            let left = self.backoff.remaining(self.now);
            if !left.is_zero() {
                self.requeue(left.max(MIN_BACKOFF_REQUEUE));
                return Ok(Vec::new());
            }
        }
        let diff = diff.min(MAX_POD_CREATE_DELETE_PER_SYNC);
        let base = base_pod(self.v.job, self.v.indexed)?;
        let pods: Vec<Pod> = if self.v.indexed {
            let Some(indexes) = self.indexes_to_create(diff) else {
                return Ok(Vec::new());
            };
            indexes
                .into_iter()
                .map(|index| {
                    let failure_counts = self
                        .v
                        .backoff_limit_per_index
                        .map(|_| self.new_index_failure_counts(index));
                    with_index(
                        &base,
                        self.v.name,
                        IndexedPod {
                            index,
                            failure_counts,
                        },
                    )
                })
                .collect()
        } else {
            vec![base; diff]
        };
        let created = i32::try_from(pods.len()).unwrap_or(i32::MAX);
        self.active_count = self.active_count.saturating_add(created);
        Ok(pods
            .into_iter()
            .map(|pod| Action::CreatePod { pod })
            .collect())
    }

    /// KCM's `activePodsForRemoval`: at least `rm_at_least` active pods, an
    /// Indexed Job's repeated or out-of-range indexes first.
    fn for_removal(&self, rm_at_least: usize) -> Vec<&'a Pod> {
        if self.v.indexed {
            active_pods_for_removal(&self.active, self.v.index_limit(), rm_at_least, self.now)
        } else {
            pods_to_delete(&self.active, &[], rm_at_least, self.now)
        }
    }

    /// KCM's `deleteJobPods`: each pod loses its finalizer, then is
    /// deleted, so it is not counted as failed.
    fn delete_uncounted(&mut self, gone: &[&'a Pod]) -> Vec<Action> {
        let mut out = Vec::with_capacity(gone.len() * 2);
        for p in gone {
            if self.tracked(p) {
                out.push(remove_finalizer(p));
            }
            out.push(delete(p));
        }
        self.note_deleted(gone);
        out
    }

    fn note_deleted(&mut self, gone: &[&Pod]) {
        let n = i32::try_from(gone.len()).unwrap_or(i32::MAX);
        let ready = i32::try_from(gone.iter().filter(|p| is_ready(p)).count()).unwrap_or(i32::MAX);
        self.active_count = self.active_count.saturating_sub(n).max(0);
        self.terminating = self.terminating.saturating_add(n);
        self.ready = self.ready.saturating_sub(ready).max(0);
    }

    /// The indexes to start now, lowest pending first; `None` when, with
    /// backoffLimitPerIndex, every one of them is still backing off (the
    /// sync then requeues for the first to be ready).
    fn indexes_to_create(&mut self, count: usize) -> Option<Vec<i64>> {
        let completions = self.v.index_limit();
        let mut non_pending: Intervals = self
            .succeeded_indexes
            .with_indexes(indexed::indexes_of(&self.active));
        if self.v.only_replace_failed {
            let terminating: Vec<&Pod> = self
                .pods
                .iter()
                .copied()
                .filter(|p| is_terminating(p))
                .collect();
            non_pending = non_pending.with_indexes(indexed::indexes_of(&terminating));
        }
        if let Some(failed) = &self.failed_indexes {
            non_pending = non_pending.merge(failed);
        }
        let indexes = first_pending_indexes(&non_pending, count, completions);
        if self.v.backoff_limit_per_index.is_none() {
            return Some(indexes);
        }
        // KCM's getPodCreationInfoForIndependentIndexes.
        let mut now_ready = Vec::new();
        let mut soonest: Option<std::time::Duration> = None;
        for ix in indexes {
            let left = self
                .delayed
                .get(&ix)
                .map_or(std::time::Duration::ZERO, |p| {
                    remaining(
                        index_absolute_failure_count(p).saturating_add(1),
                        finished_at(p),
                        self.now,
                    )
                });
            if left.is_zero() {
                now_ready.push(ix);
            } else {
                soonest = Some(soonest.map_or(left, |s| s.min(left)));
            }
        }
        if now_ready.is_empty() {
            if let Some(d) = soonest {
                self.requeue(d.max(MIN_BACKOFF_REQUEUE));
            }
            return None;
        }
        Some(now_ready)
    }

    /// KCM's `getNewIndexFailureCounts`: the failure counts of the pod an
    /// index's new pod replaces, plus that pod's own failure (ignored if an
    /// Ignore rule matched it).
    fn new_index_failure_counts(&self, index: i64) -> (i32, i32) {
        let Some(p) = self.delayed.get(&index) else {
            return (0, 0);
        };
        let (failed, ignored) = (index_failure_count(p), index_ignored_failure_count(p));
        if failure_counts(self.v.pod_failure_policy, p) {
            (failed.saturating_add(1), ignored)
        } else {
            (failed, ignored.saturating_add(1))
        }
    }
}

fn delete(p: &Pod) -> Action {
    Action::DeletePod {
        name: name(p).to_owned(),
        uid: uid(p).to_owned(),
    }
}
