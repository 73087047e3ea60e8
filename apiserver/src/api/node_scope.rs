//! What a node may read, as kubelet's Node authorizer decides it: a ConfigMap, Secret or
//! ServiceAccount only if a pod bound to that node references it. The executor on an
//! agent fetches its pods' ConfigMaps and Secrets under such a scope; the credential that
//! names the node is the authenticator's business (a `system:node:<name>` user).

use std::sync::Arc;

use serde_json::Value;

use super::Api;
use crate::error::ApiError;
use crate::resource::Resource;

/// Whether `pod` (stored JSON) references `name` as a `resource` object.
pub(crate) fn pod_references(pod: &Value, resource: Resource, name: &str) -> bool {
    let Some(spec) = pod.get("spec") else {
        return false;
    };
    let is = |v: Option<&Value>| v.and_then(Value::as_str) == Some(name);
    let containers = ["containers", "initContainers", "ephemeralContainers"]
        .into_iter()
        .filter_map(|f| spec.get(f).and_then(Value::as_array))
        .flatten();
    let volumes = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let projected = |v: &Value| {
        v.pointer("/projected/sources")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    match resource {
        Resource::ServiceAccounts => is(spec.get("serviceAccountName")),
        Resource::ConfigMaps | Resource::Secrets => {
            let secret = resource == Resource::Secrets;
            let (env_from, key_ref, volume, source) = if secret {
                ("secretRef", "secretKeyRef", "/secret/secretName", "secret")
            } else {
                (
                    "configMapRef",
                    "configMapKeyRef",
                    "/configMap/name",
                    "configMap",
                )
            };
            let in_containers = containers.clone().any(|c| {
                let from = c
                    .get("envFrom")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten();
                let env = c.get("env").and_then(Value::as_array).into_iter().flatten();
                from.into_iter()
                    .any(|e| is(e.get(env_from).and_then(|r| r.get("name"))))
                    || env.into_iter().any(|e| {
                        is(e.get("valueFrom")
                            .and_then(|v| v.get(key_ref))
                            .and_then(|r| r.get("name")))
                    })
            });
            let in_volumes = volumes.into_iter().any(|v| {
                is(v.pointer(volume))
                    || projected(v)
                        .iter()
                        .any(|s| is(s.get(source).and_then(|r| r.get("name"))))
            });
            let pull = secret
                && spec
                    .get("imagePullSecrets")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .any(|r| is(r.get("name")));
            in_containers || in_volumes || pull
        }
        _ => false,
    }
}

/// The Node authorizer's reason for an object no pod on `node` references.
pub(crate) fn no_relationship(node: &str) -> String {
    format!("no relationship found between node '{node}' and this object")
}

impl Api {
    /// `resource` `ns/name` as node `node` may read it: the object if a pod bound to the
    /// node references it, else the Node authorizer's 403 (also when it does not exist,
    /// so a node learns nothing of objects outside its scope).
    pub fn get_for_node(
        &self,
        node: &str,
        resource: Resource,
        ns: &str,
        name: &str,
    ) -> Result<Arc<Value>, ApiError> {
        if !self.node_references(node, resource, ns, name) {
            return Err(ApiError::Forbidden(format!(
                "{plural} \"{name}\" is forbidden: User \"system:node:{node}\" cannot get resource \"{plural}\" in API group \"\" in the namespace \"{ns}\": {}",
                no_relationship(node),
                plural = resource.plural()
            )));
        }
        // Referenced but absent: the node sees the plain 404.
        self.get_raw(resource, ns, name)
    }

    /// Whether a pod bound to `node` references `resource` `ns/name`: the Node
    /// authorizer's graph edge, read from the pods in the store.
    pub fn node_references(&self, node: &str, resource: Resource, ns: &str, name: &str) -> bool {
        let (pods, _) = self.store().list(&Resource::Pods.prefix(Some(ns)));
        pods.iter().any(|p| {
            p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node)
                && pod_references(p, resource, name)
        })
    }

    /// NodeRestriction's rule for a node's TokenRequest on service account `ns/account`:
    /// the token must be bound to a pod (`bound`, the live pod's JSON) that runs on
    /// `node` as that service account. The error is kube-apiserver's 403.
    pub fn node_may_request_token(
        &self,
        node: &str,
        ns: &str,
        account: &str,
        bound: Option<&Value>,
    ) -> Result<(), ApiError> {
        let forbidden = |why: &str| {
            ApiError::Forbidden(format!("serviceaccounts \"{account}\" is forbidden: {why}"))
        };
        let Some(pod) = bound else {
            return Err(forbidden("node requested token not bound to a pod"));
        };
        if pod.pointer("/spec/nodeName").and_then(Value::as_str) != Some(node) {
            return Err(forbidden(
                "node requested token bound to a pod scheduled on a different node",
            ));
        }
        if pod
            .pointer("/spec/serviceAccountName")
            .and_then(Value::as_str)
            != Some(account)
        {
            let name = pod
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            return Err(forbidden(&format!(
                "node requested token bound to a pod ({ns}/{name}) with a different serviceaccount name"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn references_are_found_wherever_a_pod_can_name_an_object() {
        let pod = json!({"spec": {
            "serviceAccountName": "robot",
            "imagePullSecrets": [{"name": "pull"}],
            "containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "env-cm"}}],
                "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}}]}],
            "volumes": [{"name": "v", "configMap": {"name": "vol-cm"}},
                        {"name": "s", "secret": {"secretName": "vol-secret"}},
                        {"name": "p", "projected": {"sources": [{"configMap": {"name": "proj-cm"}}]}}]}});
        for (r, n) in [
            (Resource::ConfigMaps, "env-cm"),
            (Resource::ConfigMaps, "vol-cm"),
            (Resource::ConfigMaps, "proj-cm"),
            (Resource::Secrets, "env-secret"),
            (Resource::Secrets, "vol-secret"),
            (Resource::Secrets, "pull"),
            (Resource::ServiceAccounts, "robot"),
        ] {
            assert!(pod_references(&pod, r, n), "{r:?} {n}");
        }
        assert!(
            !pod_references(&pod, Resource::Secrets, "env-cm"),
            "kinds do not mix"
        );
        assert!(!pod_references(&pod, Resource::ConfigMaps, "pull"));
        assert!(!pod_references(&pod, Resource::ConfigMaps, "other"));
    }

    #[tokio::test]
    async fn a_node_reads_only_what_its_own_pods_reference() {
        let api = Api::in_memory().await.unwrap();
        let cm: k8s_openapi::api::core::v1::ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": "mine"}, "data": {"a": "b"}}))
                .unwrap();
        api.create_object("default", cm, Default::default(), None)
            .await
            .unwrap();
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "envFrom": [{"configMapRef": {"name": "mine"}}]}]}}))
        .unwrap();
        api.create_pod("default", pod).await.unwrap();
        let unbound = api.get_for_node("n1", Resource::ConfigMaps, "default", "mine");
        assert_eq!(
            unbound.unwrap_err().code_and_reason().0,
            403,
            "no pod is bound yet"
        );
        let binding = crate::Binding {
            node_name: "n1".into(),
            ..Default::default()
        };
        api.bind_pod("default", "p", &binding).await.unwrap();
        let obj = api
            .get_for_node("n1", Resource::ConfigMaps, "default", "mine")
            .unwrap();
        assert_eq!(obj["data"]["a"], "b");
        let other = api
            .get_for_node("n2", Resource::ConfigMaps, "default", "mine")
            .unwrap_err();
        assert!(
            other
                .to_string()
                .contains("no relationship found between node 'n2'"),
            "{other}"
        );
        let absent = api.get_for_node("n1", Resource::ConfigMaps, "default", "nothing");
        assert_eq!(absent.unwrap_err().code_and_reason().0, 403);
    }
}
