//! kube-apiserver's HorizontalPodAutoscaler columns (`printHorizontalPodAutoscaler`):
//! NAME, REFERENCE, TARGETS, MINPODS, MAXPODS, REPLICAS, AGE.

use serde_json::{Value, json};

use crate::kinds::{col, name_and_age};

/// How many metrics TARGETS shows before `+ N more...` (kube's `formatHPAMetrics`).
const SHOWN_METRICS: usize = 2;

pub(crate) fn columns() -> Vec<Value> {
    let (name, age) = name_and_age();
    let mut max = col(
        "MaxPods",
        "",
        "Upper limit for the number of pods that can be set by the autoscaler; cannot be smaller than MinReplicas.",
    );
    max["type"] = json!("integer");
    vec![
        name,
        col(
            "Reference",
            "",
            "Reference to the resource the autoscaler controls.",
        ),
        col(
            "Targets",
            "",
            "Current and target usage of the resources the autoscaler acts on.",
        ),
        col(
            "MinPods",
            "",
            "Lower limit for the number of pods that can be set by the autoscaler, default 1.",
        ),
        max,
        col(
            "Replicas",
            "",
            "Current number of replicas of pods managed by this autoscaler.",
        ),
        age,
    ]
}

/// The cells after the name.
pub(crate) fn cells(obj: &Value, age: String) -> Vec<Value> {
    // kube prints its internal object, so an `autoscaling/v1` row shows what the v2 one
    // does.
    let converted = (obj.get("apiVersion").and_then(Value::as_str) == Some("autoscaling/v1"))
        .then(|| super::v1::value_to_v2(obj))
        .flatten();
    let obj = converted.as_ref().unwrap_or(obj);
    let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
    let reference = format!(
        "{}/{}",
        text("/spec/scaleTargetRef/kind"),
        text("/spec/scaleTargetRef/name")
    );
    let min = obj
        .pointer("/spec/minReplicas")
        .and_then(Value::as_i64)
        .map_or_else(|| "<unset>".to_owned(), |m| m.to_string());
    let int = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    vec![
        json!(reference),
        json!(targets(obj)),
        json!(min),
        json!(int("/spec/maxReplicas")),
        json!(int("/status/currentReplicas")),
        json!(age),
    ]
}

/// TARGETS: `cpu: 45%/50%`, `cpu: <unknown>/50%`, `memory: 10Mi/100Mi`, the current
/// value from the status metric at the same index.
pub(crate) fn targets(obj: &Value) -> String {
    let specs = obj
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = obj
        .pointer("/status/currentMetrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut shown = Vec::new();
    for (i, spec) in specs.iter().take(SHOWN_METRICS).enumerate() {
        let source = match spec.get("type").and_then(Value::as_str) {
            Some("Resource") => "resource",
            Some("ContainerResource") => "containerResource",
            _ => {
                shown.push("<unknown>/<unknown>".to_owned());
                continue;
            }
        };
        let s = &spec[source];
        let name = s["name"].as_str().unwrap_or("");
        let current = &statuses
            .get(i)
            .map(|st| st[source]["current"].clone())
            .unwrap_or(Value::Null);
        let (now, target) = match s["target"]["averageValue"].as_str() {
            Some(v) => (
                current["averageValue"].as_str().map(str::to_owned),
                v.to_owned(),
            ),
            None => (
                current["averageUtilization"]
                    .as_i64()
                    .map(|u| format!("{u}%")),
                s["target"]["averageUtilization"]
                    .as_i64()
                    .map_or_else(|| "<auto>".to_owned(), |u| format!("{u}%")),
            ),
        };
        let now = now.unwrap_or_else(|| "<unknown>".to_owned());
        shown.push(format!("{name}: {now}/{target}"));
    }
    let mut out = shown.join(", ");
    if specs.len() > SHOWN_METRICS {
        out.push_str(&format!(" + {} more...", specs.len() - SHOWN_METRICS));
    }
    out
}
