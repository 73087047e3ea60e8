//! A DaemonSet's ControllerRevisions (KCM's `constructHistory` and
//! `cleanupHistory` in `pkg/controller/daemon/update.go`): what `kubectl rollout
//! history ds/…` lists and `kubectl rollout undo ds/…` patches back.
//!
//! # Contract
//! - The current template has exactly one revision, `<ds>-<hash>` with `hash` the
//!   pods' `controller-revision-hash`, whose `data` is the patch that puts the
//!   template back ([`history::template_patch`]), labelled with the template's labels
//!   and the hash, annotated as the DaemonSet is, and numbered above every other
//!   (a rollback renumbers the revision it returns to, as KCM does).
//! - Duplicates of the current revision are deleted, the highest number kept.
//! - Of the other revisions, those no live pod runs are trimmed to
//!   `revisionHistoryLimit`, oldest first.
//! - Pure: the runner creates, renumbers and deletes.

use std::collections::HashSet;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

use crate::action::Action;
use crate::history::{self, find_equal, next_revision, template_patch};
use crate::owner::controller_ref;

use super::CONTROLLER_REVISION_HASH_LABEL;

/// The revision writes that make the history match the current template.
/// `owned`: the revisions the DaemonSet controls.
pub(super) fn construct(ds: &DaemonSet, owned: &[ControllerRevision], hash: &str) -> Vec<Action> {
    let Some(spec) = ds.spec.as_ref() else {
        return Vec::new();
    };
    let data = template_patch(&spec.template);
    let equal = find_equal(owned, &data);
    let mut actions = Vec::new();
    let others: Vec<ControllerRevision> = owned
        .iter()
        .filter(|r| !equal.iter().any(|e| e.metadata.name == r.metadata.name))
        .cloned()
        .collect();
    let next = next_revision(&others);
    match equal.split_last() {
        None => {
            let mut labels = spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.to_owned());
            let name = ds.metadata.name.as_deref().unwrap_or_default();
            actions.push(Action::CreateControllerRevision {
                revision: ControllerRevision {
                    metadata: ObjectMeta {
                        name: Some(format!("{name}-{hash}")),
                        namespace: ds.metadata.namespace.clone(),
                        labels: Some(labels),
                        annotations: ds.metadata.annotations.clone(),
                        owner_references: Some(vec![controller_ref(ds)]),
                        ..ObjectMeta::default()
                    },
                    data: Some(RawExtension(data)),
                    revision: next,
                },
            });
        }
        Some((current, duplicates)) => {
            for d in duplicates {
                actions.push(delete(d));
            }
            if current.revision < next {
                let mut renumbered = (*current).clone();
                renumbered.revision = next;
                actions.push(Action::UpdateControllerRevision {
                    revision: renumbered,
                });
            }
        }
    }
    actions
}

/// The old revisions to delete: beyond `revisionHistoryLimit` among those that are
/// neither current nor run by a live pod (`live_hashes`, the pods'
/// `controller-revision-hash` values).
pub(super) fn cleanup(
    ds: &DaemonSet,
    owned: &[ControllerRevision],
    hash: &str,
    live_hashes: &HashSet<&str>,
) -> Vec<Action> {
    let limit = ds
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10);
    let name = ds.metadata.name.as_deref().unwrap_or_default();
    let current = format!("{name}-{hash}");
    let live = |revision: &str| {
        revision == current
            || owned
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(revision))
                .and_then(|r| r.metadata.labels.as_ref())
                .and_then(|l| l.get(CONTROLLER_REVISION_HASH_LABEL))
                .is_some_and(|h| live_hashes.contains(h.as_str()))
    };
    history::to_truncate(owned, live, limit)
        .into_iter()
        .map(delete)
        .collect()
}

fn delete(r: &ControllerRevision) -> Action {
    Action::DeleteControllerRevision {
        name: r.metadata.name.clone().unwrap_or_default(),
        uid: r.metadata.uid.clone().unwrap_or_default(),
    }
}
