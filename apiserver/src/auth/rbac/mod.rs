//! The RBAC authorizer: Role, ClusterRole, RoleBinding and ClusterRoleBinding with
//! Kubernetes' semantics, read from the store.
//!
//! ClusterRoleBindings apply everywhere; a RoleBinding (to a Role or a ClusterRole)
//! applies only in its namespace; a request without a namespace (cluster-scoped objects,
//! lists across namespaces, non-resource URLs) is decided by ClusterRoleBindings alone.
//! The parsed objects are cached and re-read when the store's RBAC objects change (by
//! their count and newest resourceVersion), so a check costs no decoding.

pub mod bootstrap;
mod escalation;
pub mod kinds;
pub mod rules;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject,
};
use serde::de::DeserializeOwned;

pub(crate) use escalation::{Grant, Writer, confirm_no_escalation};
use kinds::Kind;

use super::request_info::Attributes;
use super::user::UserInfo;
use crate::api::Api;
use crate::error::ApiError;
use crate::store::{Precondition, WriteOp};

/// An authorization decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may go on.
    pub allowed: bool,
    /// Why (the binding that allowed it); empty when denied without an error.
    pub reason: String,
}

/// Every RBAC object, parsed.
#[derive(Default)]
struct Snapshot {
    cluster_roles: HashMap<String, Vec<PolicyRule>>,
    roles: HashMap<(String, String), Vec<PolicyRule>>,
    cluster_bindings: Vec<ClusterRoleBinding>,
    bindings: HashMap<String, Vec<RoleBinding>>,
}

fn parse_all<T: DeserializeOwned>(api: &Api, kind: Kind) -> Vec<T> {
    let (items, _) = api.store().list(&kind.prefix(None));
    items
        .iter()
        .filter_map(|v| match T::deserialize(&**v) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(kind = kind.kind(), error = %e, "unreadable RBAC object ignored");
                None
            }
        })
        .collect()
}

impl Snapshot {
    fn read(api: &Api) -> Self {
        let mut s = Self::default();
        for r in parse_all::<ClusterRole>(api, Kind::ClusterRole) {
            s.cluster_roles.insert(
                r.metadata.name.unwrap_or_default(),
                r.rules.unwrap_or_default(),
            );
        }
        for r in parse_all::<Role>(api, Kind::Role) {
            let key = (
                r.metadata.namespace.unwrap_or_default(),
                r.metadata.name.unwrap_or_default(),
            );
            s.roles.insert(key, r.rules.unwrap_or_default());
        }
        s.cluster_bindings = parse_all(api, Kind::ClusterRoleBinding);
        for b in parse_all::<RoleBinding>(api, Kind::RoleBinding) {
            s.bindings
                .entry(b.metadata.namespace.clone().unwrap_or_default())
                .or_default()
                .push(b);
        }
        s
    }

    /// Visits each (binding description, rules) that applies to `user` in `ns`, until
    /// `visit` returns true.
    fn visit(&self, user: &UserInfo, ns: &str, visit: &mut dyn FnMut(&str, &[PolicyRule]) -> bool) {
        let empty = Vec::new();
        for b in &self.cluster_bindings {
            if let Some(s) = applies(user, b.subjects.as_deref(), "") {
                let rules = self.cluster_roles.get(&b.role_ref.name).unwrap_or(&empty);
                let why = format!(
                    "ClusterRoleBinding {:?} of ClusterRole {:?} to {}",
                    b.metadata.name.as_deref().unwrap_or(""),
                    b.role_ref.name,
                    s
                );
                if visit(&why, rules) {
                    return;
                }
            }
        }
        if ns.is_empty() {
            return;
        }
        for b in self.bindings.get(ns).unwrap_or(&Vec::new()) {
            if let Some(s) = applies(user, b.subjects.as_deref(), ns) {
                let rules = if b.role_ref.kind == "ClusterRole" {
                    self.cluster_roles.get(&b.role_ref.name)
                } else {
                    self.roles.get(&(ns.to_owned(), b.role_ref.name.clone()))
                };
                let why = format!(
                    "RoleBinding {:?} of {} {:?} to {}",
                    format!("{ns}/{}", b.metadata.name.as_deref().unwrap_or("")),
                    b.role_ref.kind,
                    b.role_ref.name,
                    s
                );
                if visit(&why, rules.unwrap_or(&empty)) {
                    return;
                }
            }
        }
    }
}

/// The subject of `subjects` that names `user` (as `User "alice"`), if any.
fn applies(user: &UserInfo, subjects: Option<&[Subject]>, ns: &str) -> Option<String> {
    subjects.unwrap_or(&[]).iter().find_map(|s| {
        let hit = match s.kind.as_str() {
            "User" => user.name == s.name,
            "Group" => user.in_group(&s.name),
            "ServiceAccount" => {
                let sa_ns = s
                    .namespace
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .unwrap_or(ns);
                !sa_ns.is_empty()
                    && user.name == format!("system:serviceaccount:{sa_ns}:{}", s.name)
            }
            _ => false,
        };
        hit.then(|| format!("{} {:?}", s.kind, s.name))
    })
}

