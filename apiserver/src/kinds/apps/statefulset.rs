//! StatefulSet (`apps/v1`): pods with stable ordinal names, started and updated in
//! order. The statefulset controller runs them; the shim defaults and validates as
//! kube-apiserver does (`SetDefaults_StatefulSet`, `ValidateStatefulSet[Update]`), and
//! refuses at create what mesopod cannot honour: `volumeClaimTemplates` (there are no
//! persistent volumes) and `updateStrategy.rollingUpdate.maxUnavailable` (an alpha
//! field, off in the Kubernetes release mesopod follows).

use std::time::SystemTime;

use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetSpec, StatefulSetUpdateStrategy,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use super::{check_selector_and_template, col, non_negative};
use crate::CauseKind;
use crate::kinds::Kind;
use crate::resource::Resource;
use crate::validation::Causes;

/// `revisionHistoryLimit` unless given.
const DEFAULT_HISTORY: i32 = 10;
/// What the pod path says of a `persistentVolumeClaim` volume, said here of the
/// claims a StatefulSet would make.
const NO_PERSISTENT_VOLUMES: &str = "not supported by mesopod: there are no persistent volumes";
/// kube-apiserver's refusal of an update to a field that may not change.
const IMMUTABLE_SPEC: &str = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";

impl Kind for StatefulSet {
    const RESOURCE: Resource = Resource::StatefulSets;

    fn normalize(&mut self) {
        let Some(spec) = self.spec.as_mut() else {
            return;
        };
        spec.replicas.get_or_insert(1);
        spec.revision_history_limit.get_or_insert(DEFAULT_HISTORY);
        // Go's defaulting sees an empty string as unset.
        let unset = |v: &Option<String>| v.as_deref().is_none_or(str::is_empty);
        if unset(&spec.pod_management_policy) {
            spec.pod_management_policy = Some("OrderedReady".into());
        }
        let strategy = spec
            .update_strategy
            .get_or_insert_with(StatefulSetUpdateStrategy::default);
        if unset(&strategy.type_) {
            strategy.type_ = Some("RollingUpdate".into());
        }
        let ty = strategy.type_.get_or_insert_default();
        if ty == "RollingUpdate" {
            strategy
                .rolling_update
                .get_or_insert_with(RollingUpdateStatefulSetStrategy::default)
                .partition
                .get_or_insert(0);
        }
        let retention = spec
            .persistent_volume_claim_retention_policy
            .get_or_insert_with(StatefulSetPersistentVolumeClaimRetentionPolicy::default);
        for policy in [&mut retention.when_deleted, &mut retention.when_scaled] {
            if unset(policy) {
                *policy = Some("Retain".into());
            }
        }
        super::default_template(&mut spec.template);
    }

    fn validate(&self, causes: &mut Causes) {
        let Some(spec) = &self.spec else {
            causes.required("spec");
            return;
        };
        check_policy(causes, spec.pod_management_policy.as_deref());
        if let Some(strategy) = &spec.update_strategy {
            check_strategy(causes, strategy);
        }
        if let Some(retention) = &spec.persistent_volume_claim_retention_policy {
            let allowed = ["Retain", "Delete"];
            for (field, value) in [
                ("whenDeleted", &retention.when_deleted),
                ("whenScaled", &retention.when_scaled),
            ] {
                let v = value.as_deref().unwrap_or("");
                if !allowed.contains(&v) {
                    causes.unsupported(
                        format!("spec.persistentVolumeClaimRetentionPolicy.{field}"),
                        v,
                        &allowed,
                    );
                }
            }
        }
        non_negative(causes, "spec.replicas", spec.replicas);
        non_negative(causes, "spec.minReadySeconds", spec.min_ready_seconds);
        non_negative(
            causes,
            "spec.revisionHistoryLimit",
            spec.revision_history_limit,
        );
        if let Some(start) = spec.ordinals.as_ref().and_then(|o| o.start) {
            non_negative(causes, "spec.ordinals.start", Some(start));
        }
        check_selector_and_template(causes, "StatefulSet", &spec.selector, Some(&spec.template));
        if spec
            .volume_claim_templates
            .as_ref()
            .is_some_and(|t| !t.is_empty())
        {
            causes.forbidden("spec.volumeClaimTemplates", NO_PERSISTENT_VOLUMES);
        }
    }

    fn validate_update(old: &Self, new: &Self, causes: &mut Causes) {
        let (Some(o), Some(n)) = (&old.spec, &new.spec) else {
            return;
        };
        if fixed(o) != fixed(n) {
            causes.forbidden("spec", IMMUTABLE_SPEC);
        }
    }

    /// kube's warnings: the template's, on create and on an update that changed the
    /// spec (a StatefulSet's name is not warned about).
    fn warnings(&self, old: Option<&Self>) -> Vec<String> {
        super::template_warnings(
            &self.metadata,
            old.map(|o| &o.metadata),
            self.spec.as_ref().map(|s| &s.template),
            false,
        )
    }

