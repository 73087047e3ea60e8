//! The subresources of the workload kinds (`crate::kinds::apps`): `/status`, through
//! the plain kinds' update path with the stored spec kept, and `/scale`, which reads
//! and writes `spec.replicas` of the stored object under its resourceVersion.

use k8s_openapi::api::autoscaling::v1::Scale;
use serde_json::Value;

use super::kinds::{At, Endpoint, stale};
use super::objects::typed;
use super::{Api, RETRIES, WriteOptions};
use crate::auth::rbac::Writer;
use crate::error::ApiError;
use crate::kinds::apps::{Workload, scale};
use crate::patch::{self, PatchType};
use crate::store::object_rv;

impl Api {
    /// PUT `…/status`: only the status changes.
    pub(crate) async fn replace_status<K: Workload>(
        &self,
        ns: &str,
        name: &str,
        obj: K,
        opts: WriteOptions,
        writer: Option<&Writer>,
    ) -> Result<K, ApiError> {
        let keep = Endpoint::Sub(K::prepare_status_update);
        self.replace_object_via(ns, name, obj, opts, writer, keep)
            .await
    }

    /// PATCH `…/status`: only the status changes.
    pub(crate) async fn patch_status<K: Workload>(
        &self,
        ns: &str,
        name: &str,
        ty: PatchType,
        patch: &Value,
        opts: WriteOptions,
        writer: Option<&Writer>,
    ) -> Result<(K, Vec<String>), ApiError> {
        let keep = Endpoint::Sub(K::prepare_status_update);
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

    async fn write_scale<K: Workload>(
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
