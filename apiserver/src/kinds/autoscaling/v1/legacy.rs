//! The metric shapes kube writes into the round-trip annotations: `autoscaling/v1`'s
//! own `MetricSpec` and `MetricStatus` (the `v2beta1` layout, `targetAverageUtilization`
//! rather than `target.averageUtilization`), which no served schema holds. Only the
//! `Resource` and `ContainerResource` sources are spelled out: mesopod refuses every
//! other source at validation, so another type keeps its `type` alone and is refused
//! with its field path when it comes back.

use k8s_openapi::api::autoscaling::v2;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

/// v2's `target.type` for a utilization target.
pub(super) const UTILIZATION: &str = "Utilization";

/// v2's `target.type` for an average value target.
const AVERAGE_VALUE: &str = "AverageValue";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct MetricSpec {
    #[serde(rename = "type")]
    type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resource: Option<ResourceSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    container_resource: Option<ContainerResourceSource>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSource {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target_average_utilization: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target_average_value: Option<Quantity>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerResourceSource {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target_average_utilization: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target_average_value: Option<Quantity>,
    container: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct MetricStatus {
    #[serde(rename = "type")]
    type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resource: Option<ResourceStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    container_resource: Option<ContainerResourceStatus>,
}

/// kube's `currentAverageValue` is not optional (a missing one is written `"0"`); it is
/// left out here when v2 has none, so that reading it back gives v2 the same status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceStatus {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    current_average_utilization: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    current_average_value: Option<Quantity>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerResourceStatus {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    current_average_utilization: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    current_average_value: Option<Quantity>,
    container: String,
}

/// kube's `Convert_v1_ResourceMetricSource_To_autoscaling_ResourceMetricSource`: a
/// utilization makes a Utilization target, anything else an AverageValue one.
fn target(utilization: Option<i32>, value: Option<Quantity>) -> v2::MetricTarget {
    v2::MetricTarget {
        type_: if utilization.is_some() {
            UTILIZATION
        } else {
            AVERAGE_VALUE
        }
        .into(),
        average_utilization: utilization,
        average_value: value,
        value: None,
    }
}

impl MetricSpec {
    pub(super) fn from_v2(m: &v2::MetricSpec) -> Self {
        Self {
            type_: m.type_.clone(),
            resource: m.resource.as_ref().map(|r| ResourceSource {
                name: r.name.clone(),
                target_average_utilization: r.target.average_utilization,
                target_average_value: r.target.average_value.clone(),
            }),
            container_resource: m
                .container_resource
                .as_ref()
                .map(|r| ContainerResourceSource {
                    name: r.name.clone(),
                    target_average_utilization: r.target.average_utilization,
                    target_average_value: r.target.average_value.clone(),
                    container: r.container.clone(),
                }),
        }
    }

    pub(super) fn into_v2(self) -> v2::MetricSpec {
        v2::MetricSpec {
            type_: self.type_,
            resource: self.resource.map(|r| v2::ResourceMetricSource {
                name: r.name,
                target: target(r.target_average_utilization, r.target_average_value),
            }),
            container_resource: self.container_resource.map(|r| {
                v2::ContainerResourceMetricSource {
                    name: r.name,
                    container: r.container,
                    target: target(r.target_average_utilization, r.target_average_value),
                }
            }),
            ..Default::default()
        }
    }
}

impl MetricStatus {
    pub(super) fn from_v2(m: &v2::MetricStatus) -> Self {
        Self {
            type_: m.type_.clone(),
            resource: m.resource.as_ref().map(|r| ResourceStatus {
                name: r.name.clone(),
                current_average_utilization: r.current.average_utilization,
                current_average_value: r.current.average_value.clone(),
            }),
            container_resource: m
                .container_resource
                .as_ref()
                .map(|r| ContainerResourceStatus {
                    name: r.name.clone(),
                    current_average_utilization: r.current.average_utilization,
                    current_average_value: r.current.average_value.clone(),
                    container: r.container.clone(),
                }),
        }
    }

    pub(super) fn into_v2(self) -> v2::MetricStatus {
        let current = |utilization, value| v2::MetricValueStatus {
            average_utilization: utilization,
            average_value: value,
            value: None,
        };
        v2::MetricStatus {
            type_: self.type_,
            resource: self.resource.map(|r| v2::ResourceMetricStatus {
                name: r.name,
                current: current(r.current_average_utilization, r.current_average_value),
            }),
            container_resource: self.container_resource.map(|r| {
                v2::ContainerResourceMetricStatus {
                    name: r.name,
                    container: r.container,
                    current: current(r.current_average_utilization, r.current_average_value),
                }
            }),
            ..Default::default()
        }
    }
}
