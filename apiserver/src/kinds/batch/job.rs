//! Job (`batch/v1`): pods run to completion. The Job controller runs them; the shim
//! defaults a Job (`SetDefaults_Job`), gives it the selector and template labels that
//! tie its pods to it (`generateSelector`), validates it (`ValidateJob`,
//! `ValidateJobUpdate`) and stores it.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec, JobStatus};
use k8s_openapi::api::core::v1::{Affinity, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Serialize;
use serde_json::{Map, Value};

use super::spec::{check_job_spec, is_indexed};
use super::{INDEXED, NON_INDEXED, go_json, go_labels, job_warnings};
use crate::CauseKind;
use crate::kinds::Kind;
use crate::kinds::apps::{
    WithStatus, default_template, go_selector, keep_metadata, next_generation,
};
use crate::resource::Resource;
use crate::validation::{Causes, is_dns1123_label};

/// The label that ties a Job's pods to it (and that its generated selector selects).
pub(crate) const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";

/// The label that names a Job's pods' Job.
pub(crate) const JOB_NAME: &str = "batch.kubernetes.io/job-name";

/// [`CONTROLLER_UID`] as Kubernetes first spelled it; still set and still required.
pub(crate) const LEGACY_CONTROLLER_UID: &str = "controller-uid";

/// [`JOB_NAME`] as Kubernetes first spelled it; still set and still required.
pub(crate) const LEGACY_JOB_NAME: &str = "job-name";

/// `backoffLimit` unless given: six failures.
const DEFAULT_BACKOFF_LIMIT: i32 = 6;

/// `backoffLimit` of a Job with a backoff limit per index: the per-index limit decides,
/// so the Job-wide one is out of reach.
const BACKOFF_LIMIT_PER_INDEX_JOB: i32 = i32::MAX;

impl Kind for Job {
    const RESOURCE: Resource = Resource::Jobs;

    fn normalize(&mut self) {
        let spec = self.spec.get_or_insert_default();
        default_spec(spec);
        copy_template_labels(self);
    }

    fn validate(&self, causes: &mut Causes) {
        let default = JobSpec::default();
        let spec = self.spec.as_ref().unwrap_or(&default);
        check_generated_selector(causes, self, spec);
        check_job_spec(causes, spec, "spec");
        check_selector(causes, spec);
        if is_indexed(spec)
            && let Some(c) = spec.completions.filter(|c| *c > 0)
        {
            // The controller names the last pod's host `<job>-<completions - 1>`.
            let name = self.metadata.name.as_deref().unwrap_or_default();
            let host = format!("{name}-{}", c - 1);
            if !is_dns1123_label(&host) {
                causes.invalid(
                    "metadata.name",
                    name,
                    &format!("will not able to create pod with invalid DNS label: {host}"),
                );
            }
        }
        check_status(causes, self.status.as_ref());
    }

    /// kube's order: the Job as a new one would be checked, then what may not change.
    fn validate_against(&self, old: Option<&Self>, causes: &mut Causes) {
        self.validate(causes);
        if let Some(old) = old {
            check_update(causes, old, self);
        }
    }

    /// On create, and on an update that changed the spec.
    fn warnings(&self, old: Option<&Self>) -> Vec<String> {
        job_warnings(
            &self.metadata,
            old.map(|o| &o.metadata),
            "spec",
            self.spec.as_ref(),
        )
    }

    fn prepare_create(&mut self) {
        self.metadata.generation = Some(1);
        self.status = None;
        let uid = self.metadata.uid.clone().unwrap_or_default();
        let name = self.metadata.name.clone().unwrap_or_default();
        let spec = self.spec.get_or_insert_default();
        if spec.manual_selector != Some(true) {
            generate_selector(spec, &name, &uid);
        }
        // kube-apiserver's answer is the stored Job read back, defaulted again: the
        // Job's own labels are then its template's, generated ones included.
        copy_template_labels(self);
    }

    fn prepare_update(&mut self, old: &Self) {
        self.status.clone_from(&old.status);
        let changed = self.spec != old.spec;
        next_generation(&mut self.metadata, &old.metadata, changed);
    }
}

impl WithStatus for Job {
    fn keep_for_status(&mut self, old: &Self) {
        self.spec.clone_from(&old.spec);
        keep_metadata(&mut self.metadata, &old.metadata, false);
    }

    /// kube's `ValidateJobUpdateStatus`: the status and its transition from the stored
    /// one, and nothing of the spec (which `/status` keeps as stored).
    fn validate_status(&self, old: &Self, causes: &mut Causes) {
        super::status_rules::check(causes, self, old);
    }
}

/// `SetDefaults_Job` (batch/v1) but for the labels, and the template's pod defaults.
fn default_spec(spec: &mut JobSpec) {
    if spec.completions.is_none() && spec.parallelism.is_none() {
        spec.completions = Some(1);
    }
    spec.parallelism.get_or_insert(1);
    spec.backoff_limit
        .get_or_insert(if spec.backoff_limit_per_index.is_some() {
            BACKOFF_LIMIT_PER_INDEX_JOB
        } else {
            DEFAULT_BACKOFF_LIMIT
        });
    spec.completion_mode
        .get_or_insert_with(|| NON_INDEXED.to_owned());
    spec.suspend.get_or_insert(false);
    default_pod_failure_policy(spec);
    let replacement = if spec.pod_failure_policy.is_some() {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    spec.pod_replacement_policy
        .get_or_insert_with(|| replacement.to_owned());
    spec.manual_selector.get_or_insert(false);
    default_template(&mut spec.template);
}

/// An `onPodConditions` pattern without a status matches `True`
/// (`SetDefaults_PodFailurePolicyOnPodConditionsPattern`).
pub(super) fn default_pod_failure_policy(spec: &mut JobSpec) {
    let patterns = spec
        .pod_failure_policy
        .iter_mut()
        .flat_map(|p| p.rules.iter_mut())
        .flat_map(|r| r.on_pod_conditions.iter_mut().flatten());
    for pattern in patterns {
        if pattern.status.is_empty() {
            pattern.status = "True".to_owned();
        }
    }
}

/// A Job without labels of its own takes its template's (`SetDefaults_Job`).
fn copy_template_labels(job: &mut Job) {
    if job.metadata.labels.as_ref().is_some_and(|l| !l.is_empty()) {
        return;
    }
    let template = job
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone());
    if template.is_some() {
        job.metadata.labels = template;
    }
}

/// `generateSelector`: the template gets the Job's name and uid as labels (a label the
/// user set stays, and validation judges it), and the selector selects the uid.
fn generate_selector(spec: &mut JobSpec, name: &str, uid: &str) {
    let labels = spec
        .template
        .metadata
        .get_or_insert_default()
        .labels
        .get_or_insert_default();
    for key in [LEGACY_JOB_NAME, JOB_NAME] {
        labels
            .entry(key.to_owned())
            .or_insert_with(|| name.to_owned());
    }
    for key in [LEGACY_CONTROLLER_UID, CONTROLLER_UID] {
        labels
            .entry(key.to_owned())
            .or_insert_with(|| uid.to_owned());
    }
    spec.selector
        .get_or_insert_default()
        .match_labels
        .get_or_insert_default()
        .entry(CONTROLLER_UID.to_owned())
        .or_insert_with(|| uid.to_owned());
}

fn template_labels(spec: &JobSpec) -> Option<&BTreeMap<String, String>> {
    spec.template.metadata.as_ref()?.labels.as_ref()
}

/// `validateGeneratedSelector`: unless the selector is manual, the template carries the
/// Job's name and uid and the selector selects exactly what was generated.
fn check_generated_selector(causes: &mut Causes, job: &Job, spec: &JobSpec) {
    if spec.manual_selector == Some(true) {
        return;
    }
    let Some(selector) = &spec.selector else {
        return;
    };
    let uid = job.metadata.uid.as_deref().unwrap_or_default();
    if uid.is_empty() {
        causes.required("metadata.uid");
    }
    let name = job.metadata.name.as_deref().unwrap_or_default();
    let labels = template_labels(spec);
    let mut expected = Map::new();
    // Every Job mesopod stores was created with the prefixed labels, so they are
    // required on update too (kube requires them once the stored template has them).
    for (key, value) in [
        (LEGACY_CONTROLLER_UID, uid),
        (LEGACY_JOB_NAME, name),
        (CONTROLLER_UID, uid),
        (JOB_NAME, name),
    ] {
        check_has_label(causes, labels, key, value);
        expected.insert(key.to_owned(), Value::String(value.to_owned()));
    }
    if let Ok(parsed) = crate::selectors::LabelSelector::from_api(selector)
        && !parsed.matches(Some(&expected))
    {
        causes.push(
            CauseKind::Invalid,
            "spec.selector",
            format!(
                "Invalid value: {}: `selector` not auto-generated",
                go_selector(selector)
            ),
        );
    }
}

/// `ValidateHasLabel` of the template's labels.
fn check_has_label(
    causes: &mut Causes,
    labels: Option<&BTreeMap<String, String>>,
    key: &str,
    value: &str,
) {
    let field = format!("spec.template.metadata.labels[{key}]");
    match labels.and_then(|l| l.get(key)) {
        None => super::required(causes, &field, &format!("must be '{value}'")),
        Some(v) if v != value => causes.push(
            CauseKind::Invalid,
            field,
            format!("Invalid value: {}: must be '{value}'", go_labels(labels)),
        ),
        Some(_) => {}
    }
}

/// The selector of `ValidateJobSpec`: required, well formed, and selecting the
/// template's labels (no selector selects nothing).
fn check_selector(causes: &mut Causes, spec: &JobSpec) {
    let parsed = match &spec.selector {
        None => {
            causes.required("spec.selector");
            None
        }
        Some(selector) => match crate::selectors::LabelSelector::from_api(selector) {
            Ok(p) => Some(Some(p)),
            Err(e) => {
                causes.push(
                    CauseKind::Invalid,
                    "spec.selector",
                    format!("Invalid value: {}: {e}", go_selector(selector)),
                );
                None
            }
        },
    };
    let labels = template_labels(spec);
    let matches = |p: &crate::selectors::LabelSelector| {
        let as_json: Map<String, Value> = labels
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        p.matches(Some(&as_json))
    };
    let selects = match (&spec.selector, &parsed) {
        (None, _) => false,
        (Some(_), Some(Some(p))) => matches(p),
        // A selector that does not parse is refused above.
        (Some(_), _) => true,
    };
    if !selects {
        causes.push(
            CauseKind::Invalid,
            "spec.template.metadata.labels",
            format!(
                "Invalid value: {}: `selector` does not match template `labels`",
                go_labels(labels)
            ),
        );
    }
}

/// `validateJobStatus`'s checks that hold whatever the status was before: counts are
/// not negative and an uncounted pod is named once.
pub(super) fn check_status(causes: &mut Causes, status: Option<&JobStatus>) {
    let Some(status) = status else {
        return;
    };
    for (field, value) in [
        ("status.active", status.active),
        ("status.succeeded", status.succeeded),
        ("status.failed", status.failed),
        ("status.ready", status.ready),
        ("status.terminating", status.terminating),
    ] {
        crate::kinds::apps::non_negative(causes, field, value);
    }
    let Some(uncounted) = &status.uncounted_terminated_pods else {
        return;
    };
    let mut seen = std::collections::HashSet::new();
    for (list, uids) in [
        ("succeeded", &uncounted.succeeded),
        ("failed", &uncounted.failed),
    ] {
        for (i, uid) in uids.iter().flatten().enumerate() {
            let field = format!("status.uncountedTerminatedPods.{list}[{i}]");
            if uid.is_empty() {
                causes.invalid(field, uid, "must not be empty");
            } else if !seen.insert(uid.as_str()) {
                causes.push(
                    CauseKind::Duplicate,
                    field,
                    format!("Duplicate value: {uid:?}"),
                );
            }
        }
    }
}

/// `ValidateJobSpecUpdate`'s fields that may not change.
fn check_update(causes: &mut Causes, old: &Job, new: &Job) {
    let default = JobSpec::default();
    let o = old.spec.as_ref().unwrap_or(&default);
    let n = new.spec.as_ref().unwrap_or(&default);
    check_completions_update(causes, o, n);
    immutable(causes, "spec.selector", &o.selector, &n.selector, |s| {
        go_selector(s)
    });
    check_template_update(causes, old, o, n);
    immutable(
        causes,
        "spec.completionMode",
        &o.completion_mode,
        &n.completion_mode,
        |m| format!("{m:?}"),
    );
    immutable(
        causes,
        "spec.podFailurePolicy",
        &o.pod_failure_policy,
        &n.pod_failure_policy,
        go_json,
    );
    immutable(
        causes,
        "spec.backoffLimitPerIndex",
        &o.backoff_limit_per_index,
        &n.backoff_limit_per_index,
        i32::to_string,
    );
    immutable(
        causes,
        "spec.managedBy",
        &o.managed_by,
        &n.managed_by,
        |m| format!("{m:?}"),
    );
    immutable(
        causes,
        "spec.successPolicy",
        &o.success_policy,
        &n.success_policy,
        go_json,
    );
}

/// `field: Invalid value: V: field is immutable` when `new` differs from `old` (unset
/// and empty alike, as Go's semantic equality has them); V is `show`n, or `"null"`.
fn immutable<T: Serialize>(
    causes: &mut Causes,
    field: &str,
    old: &Option<T>,
    new: &Option<T>,
    show: impl Fn(&T) -> String,
) {
    if semantically_equal(old, new) {
        return;
    }
    let shown = new.as_ref().map_or_else(|| "\"null\"".to_owned(), show);
    causes.push(
        CauseKind::Invalid,
        field,
        format!("Invalid value: {shown}: field is immutable"),
    );
}

/// Go's `equality.Semantic.DeepEqual`, which takes nil and empty lists and maps as
/// equal: the JSON of both, without empty values, compared.
fn semantically_equal<T: Serialize>(a: &T, b: &T) -> bool {
    fn pruned(v: Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .map(|(k, v)| (k, pruned(v)))
                    .filter(|(_, v)| !is_empty(v))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.into_iter().map(pruned).collect()),
            other => other,
        }
    }
    fn is_empty(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Object(m) => m.is_empty(),
            Value::Array(a) => a.is_empty(),
            _ => false,
        }
    }
    let json = |x: &T| serde_json::to_value(x).map(pruned).ok();
    json(a) == json(b)
}

