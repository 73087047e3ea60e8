//! The autoscaler's conditions (`setCondition` of KCM's `horizontal.go`): one per type,
//! its transition time moved only when its status changes.

use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// Whether the target's scale can be read and written, and a new scale is allowed now.
pub const ABLE_TO_SCALE: &str = "AbleToScale";
/// Whether a metric gave a replica count.
pub const SCALING_ACTIVE: &str = "ScalingActive";
/// Whether the count was held back by min/max or the scale rate.
pub const SCALING_LIMITED: &str = "ScalingLimited";

/// Sets condition `type_` of `status`.
pub fn set(
    status: &mut HorizontalPodAutoscalerStatus,
    type_: &str,
    value: bool,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let value = if value { "True" } else { "False" };
    let conditions = status.conditions.get_or_insert_default();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != value {
                c.status = value.into();
                c.last_transition_time = Some(Time(now));
            }
            c.reason = Some(reason.into());
            c.message = Some(message);
        }
        None => conditions.push(HorizontalPodAutoscalerCondition {
            type_: type_.into(),
            status: value.into(),
            reason: Some(reason.into()),
            message: Some(message),
            last_transition_time: Some(Time(now)),
        }),
    }
}
