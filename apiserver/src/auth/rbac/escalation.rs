//! Kubernetes' escalation prevention on RBAC writes: a role may grant only what its
//! writer holds (unless they may `escalate` it), a binding only a role whose rules its
//! writer holds (unless they may `bind` it), as RBAC's storage checks in kube-apiserver.

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};

use super::kinds::{GROUP, Kind};
use super::{Rbac, rules};
use crate::auth::request_info::Attributes;
use crate::auth::status::forbidden_message;
use crate::auth::user::UserInfo;
use crate::error::ApiError;

/// Who writes, when authentication and RBAC are on (without them writes are not
/// checked). The authorization layer puts it in each request's extensions.
pub(crate) type Writer = (UserInfo, Arc<Rbac>);

/// What an RBAC object grants, checked against what its writer holds.
pub(crate) enum Grant<'a> {
    /// A role's rules.
    Rules(&'a [PolicyRule]),
    /// A binding's role.
    Binding(&'a RoleRef),
}

/// Refuses a write of `kind` `name` in `ns` that grants more than `writer` holds.
///
/// # Errors
/// 403 naming the rules not held; 404 for a binding to a role that does not exist.
pub(crate) fn confirm_no_escalation(
    writer: Option<&Writer>,
    kind: Kind,
    ns: &str,
    name: &str,
    grant: Grant<'_>,
) -> Result<(), ApiError> {
    let Some((user, rbac)) = writer else {
        return Ok(());
    };
    let (wanted, bypass) = match grant {
        Grant::Rules(rules) => (
            rules.to_vec(),
            Attributes::resource("escalate", GROUP, kind.plural(), ns, name),
        ),
        Grant::Binding(r) => {
            let role_kind = if r.kind == "Role" {
                Kind::Role
            } else {
                Kind::ClusterRole
            };
            let bypass = Attributes::resource("bind", GROUP, role_kind.plural(), ns, &r.name);
            if rbac.authorize(user, &bypass).allowed {
                return Ok(());
            }
            let rules =
                rbac.role_rules(ns, &r.kind, &r.name)
                    .ok_or_else(|| ApiError::NotFound {
                        resource: format!("{}.{GROUP}", role_kind.plural()),
                        name: r.name.clone(),
                    })?;
            (rules, bypass)
        }
    };
    if rbac.authorize(user, &bypass).allowed {
        return Ok(());
    }
    let missing = rules::uncovered(&rbac.rules_for(user, ns), &wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = missing.iter().map(rules::compact).collect();
    let msg = format!(
        "user {:?} (groups={:?}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        user.groups,
        lines.join("\n")
    );
    Err(ApiError::Forbidden(forbidden_message(
        GROUP,
        kind.plural(),
        name,
        &msg,
    )))
}
