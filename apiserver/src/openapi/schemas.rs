//! The schemas of the served kinds, generated from k8s-openapi's types (their `schemars`
//! implementations carry Kubernetes' published schemas), never written here.

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

/// The kinds the shim serves, as (group, version, kind) and the name of their schema.
pub(super) struct Served {
    pub(super) group: &'static str,
    pub(super) version: &'static str,
    pub(super) kind: &'static str,
    /// The path of one object (`{namespace}`/`{name}` placeholders), for its operations.
    pub(super) path: String,
    /// The schema's name, e.g. `io.k8s.api.core.v1.Pod`.
    pub(super) schema: String,
    /// Whether it is only read (`metrics.k8s.io`): its path has a `get`, not a `patch`.
    pub(super) read_only: bool,
}

fn served<T>(namespaced: bool, plural: &str, generator: &mut SchemaGenerator) -> Served
where
    T: k8s_openapi::Resource + k8s_openapi::schemars::JsonSchema,
{
    generator.subschema_for::<T>();
    let prefix = if T::GROUP.is_empty() {
        format!("/api/{}", T::VERSION)
    } else {
        format!("/apis/{}/{}", T::GROUP, T::VERSION)
    };
    let path = if namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{plural}/{{name}}")
    } else {
        format!("{prefix}/{plural}/{{name}}")
    };
    Served {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        path,
        schema: T::schema_name().into_owned(),
        read_only: false,
    }
}

/// [`served`], for a kind that takes no write.
fn read_only<T>(namespaced: bool, plural: &str, generator: &mut SchemaGenerator) -> Served
where
    T: k8s_openapi::Resource + k8s_openapi::schemars::JsonSchema,
{
    Served {
        read_only: true,
        ..served::<T>(namespaced, plural, generator)
    }
}

/// Every served kind added to `generator`, whose definitions then hold their schemas and
/// all they reference. A new served kind is one more line here.
fn all_served(generator: &mut SchemaGenerator) -> Vec<Served> {
    vec![
        served::<Pod>(true, "pods", generator),
        served::<Node>(false, "nodes", generator),
        served::<Event>(true, "events", generator),
        served::<Namespace>(false, "namespaces", generator),
        served::<ConfigMap>(true, "configmaps", generator),
        served::<Secret>(true, "secrets", generator),
        served::<ServiceAccount>(true, "serviceaccounts", generator),
        served::<k8s_openapi::api::core::v1::LimitRange>(true, "limitranges", generator),
        served::<k8s_openapi::api::core::v1::ResourceQuota>(true, "resourcequotas", generator),
        served::<k8s_openapi::api::coordination::v1::Lease>(true, "leases", generator),
        served::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(
            true,
            "poddisruptionbudgets",
            generator,
        ),
        served::<k8s_openapi::api::scheduling::v1::PriorityClass>(
            false,
            "priorityclasses",
            generator,
        ),
        served::<Role>(true, "roles", generator),
        served::<ClusterRole>(false, "clusterroles", generator),
        served::<RoleBinding>(true, "rolebindings", generator),
        served::<ClusterRoleBinding>(false, "clusterrolebindings", generator),
        served::<k8s_openapi::api::apps::v1::Deployment>(true, "deployments", generator),
        served::<k8s_openapi::api::apps::v1::ReplicaSet>(true, "replicasets", generator),
        served::<k8s_openapi::api::core::v1::ReplicationController>(
            true,
            "replicationcontrollers",
            generator,
        ),
        served::<k8s_openapi::api::apps::v1::DaemonSet>(true, "daemonsets", generator),
        served::<k8s_openapi::api::apps::v1::StatefulSet>(true, "statefulsets", generator),
        served::<k8s_openapi::api::apps::v1::ControllerRevision>(
            true,
            "controllerrevisions",
            generator,
        ),
        served::<k8s_openapi::api::batch::v1::Job>(true, "jobs", generator),
        served::<k8s_openapi::api::batch::v1::CronJob>(true, "cronjobs", generator),
        served::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>(
            true,
            "horizontalpodautoscalers",
            generator,
        ),
        served::<k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler>(
            true,
            "horizontalpodautoscalers",
            generator,
        ),
        read_only::<crate::metrics::schema::NodeMetrics>(false, "nodes", generator),
        read_only::<crate::metrics::schema::PodMetrics>(true, "pods", generator),
    ]
}

