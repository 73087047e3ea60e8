//! The annotations a Deployment keeps on its ReplicaSets: revision numbers
//! (what `kubectl rollout history/undo` reads), the revisions a reused
//! ReplicaSet served before, and the replica counts proportional scaling
//! needs.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The rollout sequence number, on ReplicaSets and on the Deployment.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// Earlier revisions a ReplicaSet served (set when a rollback reuses it).
pub const REVISION_HISTORY_ANNOTATION: &str = "deployment.kubernetes.io/revision-history";
/// `spec.replicas` of the Deployment when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// `spec.replicas + maxSurge` of the Deployment then.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";

/// kubectl's record of the applied object: never copied to ReplicaSets.
const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The extensions/v1beta1 rollback request: never copied.
const DEPRECATED_ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
/// `revision-history` stops growing past this many characters (an object's
/// annotations are limited to 256 KiB in all).
const MAX_REV_HISTORY_LENGTH_IN_CHARS: usize = 2000;

/// Annotations the Deployment's own bookkeeping owns; the others (notably
/// `kubernetes.io/change-cause`, which `rollout history` shows) are copied
/// from the Deployment to its new ReplicaSet.
fn skip_copy(key: &str) -> bool {
    matches!(
        key,
        LAST_APPLIED_ANNOTATION
            | REVISION_ANNOTATION
            | REVISION_HISTORY_ANNOTATION
            | DESIRED_REPLICAS_ANNOTATION
            | MAX_REPLICAS_ANNOTATION
            | DEPRECATED_ROLLBACK_TO
    )
}

/// The object's revision: 0 without the annotation, `None` when it does not
/// parse.
pub(crate) fn revision(meta: &ObjectMeta) -> Option<i64> {
    match meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANNOTATION))
    {
        None => Some(0),
        Some(v) => v.parse().ok(),
    }
}

/// The highest revision among `rses` (unparseable ones skipped).
pub(crate) fn max_revision<'a>(rses: impl IntoIterator<Item = &'a ReplicaSet>) -> i64 {
    rses.into_iter()
        .filter_map(|rs| revision(&rs.metadata))
        .max()
        .unwrap_or(0)
        .max(0)
}

fn annotations(rs: &mut ReplicaSet) -> &mut BTreeMap<String, String> {
    rs.metadata.annotations.get_or_insert_with(BTreeMap::new)
}

/// Copy the Deployment's annotations (but the skipped ones) to `rs`; true
/// if that changed anything.
fn copy_deployment_annotations(d: &Deployment, rs: &mut ReplicaSet) -> bool {
    let mut changed = false;
    let ann = annotations(rs);
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_copy(k) || ann.get(k) == Some(v) {
            continue;
        }
        ann.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// Bring the new ReplicaSet's annotations up to date
/// (`SetNewReplicaSetAnnotations`): the Deployment's copyable annotations;
/// the revision raised to `new_revision` if lower (a reused old ReplicaSet,
/// i.e. a rollback, also records its former revision in
/// `revision-history`); and, for a ReplicaSet about to be created, the
/// replica annotations. True if anything changed.
pub(crate) fn set_new_rs_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
    desired: i32,
    max: i32,
) -> bool {
    let mut changed = copy_deployment_annotations(d, rs);
    let ann = annotations(rs);
    let old = ann.get(REVISION_ANNOTATION).cloned();
    let old_number = match old.as_deref() {
        None | Some("") => 0,
        // KCM gives up on a ReplicaSet whose revision is not a number.
        Some(v) => match v.parse::<i64>() {
            Ok(n) => n,
            Err(_) => return false,
        },
    };
    if old_number < new_revision {
        ann.insert(REVISION_ANNOTATION.into(), new_revision.to_string());
        changed = true;
        if let Some(old) = old {
            append_history(ann, &old);
        }
    }
    if !exists && set_replicas_annotations(rs, desired, max) {
        changed = true;
    }
    changed
}

/// Append `old` to `revision-history`, dropping the oldest entries to stay
/// within the length limit (or not appending if even that cannot make it
/// fit).
fn append_history(ann: &mut BTreeMap<String, String>, old: &str) {
    let history = ann
        .get(REVISION_HISTORY_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    if history.is_empty() {
        ann.insert(REVISION_HISTORY_ANNOTATION.into(), old.to_owned());
        return;
    }
    let entries: Vec<&str> = history.split(',').collect();
    let mut total = history.len() + old.len() + 1;
    let mut start = 0;
    while total > MAX_REV_HISTORY_LENGTH_IN_CHARS && start < entries.len() {
        total -= entries[start].len() + 1;
        start += 1;
    }
    if total <= MAX_REV_HISTORY_LENGTH_IN_CHARS {
        let mut kept: Vec<&str> = entries[start..].to_vec();
        kept.push(old);
        ann.insert(REVISION_HISTORY_ANNOTATION.into(), kept.join(","));
    }
}

/// Set `desired-replicas` and `max-replicas`; true if either changed.
pub(crate) fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let ann = annotations(rs);
    let mut changed = false;
    for (key, value) in [
        (DESIRED_REPLICAS_ANNOTATION, desired.to_string()),
        (MAX_REPLICAS_ANNOTATION, max.to_string()),
    ] {
        if ann.get(key) != Some(&value) {
            ann.insert(key.into(), value);
            changed = true;
        }
    }
    changed
}

