//! Step 3 of a sync (the start of KCM's `syncJob`): whether, and how, the
//! Job ends: a podFailurePolicy FailJob rule, `backoffLimit`,
//! `activeDeadlineSeconds`, backoffLimitPerIndex's failed indexes, or an
//! Indexed Job's successPolicy.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::conditions;
use super::failure_policy::{self, PolicyAction};
use super::indexed::{self, Intervals};
use super::pods::{self, phase, valid_index};
use super::success_policy;
use super::{Finish, Sync};
use crate::time::{add_secs, until};

impl<'a> Sync<'a> {
    /// Step 3: whether (and how) the Job ends, and the activeDeadline's
    /// requeue.
    pub(super) fn decide(&mut self) {
        let conds = self.status.conditions.as_deref().unwrap_or_default();
        if let Some(c) = conditions::find_true(conds, conditions::SUCCESS_CRITERIA_MET) {
            self.finish = Some(Finish::Success {
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
            });
        } else if let Some(c) = conditions::find_true(conds, conditions::FAILURE_TARGET) {
            self.finish = Some(Finish::Failure {
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
                written: true,
            });
        } else if let Some(msg) = self.fail_job_message() {
            self.finish = Some(Finish::failure(conditions::REASON_POD_FAILURE_POLICY, &msg));
        }
        if self.finish.is_none() {
            if self.failed > self.v.backoff_limit || self.past_backoff_limit_on_failure() {
                self.finish = Some(Finish::failure(
                    conditions::REASON_BACKOFF_LIMIT_EXCEEDED,
                    conditions::MESSAGE_BACKOFF_LIMIT_EXCEEDED,
                ));
            } else if let Some(deadline) = self.deadline() {
                if self.now >= deadline {
                    self.finish = Some(Finish::failure(
                        conditions::REASON_DEADLINE_EXCEEDED,
                        conditions::MESSAGE_DEADLINE_EXCEEDED,
                    ));
                } else {
                    self.requeue(until(self.now, deadline));
                }
            }
        }
        if self.v.indexed {
            self.decide_indexed();
        }
    }

    /// When `activeDeadlineSeconds` ends (not while suspended). A Job being
    /// resumed (`Suspended` still True) counts from now, the `startTime`
    /// its resume writes: KCM 1.33 checks the deadline against the
    /// `startTime` from before the suspension first, and so fails a Job
    /// resumed after its deadline at once, against the field's contract
    /// (the timer is "stopped and reset when the Job is resumed").
    fn deadline(&self) -> Option<Timestamp> {
        let ads = self.v.active_deadline_seconds?;
        if self.v.suspended {
            return None;
        }
        let conds = self.status.conditions.as_deref().unwrap_or_default();
        let start = if conditions::find_true(conds, conditions::SUSPENDED).is_some() {
            self.now
        } else {
            self.status.start_time.as_ref()?.0
        };
        add_secs(start, ads)
    }

    fn decide_indexed(&mut self) {
        let completions = self.v.index_limit();
        let stored = self.v.job.status.as_ref();
        self.prev_succeeded_indexes = Intervals::parse(
            stored
                .and_then(|s| s.completed_indexes.as_deref())
                .unwrap_or_default(),
            completions,
        );
        let newly: BTreeSet<i64> = self
            .pods
            .iter()
            .filter(|p| phase(p) == "Succeeded" && self.tracked(p))
            .filter_map(|p| valid_index(p, completions))
            .collect();
        self.succeeded_indexes = self.prev_succeeded_indexes.with_indexes(newly);
        self.succeeded = self.succeeded_indexes.total_i32();
        if let Some(per_index) = self.v.backoff_limit_per_index {
            let prev = Intervals::parse(
                stored
                    .and_then(|s| s.failed_indexes.as_deref())
                    .unwrap_or_default(),
                completions,
            );
            let newly: BTreeSet<i64> = self
                .pods
                .iter()
                .filter(|p| self.tracked(p) && self.index_failed(p, per_index))
                .filter_map(|p| valid_index(p, completions))
                .collect();
            let failed = prev.with_indexes(newly);
            if self.finish.is_none() {
                let n = failed.total();
                if self
                    .v
                    .max_failed_indexes
                    .is_some_and(|max| n > i64::from(max))
                {
                    self.finish = Some(Finish::failure(
                        conditions::REASON_MAX_FAILED_INDEXES_EXCEEDED,
                        conditions::MESSAGE_MAX_FAILED_INDEXES_EXCEEDED,
                    ));
                } else if n > 0
                    && n.saturating_add(self.succeeded_indexes.total()) >= i64::from(completions)
                {
                    self.finish = Some(Finish::failure(
                        conditions::REASON_FAILED_INDEXES,
                        conditions::MESSAGE_FAILED_INDEXES,
                    ));
                }
            }
            let active_indexes = indexed::indexes_of(&self.active);
            let candidates: Vec<(i64, &'a Pod)> = self
                .pods
                .iter()
                .copied()
                .filter(|p| self.is_new(p, &BTreeSet::new()) && self.is_failed(p))
                .filter_map(|p| valid_index(p, completions).map(|ix| (ix, p)))
                .collect();
            self.delayed = indexed::delayed_deletion_per_index(candidates, |ix| {
                self.succeeded_indexes.has(ix) || failed.has(ix) || active_indexes.contains(&ix)
            });
            self.failed_indexes = Some(failed);
        }
        if self.finish.is_none()
            && let Some(msg) = success_policy::matched_rule(
                self.v.success_policy,
                completions,
                &self.succeeded_indexes,
            )
        {
            self.finish = Some(Finish::Success {
                reason: conditions::REASON_SUCCESS_POLICY.to_owned(),
                message: msg,
            });
        }
    }

    /// KCM's `isIndexFailed`: the pod failed and either a FailIndex rule
    /// matched, or the failure counts and the index had already failed
    /// `backoffLimitPerIndex` times before it.
    fn index_failed(&self, p: &Pod, per_index: i32) -> bool {
        if !self.is_failed(p) {
            return false;
        }
        let counts = match failure_policy::matching_action(self.v.pod_failure_policy, p) {
            Some(PolicyAction::FailIndex) => return true,
            Some(a) => a.counts(),
            None => true,
        };
        counts && pods::index_failure_count(p) >= per_index
    }

    /// A failed pod that a podFailurePolicy FailJob rule matches: its
    /// message (KCM's `getFailJobMessage`, over every claimed pod).
    fn fail_job_message(&self) -> Option<String> {
        let policy = self.v.pod_failure_policy?;
        self.pods
            .iter()
            .filter(|p| self.is_failed(p))
            .find_map(|p| match failure_policy::matching_action(Some(policy), p) {
                Some(PolicyAction::FailJob(msg)) => Some(msg),
                _ => None,
            })
    }

    /// KCM's `pastBackoffLimitOnFailure`: with restartPolicy OnFailure, the
    /// container restarts of the pending and running pods reach the limit.
    fn past_backoff_limit_on_failure(&self) -> bool {
        if !self.v.restart_on_failure {
            return false;
        }
        let restarts = self
            .pods
            .iter()
            .filter(|p| matches!(phase(p), "Running" | "Pending"))
            .filter_map(|p| p.status.as_ref())
            .flat_map(|s| {
                s.init_container_statuses
                    .iter()
                    .flatten()
                    .chain(s.container_statuses.iter().flatten())
            })
            .fold(0i32, |n, c| n.saturating_add(c.restart_count));
        if self.v.backoff_limit == 0 {
            restarts > 0
        } else {
            restarts >= self.v.backoff_limit
        }
    }
}
