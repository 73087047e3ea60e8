//! The embedder's own writes through the authorizer: once authorization is RBAC, the
//! scheduler's pod status writes and bindings ([`Api::update_pod_status`],
//! [`Api::update_pod_status_with`], [`Api::bind_pod_raw`]) are checked as
//! `system:kube-scheduler` (bound to the ClusterRole of that name), as kube-scheduler's
//! and the kubelet's writes are in Kubernetes. Without a binding they get 403.

use std::sync::Arc;

use super::rbac::Rbac;
use super::request_info::Attributes;
use super::user::UserInfo;
use crate::api::Api;
use crate::error::ApiError;

/// The authorizer and identity of in-process writes.
#[derive(Debug, Clone)]
pub struct InProcess {
    rbac: Arc<Rbac>,
    user: UserInfo,
}

impl Api {
    /// Authorizes this API's in-process pod status writes and bindings as `user`.
    /// Set once; later calls change nothing.
    pub fn authorize_in_process(&self, rbac: Arc<Rbac>, user: UserInfo) {
        let _ = self.in_process().set(InProcess { rbac, user });
    }

    pub(crate) fn check_in_process(
        &self,
        verb: &str,
        resource: &str,
        ns: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let Some(InProcess { rbac, user }) = self.in_process().get() else {
            return Ok(());
        };
        let attrs = Attributes::resource(verb, "", resource, ns, name);
        if rbac.authorize(user, &attrs).allowed {
            return Ok(());
        }
        Err(ApiError::Forbidden(super::status::forbidden_message(
            "",
            &attrs.resource,
            name,
            &super::status::denied_message(user, &attrs),
        )))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};

    use super::*;
    use crate::auth::{Auth, Authenticator};
    use crate::store::{Precondition, WriteOp};

    #[tokio::test]
    async fn the_schedulers_status_writes_need_its_binding() {
        let api = Api::in_memory().await.unwrap();
        let _auth = Auth::new(api.clone(), Authenticator::default(), true)
            .await
            .unwrap();
        let pod = Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("p".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("busybox".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        api.create_pod("default", pod).await.unwrap();
        let running = PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        };
        api.update_pod_status("default", "p", running.clone())
            .await
            .unwrap();
        api.commit(vec![WriteOp::Delete {
            key: "clusterrolebindings/system:kube-scheduler".into(),
            precondition: Precondition::None,
        }])
        .await
        .unwrap();
        let err = api
            .update_pod_status("default", "p", running)
            .await
            .unwrap_err();
        assert_eq!(err.code_and_reason(), (403, "Forbidden"));
        assert_eq!(
            err.to_string(),
            r#"pods "p" is forbidden: User "system:kube-scheduler" cannot update resource "pods/status" in API group "" in the namespace "default""#
        );
    }
}
