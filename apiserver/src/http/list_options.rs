//! The resourceVersion options of a list or watch, checked as kube-apiserver's
//! `ValidateListOptions` checks them (a 422 for `ListOptions.meta.k8s.io`), and what
//! they ask for: a list at exactly one resourceVersion, or not older than one; a watch
//! that starts with the current state (the streaming list client-go's informers use),
//! or with none.

use super::extract::Params;
use crate::error::ApiError;
use crate::validation::Causes;

const EXACT: &str = "Exact";
const NOT_OLDER_THAN: &str = "NotOlderThan";

/// Where a list is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListAt {
    /// The current state (no resourceVersion, `0`, or `NotOlderThan`; the store is
    /// checked not to be behind it apart from this).
    Current,
    /// The state at exactly this resourceVersion (`resourceVersionMatch=Exact`).
    Exact(u64),
}

/// Whether a watch begins with the current state as ADDED events.
pub(crate) fn send_initial_events(params: &Params) -> bool {
    match params.get("sendInitialEvents") {
        Some(v) => v == "true",
        // Without the option: only a watch from no resourceVersion (or `0`) does.
        None => matches!(params.get("resourceVersion"), None | Some("0")),
    }
}

/// kube-apiserver's checks of the list options, then where a list is read (for a
/// watch, always [`ListAt::Current`]).
pub(crate) fn check(params: &Params) -> Result<ListAt, ApiError> {
    let watch = params.flag("watch");
    let rv = params.get("resourceVersion").unwrap_or("");
    let matching = params.get("resourceVersionMatch").unwrap_or("");
    let cont = params.get("continue").is_some_and(|c| !c.is_empty());
    let initial = params.get("sendInitialEvents").is_some();
    let mut causes = Causes::default();
    let field = "resourceVersionMatch";
    if watch {
        if initial && matching != NOT_OLDER_THAN {
            causes.forbidden(
                field,
                &format!(
                    "sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"
                ),
            );
        }
        if !matching.is_empty() {
            if !initial {
                causes.forbidden(
                    field,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                );
            }
            if matching != NOT_OLDER_THAN {
                causes.unsupported(field, matching, &[NOT_OLDER_THAN]);
            }
            if cont {
                causes.forbidden(
                    field,
                    "resourceVersionMatch is forbidden when continue is provided",
                );
            }
        }
    } else {
        if !matching.is_empty() {
            if rv.is_empty() {
                causes.forbidden(
                    field,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                );
            }
            if cont {
                causes.forbidden(
                    field,
                    "resourceVersionMatch is forbidden when continue is provided",
                );
            }
            if matching != EXACT && matching != NOT_OLDER_THAN {
                causes.unsupported(field, matching, &[EXACT, NOT_OLDER_THAN, ""]);
            }
            if matching == EXACT && rv == "0" {
                causes.forbidden(
                    field,
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                );
            }
        }
        if initial {
            causes.forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            );
        }
    }
    causes.into_result("ListOptions.meta.k8s.io", "")?;
    if watch || matching != EXACT {
        return Ok(ListAt::Current);
    }
    rv.parse()
        .map(ListAt::Exact)
        .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {rv:?}")))
}

#[cfg(test)]
mod tests;
