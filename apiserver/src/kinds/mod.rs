//! The plain kinds (ConfigMap, Secret, ServiceAccount, Lease, PriorityClass,
//! PodDisruptionBudget, LimitRange, ResourceQuota, HorizontalPodAutoscaler, and RBAC's
//! Role, ClusterRole, RoleBinding, ClusterRoleBinding), and the workloads of `apps` and
//! `batch` built on them: what differs between them —
//! defaulting, validation, admission of the writer, the Table they print as — behind
//! one trait, so that create, get, list, watch, replace, patch and delete are written
//! once (`api/kinds.rs`, `http/kinds.rs`) for all of them, namespaced or cluster-scoped.

pub(crate) mod apps;
pub(crate) mod autoscaling;
pub(crate) mod batch;
mod configmap;
mod lease;
pub(crate) mod limitrange;
pub(crate) mod node;
pub(crate) mod policy;
pub(crate) mod priorityclass;
mod rbac;
pub(crate) mod resourcequota;
mod secret;
mod serviceaccount;

use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::auth::rbac::Writer;
use crate::resource::Resource;
use crate::validation::{Causes, check_metadata, check_subdomain_name};

pub(crate) use configmap::MAX_DATA_BYTES;
pub(crate) use serviceaccount::DEFAULT_SERVICE_ACCOUNT;

/// One plain kind. Implemented for `k8s_openapi`'s types, so the schema, the field names
/// and the unknown-field check all come from there.
pub(crate) trait Kind:
    k8s_openapi::Resource
    + k8s_openapi::Metadata<Ty = ObjectMeta>
    + Serialize
    + DeserializeOwned
    + Clone
    + PartialEq
    + Send
    + Sync
    + 'static
{
    /// The resource it is served as.
    const RESOURCE: Resource;

    /// Whether its values are secret: decoding errors then never quote the body.
    const SENSITIVE: bool = false;

    /// The rule `metadata.name` must follow (RBAC objects: a path segment, so
    /// `system:node` is a name).
    const NAME_RULE: fn(&mut Causes, &str, &str) = check_subdomain_name;

    /// Defaulting and normalisation, on create and on every update (Secret: `type`
    /// defaults to Opaque and `stringData` is merged into `data`).
    fn normalize(&mut self) {}

    /// The kind's own checks of a new or updated object (metadata is checked besides).
    fn validate(&self, causes: &mut Causes);

    /// The checks of an update beyond [`Kind::validate`] (immutability).
    fn validate_update(_old: &Self, _new: &Self, _causes: &mut Causes) {}

    /// [`Kind::validate`] knowing the stored object an update replaces (`None` on
    /// create), for a kind whose checks differ between the two in an order
    /// kube-apiserver keeps (Job: what may not change comes after the Job's own checks;
    /// CronJob: `TZ` in the schedule, the time zone and the name's length sit amid the
    /// rest). Every other kind's is [`Kind::validate`].
    fn validate_against(&self, _old: Option<&Self>, causes: &mut Causes) {
        self.validate(causes);
    }

    /// What the server sets on create whatever the client sent (the workload kinds:
    /// `metadata.generation` 1 and no status).
    fn prepare_create(&mut self) {}

    /// What an update through the main endpoint keeps of `old` (the workload kinds:
    /// the status) and `metadata.generation`, which counts spec changes.
    fn prepare_update(&mut self, _old: &Self) {}

    /// kube's `WarningsOnCreate` (`old` is `None`) or `WarningsOnUpdate` for a write
    /// [`validate`] found valid; [`validate`] adds them to the request.
    fn warnings(&self, _old: Option<&Self>) -> Vec<String> {
        Vec::new()
    }

    /// The checks of who writes, after validation, on every create and update in `ns`
    /// (RBAC: no escalation). `writer` is `None` without authentication and RBAC.
    fn admit(&self, _ns: &str, _writer: Option<&Writer>) -> Result<(), crate::ApiError> {
        Ok(())
    }

    /// The admission that reads other stored objects, after [`Kind::admit`], on every
    /// create (`old` is `None`) and update (PriorityClass: one global default).
    fn admit_stored(
        &self,
        _api: &crate::api::Api,
        _old: Option<&Self>,
    ) -> Result<(), crate::ApiError> {
        Ok(())
    }
}

