//! `resourceFieldRef` values, as kubelet computes them: the container's
//! limit (the node's capacity when unset) or request (its limit when unset,
//! as the API server defaults it), divided by `divisor` and rounded up.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Container;

/// A container's `resources` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawResources {
    /// `limits`, by resource name.
    pub limits: BTreeMap<String, String>,
    /// `requests`, by resource name.
    pub requests: BTreeMap<String, String>,
}

impl RawResources {
    /// The container's.
    pub fn of(c: &Container) -> RawResources {
        let r = c.resources.as_ref();
        let map = |m: Option<
            &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >| {
            m.into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect()
        };
        RawResources {
            limits: map(r.and_then(|r| r.limits.as_ref())),
            requests: map(r.and_then(|r| r.requests.as_ref())),
        }
    }
}

/// The value of `resource` (`limits.cpu`, `requests.memory`, ...) over
/// `divisor`, as the string the container sees.
pub(crate) fn value(r: &RawResources, resource: &str, divisor: &str) -> Result<String, String> {
    let (which, name) = resource
        .split_once('.')
        .ok_or_else(|| format!("resourceFieldRef: unsupported resource {resource:?}"))?;
    let cpu = match name {
        "cpu" => true,
        "memory" | "ephemeral-storage" => false,
        _ => {
            return Err(format!(
                "resourceFieldRef: unsupported resource {resource:?}"
            ));
        }
    };
    let get = |m: &BTreeMap<String, String>| m.get(name).cloned();
    let amount = match which {
        "limits" => match get(&r.limits) {
            Some(q) => parse(&q)?,
            None => node_capacity(name),
        },
        "requests" => match get(&r.requests).or_else(|| get(&r.limits)) {
            Some(q) => parse(&q)?,
            None => 0.0,
        },
        _ => {
            return Err(format!(
                "resourceFieldRef: unsupported resource {resource:?}"
            ));
        }
    };
    let divisor = parse(divisor)?;
    if divisor <= 0.0 {
        return Err(format!(
            "resourceFieldRef: divisor {divisor} must be positive"
        ));
    }
    // CPU goes through millicores, as kubelet's MilliValue does.
    let (amount, divisor) = if cpu {
        ((amount * 1000.0).ceil(), (divisor * 1000.0).ceil())
    } else {
        (amount, divisor)
    };
    #[allow(clippy::cast_possible_truncation)]
    let v = (amount / divisor).ceil() as i64;
    Ok(v.to_string())
}

fn parse(q: &str) -> Result<f64, String> {
    quantity::Quantity::parse(q)
        .map(|q| q.to_f64())
        .map_err(|e| format!("resourceFieldRef: quantity {q:?}: {e}"))
}

/// The node's capacity for a resource without a limit (kubelet uses the
/// node's allocatable): CPUs, memory, and the root filesystem's size.
fn node_capacity(name: &str) -> f64 {
    match name {
        #[allow(clippy::cast_precision_loss)]
        "cpu" => std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64),
        "memory" => std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            })
            .map_or(0.0, |kb| kb * 1024.0),
        #[allow(clippy::cast_precision_loss)]
        _ => rustix::fs::statvfs("/").map_or(0.0, |s| (s.f_blocks * s.f_frsize) as f64),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn values_are_divided_and_rounded_up() {
        let c: Container = serde_json::from_value(serde_json::json!({"name": "c", "resources": {
            "limits": {"cpu": "1500m", "memory": "64Mi"},
            "requests": {"cpu": "250m"}
        }}))
        .unwrap();
        let r = RawResources::of(&c);
        assert_eq!(value(&r, "limits.cpu", "1").unwrap(), "2");
        assert_eq!(value(&r, "limits.cpu", "1m").unwrap(), "1500");
        assert_eq!(value(&r, "requests.cpu", "1m").unwrap(), "250");
        assert_eq!(value(&r, "limits.memory", "1Mi").unwrap(), "64");
        assert_eq!(value(&r, "limits.memory", "1").unwrap(), "67108864");
        assert_eq!(value(&r, "requests.memory", "1Mi").unwrap(), "64");
        assert_eq!(
            value(&RawResources::default(), "requests.cpu", "1").unwrap(),
            "0"
        );
        assert!(
            value(&RawResources::default(), "limits.cpu", "1")
                .unwrap()
                .parse::<u32>()
                .unwrap()
                >= 1
        );
        assert!(value(&r, "limits.gpu", "1").is_err());
    }
}
