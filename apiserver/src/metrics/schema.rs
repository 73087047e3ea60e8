//! The OpenAPI schemas of `metrics.k8s.io/v1beta1`'s NodeMetrics and PodMetrics, so
//! that `kubectl explain podmetrics` works as it does against metrics-server.
//!
//! k8s-openapi has no types for this group (it is an aggregated API, not
//! kube-apiserver's), so these markers carry the schemas that
//! `k8s.io/metrics/pkg/apis/metrics/v1beta1` publishes: the same names, fields,
//! required lists and descriptions. The objects themselves are built as JSON by
//! [`super::http`]; these types exist only to describe them.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

use super::{GROUP, VERSION};

const API_VERSION: &str = "metrics.k8s.io/v1beta1";
const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const TIMESTAMP_DOC: &str = "The following fields define time interval from which metrics were collected from the interval [Timestamp-Window, Timestamp].";
const USAGE_DOC: &str = "The memory usage is the memory working set.";

/// `NodeMetrics`, described.
pub struct NodeMetrics;

/// `PodMetrics`, described.
pub struct PodMetrics;

/// `ContainerMetrics`, one item of a PodMetrics' `containers`.
pub struct ContainerMetrics;

impl k8s_openapi::Resource for NodeMetrics {
    const API_VERSION: &'static str = API_VERSION;
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = "NodeMetrics";
    const VERSION: &'static str = VERSION;
    const URL_PATH_SEGMENT: &'static str = "nodes";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::Resource for PodMetrics {
    const API_VERSION: &'static str = API_VERSION;
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = "PodMetrics";
    const VERSION: &'static str = VERSION;
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

/// `schema` with `description` beside it (a `$ref`'s own description, as kube's
/// generator writes it).
fn described(mut schema: Schema, description: &str) -> Schema {
    schema
        .ensure_object()
        .insert("description".into(), description.into());
    schema
}

/// A ResourceList: resource names to Quantities.
fn usage(generator: &mut SchemaGenerator) -> Schema {
    let quantity = generator.subschema_for::<Quantity>();
    let mut schema = json_schema!({"type": "object", "description": USAGE_DOC});
    schema
        .ensure_object()
        .insert("additionalProperties".into(), Value::from(quantity));
    schema
}

/// The fields every metrics object starts with.
fn common(generator: &mut SchemaGenerator) -> serde_json::Map<String, Value> {
    let mut properties = serde_json::Map::new();
    properties.insert(
        "apiVersion".into(),
        serde_json::json!({"type": "string", "description": API_VERSION_DOC}),
    );
    properties.insert(
        "kind".into(),
        serde_json::json!({"type": "string", "description": KIND_DOC}),
    );
    let metadata = described(generator.subschema_for::<ObjectMeta>(), METADATA_DOC);
    properties.insert("metadata".into(), metadata.into());
    let timestamp = described(generator.subschema_for::<Time>(), TIMESTAMP_DOC);
    properties.insert("timestamp".into(), timestamp.into());
    // metav1.Duration is published as a plain string ("1m0s", "10.5s").
    properties.insert("window".into(), serde_json::json!({"type": "string"}));
    properties
}

impl JsonSchema for NodeMetrics {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut properties = common(generator);
        properties.insert("usage".into(), usage(generator).into());
        let mut schema = json_schema!({
            "description": "NodeMetrics sets resource usage metrics of a node.",
            "type": "object",
            "required": ["timestamp", "window", "usage"],
        });
        schema
            .ensure_object()
            .insert("properties".into(), properties.into());
        schema
    }
}

impl JsonSchema for PodMetrics {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetrics".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut properties = common(generator);
        let containers = generator.subschema_for::<ContainerMetrics>();
        properties.insert(
            "containers".into(),
            serde_json::json!({
                "type": "array",
                "description": "Metrics for all containers are collected within the same time window.",
                "items": Value::from(containers),
            }),
        );
        let mut schema = json_schema!({
            "description": "PodMetrics sets resource usage metrics of a pod.",
            "type": "object",
            "required": ["timestamp", "window", "containers"],
        });
        schema
            .ensure_object()
            .insert("properties".into(), properties.into());
        schema
    }
}

impl JsonSchema for ContainerMetrics {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.metrics.pkg.apis.metrics.v1beta1.ContainerMetrics".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut properties = serde_json::Map::new();
        properties.insert(
            "name".into(),
            serde_json::json!({"type": "string", "description": "Container name corresponding to the one from pod.spec.containers."}),
        );
        properties.insert("usage".into(), usage(generator).into());
        let mut schema = json_schema!({
            "description": "ContainerMetrics sets resource usage metrics of a container.",
            "type": "object",
            "required": ["name", "usage"],
        });
        schema
            .ensure_object()
            .insert("properties".into(), properties.into());
        schema
    }
}