/// All of an object's checks: metadata (name by [`Kind::NAME_RULE`]), then the kind's own;
/// then, for a valid object, its [`Kind::warnings`].
pub(crate) fn validate<K: Kind>(obj: &K, old: Option<&K>) -> Result<(), crate::ApiError> {
    validate_with(obj, old, |causes| obj.validate_against(old, causes))?;
    if crate::notes::listening() {
        obj.warnings(old).into_iter().for_each(crate::notes::warn);
    }
    Ok(())
}

/// [`validate`] with `own` checks in place of the kind's [`Kind::validate_against`] (a
/// subresource's, such as a Job's status rules), and no warnings: kube-apiserver gives
/// none on a status write.
pub(crate) fn validate_with<K: Kind>(
    obj: &K,
    old: Option<&K>,
    own: impl FnOnce(&mut Causes),
) -> Result<(), crate::ApiError> {
    let mut causes = Causes::default();
    check_metadata(&mut causes, obj.metadata(), K::NAME_RULE);
    match old {
        Some(old) => {
            crate::api::finalizers::check_update(&mut causes, old.metadata(), obj.metadata());
            K::validate_update(old, obj, &mut causes);
        }
        None => crate::api::finalizers::check(&mut causes, obj.metadata()),
    }
    own(&mut causes);
    let name = obj.metadata().name.clone().unwrap_or_default();
    let kind = match K::RESOURCE.group() {
        "" => K::KIND.to_owned(),
        group => format!("{}.{group}", K::KIND),
    };
    causes.into_result(&kind, &name)
}

/// Each quantity of `map` as kube-apiserver stores it (`0.5` → `500m`, `1.5Gi` →
/// `1536Mi`); one that does not parse stays, for validation to name.
fn canonicalize_quantities(
    map: &mut std::collections::BTreeMap<
        String,
        k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    >,
) {
    for q in map.values_mut() {
        if let Some(amount) = quantity::Quantity::parse(&q.0)
            .ok()
            .and_then(|p| p.amount())
        {
            q.0 = amount.to_string();
        }
    }
}

/// The Table columns of a plain kind (`None` for the others).
pub(crate) fn columns(resource: Resource) -> Option<Vec<Value>> {
    match resource {
        Resource::ConfigMaps => Some(configmap::columns()),
        Resource::Secrets => Some(secret::columns()),
        Resource::ServiceAccounts => Some(serviceaccount::columns()),
        Resource::Leases => Some(lease::columns()),
        Resource::Roles
        | Resource::ClusterRoles
        | Resource::RoleBindings
        | Resource::ClusterRoleBindings => Some(rbac::columns(resource)),
        Resource::ReplicaSets => Some(apps::replicaset_columns()),
        Resource::Deployments => Some(apps::deployment_columns()),
        Resource::ReplicationControllers => Some(apps::rc_columns()),
        Resource::DaemonSets => Some(apps::daemonset_columns()),
        Resource::StatefulSets => Some(apps::statefulset_columns()),
        Resource::ControllerRevisions => Some(apps::controllerrevision_columns()),
        Resource::Jobs => Some(batch::job_columns()),
        Resource::CronJobs => Some(batch::cronjob_columns()),
        Resource::PriorityClasses => Some(priorityclass::columns()),
        Resource::PodDisruptionBudgets => Some(policy::columns()),
        Resource::LimitRanges => Some(limitrange::columns()),
        Resource::ResourceQuotas => Some(resourcequota::columns()),
        Resource::HorizontalPodAutoscalers => Some(autoscaling::table::columns()),
        _ => None,
    }
}

