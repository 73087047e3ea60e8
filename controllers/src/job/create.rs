//! The pods a Job POSTs (KCM's `manageJob` around
//! `CreatePodsWithGenerateName`): the template's pod with the Job's
//! controller reference and tracking finalizer, and for an Indexed Job its
//! completion index.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource, ObjectFieldSelector, Pod};

use super::{
    COMPLETION_INDEX_ANNOTATION, COMPLETION_INDEX_ENV, INDEX_FAILURE_COUNT_ANNOTATION,
    INDEX_IGNORED_FAILURE_COUNT_ANNOTATION, JOB_TRACKING_FINALIZER,
};
use crate::owner::controller_ref;
use crate::template::{TemplateError, pod_from_template};

/// Longest `generateName` the server keeps whole (`MaxGeneratedNameLength`:
/// 63 − the 5 random characters it appends).
const MAX_GENERATED_NAME_LENGTH: usize = 58;

/// Where an Indexed pod's `JOB_COMPLETION_INDEX` comes from: the index
/// label (PodIndexLabel, GA in kube 1.32, so KCM 1.33 points the env var at
/// the label rather than the annotation; both hold the index).
const INDEX_FIELD_PATH: &str = "metadata.labels['batch.kubernetes.io/job-completion-index']";

/// What makes one pod of an Indexed Job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexedPod {
    /// The completion index.
    pub(crate) index: i64,
    /// With backoffLimitPerIndex: the index's counted and ignored failures
    /// so far (the pod's `job-index-failure-count` and
    /// `job-index-ignored-failure-count` annotations).
    pub(crate) failure_counts: Option<(i32, i32)>,
}

/// The template pod every create of this sync shares; indexes are added by
/// [`with_index`].
///
/// # Errors
/// [`TemplateError::NoLabels`] for a template without labels (the API
/// server always sets the Job's selector labels on it).
pub(crate) fn base_pod(job: &Job, indexed: bool) -> Result<Pod, TemplateError> {
    let template = job
        .spec
        .as_ref()
        .map(|s| &s.template)
        .ok_or(TemplateError::NoLabels)?;
    let mut pod = pod_from_template(template, &job.metadata, controller_ref(job))?;
    let finalizers = pod.metadata.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == JOB_TRACKING_FINALIZER) {
        finalizers.push(JOB_TRACKING_FINALIZER.to_owned());
    }
    if indexed && let Some(spec) = pod.spec.as_mut() {
        for c in spec
            .init_containers
            .iter_mut()
            .flatten()
            .chain(spec.containers.iter_mut())
        {
            add_index_env(c);
        }
    }
    Ok(pod)
}

/// `JOB_COMPLETION_INDEX` from the index label, unless the container sets
/// the variable itself.
fn add_index_env(c: &mut Container) {
    let env = c.env.get_or_insert_with(Vec::new);
    if env.iter().any(|e| e.name == COMPLETION_INDEX_ENV) {
        return;
    }
    env.push(EnvVar {
        name: COMPLETION_INDEX_ENV.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: INDEX_FIELD_PATH.to_owned(),
            }),
            ..Default::default()
        }),
    });
}

/// The base pod as index `i`: annotation and label
/// `batch.kubernetes.io/job-completion-index`, hostname `<job>-<i>` (the
/// template's subdomain, if any, is kept, so with a headless Service of
/// that name the pod resolves as `<job>-<i>.<subdomain>`), generateName
/// `<job>-<i>-`, and with backoffLimitPerIndex the failure counts.
pub(crate) fn with_index(base: &Pod, job_name: &str, p: IndexedPod) -> Pod {
    let mut pod = base.clone();
    let ix = p.index.to_string();
    let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(COMPLETION_INDEX_ANNOTATION.to_owned(), ix.clone());
    if let Some((failed, ignored)) = p.failure_counts {
        annotations.insert(
            INDEX_FAILURE_COUNT_ANNOTATION.to_owned(),
            failed.to_string(),
        );
        if ignored > 0 {
            annotations.insert(
                INDEX_IGNORED_FAILURE_COUNT_ANNOTATION.to_owned(),
                ignored.to_string(),
            );
        }
    }
    pod.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(COMPLETION_INDEX_ANNOTATION.to_owned(), ix.clone());
    pod.spec.get_or_insert_with(Default::default).hostname = Some(format!("{job_name}-{ix}"));
    pod.metadata.generate_name = Some(generate_name_with_index(job_name, &ix));
    pod
}

/// KCM's `podGenerateNameWithIndex`: `<job>-<i>-`, the Job's name cut so
/// the whole stays within [`MAX_GENERATED_NAME_LENGTH`].
fn generate_name_with_index(job_name: &str, ix: &str) -> String {
    let suffix = format!("-{ix}-");
    let whole = format!("{job_name}{suffix}");
    if whole.len() <= MAX_GENERATED_NAME_LENGTH {
        return whole;
    }
    let keep = MAX_GENERATED_NAME_LENGTH.saturating_sub(suffix.len());
    // Names are ASCII (DNS labels); cut on a char boundary all the same.
    let cut = (0..=keep.min(job_name.len()))
        .rev()
        .find(|i| job_name.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}{suffix}", &job_name[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_job_names_are_cut_before_the_index() {
        assert_eq!(generate_name_with_index("pi", "3"), "pi-3-");
        let long = "a".repeat(60);
        let g = generate_name_with_index(&long, "12");
        assert_eq!(g.len(), 58);
        assert!(g.ends_with("a-12-"));
    }
}
