//! kube-apiserver's ResourceQuota admission, the last check of a create in a
//! namespace: each quota whose `status.hard` tracks what the new object uses, and
//! whose scopes select it, is charged; one that would pass `hard` refuses the create,
//! 403, in kube's words (`exceeded quota: q, requested: pods=1, used: pods=2,
//! limited: pods=2`). The charge is written to the quota's `status.used` under the
//! resourceVersion read, before the object is stored, so two creates at once never
//! both take the last unit; a conflict re-reads and charges again what is still to
//! charge. A dry run is checked and charges nothing. The arithmetic is
//! [`crate::quota`]'s; the resource quota controller recounts what deletes give back.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ResourceQuota;

use super::{Api, WriteOptions};
use crate::error::ApiError;
use crate::quota::{self, Subject};
use crate::resource::Resource;

/// How often a charge is tried again while other writes change the quotas under it.
const RETRIES: usize = 5;

impl Api {
    /// Charges `subject`, being created in `ns` as `resource` `shown` (its name, or its
    /// generateName), to the namespace's quotas; see the module doc.
    pub(super) async fn admit_quota(
        &self,
        ns: &str,
        resource: Resource,
        shown: &str,
        subject: Subject<'_>,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        let mut charged: BTreeSet<String> = BTreeSet::new();
        for _ in 0..RETRIES {
            let (items, _) = self.list_raw(
                Resource::ResourceQuotas,
                Some(ns),
                &crate::selectors::Selectors::default(),
            );
            if items.is_empty() {
                return Ok(());
            }
            let quotas: Vec<ResourceQuota> = items
                .iter()
                .map(|v| super::typed::<ResourceQuota>(v.as_ref()))
                .collect::<Result<_, _>>()?;
            // Those already charged on an earlier try keep their charge.
            let pending: Vec<ResourceQuota> = quotas
                .into_iter()
                .filter(|q| !charged.contains(q.metadata.name.as_deref().unwrap_or_default()))
                .collect();
            let charges = quota::charge(&pending, subject, self.now()).map_err(|why| {
                ApiError::Forbidden(format!(
                    "{} \"{shown}\" is forbidden: {why}",
                    resource.qualified()
                ))
            })?;
            if dry_run {
                return Ok(());
            }
            let mut conflicted = false;
            for (name, used) in charges {
                let Some(mut q) = pending
                    .iter()
                    .find(|q| q.metadata.name.as_deref() == Some(name.as_str()))
                    .cloned()
                else {
                    continue;
                };
                let status = q.status.get_or_insert_default();
                status.used = Some(quota::to_quantities(&used));
                match self
                    .replace_status(ns, &name, q, WriteOptions::default(), None)
                    .await
                {
                    Ok(_) => {
                        charged.insert(name);
                    }
                    Err(ApiError::Conflict { .. }) => {
                        conflicted = true;
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            if !conflicted {
                return Ok(());
            }
        }
        Err(ApiError::Timeout(
            "couldn't charge the resource quotas of the namespace due to conflicts".into(),
        ))
    }
}

#[cfg(test)]
mod tests;
