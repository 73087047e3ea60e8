//! The kinds of `batch/v1`: Job (pods that run to completion) and CronJob (Jobs on a
//! schedule). The shim defaults, validates and stores them as kube-apiserver 1.33
//! does; the Job and CronJob controllers run them.
//!
//! Contract, as for the workload kinds of `apps` (`super::apps`): their status is
//! written only through `/status` (the main endpoint keeps the stored one, `/status`
//! the stored spec), and `metadata.generation` starts at 1 and counts spec changes.
//! Beyond them:
//! - A Job without `manualSelector: true` gets a selector the server makes from its
//!   uid, and its template the labels that selector and the Job's name need
//!   (`generateSelector`), so its pods are its own whatever the user labels them.
//! - A Job's template and its other immutable fields stay as created, but for the
//!   scheduling directives of a suspended Job that never started and an Indexed Job's
//!   completions, which may change with its parallelism.
//! - A CronJob's schedule is parsed by [`crate::cron`], the parser its controller runs,
//!   so what is accepted is what runs; its time zone comes from the same bundled tz
//!   database.
//! - A batch/v1 Job deleted without a propagation policy orphans its pods, with
//!   kube-apiserver's warning (`crate::api::finalizers::default_orphans`).

mod cronjob;
mod indexes;
mod job;
mod spec;
mod status_rules;
mod table;

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

pub(crate) use table::{cronjob_cells, cronjob_columns, job_cells, job_columns};

use crate::CauseKind;
use crate::validation::Causes;

/// `completionMode` of a Job whose pods are interchangeable (the default).
pub(crate) const NON_INDEXED: &str = "NonIndexed";

/// `completionMode` of a Job whose pods each get one index.
pub(crate) const INDEXED: &str = "Indexed";

/// kube-apiserver 1.33's judgement of a Job status written through `/status` over the
/// stored `old` (`ValidateJobUpdateStatus`), as [`crate::Api`] judges every such write;
/// for the Job controller's tests, which hold each status it writes to it.
///
/// # Errors
/// The 422 `Invalid` the API answers, with kube's causes.
pub fn check_job_status_update(new: &Job, old: &Job) -> Result<(), crate::ApiError> {
    let mut causes = Causes::default();
    status_rules::check(&mut causes, new, old);
    causes.into_result(
        "Job.batch",
        new.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// `field: Required value: detail`.
fn required(causes: &mut Causes, field: &str, detail: &str) {
    causes.push(
        CauseKind::Required,
        field,
        format!("Required value: {detail}"),
    );
}

/// An invalid value Kubernetes does not show (`field.OmitValueType`): `field: Invalid
/// value: detail`.
fn invalid_omit(causes: &mut Causes, field: &str, detail: &str) {
    causes.push(
        CauseKind::Invalid,
        field,
        format!("Invalid value: {detail}"),
    );
}

/// `field: Too many: N: must have at most M items` (`field.TooMany`).
fn too_many(causes: &mut Causes, field: &str, count: usize, max: usize) {
    causes.push(
        CauseKind::TooMany,
        field,
        format!("Too many: {count}: must have at most {max} items"),
    );
}

/// A structured value in a message. Kubernetes prints Go's `%#v` of it, pointer
/// addresses included, which no client can rely on; its JSON says the same.
fn go_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// A label map as Go's `%#v` prints it, nil as `map[string]string(nil)`.
fn go_labels(labels: Option<&BTreeMap<String, String>>) -> String {
    match labels {
        Some(l) => crate::kinds::apps::go_map(l),
        None => "map[string]string(nil)".to_owned(),
    }
}

/// kube's warnings for a valid Job or CronJob write (`WarningsOnCreate`, and
/// `WarningsOnUpdate` when the generation moved): on create, a name that is no DNS label
/// (it becomes part of pod names and hostnames); then `WarningsForJobSpec` on the spec
/// at `path`: an Indexed one too large for `status.completedIndexes` to keep up with many
/// failed indexes, then its pod template's.
fn job_warnings(
    meta: &ObjectMeta,
    old: Option<&ObjectMeta>,
    path: &str,
    spec: Option<&JobSpec>,
) -> Vec<String> {
    let mut out = Vec::new();
    if old.is_some_and(|o| o.generation == meta.generation) {
        return out;
    }
    if old.is_none() {
        let name = meta.name.as_deref().unwrap_or_default();
        out.extend(crate::validation::name_not_dns_label(
            name,
            "Pod names and hostnames",
        ));
    }
    let Some(spec) = spec else { return out };
    let big = spec.completion_mode.as_deref() == Some(INDEXED)
        && spec.completions.unwrap_or(0) > 100_000
        && spec.parallelism.unwrap_or(0) > 10_000;
    if big {
        out.push(format!(
            "{path}: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail"
        ));
    }
    out.extend(crate::validation::pod_template_warnings(
        &format!("{path}.template"),
        &spec.template,
    ));
    out
}
