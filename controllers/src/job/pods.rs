//! What the Job controller reads from one pod: its tracking finalizer, its
//! completion index and per-index failure counts, whether it failed or is
//! terminating, and when it finished.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::{
    COMPLETION_INDEX_ANNOTATION, INDEX_FAILURE_COUNT_ANNOTATION,
    INDEX_IGNORED_FAILURE_COUNT_ANNOTATION, JOB_TRACKING_FINALIZER,
};

/// The pod's phase, `""` when unset.
pub(crate) fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Succeeded or Failed.
pub(crate) fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Being deleted and not yet terminal (KCM's `IsPodTerminating`): what
/// `status.terminating` counts.
pub(crate) fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() && !is_terminal(pod)
}

/// The pod still carries `batch.kubernetes.io/job-tracking`: the Job has
/// not counted it yet (or it is still running).
pub(crate) fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == JOB_TRACKING_FINALIZER)
}

/// The pod's uid (`""` if unset, which no stored pod has).
pub(crate) fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// The pod's name.
pub(crate) fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// KCM's `isPodFailed`: phase Failed; or, unless replacements wait for the
/// Failed phase (`podReplacementPolicy: Failed`, implied by a
/// podFailurePolicy), a pod being deleted that has not succeeded. That is
/// how a pod deleted before it finished, or lost with its node, counts as
/// a failure when it never reaches the Failed phase.
pub(crate) fn is_failed(pod: &Pod, only_replace_failed: bool) -> bool {
    if phase(pod) == "Failed" {
        return true;
    }
    if only_replace_failed {
        return false;
    }
    pod.metadata.deletion_timestamp.is_some() && phase(pod) != "Succeeded"
}

/// The `batch.kubernetes.io/job-completion-index` annotation as a
/// non-negative integer (KCM's `getCompletionIndex`: anything else means
/// no index).
pub(crate) fn completion_index(pod: &Pod) -> Option<i64> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(COMPLETION_INDEX_ANNOTATION)?
        .parse::<i64>()
        .ok()
        .filter(|i| *i >= 0)
}

/// The index, if it is valid for `completions` (`0 ≤ i < completions`).
pub(crate) fn valid_index(pod: &Pod, completions: i32) -> Option<i64> {
    completion_index(pod).filter(|i| *i < i64::from(completions))
}

/// An int32 annotation as KCM's `parseInt32` reads it: 0 when absent,
/// unparsable, negative or beyond int32.
fn int32_annotation(pod: &Pod, key: &str) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .and_then(|v| v.parse::<i64>().ok())
        .and_then(|v| i32::try_from(v).ok())
        .filter(|v| *v >= 0)
        .unwrap_or(0)
}

/// `batch.kubernetes.io/job-index-failure-count`: how many earlier pods of
/// this pod's index failed and counted.
pub(crate) fn index_failure_count(pod: &Pod) -> i32 {
    int32_annotation(pod, INDEX_FAILURE_COUNT_ANNOTATION)
}

/// `batch.kubernetes.io/job-index-ignored-failure-count`: how many earlier
/// pods of this pod's index failed under an Ignore rule.
pub(crate) fn index_ignored_failure_count(pod: &Pod) -> i32 {
    int32_annotation(pod, INDEX_IGNORED_FAILURE_COUNT_ANNOTATION)
}

/// Both counts: every earlier failure of the index (KCM's
/// `getIndexAbsoluteFailureCount`).
pub(crate) fn index_absolute_failure_count(pod: &Pod) -> i32 {
    index_failure_count(pod).saturating_add(index_ignored_failure_count(pod))
}

/// When the pod finished (KCM's `getFinishedTime`), first of:
/// 1. the latest `finishedAt` if every container (and every sidecar, a
///    restartable init container) terminated;
/// 2. the `Ready=False` condition's lastTransitionTime (the kubelet sets it
///    as the pod becomes terminal);
/// 3. `deletionTimestamp − deletionGracePeriodSeconds` for a deleted pod;
/// 4. its creation time.
///
/// `None` when none is known: the failure is then taken as long past.
pub(crate) fn finished_at(pod: &Pod) -> Option<Timestamp> {
    from_containers(pod)
        .or_else(|| ready_false_since(pod))
        .or_else(|| {
            let deleted = pod.metadata.deletion_timestamp.as_ref()?.0;
            let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
            deleted.checked_sub(SignedDuration::from_secs(grace)).ok()
        })
        .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn from_containers(pod: &Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref()?;
    let mut latest = latest_finish(None, status.container_statuses.iter().flatten())?;
    let sidecars: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    if !sidecars.is_empty() {
        let statuses = status
            .init_container_statuses
            .iter()
            .flatten()
            .filter(|s| sidecars.contains(&s.name.as_str()));
        latest = latest_finish(Some(latest), statuses)?;
    }
    Some(latest)
}

/// KCM's `latestFinishTime`: the latest finishedAt, or `None` as soon as
/// one container has not terminated (or terminated without a time). With
/// no statuses at all, what came in.
fn latest_finish<'a>(
    start: Option<Timestamp>,
    statuses: impl Iterator<Item = &'a ContainerStatus>,
) -> Option<Timestamp> {
    let mut latest = start;
    for s in statuses {
        let at = s
            .state
            .as_ref()
            .and_then(|st| st.terminated.as_ref())
            .and_then(|t| t.finished_at.as_ref())?
            .0;
        if latest.is_none_or(|l| l < at) {
            latest = Some(at);
        }
    }
    latest
}

fn ready_false_since(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .filter(|c| c.status == "False")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}