/// `validateCompletions`: immutable, but an Indexed Job's completions may change along
/// with its parallelism (elastic Indexed Jobs).
fn check_completions_update(causes: &mut Causes, o: &JobSpec, n: &JobSpec) {
    let field = "spec.completions";
    if n.completion_mode.as_deref() != Some(INDEXED) {
        immutable(
            causes,
            field,
            &o.completions,
            &n.completions,
            i32::to_string,
        );
        return;
    }
    // Unset on an Indexed Job is refused by the spec's own checks.
    let (Some(c), true) = (n.completions, n.completions != o.completions) else {
        return;
    };
    if Some(c) != n.parallelism {
        causes.invalid_number(
            field,
            c.into(),
            "can only be modified in tandem with spec.parallelism",
        );
    }
}

/// `validatePodTemplateUpdate`: the template is immutable, but for the scheduling
/// directives of a Job that is suspended and never started (its pods do not exist
/// yet, so a queueing controller may still steer them): node affinity, node selector,
/// tolerations, scheduling gates, labels and annotations.
fn check_template_update(causes: &mut Causes, old_job: &Job, o: &JobSpec, n: &JobSpec) {
    let suspended = o.suspend == Some(true);
    let never_started = old_job
        .status
        .as_ref()
        .is_none_or(|s| s.start_time.is_none());
    let mut old = o.template.clone();
    if suspended && never_started {
        allow_scheduling_changes(&mut old, &n.template);
    }
    if !semantically_equal(&old, &n.template) {
        causes.push(
            CauseKind::Invalid,
            "spec.template",
            format!(
                "Invalid value: {}: field is immutable",
                go_json(&n.template)
            ),
        );
    }
}

