//! Builders shared by the integration tests: pods from JSON, offers from
//! short specs, and a canonical form of resources for exact comparisons.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use mesos::proto::{Attribute, ExecutorId, Offer, Resource, resource, value};
use procurement::{NodeView, ProcureError, ProcureState, Procurement};
use registry::PodTask;
use serde_json::{Value, json};

/// A pod task from a pod spec (JSON); `annotations` may be null.
pub fn task(spec: Value, annotations: Value) -> PodTask {
    let mut meta = json!({"name": "p", "namespace": "default", "uid": "u1"});
    if !annotations.is_null() {
        meta["annotations"] = annotations;
    }
    let pod: Pod = serde_json::from_value(json!({"metadata": meta, "spec": spec})).unwrap();
    PodTask::with_id(
        "default.p.1".into(),
        Arc::new(pod),
        vec!["*".into()],
        SystemTime::UNIX_EPOCH,
    )
    .unwrap()
}

/// A container with requests, limits and ports.
pub fn container(name: &str, requests: Value, limits: Value, ports: Value) -> Value {
    let mut c = json!({"name": name, "image": "busybox"});
    let mut res = json!({});
    if !requests.is_null() {
        res["requests"] = requests;
    }
    if !limits.is_null() {
        res["limits"] = limits;
    }
    c["resources"] = res;
    if !ports.is_null() {
        c["ports"] = ports;
    }
    c
}

/// The typical pod: two containers, one host port.
pub fn typical_task() -> PodTask {
    task(
        json!({"containers": [
            container("web", json!({"cpu": "500m", "memory": "128Mi"}), Value::Null,
                json!([{"containerPort": 80, "hostPort": 31001}])),
            container("sidecar", json!({"cpu": "100m", "memory": "64Mi"}), Value::Null, Value::Null),
        ]}),
        Value::Null,
    )
}

pub fn scalar(name: &str, v: f64, role: Option<&str>) -> Resource {
    Resource {
        name: name.into(),
        r#type: value::Type::Scalar as i32,
        scalar: Some(value::Scalar { value: v }),
        reservations: role
            .map(|r| {
                vec![resource::ReservationInfo {
                    r#type: Some(resource::reservation_info::Type::Static as i32),
                    role: Some(r.into()),
                    ..Default::default()
                }]
            })
            .unwrap_or_default(),
        ..Default::default()
    }
}

pub fn ports(ranges: &[(u64, u64)], role: Option<&str>) -> Resource {
    let mut r = scalar("ports", 0.0, role);
    r.r#type = value::Type::Ranges as i32;
    r.scalar = None;
    r.ranges = Some(value::Ranges {
        range: ranges
            .iter()
            .map(|&(begin, end)| value::Range { begin, end })
            .collect(),
    });
    r
}

pub fn text_attr(name: &str, v: &str) -> Attribute {
    Attribute {
        name: name.into(),
        r#type: value::Type::Text as i32,
        text: Some(value::Text { value: v.into() }),
        ..Default::default()
    }
}

pub fn offer(host: &str, resources: Vec<Resource>, attributes: Vec<Attribute>) -> Offer {
    Offer {
        id: Some(format!("offer-{host}").into()),
        framework_id: Some("fw".into()),
        agent_id: Some(format!("agent-{host}").into()),
        hostname: host.into(),
        resources,
        attributes,
        ..Default::default()
    }
}

pub fn with_executors(mut o: Offer, ids: &[&str]) -> Offer {
    o.executor_ids = ids.iter().map(|i| ExecutorId::new(*i)).collect();
    o
}

/// The typical offer: cpus, mem, disk, two port ranges, four attributes.
pub fn typical_offer(host: &str) -> Offer {
    offer(
        host,
        vec![
            scalar("cpus", 4.0, None),
            scalar("mem", 8192.0, None),
            scalar("disk", 20480.0, None),
            ports(&[(31000, 31099), (32000, 32099)], None),
        ],
        vec![
            text_attr("rack", "r1"),
            text_attr("zone", "z1"),
            text_attr("os", "linux"),
            text_attr("arch", "amd64"),
        ],
    )
}

pub fn node_and_state(o: &Offer) -> (NodeView, ProcureState) {
    (
        NodeView::from_offer(o).unwrap(),
        ProcureState::new(o).unwrap(),
    )
}

/// Resource name and reservation role -> (scalar millis, sorted ports):
/// a canonical form, so that "equal as Mesos sees it" is `==`.
pub type Canon = BTreeMap<(String, String), (i64, Vec<u64>)>;

pub fn canon<'a>(rs: impl IntoIterator<Item = &'a Resource>) -> Canon {
    let mut m: Canon = BTreeMap::new();
    for r in rs {
        let e = m
            .entry((
                r.name.clone(),
                mesos::resources::resource_role(r).to_owned(),
            ))
            .or_default();
        if let Some(s) = r.scalar {
            e.0 += (s.value * 1000.0).round() as i64;
        }
        for rg in r.ranges.iter().flat_map(|x| x.range.iter()) {
            e.1.extend(rg.begin..=rg.end);
        }
        e.1.sort_unstable();
    }
    m.retain(|_, v| v.0 != 0 || !v.1.is_empty());
    m
}

/// Everything in the spec: the task's resources and the executor's.
pub fn spec_resources(spec: &registry::Spec) -> Vec<Resource> {
    let mut v = spec.resources.clone();
    if let Some(e) = &spec.executor {
        v.extend(e.resources.iter().cloned());
    }
    v
}

/// Scalar amount of `name` in `rs`.
pub fn amount<'a>(rs: impl IntoIterator<Item = &'a Resource>, name: &str) -> f64 {
    rs.into_iter()
        .filter(|r| r.name == name)
        .filter_map(|r| r.scalar)
        .map(|s| s.value)
        .sum()
}

/// Runs `pipeline` for one more pod on what is left of `state` and returns its
/// spec, as a round places a pod on an offer it already used; on failure the
/// state and the task are as they were before the call.
pub fn place<P: Procurement + ?Sized>(
    state: &mut ProcureState,
    pipeline: &P,
    task: &mut PodTask,
    node: &NodeView,
) -> Result<registry::Spec, ProcureError> {
    let cp = state.checkpoint();
    let before = pipeline.modifies_task().then(|| task.clone());
    state.begin_pod();
    match pipeline.procure(task, node, state) {
        Ok(()) => Ok(state.spec()),
        Err(e) => {
            state.rollback(cp);
            if let Some(before) = before {
                *task = before;
            }
            Err(e)
        }
    }
}