/// Whether [`set_replicas_annotations`] would change anything.
pub(crate) fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    let ann = rs.metadata.annotations.as_ref();
    let get = |k: &str| ann.and_then(|a| a.get(k));
    get(DESIRED_REPLICAS_ANNOTATION) != Some(&desired.to_string())
        || get(MAX_REPLICAS_ANNOTATION) != Some(&max.to_string())
}

fn int_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    rs.metadata.annotations.as_ref()?.get(key)?.parse().ok()
}

/// `desired-replicas`, if present and an int32.
pub(crate) fn desired_replicas(rs: &ReplicaSet) -> Option<i32> {
    int_annotation(rs, DESIRED_REPLICAS_ANNOTATION)
}

/// `max-replicas`, if present and an int32.
pub(crate) fn max_replicas(rs: &ReplicaSet) -> Option<i32> {
    int_annotation(rs, MAX_REPLICAS_ANNOTATION)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_annotations(pairs: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn rs(pairs: &[(&str, &str)]) -> ReplicaSet {
        ReplicaSet {
            metadata: with_annotations(pairs),
            ..Default::default()
        }
    }

    fn get(rs: &ReplicaSet, key: &str) -> Option<String> {
        rs.metadata.annotations.as_ref()?.get(key).cloned()
    }

    #[test]
    fn a_new_replica_set_gets_revision_copied_annotations_and_replica_counts() {
        let d = Deployment {
            metadata: with_annotations(&[
                ("kubernetes.io/change-cause", "kubectl set image"),
                (REVISION_ANNOTATION, "4"),
                (LAST_APPLIED_ANNOTATION, "{}"),
            ]),
            ..Default::default()
        };
        let mut new = rs(&[]);
        assert!(set_new_rs_annotations(&d, &mut new, 5, false, 10, 13));
        assert_eq!(get(&new, REVISION_ANNOTATION).as_deref(), Some("5"));
        assert_eq!(
            get(&new, "kubernetes.io/change-cause").as_deref(),
            Some("kubectl set image")
        );
        assert_eq!(get(&new, LAST_APPLIED_ANNOTATION), None);
        assert_eq!(
            get(&new, DESIRED_REPLICAS_ANNOTATION).as_deref(),
            Some("10")
        );
        assert_eq!(get(&new, MAX_REPLICAS_ANNOTATION).as_deref(), Some("13"));
        assert_eq!(get(&new, REVISION_HISTORY_ANNOTATION), None);
        // Idempotent.
        assert!(!set_new_rs_annotations(&d, &mut new, 5, true, 10, 13));
    }

    #[test]
    fn reusing_an_old_replica_set_records_its_former_revisions() {
        let d = Deployment::default();
        let mut old = rs(&[(REVISION_ANNOTATION, "2")]);
        assert!(set_new_rs_annotations(&d, &mut old, 6, true, 3, 4));
        assert_eq!(get(&old, REVISION_ANNOTATION).as_deref(), Some("6"));
        assert_eq!(get(&old, REVISION_HISTORY_ANNOTATION).as_deref(), Some("2"));
        assert_eq!(
            get(&old, DESIRED_REPLICAS_ANNOTATION),
            None,
            "exists: untouched"
        );
        assert!(set_new_rs_annotations(&d, &mut old, 9, true, 3, 4));
        assert_eq!(
            get(&old, REVISION_HISTORY_ANNOTATION).as_deref(),
            Some("2,6")
        );
        // A higher revision already in place is kept.
        assert!(!set_new_rs_annotations(&d, &mut old, 7, true, 3, 4));
        assert_eq!(get(&old, REVISION_ANNOTATION).as_deref(), Some("9"));
    }

    #[test]
    fn revision_history_drops_the_oldest_entries_past_2000_chars() {
        let mut ann = BTreeMap::new();
        let long: Vec<String> = (0..400).map(|i| format!("{:04}", i)).collect();
        ann.insert(REVISION_HISTORY_ANNOTATION.to_owned(), long.join(","));
        append_history(&mut ann, "9999");
        let h = ann
            .get(REVISION_HISTORY_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        assert!(h.len() <= 2000, "{}", h.len());
        assert!(h.ends_with(",9999"));
        assert!(h.starts_with("0001,"));
    }

    #[test]
    fn unparseable_revisions_are_skipped_or_left_alone() {
        let a = rs(&[(REVISION_ANNOTATION, "x")]);
        let b = rs(&[(REVISION_ANNOTATION, "3")]);
        assert_eq!(revision(&a.metadata), None);
        assert_eq!(revision(&rs(&[]).metadata), Some(0));
        assert_eq!(max_revision([&a, &b]), 3);
        let mut bad = a.clone();
        assert!(!set_new_rs_annotations(
            &Deployment::default(),
            &mut bad,
            4,
            true,
            1,
            2
        ));
        assert_eq!(get(&bad, REVISION_ANNOTATION).as_deref(), Some("x"));
    }

    #[test]
    fn replica_annotations_read_back_as_int32() {
        let mut r = rs(&[]);
        assert!(replicas_annotations_need_update(&r, 3, 4));
        assert!(set_replicas_annotations(&mut r, 3, 4));
        assert!(!replicas_annotations_need_update(&r, 3, 4));
        assert_eq!((desired_replicas(&r), max_replicas(&r)), (Some(3), Some(4)));
        assert_eq!(
            desired_replicas(&rs(&[(DESIRED_REPLICAS_ANNOTATION, "9999999999")])),
            None
        );
    }
}
