//! Finalizers and the garbage collector's propagation policies, for every kind, as
//! kube-apiserver's generic registry (`store.go`) keeps them.
//!
//! Contract:
//! - A delete sets the finalizers its propagation policy asks for (`orphan` for
//!   Orphan, `foregroundDeletion` for Foreground, neither for Background) in place of
//!   the ones already there ([`finalizers_for_delete`]); an object left with finalizers
//!   is not removed but marked ([`mark_deleting`]: `deletionTimestamp` now, or earlier
//!   if it had one, `deletionGracePeriodSeconds` 0, `generation` bumped once).
//! - While an object is being deleted an update may remove finalizers but add none
//!   ([`check_update`]); the update that leaves a marked object (grace period 0) with
//!   none removes it ([`removed_by_update`]).
//! - A delete that names no policy takes the kind's default ([`default_orphans`]).

use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};
use serde_json::Value;

use super::objects::{k8s_time, system_time, typed};
use crate::error::ApiError;
use crate::resource::Resource;
use crate::validation::Causes;

/// The finalizer of an Orphan delete: the collector strips the owner's references from
/// its dependents, then this finalizer.
pub const ORPHAN: &str = "orphan";

/// The finalizer of a Foreground delete: the collector deletes the dependents and
/// removes it once no dependent blocks the owner.
pub const FOREGROUND: &str = "foregroundDeletion";

/// Whether `resource`'s objects orphan their dependents when a delete names no policy.
/// Every kind served defaults to Background (apps/v1, core/v1, batch/v1 CronJob) but
/// batch/v1 Job, which orphans its pods, as it did before the garbage collector
/// (kube-apiserver's `jobStrategy.DefaultGarbageCollectionPolicy` for batch/v1).
pub(crate) fn default_orphans(resource: Resource) -> bool {
    resource == Resource::Jobs
}

/// kube-apiserver's warning on a delete of a batch/v1 Job that names no policy: the
/// pods stay, which surprises whoever expected them to go.
pub(crate) const JOB_ORPHAN_WARNING: &str = "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning";

/// The warning a delete (single or collection) of `resource` with `opts` answers with:
/// kube-apiserver's Job REST gives it whenever neither `propagationPolicy` nor
/// `orphanDependents` is set, before the delete itself, so even a failed one carries it.
pub(crate) fn default_policy_warning(
    resource: Resource,
    opts: &DeleteOptions,
) -> Option<&'static str> {
    let unset = opts.propagation_policy.is_none() && opts.orphan_dependents.is_none();
    (unset && default_orphans(resource)).then_some(JOB_ORPHAN_WARNING)
}

/// kube-apiserver's `ValidateDeleteOptions`: a known policy, not both the policy and
/// the legacy `orphanDependents`, and a known dry-run value.
pub(crate) fn validate_delete_options(opts: &DeleteOptions) -> Result<(), ApiError> {
    let mut causes = Causes::default();
    if let (Some(_), Some(p)) = (opts.orphan_dependents, opts.propagation_policy.as_deref()) {
        causes.invalid(
            "propagationPolicy",
            p,
            "orphanDependents and deletionPropagation cannot be both set",
        );
    }
    if let Some(p) = opts.propagation_policy.as_deref()
        && !matches!(p, "Foreground" | "Background" | "Orphan")
    {
        causes.unsupported(
            "propagationPolicy",
            p,
            &["Foreground", "Background", "Orphan", "nil"],
        );
    }
    for d in opts.dry_run.iter().flatten() {
        if d != "All" {
            causes.unsupported("dryRun", d, &["All"]);
        }
    }
    causes.into_result("DeleteOptions", "")
}

