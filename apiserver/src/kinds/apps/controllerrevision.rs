//! ControllerRevision (`apps/v1`): an immutable snapshot of a controller's template
//! (`data`) and its `revision` number. The StatefulSet controller (and later the
//! DaemonSet's) writes them; `kubectl rollout history|undo` reads them. Validated as
//! kube-apiserver does (`ValidateControllerRevision[Update]`): `data` is mandatory
//! and never changes, `revision` is not negative.

use std::time::SystemTime;

use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::{Value, json};

use super::col;
use crate::CauseKind;
use crate::kinds::Kind;
use crate::resource::Resource;
use crate::validation::Causes;

impl Kind for ControllerRevision {
    const RESOURCE: Resource = Resource::ControllerRevisions;

    fn validate(&self, causes: &mut Causes) {
        if self.data.is_none() {
            causes.push(
                CauseKind::Required,
                "data",
                "Required value: data is mandatory",
            );
        }
        if self.revision < 0 {
            causes.invalid_number(
                "revision",
                self.revision,
                "must be greater than or equal to 0",
            );
        }
    }

    fn validate_update(old: &Self, new: &Self, causes: &mut Causes) {
        if old.data != new.data {
            let shown = new
                .data
                .as_ref()
                .map_or_else(|| "null".to_owned(), |d| d.0.to_string());
            causes.push(
                CauseKind::Invalid,
                "data",
                format!("Invalid value: {shown}: field is immutable"),
            );
        }
    }
}

/// kube-apiserver's ControllerRevision columns: NAME CONTROLLER REVISION AGE.
pub(crate) fn columns() -> Vec<Value> {
    let (name, age) = crate::kinds::name_and_age();
    vec![
        name,
        col("Controller", "string", 0, "Controller of the object"),
        col(
            "Revision",
            "string",
            0,
            "Revision indicates the revision of the state represented by Data.",
        ),
        age,
    ]
}

/// The row: the controller as `kind.group/name` (`statefulset.apps/web`), `<none>`
/// without one, and the revision number.
pub(crate) fn cells(obj: &Value, now: SystemTime) -> Option<Vec<Value>> {
    let rev: ControllerRevision = serde_json::from_value(obj.clone()).ok()?;
    let controller = rev
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map_or_else(
            || "<none>".to_owned(),
            |r| {
                let kind = r.kind.to_lowercase();
                match r.api_version.split_once('/') {
                    Some((group, _)) if !group.is_empty() => {
                        format!("{kind}.{group}/{}", r.name)
                    }
                    _ => format!("{kind}/{}", r.name),
                }
            },
        );
    Some(vec![
        json!(rev.metadata.name),
        json!(controller),
        json!(rev.revision),
        json!(crate::clock::age(crate::table::created(obj), now)),
    ])
}
