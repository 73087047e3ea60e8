//! Controller references, and which objects an owner claims (kube's
//! `ControllerRefManager`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::{Metadata, Resource};

use crate::selector::Selector;

/// The controller reference an owner puts on what it creates or adopts:
/// `{apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true}`.
/// `blockOwnerDeletion` makes a foreground deletion of the owner wait for
/// the child.
pub fn controller_ref<K>(owner: &K) -> OwnerReference
where
    K: Resource + Metadata<Ty = ObjectMeta>,
{
    let meta = owner.metadata();
    OwnerReference {
        api_version: K::API_VERSION.to_owned(),
        kind: K::KIND.to_owned(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The object's controller reference (the one with `controller: true`;
/// the API allows at most one).
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// Whether `meta` is controlled by the owner with this uid.
pub fn is_controlled_by(meta: &ObjectMeta, owner_uid: &str) -> bool {
    controller_of(meta).is_some_and(|r| r.uid == owner_uid)
}

/// What an owner claims among candidate objects.
#[derive(Debug)]
pub struct Claim<'a, T> {
    /// What the owner may manage this sync: what it controls and still
    /// selects, plus the orphans it is about to adopt (KCM counts an
    /// adoption as claimed once its patch succeeds; the runner stops the
    /// sync if one fails).
    pub claimed: Vec<&'a T>,
    /// Orphans to adopt (also in `claimed`).
    pub adopt: Vec<&'a T>,
    /// Objects the owner controls but no longer selects: to release.
    pub release: Vec<&'a T>,
}

/// Sort `candidates` the way `ClaimObject` does:
///
/// - controlled by someone else: ignored;
/// - controlled by the owner and selected: claimed (even while the owner is
///   being deleted, since that takes no action);
/// - controlled by the owner, not selected: released, unless the owner is
///   being deleted;
/// - an orphan: adopted if selected, not itself being deleted, in the
///   owner's namespace, and the owner is not being deleted.
///
/// The runner re-reads the owner uncached before adopting (a stale cache
/// could show a live owner that is already being deleted).
pub fn claim<'a, T, I>(owner: &ObjectMeta, selector: &Selector, candidates: I) -> Claim<'a, T>
where
    T: Metadata<Ty = ObjectMeta> + 'a,
    I: IntoIterator<Item = &'a T>,
{
    let owner_uid = owner.uid.as_deref().unwrap_or_default();
    let owner_deleting = owner.deletion_timestamp.is_some();
    let mut out = Claim {
        claimed: Vec::new(),
        adopt: Vec::new(),
        release: Vec::new(),
    };
    for obj in candidates {
        let meta = obj.metadata();
        let selected = selector.matches(meta.labels.as_ref());
        match controller_of(meta) {
            Some(r) if r.uid != owner_uid => {}
            Some(_) if selected => out.claimed.push(obj),
            Some(_) => {
                if !owner_deleting {
                    out.release.push(obj);
                }
            }
            None => {
                let same_namespace = owner.namespace.as_deref().is_none_or(|ns| {
                    ns.is_empty() || meta.namespace.as_deref().unwrap_or_default() == ns
                });
                if selected
                    && !owner_deleting
                    && meta.deletion_timestamp.is_none()
                    && same_namespace
                {
                    out.claimed.push(obj);
                    out.adopt.push(obj);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::collections::BTreeMap;

    fn rs(deleting: bool) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("rs-uid".into()),
                deletion_timestamp: deleting
                    .then(|| Time("2024-01-01T00:00:00Z".parse().expect("ts"))),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn pod(name: &str, app: &str, owner: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("{name}-uid")),
                labels: Some(BTreeMap::from([("app".to_owned(), app.to_owned())])),
                owner_references: owner.map(|uid| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "ReplicaSet".into(),
                        name: "x".into(),
                        uid: uid.into(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn names(v: &[&Pod]) -> Vec<String> {
        v.iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    fn web() -> Selector {
        Selector::from_map(&BTreeMap::from([("app".to_owned(), "web".to_owned())]))
    }

    #[test]
    fn controller_ref_names_the_owner_and_blocks_its_deletion() {
        let r = controller_ref(&rs(false));
        assert_eq!(
            r,
            OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "web".into(),
                uid: "rs-uid".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }
        );
    }

    #[test]
    fn claims_own_adopts_matching_orphans_releases_strays_ignores_others() {
        let mut deleting_orphan = pod("dying", "web", None);
        deleting_orphan.metadata.deletion_timestamp =
            Some(Time("2024-01-01T00:00:00Z".parse().expect("ts")));
        let mut other_ns = pod("elsewhere", "web", None);
        other_ns.metadata.namespace = Some("other".into());
        let pods = vec![
            pod("mine", "web", Some("rs-uid")),
            pod("orphan", "web", None),
            pod("stray", "db", Some("rs-uid")),
            pod("theirs", "web", Some("other-uid")),
            pod("unrelated", "db", None),
            deleting_orphan,
            other_ns,
        ];
        let owner = rs(false);
        let c = claim(&owner.metadata, &web(), &pods);
        assert_eq!(names(&c.claimed), ["mine", "orphan"]);
        assert_eq!(names(&c.adopt), ["orphan"]);
        assert_eq!(names(&c.release), ["stray"]);
    }

    #[test]
    fn an_owner_being_deleted_adopts_and_releases_nothing_but_keeps_its_own() {
        let pods = vec![
            pod("mine", "web", Some("rs-uid")),
            pod("orphan", "web", None),
            pod("stray", "db", Some("rs-uid")),
        ];
        let owner = rs(true);
        let c = claim(&owner.metadata, &web(), &pods);
        assert_eq!(names(&c.claimed), ["mine"]);
        assert!(c.adopt.is_empty());
        assert!(c.release.is_empty());
    }
}