/// Whether a delete with `opts` of an object holding `existing` orphans its
/// dependents (`shouldOrphanDependents`): the request's word first, then a GC
/// finalizer already there, then the kind's default.
fn orphans(resource: Resource, existing: &[String], opts: &DeleteOptions) -> bool {
    if let Some(o) = opts.orphan_dependents {
        return o;
    }
    match opts.propagation_policy.as_deref() {
        Some("Orphan") => return true,
        Some("Background" | "Foreground") => return false,
        _ => {}
    }
    for f in existing {
        match f.as_str() {
            ORPHAN => return true,
            FOREGROUND => return false,
            _ => {}
        }
    }
    default_orphans(resource)
}

/// Whether a delete with `opts` deletes the dependents first (`shouldDeleteDependents`).
fn foreground(existing: &[String], opts: &DeleteOptions) -> bool {
    if opts.orphan_dependents.is_some() {
        return false;
    }
    match opts.propagation_policy.as_deref() {
        Some("Foreground") => return true,
        Some("Background" | "Orphan") => return false,
        _ => {}
    }
    for f in existing {
        match f.as_str() {
            FOREGROUND => return true,
            ORPHAN => return false,
            _ => {}
        }
    }
    false
}

/// The finalizers a delete with `opts` leaves on an object that has `existing`, or
/// `None` when they stay as they are (`deletionFinalizersForGarbageCollection`).
pub(crate) fn finalizers_for_delete(
    resource: Resource,
    existing: &[String],
    opts: &DeleteOptions,
) -> Option<Vec<String>> {
    let mut new: Vec<String> = existing
        .iter()
        .filter(|f| *f != ORPHAN && *f != FOREGROUND)
        .cloned()
        .collect();
    if orphans(resource, existing, opts) {
        new.push(ORPHAN.to_owned());
    }
    if foreground(existing, opts) {
        new.push(FOREGROUND.to_owned());
    }
    let same = new.len() == existing.len() && new.iter().all(|f| existing.contains(f));
    (!same).then_some(new)
}

/// Marks an object held by its finalizers as being deleted (`markAsDeleting`): the
/// deletion time is now unless it already has an earlier one, the grace period 0, and
/// a first mark bumps a positive `generation`.
pub(crate) fn mark_deleting(meta: &mut ObjectMeta, now: SystemTime) {
    let existing = meta.deletion_timestamp.as_ref().map(system_time);
    if existing.is_none() && meta.generation.is_some_and(|g| g > 0) {
        meta.generation = meta.generation.map(|g| g + 1);
    }
    if existing.is_none_or(|t| t > now) {
        meta.deletion_timestamp = Some(k8s_time(now));
    }
    meta.deletion_grace_period_seconds = Some(0);
}

/// Whether `meta` has finalizers.
pub(crate) fn has_finalizers(meta: &ObjectMeta) -> bool {
    meta.finalizers.as_ref().is_some_and(|f| !f.is_empty())
}

/// Whether an update from `old` to `new` removes the object (`shouldDeleteDuringUpdate`):
/// `new` has no finalizers and `old` was being deleted with no grace period left.
pub(crate) fn removed_by_update(old: &ObjectMeta, new: &ObjectMeta) -> bool {
    !has_finalizers(new)
        && old.deletion_timestamp.is_some()
        && old.deletion_grace_period_seconds.is_none_or(|g| g == 0)
}

/// The finalizer checks of every object (`ValidateFinalizers`): the orphan and
/// foreground finalizers exclude each other.
pub(crate) fn check(causes: &mut Causes, meta: &ObjectMeta) {
    let f = meta.finalizers.as_deref().unwrap_or_default();
    if f.iter().any(|x| x == ORPHAN) && f.iter().any(|x| x == FOREGROUND) {
        // kube-apiserver shows the list as Go's %#v does.
        let shown = go_strings(f.iter());
        causes.push(
            crate::error::CauseKind::Invalid,
            "metadata.finalizers",
            format!(
                "Invalid value: {shown}: finalizer {ORPHAN} and {FOREGROUND} cannot be both set"
            ),
        );
    }
}