    fn prepare_create(&mut self) {
        self.metadata.generation = Some(1);
        self.status = None;
    }

    fn prepare_update(&mut self, old: &Self) {
        self.status.clone_from(&old.status);
        let changed = self.spec != old.spec;
        super::next_generation(&mut self.metadata, &old.metadata, changed);
    }
}

/// The spec without the fields an update may change (ValidateStatefulSetUpdate
/// compares what is left).
fn fixed(spec: &StatefulSetSpec) -> StatefulSetSpec {
    StatefulSetSpec {
        replicas: None,
        ordinals: None,
        template: Default::default(),
        update_strategy: None,
        revision_history_limit: None,
        persistent_volume_claim_retention_policy: None,
        min_ready_seconds: None,
        ..spec.clone()
    }
}

/// `spec.podManagementPolicy`: OrderedReady or Parallel.
fn check_policy(causes: &mut Causes, policy: Option<&str>) {
    match policy {
        None | Some("") => causes.required("spec.podManagementPolicy"),
        Some("OrderedReady" | "Parallel") => {}
        Some(other) => causes.invalid(
            "spec.podManagementPolicy",
            other,
            "must be 'OrderedReady' or 'Parallel'",
        ),
    }
}

/// `spec.updateStrategy`: RollingUpdate (a partition not below 0, no `maxUnavailable`)
/// or OnDelete (no `rollingUpdate`).
fn check_strategy(causes: &mut Causes, strategy: &StatefulSetUpdateStrategy) {
    let path = "spec.updateStrategy";
    match strategy.type_.as_deref().unwrap_or("") {
        "" => causes.required(path),
        "OnDelete" => {
            if let Some(ru) = &strategy.rolling_update {
                causes.push(
                    CauseKind::Invalid,
                    format!("{path}.rollingUpdate"),
                    format!(
                        "Invalid value: {}: only allowed for updateStrategy 'RollingUpdate'",
                        go_rolling_update(Some(ru))
                    ),
                );
            }
        }
        "RollingUpdate" => {
            if let Some(ru) = &strategy.rolling_update {
                non_negative(causes, &format!("{path}.rollingUpdate.partition"), ru.partition);
                if ru.max_unavailable.is_some() {
                    causes.forbidden(
                        format!("{path}.rollingUpdate.maxUnavailable"),
                        "not supported by mesopod: an alpha field (MaxUnavailableStatefulSet), off in Kubernetes by default",
                    );
                }
            }
        }
        other => causes.push(
            CauseKind::Invalid,
            path,
            format!(
                "Invalid value: apps.StatefulSetUpdateStrategy{{Type:{other:?}, RollingUpdate:{}}}: must be 'RollingUpdate' or 'OnDelete'",
                go_rolling_update(strategy.rolling_update.as_ref())
            ),
        ),
    }
}

/// A rolling update strategy as kube-apiserver prints it in validation messages (the
/// pointer followed to its struct; a nil one as Go prints it).
fn go_rolling_update(ru: Option<&RollingUpdateStatefulSetStrategy>) -> String {
    match ru {
        None => "(*apps.RollingUpdateStatefulSetStrategy)(nil)".into(),
        Some(ru) => format!(
            "apps.RollingUpdateStatefulSetStrategy{{Partition:{}, MaxUnavailable:(*intstr.IntOrString)(nil)}}",
            ru.partition.unwrap_or(0)
        ),
    }
}

replicated_workload!(
    StatefulSet,
    keep_labels: false,
    status_replicas: |s| s.replicas,
    selector: |s| Some(&s.selector)
);

/// kube-apiserver's StatefulSet columns: NAME READY AGE, and with `-o wide` CONTAINERS
/// IMAGES (no SELECTOR, unlike the other workloads).
pub(crate) fn columns() -> Vec<Value> {
    let (name, age) = crate::kinds::name_and_age();
    let [containers, images, _] = super::wide_columns("");
    vec![
        name,
        col("Ready", "string", 0, "Number of the pod with ready state"),
        age,
        containers,
        images,
    ]
}

pub(crate) fn cells(obj: &Value, now: SystemTime) -> Option<Vec<Value>> {
    let set: StatefulSet = serde_json::from_value(obj.clone()).ok()?;
    let status = set.status.clone().unwrap_or_default();
    let spec = set.spec.clone().unwrap_or_default();
    let [containers, images, _] = super::wide_cells(Some(&spec.template), &spec.selector);
    Some(vec![
        json!(set.metadata.name),
        json!(format!(
            "{}/{}",
            status.ready_replicas.unwrap_or(0),
            spec.replicas.unwrap_or(1)
        )),
        json!(crate::clock::age(crate::table::created(obj), now)),
        containers,
        images,
    ])
}
