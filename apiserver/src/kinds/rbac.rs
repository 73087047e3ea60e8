//! Role, ClusterRole, RoleBinding and ClusterRoleBinding (`rbac.authorization.k8s.io/v1`)
//! as plain kinds: kube-apiserver's validation of rules and bindings, a binding's
//! `roleRef` fixed once written, the escalation check on every write
//! (`crate::auth::rbac::confirm_no_escalation`), and the Tables kubectl prints (roles:
//! NAME, CREATED AT; bindings: NAME, ROLE, AGE, and USERS, GROUPS, SERVICEACCOUNTS
//! with `-o wide`). The authorizer reads the same stored objects.

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use serde_json::{Value, json};

use super::{Kind, col, name_and_age};
use crate::auth::rbac::kinds::{GROUP, Kind as RbacKind};
use crate::auth::rbac::{self, Grant, Writer};
use crate::error::ApiError;
use crate::resource::Resource;
use crate::validation::Causes;

fn check_rules(causes: &mut Causes, rules: Option<&[PolicyRule]>, cluster: bool) {
    for (i, r) in rules.unwrap_or(&[]).iter().enumerate() {
        let f = |s: &str| format!("rules[{i}].{s}");
        if r.verbs.is_empty() {
            causes.required(f("verbs"));
        }
        let urls = r.non_resource_urls.as_deref().unwrap_or(&[]);
        let resources = r.resources.as_deref().unwrap_or(&[]);
        if !urls.is_empty() {
            if !cluster {
                causes.invalid(
                    f("nonResourceURLs"),
                    &urls.join(","),
                    "namespaced rules cannot apply to non-resource URLs",
                );
            }
            if !resources.is_empty() {
                causes.invalid(
                    f("nonResourceURLs"),
                    &urls.join(","),
                    "rules cannot apply to both regular resources and non-resource URLs",
                );
            }
        } else {
            if r.api_groups.as_deref().unwrap_or(&[]).is_empty() {
                causes.required(f("apiGroups"));
            }
            if resources.is_empty() {
                causes.required(f("resources"));
            }
        }
    }
}

fn check_binding(
    causes: &mut Causes,
    role_ref: &RoleRef,
    subjects: Option<&[Subject]>,
    namespaced: bool,
) {
    if role_ref.api_group != GROUP {
        causes.unsupported("roleRef.apiGroup", &role_ref.api_group, &[GROUP]);
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&role_ref.kind.as_str()) {
        causes.unsupported("roleRef.kind", &role_ref.kind, kinds);
    }
    if role_ref.name.is_empty() {
        causes.required("roleRef.name");
    }
    for (i, s) in subjects.unwrap_or(&[]).iter().enumerate() {
        if !matches!(s.kind.as_str(), "User" | "Group" | "ServiceAccount") {
            causes.unsupported(
                format!("subjects[{i}].kind"),
                &s.kind,
                &["ServiceAccount", "User", "Group"],
            );
        }
        if s.name.is_empty() {
            causes.required(format!("subjects[{i}].name"));
        }
        if s.kind == "ServiceAccount"
            && !namespaced
            && s.namespace.as_deref().unwrap_or("").is_empty()
        {
            causes.required(format!("subjects[{i}].namespace"));
        }
    }
}

/// `ValidateRBACName`: a path segment (`path.IsValidPathSegmentName`), so the
/// bootstrap roles' `system:` names are names.
fn check_path_segment_name(causes: &mut Causes, field: &str, name: &str) {
    if name == "." || name == ".." {
        causes.invalid(field, name, &format!("may not be '{name}'"));
    }
    for c in ["/", "%"] {
        if name.contains(c) {
            causes.invalid(field, name, &format!("may not contain '{c}'"));
        }
    }
}

/// `ValidateRoleBindingUpdate`: a binding keeps the role it was written with.
fn check_role_ref_kept(causes: &mut Causes, old: &RoleRef, new: &RoleRef) {
    if old != new {
        causes.invalid("roleRef", &new.name, "cannot change roleRef");
    }
}

