//! kube-apiserver's checks of an `autoscaling/v2` HorizontalPodAutoscaler
//! (`pkg/apis/autoscaling/validation/validation.go`, with its messages and order),
//! then mesopod's refusals of what it cannot honour (see the module doc of
//! `kinds::autoscaling`).

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HPAScalingRules, HorizontalPodAutoscalerSpec,
    HorizontalPodAutoscalerStatus, MetricSpec, MetricTarget,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::CauseKind;
use crate::kinds::apps::non_negative;
use crate::validation::Causes;

/// kube's `MaxStabilizationWindowSeconds`: one hour.
const MAX_STABILIZATION_WINDOW_SECONDS: i32 = 3600;

/// kube's `MaxPeriodSeconds`: thirty minutes.
const MAX_PERIOD_SECONDS: i32 = 1800;

/// The metric source types kube knows, sorted as its `NotSupported` lists them.
const METRIC_SOURCE_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

/// The resources the executors sample, and so the only ones a metric may name.
const SAMPLED_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// `validateHorizontalPodAutoscalerSpec` with a `minReplicas` floor of 1
/// (`HPAScaleToZero` is alpha and off), then mesopod's refusals.
pub(super) fn spec(spec: &HorizontalPodAutoscalerSpec, causes: &mut Causes) {
    if let Some(min) = spec.min_replicas
        && min < 1
    {
        causes.invalid_number(
            "spec.minReplicas",
            min.into(),
            "must be greater than or equal to 1",
        );
    }
    if spec.max_replicas < 1 {
        causes.invalid_number(
            "spec.maxReplicas",
            spec.max_replicas.into(),
            "must be greater than 0",
        );
    }
    if let Some(min) = spec.min_replicas
        && spec.max_replicas < min
    {
        causes.invalid_number(
            "spec.maxReplicas",
            spec.max_replicas.into(),
            "must be greater than or equal to `minReplicas`",
        );
    }
    cross_version_reference(&spec.scale_target_ref, "spec.scaleTargetRef", causes);
    for (i, m) in spec.metrics.iter().flatten().enumerate() {
        metric_spec(m, &format!("spec.metrics[{i}]"), causes);
    }
    if let Some(b) = &spec.behavior {
        scaling_rules(b.scale_up.as_ref(), "spec.behavior.scaleUp", causes);
        scaling_rules(b.scale_down.as_ref(), "spec.behavior.scaleDown", causes);
    }
    for (i, m) in spec.metrics.iter().flatten().enumerate() {
        honoured(m, &format!("spec.metrics[{i}]"), causes);
    }
}

/// `ValidateHorizontalPodAutoscalerStatusUpdate`: no negative count.
pub(super) fn status(status: Option<&HorizontalPodAutoscalerStatus>, causes: &mut Causes) {
    let Some(s) = status else {
        return;
    };
    non_negative(
        causes,
        "status.currentReplicas",
        Some(s.current_replicas.unwrap_or(0)),
    );
    non_negative(causes, "status.desiredReplicas", Some(s.desired_replicas));
}

/// `IsValidPathSegmentName`'s messages for `name`.
fn path_segment(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    if name == "." || name == ".." {
        out.push(format!("may not be '{name}'"));
        return out;
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            out.push(format!("may not contain '{bad}'"));
        }
    }
    out
}

/// `ValidateCrossVersionObjectReference`: `kind` and `name` required, each a path
/// segment.
fn cross_version_reference(r: &CrossVersionObjectReference, at: &str, causes: &mut Causes) {
    for (field, value) in [("kind", &r.kind), ("name", &r.name)] {
        if value.is_empty() {
            causes.required(format!("{at}.{field}"));
        } else {
            for msg in path_segment(value) {
                causes.invalid(format!("{at}.{field}"), value, &msg);
            }
        }
    }
}

/// Whether a quantity's sign is positive (`Sign() == 1`); one that does not parse is
/// refused by the decoder already, so it counts as not positive here.
fn positive(q: &Quantity) -> bool {
    quantity::Quantity::parse(&q.0).is_ok_and(|p| !p.is_negative() && !p.is_zero())
}