/// Which document the schemas are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flavour {
    /// Swagger 2.0: `#/definitions/`, `$ref` with sibling fields (as kube-apiserver's v2).
    V2,
    /// OpenAPI 3.0: `#/components/schemas/`, a `$ref` with siblings wrapped in `allOf`.
    V3,
}

/// The served kinds and the definitions of `flavour`'s document.
pub(super) fn definitions(flavour: Flavour) -> (Vec<Served>, Map<String, Value>) {
    let settings = match flavour {
        Flavour::V2 => SchemaSettings::draft07().with(|s| s.transforms.clear()),
        Flavour::V3 => SchemaSettings::openapi3(),
    };
    let mut generator = settings.into_generator();
    let served = all_served(&mut generator);
    let mut defs = generator.take_definitions(true);
    for s in &served {
        if let Some(Value::Object(def)) = defs.get_mut(&s.schema) {
            def.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": s.group, "kind": s.kind, "version": s.version}]),
            );
        }
    }
    for def in defs.values_mut() {
        unrequire_metadata(def);
    }
    (served, defs)
}

/// k8s-openapi's types hold `metadata` as a plain struct, so their schemas list it as
/// required; Kubernetes' do not (a create may leave it to `generateName` defaulting), and
/// kubectl's client-side validation would refuse bodies the server accepts.
fn unrequire_metadata(def: &mut Value) {
    let Some(obj) = def.as_object_mut() else {
        return;
    };
    let has_metadata_ref = obj
        .get("properties")
        .and_then(|p| p.get("metadata"))
        .is_some();
    if !has_metadata_ref {
        return;
    }
    if let Some(Value::Array(required)) = obj.get_mut("required") {
        required.retain(|r| r != "metadata");
        if required.is_empty() {
            obj.remove("required");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_kind_has_a_schema_with_its_group_version_kind_and_references_resolve() {
        for flavour in [Flavour::V2, Flavour::V3] {
            let (served, defs) = definitions(flavour);
            for s in &served {
                let def = &defs[&s.schema];
                assert_eq!(def["x-kubernetes-group-version-kind"][0]["kind"], s.kind);
                assert!(def["properties"]["metadata"].is_object(), "{}", s.schema);
                assert!(
                    !def["required"]
                        .as_array()
                        .is_some_and(|r| r.iter().any(|f| f == "metadata"))
                );
            }
            let prefix = match flavour {
                Flavour::V2 => "#/definitions/",
                Flavour::V3 => "#/components/schemas/",
            };
            let text = serde_json::to_string(&defs).unwrap_or_default();
            for piece in text.split("\"$ref\":\"").skip(1) {
                let target = piece.split('"').next().unwrap_or("");
                let name = target.strip_prefix(prefix).unwrap_or("");
                assert!(defs.contains_key(name), "{flavour:?}: dangling {target}");
            }
        }
    }

    #[test]
    fn pod_containers_are_described_as_kubernetes_publishes_them() {
        let (_, defs) = definitions(Flavour::V3);
        let spec = &defs["io.k8s.api.core.v1.PodSpec"];
        let containers = &spec["properties"]["containers"];
        assert_eq!(containers["type"], "array");
        assert_eq!(
            containers["items"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.Container"
        );
        assert!(
            defs["io.k8s.api.core.v1.Container"]["required"]
                .as_array()
                .is_some_and(|r| r.iter().any(|f| f == "name"))
        );
    }
}
