//! ControllerRevisions, the history of a controller's pod template (KCM's
//! `controller/history`): what StatefulSets record (and DaemonSets can), so that a
//! template seen before is recognised, `kubectl rollout history` lists the revisions
//! and `kubectl rollout undo` patches one back.
//!
//! # Contract
//! - A revision's `data` is the strategic merge patch that puts its template back,
//!   `{"spec":{"template":{…,"$patch":"replace"}}}` ([`template_patch`]); two revisions
//!   are the same state exactly when their `data` is equal ([`find_equal`]).
//! - Its name is `<parent>-<hash(data, collisionCount)>` ([`revision_name`]); a name
//!   taken by other data is a collision, which the owner counts in
//!   `status.collisionCount` to get another name.
//! - Pure: no I/O; the caller creates, renumbers and deletes.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Value, json};

use crate::deployment::hash::hash_name;

/// The label a revision carries with its hash (`ControllerRevisionHashLabel`).
pub const REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// Longest parent name kept in a revision's name, so that name and hash fit in a
/// DNS subdomain (`ControllerRevisionName`).
const MAX_PREFIX: usize = 223;

/// The `data` of a revision of `template`: the patch that puts it back whole.
pub fn template_patch(template: &PodTemplateSpec) -> Value {
    let mut t = serde_json::to_value(template).unwrap_or_else(|_| json!({}));
    if let Value::Object(m) = &mut t {
        m.insert("$patch".into(), Value::String("replace".into()));
    }
    json!({"spec": {"template": t}})
}

/// The template a revision's `data` holds (what [`template_patch`] wrote), or `None`
/// for data of another shape.
pub fn template_of(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut t = revision.data.as_ref()?.0.pointer("/spec/template")?.clone();
    if let Value::Object(m) = &mut t {
        m.remove("$patch");
    }
    serde_json::from_value(t).ok()
}

/// `<parent>-<hash>`: the hash of `data` and, once names collided, the collision
/// count (`HashControllerRevision` with its probe).
pub fn revision_name(parent: &str, data: &Value, collision_count: Option<i32>) -> String {
    let bytes = serde_json::to_vec(data).unwrap_or_default();
    let probe = collision_count.map(|c| c.to_string()).unwrap_or_default();
    let hash = hash_name(&[&bytes, probe.as_bytes()]);
    let prefix = match parent.char_indices().nth(MAX_PREFIX) {
        Some((i, _)) => &parent[..i],
        None => parent,
    };
    format!("{prefix}-{hash}")
}

/// A new revision of the parent (`NewControllerRevision`): the template's labels plus
/// the hash label, the parent's controller reference, `data` and `revision`.
pub fn new_revision(
    parent: &ObjectMeta,
    owner: OwnerReference,
    template_labels: Option<&BTreeMap<String, String>>,
    data: Value,
    revision: i64,
    collision_count: Option<i32>,
) -> ControllerRevision {
    let name = revision_name(
        parent.name.as_deref().unwrap_or_default(),
        &data,
        collision_count,
    );
    let hash = name.rsplit('-').next().unwrap_or_default().to_owned();
    let mut labels = template_labels.cloned().unwrap_or_default();
    labels.insert(REVISION_HASH_LABEL.into(), hash);
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: parent.namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision,
    }
}

/// The revisions in history order (`SortControllerRevisions`): by revision number,
/// then creation time, then name.
pub fn sorted(revisions: &[ControllerRevision]) -> Vec<&ControllerRevision> {
    let mut out: Vec<&ControllerRevision> = revisions.iter().collect();
    out.sort_by(|a, b| {
        a.revision
            .cmp(&b.revision)
            .then_with(|| {
                let t = |r: &ControllerRevision| r.metadata.creation_timestamp.clone();
                t(a).cmp(&t(b))
            })
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    out
}

/// The revisions whose `data` equals `needle`'s, in history order
/// (`FindEqualRevisions`).
pub fn find_equal<'a>(
    revisions: &'a [ControllerRevision],
    data: &Value,
) -> Vec<&'a ControllerRevision> {
    sorted(revisions)
        .into_iter()
        .filter(|r| r.data.as_ref().is_some_and(|d| &d.0 == data))
        .collect()
}