/// `validateMetricTarget`.
fn metric_target(t: &MetricTarget, at: &str, causes: &mut Causes) {
    if t.type_.is_empty() {
        causes.push(
            CauseKind::Required,
            format!("{at}.type"),
            "Required value: must specify a metric target type",
        );
    }
    if !matches!(t.type_.as_str(), "Utilization" | "Value" | "AverageValue") {
        causes.invalid(
            format!("{at}.type"),
            &t.type_,
            "must be either Utilization, Value, or AverageValue",
        );
    }
    for (field, q) in [("value", &t.value), ("averageValue", &t.average_value)] {
        if let Some(q) = q
            && !positive(q)
        {
            causes.invalid(format!("{at}.{field}"), &q.0, "must be positive");
        }
    }
    if let Some(u) = t.average_utilization
        && u < 1
    {
        causes.invalid_number(
            format!("{at}.averageUtilization"),
            u.into(),
            "must be greater than 0",
        );
    }
}

/// The checks of a `Resource` or `ContainerResource` target: exactly one of a
/// utilization and an average value.
fn resource_target(t: &MetricTarget, at: &str, causes: &mut Causes) {
    metric_target(t, at, causes);
    if t.average_utilization.is_none() && t.average_value.is_none() {
        causes.push(
            CauseKind::Required,
            format!("{at}.averageUtilization"),
            "Required value: must set either a target raw value or a target utilization",
        );
    }
    if t.average_utilization.is_some() && t.average_value.is_some() {
        causes.forbidden(
            format!("{at}.averageValue"),
            "may not set both a target raw value and a target utilization",
        );
    }
}

/// `validateMetricSpec`: a known type, its source given, and no other.
fn metric_spec(m: &MetricSpec, at: &str, causes: &mut Causes) {
    if m.type_.is_empty() {
        causes.push(
            CauseKind::Required,
            format!("{at}.type"),
            "Required value: must specify a metric source type",
        );
    }
    if !METRIC_SOURCE_TYPES.contains(&m.type_.as_str()) {
        causes.unsupported(format!("{at}.type"), &m.type_, &METRIC_SOURCE_TYPES);
    }
    let present = [
        ("object", m.object.is_some()),
        ("external", m.external.is_some()),
        ("pods", m.pods.is_some()),
        ("resource", m.resource.is_some()),
        ("containerResource", m.container_resource.is_some()),
    ];
    // kube checks the first source given only.
    match present.iter().find(|(_, p)| *p).map(|(f, _)| *f) {
        Some("resource") => {
            if let Some(r) = &m.resource {
                if r.name.is_empty() {
                    causes.push(
                        CauseKind::Required,
                        format!("{at}.resource.name"),
                        "Required value: must specify a resource name",
                    );
                }
                resource_target(&r.target, &format!("{at}.resource.target"), causes);
            }
        }
        Some("containerResource") => {
            if let Some(r) = &m.container_resource {
                let at = format!("{at}.containerResource");
                if r.name.is_empty() {
                    causes.push(
                        CauseKind::Required,
                        format!("{at}.name"),
                        "Required value: must specify a resource name",
                    );
                }
                if r.container.is_empty() {
                    causes.push(
                        CauseKind::Required,
                        format!("{at}.container"),
                        "Required value: must specify a container",
                    );
                } else if !crate::validation::is_dns1123_label(&r.container) {
                    causes.invalid(
                        format!("{at}.container"),
                        &r.container,
                        crate::validation::DNS1123_LABEL_MSG,
                    );
                }
                resource_target(&r.target, &format!("{at}.target"), causes);
            }
        }
        // Pods, Object and External are refused whole by `honoured`.
        _ => {}
    }
    let expected = match m.type_.as_str() {
        "Object" => Some("object"),
        "Pods" => Some("pods"),
        "Resource" => Some("resource"),
        "External" => Some("external"),
        "ContainerResource" => Some("containerResource"),
        _ => None,
    };
    if let Some(field) = expected
        && !present.iter().any(|(f, p)| *f == field && *p)
    {
        causes.push(
            CauseKind::Required,
            format!("{at}.{field}"),
            "Required value: must populate information for the given metric source",
        );
    }
    if present.iter().filter(|(_, p)| *p).count() > 1 {
        for (field, _) in present.iter().filter(|(f, p)| *p && Some(*f) != expected) {
            causes.forbidden(
                format!("{at}.{field}"),
                "must populate the given metric source only",
            );
        }
    }
}

