//! The typed reads and writes of Leases that leader election makes in process (over
//! HTTP, Leases take the plain kinds' generic path).

use k8s_openapi::api::coordination::v1::Lease;

use super::Api;
use super::objects::{stamp_new, to_value, typed};
use crate::error::ApiError;
use crate::kinds;
use crate::resource::Resource;
use crate::store::{Precondition, WriteOp, object_rv};

impl Api {
    /// The Lease `ns/name` with its resourceVersion, if it exists.
    ///
    /// # Errors
    /// A stored object that is not a Lease (500).
    pub fn get_lease(&self, ns: &str, name: &str) -> Result<Option<(Lease, u64)>, ApiError> {
        let Some(v) = self.get_value(&Resource::Leases.key(ns, name)) else {
            return Ok(None);
        };
        let rv = object_rv(&v).unwrap_or(0);
        Ok(Some((typed(&v)?, rv)))
    }

    /// Creates `lease` in `ns` (`expected` `None`) or replaces it if it is still at
    /// resourceVersion `expected`; answers the new resourceVersion.
    ///
    /// # Errors
    /// 409 when another writer got there first (AlreadyExists or Conflict), 422 for an
    /// invalid Lease, and the fence's refusal on a fenced handle.
    pub async fn write_lease(
        &self,
        ns: &str,
        mut lease: Lease,
        expected: Option<u64>,
    ) -> Result<u64, ApiError> {
        let name = lease.metadata.name.clone().unwrap_or_default();
        lease.metadata.namespace = Some(ns.to_owned());
        lease.metadata.resource_version = None;
        if expected.is_none() {
            stamp_new(&mut lease.metadata, self.now());
        }
        kinds::validate(&lease, None)?;
        let put = WriteOp::Put {
            key: Resource::Leases.key(ns, &name),
            object: to_value(&lease)?,
            precondition: expected.map_or(Precondition::Absent, Precondition::ResourceVersion),
        };
        let changes = match expected {
            None => self.commit_create(Resource::Leases, ns, &name, put).await?,
            Some(_) => self.commit(vec![put]).await?,
        };
        changes
            .first()
            .map(|c| c.rv)
            .ok_or_else(|| ApiError::Internal("the store reported no change".into()))
    }
}