/// The number the next revision gets: one more than the highest (`nextRevision`).
pub fn next_revision(revisions: &[ControllerRevision]) -> i64 {
    revisions
        .iter()
        .map(|r| r.revision)
        .max()
        .unwrap_or(0)
        .saturating_add(1)
}

/// The revisions to delete to keep `limit` of those not `live` (KCM's
/// `truncateHistory`; a negative limit keeps all): the oldest first; a live revision (current, update, or one a
/// pod still runs) is never deleted and does not count.
pub fn to_truncate(
    revisions: &[ControllerRevision],
    live: impl Fn(&str) -> bool,
    limit: i32,
) -> Vec<&ControllerRevision> {
    let history: Vec<&ControllerRevision> = sorted(revisions)
        .into_iter()
        .filter(|r| !live(r.metadata.name.as_deref().unwrap_or_default()))
        .collect();
    // A negative limit keeps everything, as KCM reads it.
    let Ok(keep) = usize::try_from(limit) else {
        return Vec::new();
    };
    let excess = history.len().saturating_sub(keep);
    history.into_iter().take(excess).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    fn template(image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    fn rev(name: &str, image: &str, n: i64) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some(RawExtension(template_patch(&template(image)))),
            revision: n,
        }
    }

    #[test]
    fn data_is_a_replacing_patch_of_the_template_and_reads_back() {
        let t = template("a:1");
        let data = template_patch(&t);
        assert_eq!(data["spec"]["template"]["$patch"], "replace");
        assert_eq!(
            data["spec"]["template"]["spec"]["containers"][0]["image"],
            "a:1"
        );
        let r = rev("web-x", "a:1", 1);
        assert_eq!(template_of(&r), Some(t));
    }

    #[test]
    fn names_hash_the_data_and_the_collision_count() {
        let a = template_patch(&template("a:1"));
        let b = template_patch(&template("a:2"));
        let name = revision_name("web", &a, None);
        assert!(name.starts_with("web-"), "{name}");
        assert_eq!(name, revision_name("web", &a, None), "stable");
        assert_ne!(name, revision_name("web", &b, None));
        assert_ne!(name, revision_name("web", &a, Some(1)));
        let long = "a".repeat(300);
        assert!(revision_name(&long, &a, None).len() <= 253);
    }

    #[test]
    fn new_revisions_carry_the_template_labels_and_the_hash_label() {
        let parent = ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        };
        let owner = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "StatefulSet".into(),
            name: "web".into(),
            uid: "u".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let t = template("a:1");
        let r = new_revision(
            &parent,
            owner.clone(),
            t.metadata.as_ref().and_then(|m| m.labels.as_ref()),
            template_patch(&t),
            3,
            None,
        );
        let name = r.metadata.name.clone().expect("named");
        let labels = r.metadata.labels.clone().expect("labelled");
        assert_eq!(labels["app"], "web");
        assert_eq!(format!("web-{}", labels[REVISION_HASH_LABEL]), name);
        assert_eq!(r.metadata.owner_references, Some(vec![owner]));
        assert_eq!(r.revision, 3);
    }

    #[test]
    fn history_is_found_numbered_and_truncated_oldest_first_sparing_live_ones() {
        let revs = vec![
            rev("r3", "c", 3),
            rev("r1", "a", 1),
            rev("r2", "b", 2),
            rev("r4", "a", 4),
        ];
        assert_eq!(next_revision(&revs), 5);
        assert_eq!(next_revision(&[]), 1);
        let equal: Vec<_> = find_equal(&revs, &template_patch(&template("a")))
            .iter()
            .map(|r| r.revision)
            .collect();
        assert_eq!(equal, [1, 4]);
        let gone: Vec<_> = to_truncate(&revs, |n| n == "r1" || n == "r4", 1)
            .iter()
            .map(|r| r.revision)
            .collect();
        assert_eq!(gone, [2], "r1 is live; of r2 and r3 the older goes");
        assert!(to_truncate(&revs, |_| false, 10).is_empty());
        assert!(to_truncate(&revs, |_| false, -1).is_empty());
        assert_eq!(to_truncate(&revs, |_| false, 0).len(), 4);
    }
}
