//! Jobs as a CronJob sees them: whose they are, whether they finished, the
//! reference `status.active` keeps, and the Job a slot creates
//! (`getJobFromTemplate2`).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;

use super::schedule::{job_name, rfc3339_in};
use crate::owner::{controller_of, controller_ref};

/// The annotation a scheduled Job carries: its slot, RFC 3339 in the
/// CronJob's zone (`batchv1.CronJobScheduledTimestampAnnotation`). A Job
/// with it and a CronJob controller is a tick's Job, inside the floor of
/// [`super::SCHEDULED_JOB_FLOOR`].
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The annotation `kubectl create job --from=cronjob/NAME` puts on the Job
/// it makes (value `manual`). Such a Job is controlled by the CronJob but is
/// no tick: KCM reports it as `UnexpectedJob` while it runs and counts it
/// in the history once finished, and so does this.
pub const INSTANTIATE_ANNOTATION: &str = "cronjob.kubernetes.io/instantiate";

/// How a Job ended: the first `Complete` or `Failed` condition that is
/// `True` (KCM's `FinishedCondition`; the interim `SuccessCriteriaMet` and
/// `FailureTarget` do not count), with its lastTransitionTime.
pub(crate) fn finished(job: &Job) -> Option<(&'static str, Option<Timestamp>)> {
    job.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find_map(|c| {
            let kind = match c.type_.as_str() {
                "Complete" => "Complete",
                "Failed" => "Failed",
                _ => return None,
            };
            (c.status == "True").then(|| (kind, c.last_transition_time.as_ref().map(|t| t.0)))
        })
}

/// `Complete=True` (KCM's `IsJobSucceeded`).
pub(crate) fn succeeded(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

/// Whether the Job's controller reference names this CronJob. KCM matches
/// by name only (`getJobsToBeReconciled`), so a Job left by an earlier
/// CronJob of the same name counts; the kind is checked here too, so a Job
/// another kind of owner controls under that name does not.
pub(crate) fn controlled_by_name(job: &Job, cj: &CronJob) -> bool {
    controller_of(&job.metadata).is_some_and(|r| {
        r.kind == "CronJob" && Some(r.name.as_str()) == cj.metadata.name.as_deref()
    })
}

/// The Job's `metadata.name`, or "" (the API never stores a Job without).
pub(crate) fn name(job: &Job) -> &str {
    job.metadata.name.as_deref().unwrap_or_default()
}

/// The Job's `metadata.uid`, or "".
pub(crate) fn uid(job: &Job) -> &str {
    job.metadata.uid.as_deref().unwrap_or_default()
}

/// The reference `status.active` keeps (client-go's `GetReference`).
pub(crate) fn job_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// The reference to a Job this sync is about to create: everything but the
/// uid and resourceVersion, which only the API's answer gives
/// ([`super::after_create`] fills them in).
pub(crate) fn pending_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        uid: None,
        resource_version: None,
        ..job_ref(job)
    }
}

/// The Job of the slot at `scheduled`: named [`job_name`], the template's
/// labels and annotations, [`SCHEDULED_TIMESTAMP_ANNOTATION`] in
/// `zone`, the CronJob as controller (blockOwnerDeletion), the template's
/// spec. The API server sets everything else.
pub(crate) fn job_for_slot(cj: &CronJob, scheduled: Timestamp, zone: &TimeZone) -> Job {
    let template = cj.spec.as_ref().map(|s| &s.job_template);
    let meta = template.and_then(|t| t.metadata.as_ref());
    let labels = meta
        .and_then(|m| m.labels.clone())
        .filter(|l| !l.is_empty());
    let mut annotations: BTreeMap<String, String> =
        meta.and_then(|m| m.annotations.clone()).unwrap_or_default();
    annotations.insert(
        SCHEDULED_TIMESTAMP_ANNOTATION.into(),
        rfc3339_in(scheduled, zone),
    );
    let cj_name = cj.metadata.name.as_deref().unwrap_or_default();
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(cj_name, scheduled)),
            namespace: cj.metadata.namespace.clone(),
            labels,
            annotations: Some(annotations),
            owner_references: Some(vec![controller_ref(cj)]),
            ..Default::default()
        },
        spec: template.and_then(|t| t.spec.clone()),
        status: None,
    }
}

/// The slot a Job's scheduled-timestamp annotation names: `None` when it
/// has none (not a tick's Job), `Some(None)` when it has one that does not
/// parse.
pub(crate) fn annotated_slot(job: &Job) -> Option<Option<Timestamp>> {
    let value = job
        .metadata
        .annotations
        .as_ref()?
        .get(SCHEDULED_TIMESTAMP_ANNOTATION)?;
    Some(value.parse().ok())
}
