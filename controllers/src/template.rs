//! Pods from an owner's template (KCM's `GetPodFromTemplate` and the
//! checks `createPods` makes before the POST).

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// A pod the controller refuses to POST.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A pod without labels could never be selected back by its owner,
    /// which would then create pods for ever. (KCM's exact message; it
    /// becomes the owner's `ReplicaFailure` condition.)
    #[error("unable to create pods, no labels")]
    NoLabels,
}

/// Longest object name (DNS subdomain).
const MAX_NAME_LEN: usize = 253;

/// `generateName` for an owner's pods: `"<owner>-"`, or the bare name when
/// the dash would make it too long (the server appends 5 random
/// characters, cutting the base to fit).
pub fn generate_name_prefix(owner_name: &str) -> String {
    if owner_name.len() < MAX_NAME_LEN {
        format!("{owner_name}-")
    } else {
        owner_name.to_owned()
    }
}

/// The pod an owner POSTs: `generateName "<owner>-"`, the owner's
/// namespace, the template's labels, annotations and finalizers, its spec,
/// and the owner's controller reference. Nothing else of the template's
/// metadata is copied (a template `name` would make every pod collide).
///
/// # Errors
/// [`TemplateError::NoLabels`] when the template has no labels.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    owner: &ObjectMeta,
    owner_ref: OwnerReference,
) -> Result<Pod, TemplateError> {
    let tm = template.metadata.as_ref();
    let labels = tm.and_then(|m| m.labels.clone()).filter(|l| !l.is_empty());
    if labels.is_none() {
        return Err(TemplateError::NoLabels);
    }
    Ok(Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name_prefix(
                owner.name.as_deref().unwrap_or_default(),
            )),
            namespace: owner.namespace.clone(),
            labels,
            annotations: tm
                .and_then(|m| m.annotations.clone())
                .filter(|a| !a.is_empty()),
            finalizers: tm
                .and_then(|m| m.finalizers.clone())
                .filter(|f| !f.is_empty()),
            owner_references: Some(vec![owner_ref]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use std::collections::BTreeMap;

    fn template(labels: &[(&str, &str)]) -> PodTemplateSpec {
        let map = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
        };
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                name: Some("ignored".into()),
                labels: Some(map(labels)),
                annotations: Some(map(&[("a", "1")])),
                finalizers: Some(vec!["example.com/keep".into()]),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("nginx".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    fn owner() -> (ObjectMeta, OwnerReference) {
        let meta = ObjectMeta {
            name: Some("web-7d4b9c".into()),
            namespace: Some("prod".into()),
            uid: Some("rs-uid".into()),
            ..Default::default()
        };
        let r = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web-7d4b9c".into(),
            uid: "rs-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        (meta, r)
    }

    #[test]
    fn pod_copies_template_labels_annotations_finalizers_and_spec() {
        let t = template(&[("app", "web")]);
        let (meta, r) = owner();
        let pod = pod_from_template(&t, &meta, r.clone()).expect("pod");
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-7d4b9c-"));
        assert_eq!(pod.metadata.name, None);
        assert_eq!(pod.metadata.namespace.as_deref(), Some("prod"));
        assert_eq!(
            pod.metadata.labels,
            t.metadata.as_ref().and_then(|m| m.labels.clone())
        );
        assert_eq!(
            pod.metadata.annotations,
            t.metadata.as_ref().and_then(|m| m.annotations.clone())
        );
        assert_eq!(
            pod.metadata.finalizers,
            Some(vec!["example.com/keep".to_owned()])
        );
        assert_eq!(pod.metadata.owner_references, Some(vec![r]));
        assert_eq!(pod.spec, t.spec);
    }

    #[test]
    fn a_template_without_labels_is_refused_with_kcms_message() {
        let (meta, r) = owner();
        let err = pod_from_template(&template(&[]), &meta, r).expect_err("no labels");
        assert_eq!(err.to_string(), "unable to create pods, no labels");
    }

    #[test]
    fn overlong_owner_names_get_no_dash() {
        let long = "a".repeat(253);
        assert_eq!(generate_name_prefix(&long), long);
        assert_eq!(generate_name_prefix("web"), "web-");
    }
}