/// The Kind impl of a role kind (it grants its rules) or a binding kind (its roleRef).
macro_rules! rbac_kind {
    (role $t:ty, $kind:expr, $resource:expr, $cluster:expr) => {
        impl Kind for $t {
            const RESOURCE: Resource = $resource;
            const NAME_RULE: fn(&mut Causes, &str, &str) = check_path_segment_name;

            fn validate(&self, causes: &mut Causes) {
                check_rules(causes, self.rules.as_deref(), $cluster);
            }

            fn admit(&self, ns: &str, writer: Option<&Writer>) -> Result<(), ApiError> {
                let name = self.metadata.name.as_deref().unwrap_or("");
                let rules = self.rules.as_deref().unwrap_or(&[]);
                rbac::confirm_no_escalation(writer, $kind, ns, name, Grant::Rules(rules))
            }
        }
    };
    (binding $t:ty, $kind:expr, $resource:expr, $namespaced:expr) => {
        impl Kind for $t {
            const RESOURCE: Resource = $resource;
            const NAME_RULE: fn(&mut Causes, &str, &str) = check_path_segment_name;

            fn validate(&self, causes: &mut Causes) {
                check_binding(
                    causes,
                    &self.role_ref,
                    self.subjects.as_deref(),
                    $namespaced,
                );
            }

            fn validate_update(old: &Self, new: &Self, causes: &mut Causes) {
                check_role_ref_kept(causes, &old.role_ref, &new.role_ref);
            }

            fn admit(&self, ns: &str, writer: Option<&Writer>) -> Result<(), ApiError> {
                let name = self.metadata.name.as_deref().unwrap_or("");
                let grant = Grant::Binding(&self.role_ref);
                rbac::confirm_no_escalation(writer, $kind, ns, name, grant)
            }
        }
    };
}

rbac_kind!(role Role, RbacKind::Role, Resource::Roles, false);
rbac_kind!(role ClusterRole, RbacKind::ClusterRole, Resource::ClusterRoles, true);
rbac_kind!(binding RoleBinding, RbacKind::RoleBinding, Resource::RoleBindings, true);
rbac_kind!(
    binding ClusterRoleBinding,
    RbacKind::ClusterRoleBinding,
    Resource::ClusterRoleBindings,
    false
);

/// Whether `resource` is a role kind (Table: NAME, CREATED AT) or a binding kind.
pub(super) fn is_role(resource: Resource) -> bool {
    matches!(resource, Resource::Roles | Resource::ClusterRoles)
}

/// The columns of kube-apiserver's RBAC printers.
pub(super) fn columns(resource: Resource) -> Vec<Value> {
    let (name, age) = name_and_age();
    if is_role(resource) {
        let mut created = age;
        created["name"] = json!("Created At");
        created["type"] = json!("date");
        return vec![name, created];
    }
    let wide = |n: &str, d: &str| {
        let mut c = col(n, "", d);
        c["priority"] = json!(1);
        c
    };
    vec![
        name,
        col(
            "Role",
            "",
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable.",
        ),
        age,
        wide("Users", "Users in the roleBinding"),
        wide("Groups", "Groups in the roleBinding"),
        wide("ServiceAccounts", "ServiceAccounts in the roleBinding"),
    ]
}

/// A role's row: its name and its creation time in RFC 3339 (`printRole`).
pub(super) fn role_cells(obj: &Value) -> Vec<Value> {
    let at = obj
        .pointer("/metadata/creationTimestamp")
        .cloned()
        .unwrap_or(Value::Null);
    vec![name_of(obj), at]
}

fn name_of(obj: &Value) -> Value {
    obj.pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null)
}

