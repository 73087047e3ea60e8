//! Applying a hook's changes to a pod.

use k8s_openapi::api::core::v1::{Pod, Toleration as K8sToleration};

use super::decision::Changes;

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// The pod with `changes` applied: maps merged (the hook's keys win),
/// tolerations appended, non-empty strings replacing.
pub fn apply_changes(pod: &Pod, changes: &Changes) -> Pod {
    let mut pod = pod.clone();
    if !changes.labels.is_empty() {
        pod.metadata
            .labels
            .get_or_insert_with(Default::default)
            .extend(changes.labels.clone());
    }
    if !changes.annotations.is_empty() {
        pod.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .extend(changes.annotations.clone());
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    if !changes.node_selector.is_empty() {
        spec.node_selector
            .get_or_insert_with(Default::default)
            .extend(changes.node_selector.clone());
    }
    if !changes.tolerations.is_empty() {
        spec.tolerations
            .get_or_insert_with(Vec::new)
            .extend(changes.tolerations.iter().map(|t| K8sToleration {
                key: non_empty(&t.key),
                operator: non_empty(&t.operator),
                value: non_empty(&t.value),
                effect: non_empty(&t.effect),
                toleration_seconds: t.toleration_seconds,
            }));
    }
    if let Some(pc) = non_empty(&changes.priority_class_name) {
        spec.priority_class_name = Some(pc);
    }
    if let Some(sa) = non_empty(&changes.service_account) {
        spec.service_account_name = Some(sa);
    }
    pod
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::admission::Toleration;
    use k8s_openapi::api::core::v1::PodSpec;

    #[test]
    fn maps_merge_tolerations_append_strings_replace() {
        let mut pod = Pod::default();
        pod.metadata.labels =
            Some([("app".into(), "web".into()), ("tier".into(), "x".into())].into());
        pod.spec = Some(PodSpec {
            node_selector: Some([("disk".into(), "ssd".into())].into()),
            tolerations: Some(vec![K8sToleration {
                key: Some("old".into()),
                ..Default::default()
            }]),
            priority_class_name: Some("low".into()),
            ..Default::default()
        });
        let changed = apply_changes(
            &pod,
            &Changes {
                node_selector: [("tenant".into(), "acme".into())].into(),
                tolerations: vec![Toleration {
                    key: "tenant".into(),
                    ..Default::default()
                }],
                labels: [("tier".into(), "y".into())].into(),
                service_account: "builder".into(),
                ..Default::default()
            },
        );
        let spec = changed.spec.unwrap();
        assert_eq!(spec.node_selector.unwrap().len(), 2);
        assert_eq!(spec.tolerations.unwrap().len(), 2);
        assert_eq!(spec.priority_class_name.as_deref(), Some("low"));
        assert_eq!(spec.service_account_name.as_deref(), Some("builder"));
        let labels = changed.metadata.labels.unwrap();
        assert_eq!(labels["tier"], "y");
        assert_eq!(labels["app"], "web");
    }
}
