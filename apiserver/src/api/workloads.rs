//! The subresources of the workload kinds (`crate::kinds::apps`, `crate::kinds::batch`):
//! `/status`, through the plain kinds' update path with the stored spec kept, and
//! `/scale`, which reads and writes `spec.replicas` of the stored object under its
//! resourceVersion.

use k8s_openapi::api::autoscaling::v1::Scale;
use serde_json::Value;

use super::kinds::{At, Endpoint, stale};
use super::objects::typed;
use super::{Api, RETRIES, WriteOptions};
use crate::auth::rbac::Writer;
use crate::error::ApiError;
use crate::kinds::apps::{WithStatus, Workload, scale};
use crate::patch::{self, PatchType};
use crate::store::object_rv;

impl Api {
    /// PUT `…/status`: only the status changes.
    pub(crate) async fn replace_status<K: WithStatus>(
        &self,
        ns: &str,
        name: &str,
        obj: K,
        opts: WriteOptions,
        writer: Option<&Writer>,
    ) -> Result<K, ApiError> {
        let keep = Endpoint::Sub(K::keep_for_status, K::validate_status);
        self.replace_object_via(ns, name, obj, opts, writer, keep)
            .await
    }

    /// PATCH `…/status`: only the status changes.
    pub(crate) async fn patch_status<K: WithStatus>(
        &self,
        ns: &str,
        name: &str,
        ty: PatchType,
        patch: &Value,
        opts: WriteOptions,
        writer: Option<&Writer>,
    ) -> Result<(K, Vec<String>), ApiError> {
        let keep = Endpoint::Sub(K::keep_for_status, K::validate_status);
        self.patch_object_via(ns, name, ty, patch, opts, writer, keep)
            .await
    }

    /// GET `…/scale`.
    pub(crate) fn get_scale<K: Workload>(&self, ns: &str, name: &str) -> Result<Value, ApiError> {
        let (obj, _) = self.get_typed::<K>(K::RESOURCE, ns, name)?;
        Ok(scale::of(&obj))
    }

    /// PUT `…/scale`: `spec.replicas` of the stored object, under the Scale's
    /// resourceVersion when it has one (409 if the object changed since).
    pub(crate) async fn replace_scale<K: Workload>(
        &self,
        ns: &str,
        name: &str,
        body: &Value,
        opts: WriteOptions,
        writer: Option<&Writer>,
    ) -> Result<Value, ApiError> {
        let wanted = decode_scale(body, name)?;
        let explicit = scale_rv(&wanted)?;
        self.write_scale::<K>(ns, name, scale::replicas(&wanted), explicit, opts, writer)
            .await
    }

    /// PATCH `…/scale`: the patch applies to the current Scale (`kubectl scale` sends a
    /// merge patch of `spec.replicas`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn patch_scale<K: Workload>(
        &self,
        ns: &str,
        name: &str,
        ty: PatchType,
        patch: &Value,
        opts: WriteOptions,
        writer: Option<&Writer>,
    ) -> Result<Value, ApiError> {
        for _ in 0..RETRIES {
            let current = self.get_scale::<K>(ns, name)?;
            let patched = patch::apply(ty, &current, patch, "Scale", name)?;
            let wanted = decode_scale(&patched, name)?;
            let rv = object_rv(&current).unwrap_or(0);
            let explicit = scale_rv(&wanted)?.filter(|v| *v != rv);
            match self
                .write_scale::<K>(
                    ns,
                    name,
                    scale::replicas(&wanted),
                    Some(explicit.unwrap_or(rv)),
                    opts,
                    writer,
                )
                .await
            {
                Err(ApiError::Conflict { .. }) if explicit.is_none() => continue,
                other => return other,
            }
        }
        Err(stale::<K>(name))
    }

    pub(super) async fn write_scale<K: Workload>(
        &self,
        ns: &str,
        name: &str,
        replicas: i32,
        explicit: Option<u64>,
        opts: WriteOptions,
        writer: Option<&Writer>,
    ) -> Result<Value, ApiError> {
        for _ in 0..RETRIES {
            let (old, old_rv) = self.get_typed::<K>(K::RESOURCE, ns, name)?;
            if explicit.is_some_and(|rv| rv != old_rv) {
                return Err(stale::<K>(name));
            }
            let mut new = old.clone();
            new.set_replicas(replicas);
            let at = At { ns, name, old_rv };
            match self
                .update_object(at, &old, new, opts, writer, Endpoint::Main)
                .await
            {
                Err(ApiError::Conflict { .. }) if explicit.is_none() => continue,
                Err(e) => return Err(e),
                Ok(obj) => return Ok(scale::of(&obj)),
            }
        }
        Err(stale::<K>(name))
    }
}

