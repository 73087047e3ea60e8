//! Strategic merge patch for the lists `kubectl apply` touches.
//!
//! Maps merge recursively and `null` removes a key. Lists merge per Kubernetes' patch
//! strategy for the field (see [`list_strategy`]): by a merge key (containers by `name`,
//! ports by `containerPort`, volume mounts by `mountPath`, ...), as a set of primitives
//! (finalizers), or by replacement (everything else, tolerations included, as in
//! Kubernetes where they carry no patch strategy). Directives understood: `$patch`
//! (`replace`, `delete`, `merge`), `$retainKeys`, `$setElementOrder/<list>` and
//! `$deleteFromPrimitiveList/<list>`.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    Replace,
    MergeKey(&'static str),
    Primitive,
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// The patch strategy of the list at `path` (field names, no indices) in an object of
/// `kind`, copied from the `patchStrategy`/`patchMergeKey` tags of Kubernetes' types.
fn list_strategy(kind: &str, path: &[String]) -> ListStrategy {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    // A workload's pod template merges as a pod does (`kubectl set image` patches
    // one container of a Deployment's template by name).
    if let Some(pod) = pod_template_path(kind, &p) {
        return strategy_of("Pod", pod);
    }
    strategy_of(kind, &p)
}

/// The path inside the pod template of a workload `kind`, if `path` is in it.
fn pod_template_path<'a>(kind: &str, path: &'a [&'a str]) -> Option<&'a [&'a str]> {
    let prefix: &[&str] = match kind {
        "Deployment"
        | "ReplicaSet"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicationController"
        | "Job" => &["spec", "template"],
        "PodTemplate" => &["template"],
        "CronJob" => &["spec", "jobTemplate", "spec", "template"],
        _ => return None,
    };
    path.strip_prefix(prefix)
}

fn strategy_of(kind: &str, p: &[&str]) -> ListStrategy {
    match (kind, p) {
        (_, ["metadata", "finalizers"]) => ListStrategy::Primitive,
        (_, ["metadata", "ownerReferences"]) => ListStrategy::MergeKey("uid"),
        ("Pod", ["spec", c]) if CONTAINER_LISTS.contains(c) => ListStrategy::MergeKey("name"),
        ("Pod", ["spec", c, field]) if CONTAINER_LISTS.contains(c) => match *field {
            "ports" => ListStrategy::MergeKey("containerPort"),
            "env" => ListStrategy::MergeKey("name"),
            "volumeMounts" => ListStrategy::MergeKey("mountPath"),
            "volumeDevices" => ListStrategy::MergeKey("devicePath"),
            _ => ListStrategy::Replace,
        },
        (
            "Pod",
            [
                "spec",
                "volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims",
            ],
        ) => ListStrategy::MergeKey("name"),
        ("Pod", ["spec", "hostAliases"]) => ListStrategy::MergeKey("ip"),
        ("Pod" | "Job", ["status", "conditions"]) => ListStrategy::MergeKey("type"),
        ("Pod", ["status", "podIPs" | "hostIPs"]) => ListStrategy::MergeKey("ip"),
        ("Node", ["status", "addresses" | "conditions"]) => ListStrategy::MergeKey("type"),
        _ => ListStrategy::Replace,
    }
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::BadRequest(msg.into())
}

/// Applies strategic merge patch `patch` to `live`, an object of `kind`.
pub fn strategic_merge(live: &Value, patch: &Value, kind: &str) -> Result<Value, ApiError> {
    let patch = patch
        .as_object()
        .ok_or_else(|| bad("the patch must be a JSON object"))?;
    let mut path = Vec::new();
    Ok(Value::Object(
        merge_map(live.as_object(), patch, kind, &mut path)?.unwrap_or_default(),
    ))
}

/// `None` means the patch deletes this map (`$patch: delete`).
fn merge_map(
    orig: Option<&Map<String, Value>>,
    patch: &Map<String, Value>,
    kind: &str,
    path: &mut Vec<String>,
) -> Result<Option<Map<String, Value>>, ApiError> {
    match patch.get("$patch").map(|v| v.as_str()) {
        None | Some(Some("merge")) => {}
        Some(Some("delete")) => return Ok(None),
        Some(Some("replace")) => {
            let mut out = patch.clone();
            out.retain(|k, _| !k.starts_with('$'));
            return Ok(Some(out));
        }
        Some(other) => return Err(bad(format!("unknown patch type: {other:?}"))),
    }
    let mut out = orig.cloned().unwrap_or_default();
    if let Some(retain) = patch.get("$retainKeys") {
        let keys = retain
            .as_array()
            .ok_or_else(|| bad("$retainKeys must be a list"))?;
        out.retain(|k, _| keys.iter().any(|r| r.as_str() == Some(k.as_str())));
    }
    let mut orders = Vec::new();
    let mut removals = Vec::new();
    for (k, pv) in patch {
        if let Some(field) = k.strip_prefix("$setElementOrder/") {
            orders.push((field, pv));
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            removals.push((field, pv));
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        path.push(k.clone());
        let merged = merge_value(out.get(k), pv, kind, path);
        path.pop();
        match merged? {
            Some(v) => {
                out.insert(k.clone(), v);
            }
            None => {
                out.remove(k);
            }
        }
    }
    for (field, gone) in removals {
        let gone = gone
            .as_array()
            .ok_or_else(|| bad("$deleteFromPrimitiveList must be a list"))?;
        if let Some(Value::Array(list)) = out.get_mut(field) {
            list.retain(|v| !gone.contains(v));
        }
    }
    for (field, order) in orders {
        let order = order
            .as_array()
            .ok_or_else(|| bad("$setElementOrder must be a list"))?;
        path.push(field.to_string());
        let key = match list_strategy(kind, path) {
            ListStrategy::MergeKey(key) => Some(key),
            _ => None,
        };
        path.pop();
        if let Some(Value::Array(list)) = out.get_mut(field) {
            reorder(list, order, key);
        }
    }
    Ok(Some(out))
}

/// `None` means remove the key.
fn merge_value(
    orig: Option<&Value>,
    pv: &Value,
    kind: &str,
    path: &mut Vec<String>,
) -> Result<Option<Value>, ApiError> {
    match pv {
        Value::Null => Ok(None),
        Value::Object(pm) => {
            Ok(merge_map(orig.and_then(Value::as_object), pm, kind, path)?.map(Value::Object))
        }
        Value::Array(pa) => {
            let orig = orig.and_then(Value::as_array);
            let merged = match list_strategy(kind, path) {
                ListStrategy::Replace => strip_list(pa),
                ListStrategy::Primitive => {
                    let mut out = orig.cloned().unwrap_or_default();
                    for v in pa {
                        if !out.contains(v) {
                            out.push(v.clone());
                        }
                    }
                    out
                }
                ListStrategy::MergeKey(key) => merge_keyed(orig, pa, key, kind, path)?,
            };
            Ok(Some(Value::Array(merged)))
        }
        other => Ok(Some(other.clone())),
    }
}

fn strip_list(list: &[Value]) -> Vec<Value> {
    list.iter()
        .filter(|v| v.get("$patch").is_none())
        .cloned()
        .collect()
}

fn merge_keyed(
    orig: Option<&Vec<Value>>,
    patch: &[Value],
    key: &str,
    kind: &str,
    path: &mut Vec<String>,
) -> Result<Vec<Value>, ApiError> {
    if patch
        .iter()
        .any(|e| e.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Ok(strip_list(patch));
    }
    let mut out = orig.cloned().unwrap_or_default();
    for pe in patch {
        let pm = pe
            .as_object()
            .ok_or_else(|| bad(format!("{}: list elements must be objects", path.join("."))))?;
        let id = pm.get(key).ok_or_else(|| {
            bad(format!(
                "map: {pe} does not contain declared merge key: {key}"
            ))
        })?;
        let pos = out.iter().position(|e| e.get(key) == Some(id));
        if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(pos) = pos {
                out.remove(pos);
            }
            continue;
        }
        match pos {
            Some(pos) => {
                if let Some(m) = merge_map(out[pos].as_object(), pm, kind, path)? {
                    out[pos] = Value::Object(m);
                } else {
                    out.remove(pos);
                }
            }
            None => {
                if let Some(m) = merge_map(None, pm, kind, path)? {
                    out.push(Value::Object(m));
                }
            }
        }
    }
    Ok(out)
}

/// Puts the elements named in `order` first, in that order; the others keep their
/// relative order after them.
fn reorder(list: &mut [Value], order: &[Value], key: Option<&str>) {
    let id = |v: &Value| -> Value {
        match key {
            Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
            None => v.clone(),
        }
    };
    let wanted: Vec<Value> = order.iter().map(id).collect();
    let rank = |v: &Value| {
        wanted
            .iter()
            .position(|w| *w == id(v))
            .unwrap_or(usize::MAX)
    };
    list.sort_by_key(rank);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_workloads_pod_template_merges_its_containers_by_name() {
        let live = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "main", "image": "a:1", "ports": [{"containerPort": 80}]},
            {"name": "side", "image": "s:1"}]}}}});
        // What `kubectl set image deployment/web main=a:2` sends.
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "a:2"}]}}}});
        let out = strategic_merge(&live, &patch, "Deployment").unwrap();
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name": "main", "image": "a:2", "ports": [{"containerPort": 80}]}, {"name": "side", "image": "s:1"}])
        );
        assert_eq!(out["spec"]["replicas"], 2);
    }
    use serde_json::json;

    fn live() -> Value {
        json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {"containers": [
                {"name": "web", "image": "nginx:1", "env": [{"name": "A", "value": "1"}],
                 "ports": [{"containerPort": 80}]},
                {"name": "side", "image": "busybox"}],
                "tolerations": [{"key": "k", "operator": "Exists"}]}})
    }

    #[test]
    fn containers_merge_by_name_with_element_order() {
        let patch = json!({"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "web"}],
            "containers": [{"name": "web", "image": "nginx:2"}]}});
        let out = strategic_merge(&live(), &patch, "Pod").unwrap();
        let cs = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs.len(), 2);
        assert_eq!(cs[0]["name"], "side");
        assert_eq!(cs[1]["image"], "nginx:2");
        assert_eq!(
            cs[1]["env"][0]["name"], "A",
            "fields absent from the patch stay"
        );
    }

    #[test]
    fn delete_directive_removes_one_container_and_null_removes_a_label() {
        let patch = json!({"metadata": {"labels": {"a": null}},
            "spec": {"containers": [{"name": "side", "$patch": "delete"}]}});
        let out = strategic_merge(&live(), &patch, "Pod").unwrap();
        assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 1);
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
    }

    #[test]
    fn env_and_ports_merge_by_their_keys_tolerations_replace() {
        let patch = json!({"spec": {"containers": [{"name": "web",
            "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "9"}],
            "ports": [{"containerPort": 443}]}],
            "tolerations": [{"key": "other", "operator": "Exists"}]}});
        let out = strategic_merge(&live(), &patch, "Pod").unwrap();
        let web = &out["spec"]["containers"][0];
        assert_eq!(
            web["env"],
            json!([{"name": "A", "value": "9"}, {"name": "B", "value": "2"}])
        );
        assert_eq!(web["ports"].as_array().unwrap().len(), 2);
        assert_eq!(
            out["spec"]["tolerations"],
            json!([{"key": "other", "operator": "Exists"}])
        );
    }

    #[test]
    fn primitive_lists_union_and_delete_from_primitive_list() {
        let patch = json!({"metadata": {"finalizers": ["y"], "$deleteFromPrimitiveList/finalizers": ["x"]}});
        let out = strategic_merge(&live(), &patch, "Pod").unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["y"]));
    }

    #[test]
    fn replace_and_retain_keys_directives() {
        let patch = json!({"spec": {"containers": [{"name": "only", "image": "x"}, {"$patch": "replace"}]}});
        let out = strategic_merge(&live(), &patch, "Pod").unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "only", "image": "x"}])
        );
        let live = json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}});
        let patch = json!({"spec": {"volumes": [{"name": "v", "$retainKeys": ["hostPath", "name"], "hostPath": {"path": "/x"}}]}});
        let out = strategic_merge(&live, &patch, "Pod").unwrap();
        assert_eq!(
            out["spec"]["volumes"],
            json!([{"name": "v", "hostPath": {"path": "/x"}}])
        );
    }

    #[test]
    fn a_list_element_without_its_merge_key_is_a_bad_request() {
        let patch = json!({"spec": {"containers": [{"image": "x"}]}});
        let err = strategic_merge(&live(), &patch, "Pod").unwrap_err();
        assert_eq!(err.code_and_reason().0, 400);
    }
}
