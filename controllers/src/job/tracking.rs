//! Step 5 of a sync (KCM's `trackJobStatusAndRemoveFinalizers` and
//! `enactJobFinished`): count what earlier syncs recorded, record the pods
//! that finished since, pick the finalizers to remove, and end the Job
//! when nothing is left to count or terminating.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::{JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;

use super::conditions::{
    self, COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, new_condition,
};
use super::failure_policy::failure_counts;
use super::pods::{completion_index, phase, uid, valid_index};
use super::{Finish, MAX_UNCOUNTED_PODS, Sync, remove_finalizer};
use crate::action::{Action, Event};
use crate::time::wire_time;

/// The status to write (if it differs from the stored one) and the
/// finalizer removals that follow it.
pub(super) struct Tracked {
    pub(super) status: JobStatus,
    pub(super) removals: Vec<Action>,
}

impl Sync<'_> {
    pub(super) fn track(&mut self) -> Tracked {
        let mut status = std::mem::take(&mut self.status);
        let stored = status.uncounted_terminated_pods.take().unwrap_or_default();
        let mut unc_succeeded = stored.succeeded.unwrap_or_default();
        let mut unc_failed = stored.failed.unwrap_or_default();

        // Count the uids whose pods have lost the finalizer (or are gone).
        let with_finalizer: BTreeSet<&str> = self
            .pods
            .iter()
            .filter(|p| self.unprocessed(p))
            .map(|p| uid(p))
            .collect();
        let before = unc_succeeded.len();
        unc_succeeded.retain(|u| with_finalizer.contains(u.as_str()));
        let counted_succeeded = before - unc_succeeded.len();
        let before = unc_failed.len();
        unc_failed.retain(|u| with_finalizer.contains(u.as_str()));
        let counted_failed = before - unc_failed.len();
        let add = |n: Option<i32>, k: usize| {
            n.unwrap_or(0)
                .saturating_add(i32::try_from(k).unwrap_or(i32::MAX))
        };
        status.succeeded = Some(add(status.succeeded, counted_succeeded));
        status.failed = Some(add(status.failed, counted_failed));

        // Record the pods that finished since, and let go of their
        // finalizers (and of every one once the Job ends or is deleted).
        let completions = self.v.index_limit();
        let mut pods: Vec<&Pod> = self.pods.clone();
        if self.v.indexed {
            // Completed indexes come in order.
            pods.sort_by_key(|p| completion_index(p));
        }
        let ending_in_failure = matches!(self.finish, Some(Finish::Failure { .. }));
        let mut new_indexes: Vec<i64> = Vec::new();
        let mut removals = Vec::new();
        let mut reached_max = false;
        for p in pods {
            if !self.unprocessed(p) {
                continue;
            }
            let failed = self.is_failed(p);
            if !self.can_remove_finalizer(p, failed) {
                continue;
            }
            removals.push(remove_finalizer(p));
            let u = uid(p);
            if phase(p) == "Succeeded" && !self.uncounted_failed.contains(u) {
                if self.v.indexed {
                    if let Some(ix) = valid_index(p, completions)
                        && !self.prev_succeeded_indexes.has(ix)
                    {
                        new_indexes.push(ix);
                    }
                } else if !self.uncounted_succeeded.contains(u) {
                    unc_succeeded.push(u.to_owned());
                }
            } else if (failed || ending_in_failure)
                && !self.uncounted_failed.contains(u)
                && (!self.v.indexed || valid_index(p, completions).is_some())
                && failure_counts(self.v.pod_failure_policy, p)
            {
                // A pod still running when the Job fails counts as failed.
                unc_failed.push(u.to_owned());
            }
            if new_indexes.len() + unc_succeeded.len() + unc_failed.len() >= MAX_UNCOUNTED_PODS {
                // The rest waits for the next sync, which this one's writes
                // trigger.
                reached_max = true;
                break;
            }
        }
        if self.v.indexed {
            new_indexes.sort_unstable();
            self.succeeded_indexes = self.succeeded_indexes.with_indexes(new_indexes);
            status.succeeded = Some(self.succeeded_indexes.total_i32());
            status.completed_indexes = Some(self.succeeded_indexes.to_string());
            status.failed_indexes = self.failed_indexes.as_ref().map(ToString::to_string);
        }

        // The interim condition, then the terminal one once every pod is
        // counted and none is terminating.
        let conds = status.conditions.get_or_insert_with(Vec::new);
        let terminal = match &self.finish {
            None => None,
            Some(Finish::Failure {
                reason,
                message,
                written,
            }) => {
                if !written {
                    conds.push(new_condition(
                        FAILURE_TARGET,
                        "True",
                        reason,
                        message,
                        self.now,
                    ));
                }
                Some((FAILED, reason.clone(), message.clone()))
            }
            Some(Finish::Success { reason, message }) => {
                if conditions::find_true(conds, SUCCESS_CRITERIA_MET).is_none() {
                    conds.push(new_condition(
                        SUCCESS_CRITERIA_MET,
                        "True",
                        reason,
                        message,
                        self.now,
                    ));
                }
                Some((COMPLETE, reason.clone(), message.clone()))
            }
        };
        let all_counted = unc_succeeded.is_empty() && unc_failed.is_empty();
        if let Some((type_, reason, message)) = terminal
            && all_counted
            && !reached_max
            && self.terminating == 0
        {
            conditions::ensure(conds, type_, "True", &reason, &message, self.now);
            if type_ == COMPLETE {
                status.completion_time = Some(wire_time(self.now));
                if self
                    .v
                    .completions
                    .is_some_and(|c| status.succeeded.unwrap_or(0) > c)
                {
                    self.events.push(Event::warning(
                        "TooManySucceededPods",
                        "Too many succeeded pods running after completion count reached".into(),
                    ));
                }
                self.events
                    .push(Event::normal("Completed", "Job completed".into()));
            } else {
                self.events.push(Event::warning(&reason, message));
            }
        }

        status.active = Some(self.active_count);
        status.ready = Some(self.ready);
        status.terminating = Some(self.terminating);
        status.uncounted_terminated_pods = Some(UncountedTerminatedPods {
            succeeded: (!unc_succeeded.is_empty()).then_some(unc_succeeded),
            failed: (!unc_failed.is_empty()).then_some(unc_failed),
        });
        Tracked {
            status: super::status::omit_empty(status),
            removals,
        }
    }

    /// KCM's `canRemoveFinalizer`: when the Job is being deleted or ends,
    /// when the pod succeeded, or when it failed, unless (with
    /// backoffLimitPerIndex) it is the failed pod its index's replacement
    /// will read its failure count from.
    fn can_remove_finalizer(&self, p: &Pod, failed: bool) -> bool {
        if self.v.deleting || self.finish.is_some() || phase(p) == "Succeeded" {
            return true;
        }
        if !failed {
            return false;
        }
        if self.v.backoff_limit_per_index.is_some()
            && let Some(ix) = completion_index(p)
            && self.delayed.get(&ix).is_some_and(|d| uid(d) == uid(p))
        {
            return false;
        }
        true
    }
}
