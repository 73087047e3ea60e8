//! The `scale` subresource of any workload kind, named as an autoscaler's
//! `scaleTargetRef` names it (`apiVersion`, `kind`, `name`): the HPA controller's one
//! way to read and set a target's replicas, as KCM's scale client is.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::core::v1::ReplicationController;
use serde_json::Value;

use super::objects::typed;
use super::{Api, WriteOptions};
use crate::error::ApiError;

/// The workload kinds served with `scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Deployment,
    ReplicaSet,
    StatefulSet,
    ReplicationController,
}

impl Target {
    /// The kind `kind` of the group in `api_version` (its version is not read: every
    /// version of a kind has the same scale), or the RESTMapper's error.
    fn of(api_version: &str, kind: &str) -> Result<Self, ApiError> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        match (group, kind) {
            ("apps", "Deployment") => Ok(Self::Deployment),
            ("apps", "ReplicaSet") => Ok(Self::ReplicaSet),
            ("apps", "StatefulSet") => Ok(Self::StatefulSet),
            ("", "ReplicationController") => Ok(Self::ReplicationController),
            _ => Err(ApiError::BadRequest(format!(
                "no matches for kind \"{kind}\" in group \"{group}\""
            ))),
        }
    }
}

fn decode(v: Value) -> Result<Scale, ApiError> {
    typed(&v)
}

impl Api {
    /// The Scale of the workload `kind` of `api_version` named `name` in `ns`.
    ///
    /// # Errors
    /// A kind without `scale` (400, the RESTMapper's words), or one not found (404).
    pub fn get_scale_of(
        &self,
        api_version: &str,
        kind: &str,
        ns: &str,
        name: &str,
    ) -> Result<Scale, ApiError> {
        let v = match Target::of(api_version, kind)? {
            Target::Deployment => self.get_scale::<Deployment>(ns, name),
            Target::ReplicaSet => self.get_scale::<ReplicaSet>(ns, name),
            Target::StatefulSet => self.get_scale::<StatefulSet>(ns, name),
            Target::ReplicationController => self.get_scale::<ReplicationController>(ns, name),
        }?;
        decode(v)
    }

    /// Sets the target's `spec.replicas` to `replicas`, under `resource_version` (the
    /// Scale the caller read): a target changed since is a 409 and nothing is written.
    ///
    /// # Errors
    /// As [`Api::get_scale_of`], a conflict, or the workload's validation.
    pub async fn replace_scale_of(
        &self,
        api_version: &str,
        kind: &str,
        ns: &str,
        name: &str,
        replicas: i32,
        resource_version: Option<u64>,
    ) -> Result<Scale, ApiError> {
        let opts = WriteOptions::default();
        let v = match Target::of(api_version, kind)? {
            Target::Deployment => {
                self.write_scale::<Deployment>(ns, name, replicas, resource_version, opts, None)
                    .await
            }
            Target::ReplicaSet => {
                self.write_scale::<ReplicaSet>(ns, name, replicas, resource_version, opts, None)
                    .await
            }
            Target::StatefulSet => {
                self.write_scale::<StatefulSet>(ns, name, replicas, resource_version, opts, None)
                    .await
            }
            Target::ReplicationController => {
                self.write_scale::<ReplicationController>(
                    ns,
                    name,
                    replicas,
                    resource_version,
                    opts,
                    None,
                )
                .await
            }
        }?;
        decode(v)
    }
}
