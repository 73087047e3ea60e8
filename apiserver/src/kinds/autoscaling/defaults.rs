//! kube's defaults of an `autoscaling/v2` HorizontalPodAutoscaler
//! (`pkg/apis/autoscaling/v2/defaults.go`), applied on every write so the stored
//! object says what the controller does.

use k8s_openapi::api::autoscaling::v2::{
    HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscaler, MetricSpec, MetricTarget,
    ResourceMetricSource,
};

/// The CPU utilization an autoscaler without metrics aims at (kube's
/// `DefaultCPUUtilization`).
pub const DEFAULT_CPU_UTILIZATION: i32 = 80;

/// The period of the default policies: the controller's sync period, so each sync may
/// take one full step.
const DEFAULT_PERIOD_SECONDS: i32 = 15;

fn policy(type_: &str, value: i32) -> HPAScalingPolicy {
    HPAScalingPolicy {
        type_: type_.into(),
        value,
        period_seconds: DEFAULT_PERIOD_SECONDS,
    }
}

/// kube's scale-up rules: no stabilization, the larger of 4 pods and 100% per 15 s.
pub fn scale_up_defaults() -> HPAScalingRules {
    HPAScalingRules {
        stabilization_window_seconds: Some(0),
        select_policy: Some("Max".into()),
        policies: Some(vec![policy("Pods", 4), policy("Percent", 100)]),
        tolerance: None,
    }
}

/// kube's scale-down rules: 100% per 15 s; the window stays unset, which means the
/// controller's `--horizontal-pod-autoscaler-downscale-stabilization` (5 min).
pub fn scale_down_defaults() -> HPAScalingRules {
    HPAScalingRules {
        stabilization_window_seconds: None,
        select_policy: Some("Max".into()),
        policies: Some(vec![policy("Percent", 100)]),
        tolerance: None,
    }
}

/// `rules` with its unset fields from `defaults` (kube's `GenerateHPAScale*Rules`).
fn fill(rules: Option<HPAScalingRules>, defaults: HPAScalingRules) -> HPAScalingRules {
    let Some(mut rules) = rules else {
        return defaults;
    };
    if rules.policies.is_none() {
        rules.policies = defaults.policies;
    }
    if rules.select_policy.is_none() {
        rules.select_policy = defaults.select_policy;
    }
    if rules.stabilization_window_seconds.is_none() {
        rules.stabilization_window_seconds = defaults.stabilization_window_seconds;
    }
    rules
}

/// `SetDefaults_HorizontalPodAutoscaler`: `minReplicas` 1, CPU at 80% when there is
/// no metric, and a given `behavior`'s missing rules filled in (an absent `behavior`
/// stays absent: the controller uses the same defaults).
pub(super) fn apply(hpa: &mut HorizontalPodAutoscaler) {
    let spec = hpa.spec.get_or_insert_default();
    spec.min_replicas.get_or_insert(1);
    if spec.metrics.as_ref().is_none_or(Vec::is_empty) {
        spec.metrics = Some(vec![MetricSpec {
            type_: "Resource".into(),
            resource: Some(ResourceMetricSource {
                name: "cpu".into(),
                target: MetricTarget {
                    type_: "Utilization".into(),
                    average_utilization: Some(DEFAULT_CPU_UTILIZATION),
                    ..MetricTarget::default()
                },
            }),
            ..MetricSpec::default()
        }]);
    }
    if let Some(b) = spec.behavior.as_mut() {
        b.scale_up = Some(fill(b.scale_up.take(), scale_up_defaults()));
        b.scale_down = Some(fill(b.scale_down.take(), scale_down_defaults()));
    }
}