/// The Table cells of one object of a plain kind (`None` for the others or an object
/// that does not decode).
pub(crate) fn cells(resource: Resource, obj: &Value, now: SystemTime) -> Option<Vec<Value>> {
    if rbac::is_role(resource) {
        return Some(rbac::role_cells(obj));
    }
    match resource {
        Resource::ReplicaSets => return apps::replicaset_cells(obj, now),
        Resource::Deployments => return apps::deployment_cells(obj, now),
        Resource::ReplicationControllers => return apps::rc_cells(obj, now),
        Resource::DaemonSets => return apps::daemonset_cells(obj, now),
        Resource::StatefulSets => return apps::statefulset_cells(obj, now),
        Resource::ControllerRevisions => return apps::controllerrevision_cells(obj, now),
        Resource::Jobs => return batch::job_cells(obj, now),
        Resource::CronJobs => return batch::cronjob_cells(obj, now),
        _ => {}
    }
    let age = crate::clock::age(crate::table::created(obj), now);
    let name = obj
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    let mut row = vec![name];
    match resource {
        Resource::ConfigMaps => row.push(configmap::data_count(obj)),
        Resource::Secrets => row.extend(secret::type_and_count(obj)),
        Resource::ServiceAccounts => row.push(serviceaccount::secret_count(obj)),
        Resource::Leases => row.push(lease::holder(obj)),
        Resource::PriorityClasses => {
            row.extend(priorityclass::cells(obj, age));
            return Some(row);
        }
        Resource::PodDisruptionBudgets => {
            row.extend(policy::cells(obj, age));
            return Some(row);
        }
        Resource::LimitRanges => {
            row.push(limitrange::created_at(obj));
            return Some(row);
        }
        Resource::ResourceQuotas => {
            row.extend(resourcequota::cells(obj, age));
            return Some(row);
        }
        Resource::HorizontalPodAutoscalers => {
            row.extend(autoscaling::table::cells(obj, age));
            return Some(row);
        }
        Resource::RoleBindings | Resource::ClusterRoleBindings => {
            row.push(rbac::role_ref(obj));
            row.push(Value::String(age));
            row.extend(rbac::subjects(obj));
            return Some(row);
        }
        _ => return None,
    }
    row.push(Value::String(age));
    Some(row)
}

/// A Table column definition, as Kubernetes' printers declare them.
fn col(name: &str, format: &str, description: &str) -> Value {
    serde_json::json!({"name": name, "type": "string", "format": format, "description": description, "priority": 0})
}

/// The NAME column every plain kind starts with and the AGE column it ends with.
fn name_and_age() -> (Value, Value) {
    (
        col(
            "Name",
            "name",
            "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        ),
        col(
            "Age",
            "",
            "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
        ),
    )
}

/// The key rule of ConfigMap and Secret data (`IsConfigMapKey`), one cause per broken
/// rule, at `path[key]`.
fn check_data_key(causes: &mut Causes, path: &str, key: &str) {
    let field = format!("{path}[{key}]");
    if key.len() > 253 {
        causes.invalid(&field, key, "must be no more than 253 characters");
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
    {
        causes.invalid(
            &field,
            key,
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
        );
    }
    if key == "." {
        causes.invalid(&field, key, "must not be '.'");
    } else if key == ".." {
        causes.invalid(&field, key, "must not be '..'");
    } else if key.starts_with("..") {
        causes.invalid(&field, key, "must not start with '..'");
    }
}

/// The message of every change to an immutable ConfigMap's or Secret's data.
const IMMUTABLE_SET: &str = "Forbidden: field is immutable when `immutable` is set";

/// `immutable: true` freezes the data and itself (ConfigMap and Secret alike).
fn check_immutable(
    causes: &mut Causes,
    old_immutable: Option<bool>,
    new_immutable: Option<bool>,
    changed: &[(&str, bool)],
) {
    if old_immutable != Some(true) {
        return;
    }
    if new_immutable != Some(true) {
        causes.push(crate::CauseKind::Forbidden, "immutable", IMMUTABLE_SET);
    }
    for (field, differs) in changed {
        if *differs {
            causes.push(crate::CauseKind::Forbidden, *field, IMMUTABLE_SET);
        }
    }
}