/// `validateScalingRules` and `validateScalingPolicy`.
fn scaling_rules(rules: Option<&HPAScalingRules>, at: &str, causes: &mut Causes) {
    let Some(rules) = rules else {
        return;
    };
    if let Some(w) = rules.stabilization_window_seconds {
        let field = format!("{at}.stabilizationWindowSeconds");
        if w < 0 {
            causes.invalid_number(&field, w.into(), "must be greater than or equal to zero");
        }
        if w > MAX_STABILIZATION_WINDOW_SECONDS {
            causes.invalid_number(
                &field,
                w.into(),
                &format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"),
            );
        }
    }
    if rules.tolerance.is_some() {
        // kube-apiserver drops this alpha field unless HPAConfigurableTolerance is
        // on; refused here rather than dropped, so nobody counts on it.
        causes.forbidden(
            format!("{at}.tolerance"),
            "not supported by mesopod: every HPA has kube-controller-manager's 10% tolerance (--horizontal-pod-autoscaler-tolerance); the per-HPA tolerance is the alpha HPAConfigurableTolerance feature",
        );
    }
    if let Some(p) = rules.select_policy.as_deref()
        && !matches!(p, "Disabled" | "Max" | "Min")
    {
        causes.unsupported(format!("{at}.selectPolicy"), p, &["Disabled", "Max", "Min"]);
    }
    let policies = rules.policies.as_deref().unwrap_or_default();
    if policies.is_empty() {
        causes.push(
            CauseKind::Required,
            format!("{at}.policies"),
            "Required value: must specify at least one Policy",
        );
    }
    for (i, p) in policies.iter().enumerate() {
        let at = format!("{at}.policies[{i}]");
        if !matches!(p.type_.as_str(), "Pods" | "Percent") {
            causes.unsupported(format!("{at}.type"), &p.type_, &["Percent", "Pods"]);
        }
        if p.value <= 0 {
            causes.invalid_number(
                format!("{at}.value"),
                p.value.into(),
                "must be greater than zero",
            );
        }
        if p.period_seconds <= 0 {
            causes.invalid_number(
                format!("{at}.periodSeconds"),
                p.period_seconds.into(),
                "must be greater than zero",
            );
        }
        if p.period_seconds > MAX_PERIOD_SECONDS {
            causes.invalid_number(
                format!("{at}.periodSeconds"),
                p.period_seconds.into(),
                &format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            );
        }
    }
}

/// mesopod's refusals: a metric it has no source for is refused at its type, a
/// resource the executors do not sample at its name.
fn honoured(m: &MetricSpec, at: &str, causes: &mut Causes) {
    let why = match m.type_.as_str() {
        "Pods" => Some("Pods metrics are read from the custom metrics API (custom.metrics.k8s.io)"),
        "Object" => {
            Some("Object metrics are read from the custom metrics API (custom.metrics.k8s.io)")
        }
        "External" => Some(
            "External metrics are read from the external metrics API (external.metrics.k8s.io)",
        ),
        _ => None,
    };
    if let Some(why) = why {
        causes.push(
            CauseKind::NotSupported,
            format!("{at}.type"),
            format!(
                "Unsupported value: \"{}\": not supported by mesopod: {why}, which it does not serve; use Resource or ContainerResource metrics of cpu or memory",
                m.type_
            ),
        );
        return;
    }
    let name = match (m.type_.as_str(), &m.resource, &m.container_resource) {
        ("Resource", Some(r), _) => Some((format!("{at}.resource.name"), &r.name)),
        ("ContainerResource", _, Some(r)) => {
            Some((format!("{at}.containerResource.name"), &r.name))
        }
        _ => None,
    };
    if let Some((field, name)) = name
        && !name.is_empty()
        && !SAMPLED_RESOURCES.contains(&name.as_str())
    {
        causes.push(
            CauseKind::NotSupported,
            field,
            format!(
                "Unsupported value: \"{name}\": not supported by mesopod: only cpu and memory are sampled; supported values: \"cpu\", \"memory\""
            ),
        );
    }
}
