//! A StatefulSet pod's identity (KCM's `stateful_set_utils.go`): its ordinal name
//! `<set>-<i>`, the labels that name it and its revision, and its DNS identity
//! (`hostname` the pod's name; not the `subdomain` under the set's governing
//! Service, which needs the cluster DNS mesopod does not have).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};

use crate::owner::controller_ref;
use crate::template::{TemplateError, pod_from_template};

/// The label with the pod's own name (`StatefulSetPodNameLabel`), which a Service can
/// select one pod by.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label with the pod's ordinal (`PodIndexLabel`, GA in 1.32).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// The label with the name of the ControllerRevision the pod was made from
/// (`ControllerRevisionHashLabelKey`).
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// `<set>-<ordinal>`.
pub fn pod_name(set: &str, ordinal: i32) -> String {
    format!("{set}-{ordinal}")
}

/// The set a pod name belongs to and its ordinal (`getParentNameAndOrdinal`: the name
/// is `<parent>-<digits>`), or `None` for another shape.
pub fn parent_and_ordinal(name: &str) -> Option<(&str, i32)> {
    let (parent, digits) = name.rsplit_once('-')?;
    if parent.is_empty() || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((parent, digits.parse().ok()?))
}

/// Whether `pod` is one of `set`'s by its name (`isMemberOf`).
pub fn is_member(set: &str, pod: &Pod) -> bool {
    pod.metadata
        .name
        .as_deref()
        .and_then(parent_and_ordinal)
        .is_some_and(|(parent, _)| parent == set)
}

/// The pod's ordinal, if its name has one.
pub fn ordinal(pod: &Pod) -> Option<i32> {
    pod.metadata
        .name
        .as_deref()
        .and_then(parent_and_ordinal)
        .map(|(_, o)| o)
}

/// The revision a pod was made from (its `controller-revision-hash` label).
pub fn revision(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(REVISION_LABEL)
        .map(String::as_str)
}

/// The pod of ordinal `ordinal` from `template`, made by `set` at `revision`
/// (`newVersionedStatefulSetPod`): the template's pod with the set's controller
/// reference, named `<set>-<ordinal>`, labelled with its name, index and revision,
/// `hostname` its name.
///
/// # Errors
/// [`TemplateError::NoLabels`] when the template has no labels.
pub fn new_pod(
    set: &StatefulSet,
    template: &PodTemplateSpec,
    ordinal: i32,
    revision: &str,
) -> Result<Pod, TemplateError> {
    let mut pod = pod_from_template(template, &set.metadata, controller_ref(set))?;
    let name = pod_name(set.metadata.name.as_deref().unwrap_or_default(), ordinal);
    let labels = pod.metadata.labels.get_or_insert_default();
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision.into());
    // `subdomain` (the set's serviceName) is not set: mesopod has no cluster DNS to
    // give the pod a name under, and refuses the field on every pod.
    pod.spec.get_or_insert_default().hostname = Some(name.clone());
    pod.metadata.name = Some(name);
    Ok(pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinal_names_parse_back() {
        assert_eq!(parent_and_ordinal("web-0"), Some(("web", 0)));
        assert_eq!(parent_and_ordinal("my-web-12"), Some(("my-web", 12)));
        assert_eq!(parent_and_ordinal("web-abcde"), None);
        assert_eq!(parent_and_ordinal("web"), None);
        assert_eq!(parent_and_ordinal("-3"), None);
        assert_eq!(parent_and_ordinal("web-99999999999"), None);
        assert_eq!(pod_name("web", 7), "web-7");
    }
}