/// The finalizer checks of an update (`ValidateObjectMetaUpdate`): none may be added to
/// an object being deleted.
pub(crate) fn check_update(causes: &mut Causes, old: &ObjectMeta, new: &ObjectMeta) {
    check(causes, new);
    if old.deletion_timestamp.is_none() {
        return;
    }
    let had = old.finalizers.as_deref().unwrap_or_default();
    let mut extra: Vec<&String> = new
        .finalizers
        .iter()
        .flatten()
        .filter(|f| !had.contains(f))
        .collect();
    if extra.is_empty() {
        return;
    }
    extra.sort();
    extra.dedup();
    causes.forbidden(
        "metadata.finalizers",
        &format!(
            "no new finalizers can be added if the object is being deleted, found new finalizers {}",
            go_strings(extra.into_iter())
        ),
    );
}

/// A list of strings as Go's `%#v` prints a `[]string`: `[]string{"a", "b"}`.
fn go_strings<'a>(items: impl Iterator<Item = &'a String>) -> String {
    let list: Vec<String> = items.map(|f| format!("{f:?}")).collect();
    format!("[]string{{{}}}", list.join(", "))
}

/// The metadata of a stored object.
pub(crate) fn meta_of(v: &Value) -> Result<ObjectMeta, ApiError> {
    typed(v.get("metadata").unwrap_or(&Value::Null))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn opts(policy: Option<&str>, orphan: Option<bool>) -> DeleteOptions {
        DeleteOptions {
            propagation_policy: policy.map(str::to_owned),
            orphan_dependents: orphan,
            ..DeleteOptions::default()
        }
    }

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn policies_set_their_finalizer_in_place_of_the_other() {
        let r = Resource::Deployments;
        assert_eq!(
            finalizers_for_delete(r, &[], &opts(Some("Orphan"), None)),
            Some(strings(&[ORPHAN]))
        );
        assert_eq!(
            finalizers_for_delete(
                r,
                &strings(&["a/b", ORPHAN]),
                &opts(Some("Foreground"), None)
            ),
            Some(strings(&["a/b", FOREGROUND]))
        );
        assert_eq!(
            finalizers_for_delete(r, &strings(&[FOREGROUND]), &opts(Some("Background"), None)),
            Some(vec![])
        );
        assert_eq!(
            finalizers_for_delete(r, &[], &opts(None, Some(true))),
            Some(strings(&[ORPHAN]))
        );
        // No policy: what is there stays, and the default adds nothing.
        assert_eq!(
            finalizers_for_delete(r, &strings(&[ORPHAN]), &opts(None, None)),
            None
        );
        assert_eq!(finalizers_for_delete(r, &[], &opts(None, None)), None);
    }

    #[test]
    fn a_second_mark_keeps_the_first_time_and_generation() {
        let mut meta = ObjectMeta {
            generation: Some(3),
            ..ObjectMeta::default()
        };
        let t0 = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000);
        mark_deleting(&mut meta, t0);
        mark_deleting(&mut meta, t0 + std::time::Duration::from_secs(5));
        assert_eq!(meta.generation, Some(4));
        assert_eq!(meta.deletion_timestamp, Some(k8s_time(t0)));
        assert_eq!(meta.deletion_grace_period_seconds, Some(0));
    }

    #[test]
    fn no_finalizer_may_be_added_while_deleting() {
        let old = ObjectMeta {
            deletion_timestamp: Some(k8s_time(SystemTime::UNIX_EPOCH)),
            finalizers: Some(strings(&["a/x"])),
            ..ObjectMeta::default()
        };
        let mut causes = Causes::default();
        let new = ObjectMeta {
            finalizers: Some(strings(&["a/x", "a/y"])),
            ..old.clone()
        };
        check_update(&mut causes, &old, &new);
        assert_eq!(
            causes.0[0].message,
            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"a/y\"}"
        );
        let mut causes = Causes::default();
        check_update(&mut causes, &old, &ObjectMeta::default());
        assert!(causes.0.is_empty());
        assert!(removed_by_update(&old, &ObjectMeta::default()));
    }
}