fn decode_scale(body: &Value, name: &str) -> Result<Scale, ApiError> {
    let scale: Scale = typed(body).map_err(|_| {
        ApiError::BadRequest(format!(
            "Scale in version \"v1\" cannot be handled as a Scale: {}",
            serde_json::from_value::<Scale>(body.clone())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        ))
    })?;
    if let Some(n) = scale.metadata.name.as_deref()
        && n != name
    {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    Ok(scale)
}

fn scale_rv(scale: &Scale) -> Result<Option<u64>, ApiError> {
    match scale.metadata.resource_version.as_deref() {
        None | Some("") => Ok(None),
        Some(rv) => rv
            .parse()
            .map(Some)
            .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {rv:?}"))),
    }
}

/// The typed, in-process face of one workload kind, for the controllers: list, watch,
/// create, replace (under the object's resourceVersion when it carries one), write the
/// status, delete. Writes go through this handle's fence, as every write of the handle.
macro_rules! typed_workload_api {
    ($ty:ty, $what:literal, $list:ident, $get:ident, $watch:ident, $create:ident, $replace:ident, $status:ident, $delete:ident) => {
        typed_workload_api!($ty, $what, $list, $get, $watch, $create, $replace, $status, $delete, None);
    };
    ($ty:ty, $what:literal, $list:ident, $get:ident, $watch:ident, $create:ident, $replace:ident, $status:ident, $delete:ident, $policy:expr) => {
        impl Api {
            #[doc = concat!("The ", $what, " in `namespace` (or all) that `label_selector` selects.")]
            ///
            /// # Errors
            /// A selector that does not parse.
            pub fn $list(
                &self,
                namespace: Option<&str>,
                label_selector: &str,
            ) -> Result<super::ObjectList<$ty>, ApiError> {
                self.list_typed(<$ty as crate::kinds::Kind>::RESOURCE, namespace, label_selector, "")
            }

            #[doc = concat!("One of the ", $what, ".")]
            ///
            /// # Errors
            /// 404 if there is none of that name.
            pub fn $get(&self, namespace: &str, name: &str) -> Result<$ty, ApiError> {
                self.get_typed::<$ty>(<$ty as crate::kinds::Kind>::RESOURCE, namespace, name)
                    .map(|(obj, _)| obj)
            }

            #[doc = concat!("Changes to the ", $what, " after `from`, as [`Api::watch_pods`] (relist on `Expired`).")]
            ///
            /// # Errors
            /// `Expired` when `from` is older than the store's history.
            pub fn $watch(
                &self,
                namespace: Option<&str>,
                from: u64,
            ) -> Result<super::watch::ObjectStream<$ty>, ApiError> {
                self.watch_typed(<$ty as crate::kinds::Kind>::RESOURCE, namespace, from)
            }

            #[doc = concat!("Creates one of the ", $what, " (`generateName` honoured).")]
            ///
            /// # Errors
            /// 409 if the name is taken, 404/403 for a missing or terminating namespace,
            /// 422 if invalid, a fence refusal.
            pub async fn $create(&self, namespace: &str, obj: $ty) -> Result<$ty, ApiError> {
                self.create_object(namespace, obj, WriteOptions::default(), None)
                    .await
            }

            #[doc = concat!("Replaces one of the ", $what, " through the main endpoint (its status stays).")]
            ///
            /// # Errors
            /// 409 if it changed since the resourceVersion it carries, 404, 422.
            pub async fn $replace(&self, namespace: &str, name: &str, obj: $ty) -> Result<$ty, ApiError> {
                self.replace_object(namespace, name, obj, WriteOptions::default(), None)
                    .await
            }

            #[doc = concat!("Writes the status of one of the ", $what, " (nothing else changes).")]
            ///
            /// # Errors
            /// 409 if it changed since the resourceVersion it carries, 404, 422.
            pub async fn $status(&self, namespace: &str, name: &str, obj: $ty) -> Result<$ty, ApiError> {
                self.replace_status(namespace, name, obj, WriteOptions::default(), None)
                    .await
            }

            #[doc = concat!("Deletes one of the ", $what, " (Background propagation; its own finalizers may hold it).")]
            ///
            /// # Errors
            /// 404 if there is none of that name.
            pub async fn $delete(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
                let opts = k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions {
                    propagation_policy: $policy.map(str::to_owned),
                    ..Default::default()
                };
                self.delete_object(<$ty as crate::kinds::Kind>::RESOURCE, namespace, name, &opts)
                    .await
                    .map(|_| ())
            }
        }
    };
}

typed_workload_api!(
    k8s_openapi::api::apps::v1::ReplicaSet,
    "ReplicaSets",
    list_replicasets,
    get_replicaset,
    watch_replicasets,
    create_replicaset,
    replace_replicaset,
    replace_replicaset_status,
    delete_replicaset
);
typed_workload_api!(
    k8s_openapi::api::core::v1::ReplicationController,
    "ReplicationControllers",
    list_replicationcontrollers,
    get_replicationcontroller,
    watch_replicationcontrollers,
    create_replicationcontroller,
    replace_replicationcontroller,
    replace_replicationcontroller_status,
    delete_replicationcontroller
);
typed_workload_api!(
    k8s_openapi::api::apps::v1::DaemonSet,
    "DaemonSets",
    list_daemonsets,
    get_daemonset,
    watch_daemonsets,
    create_daemonset,
    replace_daemonset,
    replace_daemonset_status,
    delete_daemonset
);
typed_workload_api!(
    k8s_openapi::api::apps::v1::Deployment,
    "Deployments",
    list_deployments,
    get_deployment,
    watch_deployments,
    create_deployment,
    replace_deployment,
    replace_deployment_status,
    delete_deployment
);
typed_workload_api!(
    k8s_openapi::api::apps::v1::StatefulSet,
    "StatefulSets",
    list_statefulsets,
    get_statefulset,
    watch_statefulsets,
    create_statefulset,
    replace_statefulset,
    replace_statefulset_status,
    delete_statefulset
);
// A batch/v1 Job's own default orphans its pods; the in-process callers (the CronJob
// controller's history and Replace) mean Background, as KCM's say it explicitly.
typed_workload_api!(
    k8s_openapi::api::batch::v1::Job,
    "Jobs",
    list_jobs,
    get_job,
    watch_jobs,
    create_job,
    replace_job,
    replace_job_status,
    delete_job,
    Some("Background")
);
typed_workload_api!(
    k8s_openapi::api::policy::v1::PodDisruptionBudget,
    "PodDisruptionBudgets",
    list_poddisruptionbudgets,
    get_poddisruptionbudget,
    watch_poddisruptionbudgets,
    create_poddisruptionbudget,
    replace_poddisruptionbudget,
    replace_poddisruptionbudget_status,
    delete_poddisruptionbudget
);
typed_workload_api!(
    k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
    "HorizontalPodAutoscalers",
    list_horizontalpodautoscalers,
    get_horizontalpodautoscaler,
    watch_horizontalpodautoscalers,
    create_horizontalpodautoscaler,
    replace_horizontalpodautoscaler,
    replace_horizontalpodautoscaler_status,
    delete_horizontalpodautoscaler
);
typed_workload_api!(
    k8s_openapi::api::core::v1::ResourceQuota,
    "ResourceQuotas",
    list_resourcequotas,
    get_resourcequota,
    watch_resourcequotas,
    create_resourcequota,
    replace_resourcequota,
    replace_resourcequota_status,
    delete_resourcequota
);
typed_workload_api!(
    k8s_openapi::api::batch::v1::CronJob,
    "CronJobs",
    list_cronjobs,
    get_cronjob,
    watch_cronjobs,
    create_cronjob,
    replace_cronjob,
    replace_cronjob_status,
    delete_cronjob
);

impl Api {
    /// Deletes a Job with `opts` (the controllers' propagation policy and uid
    /// precondition).
    ///
    /// # Errors
    /// 404 if there is none of that name, 409 if the precondition fails.
    pub async fn delete_job_with(
        &self,
        namespace: &str,
        name: &str,
        opts: &k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions,
    ) -> Result<(), ApiError> {
        self.delete_object(
            <k8s_openapi::api::batch::v1::Job as crate::kinds::Kind>::RESOURCE,
            namespace,
            name,
            opts,
        )
        .await
        .map(|_| ())
    }
}