/// The RBAC authorizer over one API's store.
pub struct Rbac {
    api: Api,
    cache: RwLock<Option<(Fingerprint, Arc<Snapshot>)>>,
}

/// How many RBAC objects there are and the newest one's resourceVersion.
type Fingerprint = (usize, u64);

impl std::fmt::Debug for Rbac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rbac").finish_non_exhaustive()
    }
}

impl Rbac {
    /// An authorizer over `api`'s RBAC objects.
    pub fn new(api: Api) -> Self {
        Self {
            api,
            cache: RwLock::new(None),
        }
    }

    /// Creates the bootstrap roles and bindings that are missing (changed ones are kept,
    /// as an operator may have edited them).
    ///
    /// # Errors
    /// The store failed.
    pub async fn bootstrap(&self) -> Result<(), ApiError> {
        let now = self.api.now();
        let mut ops = Vec::new();
        let mut put = |kind: Kind, mut value: serde_json::Value| -> Result<(), ApiError> {
            let name = value["metadata"]["name"].as_str().unwrap_or("").to_owned();
            let key = kind.key("", &name);
            if self.api.store().get(&key).is_none() {
                value["metadata"]["uid"] = uuid::Uuid::new_v4().to_string().into();
                value["metadata"]["creationTimestamp"] =
                    serde_json::to_value(crate::api::k8s_time(now))
                        .map_err(|e| ApiError::Internal(e.to_string()))?;
                value["apiVersion"] = format!("{}/v1", kinds::GROUP).into();
                value["kind"] = kind.kind().into();
                ops.push(WriteOp::Put {
                    key,
                    object: value,
                    precondition: Precondition::Absent,
                });
            }
            Ok(())
        };
        let enc = |e: serde_json::Error| ApiError::Internal(e.to_string());
        for r in bootstrap::cluster_roles() {
            put(Kind::ClusterRole, serde_json::to_value(r).map_err(enc)?)?;
        }
        for b in bootstrap::cluster_role_bindings() {
            put(
                Kind::ClusterRoleBinding,
                serde_json::to_value(b).map_err(enc)?,
            )?;
        }
        if !ops.is_empty() {
            match self.api.commit(ops).await {
                Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// How many RBAC objects there are and the newest one's resourceVersion: any write
    /// changes one of the two (a delete the count, a create or update the newest).
    fn fingerprint(&self) -> Fingerprint {
        Kind::ALL.iter().fold((0, 0), |(n, rv), kind| {
            let (items, _) = self.api.store().list_stored(&kind.prefix(None));
            let newest = items
                .iter()
                .map(crate::store::Stored::rv)
                .max()
                .unwrap_or(0);
            (n + items.len(), rv.max(newest))
        })
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        let generation = self.fingerprint();
        if let Ok(cache) = self.cache.read()
            && let Some((g, s)) = cache.as_ref()
            && *g == generation
        {
            return s.clone();
        }
        let snap = Arc::new(Snapshot::read(&self.api));
        if let Ok(mut cache) = self.cache.write() {
            *cache = Some((generation, snap.clone()));
        }
        snap
    }

    /// Decides whether `user` may do `a`. Members of `system:masters` may do anything,
    /// before RBAC is asked, as in kube-apiserver.
    pub fn authorize(&self, user: &UserInfo, a: &Attributes) -> Decision {
        if user.in_group(super::user::MASTERS) {
            return Decision {
                allowed: true,
                reason: String::new(),
            };
        }
        let mut reason = String::new();
        self.snapshot()
            .visit(user, &a.namespace, &mut |why, rules| {
                if rules.iter().any(|r| rules::allows(r, a)) {
                    reason = format!("RBAC: allowed by {why}");
                    true
                } else {
                    false
                }
            });
        Decision {
            allowed: !reason.is_empty(),
            reason,
        }
    }

    /// Every rule that applies to `user` in `ns` (cluster-wide ones only when `ns` is
    /// empty): what they hold, for escalation checks and rules reviews.
    pub fn rules_for(&self, user: &UserInfo, ns: &str) -> Vec<PolicyRule> {
        if user.in_group(super::user::MASTERS) {
            return vec![
                rules::rule(&["*"], &["*"], &["*"]),
                rules::url_rule(&["*"], &["*"]),
            ];
        }
        let mut out = Vec::new();
        self.snapshot().visit(user, ns, &mut |_, rules| {
            out.extend_from_slice(rules);
            false
        });
        out
    }

    /// The rules of the role a binding refers to (`None`: no such role).
    pub(crate) fn role_rules(&self, ns: &str, kind: &str, name: &str) -> Option<Vec<PolicyRule>> {
        let snap = self.snapshot();
        match kind {
            "ClusterRole" => snap.cluster_roles.get(name).cloned(),
            "Role" => snap.roles.get(&(ns.to_owned(), name.to_owned())).cloned(),
            _ => None,
        }
    }
}
