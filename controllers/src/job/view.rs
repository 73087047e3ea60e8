//! The parts of a Job's spec a sync reads, with the API's defaults applied
//! (a stored object may lack what defaulting would have set).

use k8s_openapi::api::batch::v1::{Job, JobSpec, PodFailurePolicy, SuccessPolicy};

use crate::error::ReconcileError;
use crate::selector::{Selector, SelectorError};

/// `backoffLimit` when unset.
const DEFAULT_BACKOFF_LIMIT: i32 = 6;

/// The Job as a sync sees it.
pub(crate) struct View<'a> {
    pub(crate) job: &'a Job,
    pub(crate) name: &'a str,
    pub(crate) selector: Selector,
    /// `completionMode: Indexed`.
    pub(crate) indexed: bool,
    /// `spec.completions`; always set for an Indexed Job.
    pub(crate) completions: Option<i32>,
    /// `spec.parallelism` (default 1), never negative.
    pub(crate) parallelism: i32,
    /// `spec.backoffLimit` (default 6, or int32 max with
    /// backoffLimitPerIndex).
    pub(crate) backoff_limit: i32,
    /// `spec.backoffLimitPerIndex` (Indexed only).
    pub(crate) backoff_limit_per_index: Option<i32>,
    pub(crate) max_failed_indexes: Option<i32>,
    pub(crate) suspended: bool,
    /// Replacements wait for the Failed phase: `podReplacementPolicy:
    /// Failed`, which a podFailurePolicy implies (KCM's
    /// `onlyReplaceFailedPods`).
    pub(crate) only_replace_failed: bool,
    pub(crate) pod_failure_policy: Option<&'a PodFailurePolicy>,
    pub(crate) success_policy: Option<&'a SuccessPolicy>,
    pub(crate) active_deadline_seconds: Option<i64>,
    /// `restartPolicy: OnFailure`: container restarts count towards
    /// backoffLimit.
    pub(crate) restart_on_failure: bool,
    /// The Job is being deleted.
    pub(crate) deleting: bool,
}

/// What decides how (or whether) a Job is synced before its spec is read.
pub(crate) enum Mode {
    NonIndexed,
    Indexed,
    /// A completion mode this version does not know: KCM skips the Job
    /// with a Warning.
    Unknown,
}

pub(crate) fn mode(spec: &JobSpec) -> Mode {
    match spec.completion_mode.as_deref() {
        None | Some("NonIndexed") => Mode::NonIndexed,
        Some("Indexed") => Mode::Indexed,
        Some(_) => Mode::Unknown,
    }
}

impl<'a> View<'a> {
    /// # Errors
    /// No spec or selector, a selector that cannot be evaluated, an
    /// Indexed Job without completions.
    pub(crate) fn of(
        job: &'a Job,
        spec: &'a JobSpec,
        indexed: bool,
    ) -> Result<Self, ReconcileError> {
        let selector = Selector::new(spec.selector.as_ref().ok_or(SelectorError::Missing)?)?;
        let completions = spec.completions.map(|c| c.max(0));
        if indexed && completions.is_none() {
            return Err(ReconcileError::InvalidSpec(
                "spec.completions: Required value: when completion mode is Indexed",
            ));
        }
        let backoff_limit_per_index = spec.backoff_limit_per_index.filter(|_| indexed);
        let default_limit = if backoff_limit_per_index.is_some() {
            i32::MAX
        } else {
            DEFAULT_BACKOFF_LIMIT
        };
        Ok(View {
            job,
            name: job.metadata.name.as_deref().unwrap_or_default(),
            selector,
            indexed,
            completions,
            parallelism: spec.parallelism.unwrap_or(1).max(0),
            backoff_limit: spec.backoff_limit.unwrap_or(default_limit),
            backoff_limit_per_index,
            max_failed_indexes: spec.max_failed_indexes,
            suspended: spec.suspend == Some(true),
            only_replace_failed: spec.pod_replacement_policy.as_deref() == Some("Failed")
                || spec.pod_failure_policy.is_some(),
            pod_failure_policy: spec.pod_failure_policy.as_ref(),
            success_policy: spec.success_policy.as_ref(),
            active_deadline_seconds: spec.active_deadline_seconds,
            restart_on_failure: spec
                .template
                .spec
                .as_ref()
                .and_then(|s| s.restart_policy.as_deref())
                == Some("OnFailure"),
            deleting: job.metadata.deletion_timestamp.is_some(),
        })
    }

    /// `completions` for index arithmetic (0 when unset: no valid index).
    pub(crate) fn index_limit(&self) -> i32 {
        self.completions.unwrap_or(0)
    }
}
