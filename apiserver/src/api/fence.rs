//! Fencing: writes made through a fenced [`Api`] handle apply only while their writer
//! still holds a leader-election Lease at the resourceVersion of its last renewal.
//!
//! Every such write carries `WriteOp::Check { key: <the Lease>, ResourceVersion(rv) }`
//! in its own transaction, so a leader that was frozen past its lease (and replaced)
//! writes nothing: its check fails against the new holder's renewals. The holder
//! renews under [`Fence::renewing`], which waits for the fenced writes in flight and
//! holds new ones back for that one commit, so a leader's own renewal never fails its
//! own writes.

use std::sync::Arc;

use tokio::sync::{RwLock, RwLockWriteGuard};

use super::Api;
use crate::error::ApiError;
use crate::resource::Resource;
use crate::store::{Change, Precondition, StoreError, WriteOp};

/// One Lease's fence, shared by the elector (which sets it) and the fenced handles.
#[derive(Debug)]
pub struct Fence {
    key: String,
    name: String,
    /// The Lease's resourceVersion after our last successful renewal; `None` while we do
    /// not lead.
    rv: RwLock<Option<u64>>,
}

/// Held while the Lease is renewed: fenced writes wait until it is dropped.
#[derive(Debug)]
pub struct Renewal<'a>(RwLockWriteGuard<'a, Option<u64>>);

impl Renewal<'_> {
    /// Records the outcome: `Some(rv)` the renewed Lease's resourceVersion, `None` lost.
    pub fn set(&mut self, rv: Option<u64>) {
        *self.0 = rv;
    }

    /// What the fence holds now.
    pub fn get(&self) -> Option<u64> {
        *self.0
    }
}

impl Fence {
    /// A fence on the Lease `namespace/name`, not held.
    pub fn new(namespace: &str, name: &str) -> Arc<Self> {
        Arc::new(Self {
            key: Resource::Leases.key(namespace, name),
            name: name.to_owned(),
            rv: RwLock::new(None),
        })
    }

    /// The Lease's store key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The resourceVersion fenced writes are checked against, if held.
    pub async fn held(&self) -> Option<u64> {
        *self.rv.read().await
    }

    /// Excludes fenced writes while the Lease is renewed (see the module doc).
    pub async fn renewing(&self) -> Renewal<'_> {
        Renewal(self.rv.write().await)
    }

    /// The error of a write refused by the fence.
    pub fn refused(&self) -> ApiError {
        ApiError::Conflict {
            resource: "leases".into(),
            name: self.name.clone(),
            detail: "this mesopod does not hold the leader lease; the write was not made".into(),
        }
    }

    /// Commits `ops` through `api` only if the fence is held, guarded by the check.
    pub(super) async fn commit(
        &self,
        api: &Api,
        mut ops: Vec<WriteOp>,
    ) -> Result<Vec<Arc<Change>>, ApiError> {
        let held = self.rv.read().await;
        let Some(rv) = *held else {
            return Err(self.refused());
        };
        // First, so a lost lease is what the refusal says even if another check fails.
        ops.insert(
            0,
            WriteOp::Check {
                key: self.key.clone(),
                precondition: Precondition::ResourceVersion(rv),
            },
        );
        match api.inner.store.commit(ops).await {
            Ok(changes) => Ok(changes),
            Err(StoreError::Conflict { key, .. } | StoreError::NotFound(key))
                if key == self.key =>
            {
                Err(self.refused())
            }
            Err(e) => Err(ApiError::from_store(e)),
        }
    }
}

impl Api {
    /// This handle with every write fenced by `fence` (the scheduler's handle).
    pub fn fenced(&self, fence: Arc<Fence>) -> Api {
        Api {
            inner: self.inner.clone(),
            fence: Some(fence),
        }
    }

    /// This handle without a fence (the API's own, the elector's).
    pub fn unfenced(&self) -> Api {
        Api {
            inner: self.inner.clone(),
            fence: None,
        }
    }

    /// The fence of this handle, if any.
    pub fn fence(&self) -> Option<&Arc<Fence>> {
        self.fence.as_ref()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn lease(holder: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some("mesopod".into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(15),
                ..Default::default()
            }),
        }
    }

    async fn write(api: &Api) -> Result<(), ApiError> {
        api.put_meta("fenced", b"x".to_vec()).await
    }

    #[tokio::test]
    async fn a_fenced_write_needs_the_lease_at_the_last_renewal() {
        let api = Api::in_memory().await.unwrap();
        let fence = Fence::new("kube-system", "mesopod");
        let fenced = api.fenced(fence.clone());
        // Not held: refused without touching the store.
        assert_eq!(write(&fenced).await.unwrap_err(), fence.refused());

        let rv = api
            .write_lease("kube-system", lease("a"), None)
            .await
            .unwrap();
        fence.renewing().await.set(Some(rv));
        write(&fenced).await.unwrap();
        assert_eq!(api.get_meta("fenced").as_deref(), Some(&b"x"[..]));

        // Another replica takes the lease: our next write is refused, the store unchanged.
        let (mut taken, rv) = api.get_lease("kube-system", "mesopod").unwrap().unwrap();
        taken.spec.as_mut().unwrap().holder_identity = Some("b".into());
        api.write_lease("kube-system", taken, Some(rv))
            .await
            .unwrap();
        let before = api.resource_version();
        let e = fenced.put_meta("fenced", b"y".to_vec()).await.unwrap_err();
        assert_eq!(e, fence.refused());
        assert_eq!(api.get_meta("fenced").as_deref(), Some(&b"x"[..]));
        assert_eq!(api.resource_version(), before);
        // The unfenced handle (the API's own) is not affected.
        fenced
            .unfenced()
            .put_meta("fenced", b"z".to_vec())
            .await
            .unwrap();
    }
}
