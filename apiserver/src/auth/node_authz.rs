//! The Node authorizer (`--authorization-mode=Node,RBAC`), as kube-apiserver's: a node
//! (`system:node:<name>` in `system:nodes`) may get a ConfigMap, Secret or ServiceAccount,
//! and create a `serviceaccounts/token`, only where a pod bound to it references the
//! object; and, mesopod's own, push its own resource metrics (`create` on
//! `nodes/<its name>/metrics`, [`crate::metrics`]). Everything else gets no opinion, and RBAC decides; a node holds no RBAC
//! grants by default, so that is a 403 whose message carries this authorizer's reason,
//! as kube-apiserver's union authorizer joins them.
//!
//! Which pod a node's token is bound to is checked at the TokenRequest itself
//! ([`crate::Api::node_may_request_token`], NodeRestriction's rule), since the
//! authorizer does not see the body.

use axum::response::Response;

use super::node_keys::node_of;
use super::request_info::Attributes;
use super::user::UserInfo;
use crate::api::Api;
use crate::api::node_scope::no_relationship;
use crate::resource::Resource;

/// The Node authorizer's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeDecision {
    /// The request is within the node's scope.
    Allow,
    /// Not this authorizer's to allow; the reason (possibly empty) joins the 403's message.
    NoOpinion(String),
}

fn read_scoped(resource: &str) -> Option<Resource> {
    match resource {
        "configmaps" => Some(Resource::ConfigMaps),
        "secrets" => Some(Resource::Secrets),
        "serviceaccounts" => Some(Resource::ServiceAccounts),
        _ => None,
    }
}

/// Decides `a` for `user`: no opinion unless the user is a node.
pub fn authorize(api: &Api, user: &UserInfo, a: &Attributes) -> NodeDecision {
    let Some(node) = node_of(user) else {
        return NodeDecision::NoOpinion(String::new());
    };
    if !a.resource_request || !a.api_group.is_empty() {
        return NodeDecision::NoOpinion(String::new());
    }
    if a.resource == "nodes" && a.subresource == "metrics" {
        return match (a.verb.as_str(), a.name == node) {
            ("create", true) => NodeDecision::Allow,
            _ => NodeDecision::NoOpinion(format!("node '{node}' can only report its own metrics")),
        };
    }
    let Some(resource) = read_scoped(&a.resource) else {
        return NodeDecision::NoOpinion(String::new());
    };
    let token = resource == Resource::ServiceAccounts && a.subresource == "token";
    if token {
        if a.verb != "create" {
            return NodeDecision::NoOpinion(
                "can only create tokens for individual service accounts".into(),
            );
        }
    } else if !a.subresource.is_empty() {
        return NodeDecision::NoOpinion(String::new());
    } else if a.verb != "get" || a.name.is_empty() {
        return NodeDecision::NoOpinion("can only get individual resources of this type".into());
    }
    if api.node_references(node, resource, &a.namespace, &a.name) {
        NodeDecision::Allow
    } else {
        NodeDecision::NoOpinion(no_relationship(node))
    }
}

/// The 403 of a request neither authorizer allowed, with the Node authorizer's reason.
pub fn denied(user: &UserInfo, a: &Attributes, reason: &str) -> Response {
    if reason.is_empty() {
        return super::status::denied(user, a);
    }
    let msg = format!("{}: {reason}", super::status::denied_message(user, a));
    super::status::forbidden(&a.api_group, &a.resource, &a.name, &msg)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn a_node_gets_only_what_its_pods_reference_and_never_lists() {
        let api = Api::in_memory().await.unwrap();
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}}))
        .unwrap();
        api.create_pod("default", pod).await.unwrap();
        let binding = crate::Binding {
            node_name: "n1".into(),
            ..Default::default()
        };
        api.bind_pod("default", "p", &binding).await.unwrap();
        let node = |n: &str| {
            UserInfo::authenticated(format!("system:node:{n}"), "", vec!["system:nodes".into()])
        };
        let get = Attributes::resource("get", "", "secrets", "default", "s");
        assert_eq!(authorize(&api, &node("n1"), &get), NodeDecision::Allow);
        assert_eq!(
            authorize(&api, &node("n2"), &get),
            NodeDecision::NoOpinion(
                "no relationship found between node 'n2' and this object".into()
            )
        );
        let list = Attributes::resource("list", "", "secrets", "default", "");
        assert_eq!(
            authorize(&api, &node("n1"), &list),
            NodeDecision::NoOpinion("can only get individual resources of this type".into())
        );
        let token =
            Attributes::resource("create", "", "serviceaccounts/token", "default", "default");
        assert_eq!(authorize(&api, &node("n1"), &token), NodeDecision::Allow);
        assert!(matches!(
            authorize(&api, &node("n2"), &token),
            NodeDecision::NoOpinion(_)
        ));
        let pods = Attributes::resource("list", "", "pods", "default", "");
        assert_eq!(
            authorize(&api, &node("n1"), &pods),
            NodeDecision::NoOpinion(String::new())
        );
        let push = |n: &str| Attributes::resource("create", "", "nodes/metrics", "", n);
        assert_eq!(
            authorize(&api, &node("n1"), &push("n1")),
            NodeDecision::Allow
        );
        assert_eq!(
            authorize(&api, &node("n2"), &push("n1")),
            NodeDecision::NoOpinion("node 'n2' can only report its own metrics".into())
        );
        let impostor = UserInfo::authenticated("system:node:n1", "", vec![]);
        assert_eq!(
            authorize(&api, &impostor, &get),
            NodeDecision::NoOpinion(String::new()),
            "the name alone, outside system:nodes, is no node"
        );
    }
}
