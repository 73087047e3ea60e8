//! Who made a request, as kube-apiserver's authenticators describe a user.

use std::collections::BTreeMap;

/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of anonymous requests.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The group exempt from authorization (bound to `cluster-admin`).
pub const MASTERS: &str = "system:masters";
/// The anonymous user.
pub const ANONYMOUS: &str = "system:anonymous";
/// The identity the scheduler's in-process writes are authorized as.
pub const SCHEDULER: &str = "system:kube-scheduler";

/// An authenticated (or anonymous) user: `UserInfo` of `authentication.k8s.io/v1`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// The user name, e.g. `alice` or `system:serviceaccount:default:builder`.
    pub name: String,
    /// The uid, if the authenticator knows one.
    pub uid: String,
    /// The groups, `system:authenticated` or `system:unauthenticated` included.
    pub groups: Vec<String>,
    /// Extra attributes (a service account token's pod, credential id).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// An authenticated user: `system:authenticated` is appended to `groups` (once).
    pub fn authenticated(
        name: impl Into<String>,
        uid: impl Into<String>,
        groups: Vec<String>,
    ) -> Self {
        let mut groups = groups;
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_owned());
        }
        Self {
            name: name.into(),
            uid: uid.into(),
            groups,
            extra: BTreeMap::new(),
        }
    }

    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        Self {
            name: ANONYMOUS.to_owned(),
            groups: vec![UNAUTHENTICATED.to_owned()],
            ..Self::default()
        }
    }

    /// The scheduler's own identity.
    pub fn scheduler() -> Self {
        Self::authenticated(SCHEDULER, "", Vec::new())
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// The `userInfo` object of a review's status.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = self.uid.clone().into();
        }
        if !self.extra.is_empty() {
            v["extra"] = serde_json::json!(self.extra);
        }
        v
    }
}
