//! The four RBAC kinds of `rbac.authorization.k8s.io/v1` and where the store keeps them
//! (`/registry/roles/NS/NAME` in kube-apiserver's etcd, `roles/NS/NAME` here).

use crate::resource::Resource;

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// One of the RBAC kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `Role`, namespaced.
    Role,
    /// `ClusterRole`, cluster-scoped.
    ClusterRole,
    /// `RoleBinding`, namespaced.
    RoleBinding,
    /// `ClusterRoleBinding`, cluster-scoped.
    ClusterRoleBinding,
}

impl Kind {
    /// Every kind, in discovery order.
    pub const ALL: [Kind; 4] = [
        Kind::ClusterRoleBinding,
        Kind::ClusterRole,
        Kind::RoleBinding,
        Kind::Role,
    ];

    /// The plural resource name.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Role => "roles",
            Self::ClusterRole => "clusterroles",
            Self::RoleBinding => "rolebindings",
            Self::ClusterRoleBinding => "clusterrolebindings",
        }
    }

    /// The kind name.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Role => "Role",
            Self::ClusterRole => "ClusterRole",
            Self::RoleBinding => "RoleBinding",
            Self::ClusterRoleBinding => "ClusterRoleBinding",
        }
    }

    /// Whether objects live in a namespace.
    pub fn namespaced(self) -> bool {
        matches!(self, Self::Role | Self::RoleBinding)
    }

    /// Whether the kind grants permissions (a role) rather than assigning them.
    pub fn is_role(self) -> bool {
        matches!(self, Self::Role | Self::ClusterRole)
    }

    /// The resource it is served as (through the plain kinds' path, `crate::kinds`).
    pub fn resource(self) -> Resource {
        match self {
            Self::Role => Resource::Roles,
            Self::ClusterRole => Resource::ClusterRoles,
            Self::RoleBinding => Resource::RoleBindings,
            Self::ClusterRoleBinding => Resource::ClusterRoleBindings,
        }
    }

    /// The store key of one object.
    pub fn key(self, ns: &str, name: &str) -> String {
        self.resource().key(ns, name)
    }

    /// The store prefix of all objects, or of one namespace's.
    pub fn prefix(self, ns: Option<&str>) -> String {
        self.resource().prefix(ns)
    }
}
