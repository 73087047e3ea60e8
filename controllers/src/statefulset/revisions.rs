//! Which ControllerRevisions a StatefulSet's sync works with
//! (`getStatefulSetRevisions`): the update revision is the one whose data is the
//! set's template now — the newest if it already is, an older one renumbered to the
//! top (a rollback), or a new one — and the current revision the one
//! `status.currentRevision` names (the update revision when there is none yet).

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};

use crate::Action;
use crate::history::{self, find_equal, new_revision, next_revision, sorted, template_patch};
use crate::owner::controller_ref;

/// A sync's revisions: the current and update revisions, and the write that makes
/// the update revision exist (a create or a renumbering), if one is needed.
pub(super) struct Plan {
    pub(super) current: ControllerRevision,
    pub(super) update: ControllerRevision,
    pub(super) write: Option<Action>,
}

/// The revisions of `set`: `owned` are those it controls, `all` every revision in its
/// namespace (a name may be taken by another's). `None` when the update revision's
/// name is taken by other data: the set's collision count goes up, which names it
/// anew.
pub(super) fn plan(
    set: &StatefulSet,
    owned: &[ControllerRevision],
    all: &[ControllerRevision],
) -> Option<Plan> {
    let spec = set.spec.clone().unwrap_or_default();
    let status = set.status.clone().unwrap_or_default();
    let data = template_patch(&spec.template);
    let newest = sorted(owned).last().and_then(|r| r.metadata.name.clone());
    let equal = find_equal(owned, &data);
    let (update, write) = match equal.last() {
        Some(same) if same.metadata.name == newest => ((*same).clone(), None),
        Some(older) => {
            let mut renumbered = (*older).clone();
            renumbered.revision = next_revision(owned);
            (
                renumbered.clone(),
                Some(Action::UpdateControllerRevision {
                    revision: renumbered,
                }),
            )
        }
        None => {
            let fresh = new_revision(
                &set.metadata,
                controller_ref(set),
                spec.template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.as_ref()),
                data,
                next_revision(owned),
                Some(status.collision_count.unwrap_or(0)),
            );
            if all.iter().any(|r| r.metadata.name == fresh.metadata.name) {
                return None;
            }
            (
                fresh.clone(),
                Some(Action::CreateControllerRevision { revision: fresh }),
            )
        }
    };
    let current = status
        .current_revision
        .as_deref()
        .filter(|name| Some(*name) != update.metadata.name.as_deref())
        .and_then(|name| {
            owned
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(name))
        })
        .cloned()
        .unwrap_or_else(|| update.clone());
    Some(Plan {
        current,
        update,
        write,
    })
}

/// The template a revision records, or `fallback` when its data does not hold one.
pub(super) fn template_or(
    revision: &ControllerRevision,
    fallback: &k8s_openapi::api::core::v1::PodTemplateSpec,
) -> k8s_openapi::api::core::v1::PodTemplateSpec {
    history::template_of(revision).unwrap_or_else(|| fallback.clone())
}