/// A binding's cells after its NAME: `Kind/name` of its role (`printRoleBinding`).
pub(super) fn role_ref(obj: &Value) -> Value {
    let field = |f: &str| {
        obj.pointer(&format!("/roleRef/{f}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    json!(format!("{}/{}", field("kind"), field("name")))
}

/// A binding's wide cells: its users, groups and service accounts (`namespace/name`),
/// each joined by ", " (`SubjectsStrings`).
pub(super) fn subjects(obj: &Value) -> [Value; 3] {
    let mut out: [Vec<String>; 3] = Default::default();
    for s in obj
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |f: &str| s.get(f).and_then(Value::as_str).unwrap_or("");
        match field("kind") {
            "User" => out[0].push(field("name").to_owned()),
            "Group" => out[1].push(field("name").to_owned()),
            "ServiceAccount" => out[2].push(format!("{}/{}", field("namespace"), field("name"))),
            _ => {}
        }
    }
    out.map(|v| json!(v.join(", ")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::kinds::validate;

    fn fields(e: ApiError) -> Vec<String> {
        match e {
            ApiError::Invalid { causes, .. } => causes.into_iter().map(|c| c.field).collect(),
            other => panic!("not invalid: {other:?}"),
        }
    }

    #[test]
    fn rules_need_verbs_groups_and_resources_and_urls_only_cluster_wide() {
        let role: Role = serde_json::from_value(json!({"metadata": {"name": "r"},
            "rules": [{"verbs": [], "resources": ["pods"]}, {"verbs": ["get"], "nonResourceURLs": ["/x"]}]}))
        .unwrap();
        assert_eq!(
            fields(validate(&role, None).unwrap_err()),
            [
                "rules[0].verbs",
                "rules[0].apiGroups",
                "rules[1].nonResourceURLs"
            ]
        );
        let cluster: ClusterRole = serde_json::from_value(json!({"metadata": {"name": "r"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]}))
        .unwrap();
        assert!(validate(&cluster, None).is_ok());
    }

    #[test]
    fn rbac_names_are_path_segments() {
        let named = |n: &str| -> ClusterRole {
            serde_json::from_value(json!({"metadata": {"name": n}})).unwrap()
        };
        assert!(validate(&named("system:controller:x"), None).is_ok());
        for bad in ["a/b", "a%b", ".."] {
            assert_eq!(
                fields(validate(&named(bad), None).unwrap_err()),
                ["metadata.name"],
                "{bad}"
            );
        }
    }

    #[test]
    fn a_binding_keeps_its_role_ref() {
        let b = |role: &str| -> RoleBinding {
            serde_json::from_value(json!({"metadata": {"name": "b"},
                "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": role},
                "subjects": [{"kind": "User", "name": "alice"}]}))
            .unwrap()
        };
        assert!(validate(&b("a"), Some(&b("a"))).is_ok());
        assert_eq!(
            fields(validate(&b("b"), Some(&b("a"))).unwrap_err()),
            ["roleRef"]
        );
    }

    #[test]
    fn a_cluster_binding_refers_to_cluster_roles_and_namespaced_service_accounts() {
        let b: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": "b"},
            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "Robot", "name": "x"}]}))
        .unwrap();
        assert_eq!(
            fields(validate(&b, None).unwrap_err()),
            ["roleRef.kind", "subjects[0].namespace", "subjects[1].kind"]
        );
    }

    #[test]
    fn binding_cells_show_the_role_and_the_subjects_by_kind() {
        let obj = json!({"roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [
            {"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "namespace": "ns", "name": "sa"}]});
        assert_eq!(role_ref(&obj), json!("ClusterRole/view"));
        assert_eq!(
            subjects(&obj),
            [json!("alice, bob"), json!("devs"), json!("ns/sa")]
        );
        assert_eq!(
            columns(Resource::RoleBindings)
                .iter()
                .map(|c| (c["name"].as_str().unwrap(), c["priority"].as_u64().unwrap()))
                .collect::<Vec<_>>(),
            [
                ("Name", 0),
                ("Role", 0),
                ("Age", 0),
                ("Users", 1),
                ("Groups", 1),
                ("ServiceAccounts", 1)
            ]
        );
    }
}