/// `old` with `new`'s scheduling directives, so that only other changes show.
fn allow_scheduling_changes(old: &mut PodTemplateSpec, new: &PodTemplateSpec) {
    let new_meta = new.metadata.clone().unwrap_or_default();
    let meta = old.metadata.get_or_insert_default();
    meta.labels = new_meta.labels;
    meta.annotations = new_meta.annotations;
    let (Some(o), Some(n)) = (old.spec.as_mut(), new.spec.as_ref()) else {
        return;
    };
    match (&mut o.affinity, &n.affinity) {
        (Some(a), None) => {
            a.node_affinity = None;
            if *a == Affinity::default() {
                o.affinity = None;
            }
        }
        (None, Some(na)) => {
            o.affinity = Some(Affinity {
                node_affinity: na.node_affinity.clone(),
                ..Affinity::default()
            });
        }
        (Some(a), Some(na)) => a.node_affinity.clone_from(&na.node_affinity),
        (None, None) => {}
    }
    o.node_selector.clone_from(&n.node_selector);
    o.tolerations.clone_from(&n.tolerations);
    o.scheduling_gates.clone_from(&n.scheduling_gates);
}

/// The selector a Job's pods are listed by, as a string (`<none>` when it has none).
pub(super) fn selector_text(selector: Option<&LabelSelector>) -> String {
    let text = selector
        .map(crate::kinds::apps::selector_string)
        .unwrap_or_default();
    if text.is_empty() {
        "<none>".to_owned()
    } else {
        text
    }
}
