//! kube-apiserver's ResourceQuota admission, the last check of a create in a
//! namespace: each quota whose `status.hard` tracks what the new object uses, and
//! whose scopes select it, is charged; one that would pass `hard` refuses the create,
//! 403, in kube's words (`exceeded quota: q, requested: pods=1, used: pods=2,
//! limited: pods=2`). The arithmetic is [`crate::quota`]'s; the resource quota
//! controller recounts what deletes give back.
//!
//! # How charges are written
//! As kube-apiserver's quota evaluator does, a namespace's admissions wait in one
//! line, and whoever holds the namespace's turn charges every admission waiting, in
//! order, against the quotas as they stand, then writes each quota it changed once,
//! under the resourceVersion it read, before any of those objects is stored. So two
//! creates never both take the last unit, and a burst of creates (a ReplicaSet
//! scaling up) costs one quota write per batch, not one per pod. A conflict (another
//! replica's charge, the controller's recount) reads the quotas again and charges
//! again what is still to charge; a quota already written in the batch keeps its
//! charge. The batch runs in a task of its own, so a client that goes away mid-batch
//! leaves the others' charges whole. A dry run is checked and charges nothing.
//!
//! # One commit for a batch
//! A create may hand its own writes to the charge ([`Ride`]): then the batch's quota
//! writes and every charged create's writes go in one atomic commit. A create then
//! costs one commit instead of two in a row (the charge's, then its own), so a
//! namespace under quota takes creates as fast as one without; and a create that
//! fails takes its charge with it, which kube's two writes cannot. When that commit
//! fails (a name taken, the namespace or a quota changed meanwhile), the batch falls
//! back to the two steps: the quotas are charged alone, and each create commits its
//! own writes as before, with its own retries.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use tokio::sync::oneshot;

use super::{Api, WriteOptions};
use crate::error::ApiError;
use crate::quota::{self, Subject};
use crate::resource::Resource;
use crate::store::{Change, Precondition, WriteOp};

/// A create's own writes, built only when a quota charges it (a namespace without
/// quotas pays nothing for them), to commit with the batch's quota writes.
pub(super) type Ride<'a> = &'a mut (dyn FnMut() -> Result<Vec<WriteOp>, ApiError> + Send);

/// What came of a charge.
#[derive(Debug, Clone)]
pub(super) enum Charge {
    /// Charged, and the create's writes committed with the charge: their changes.
    Committed(Vec<Arc<Change>>),
    /// Charged (or nothing to charge): the create commits its own writes.
    Admitted,
}

/// How often a batch is charged again while other writes change the quotas under it.
const RETRIES: usize = 5;

/// The waiting admissions of each namespace with quotas.
#[derive(Default)]
pub(super) struct Turns(Mutex<HashMap<String, Arc<Line>>>);

impl Turns {
    fn of(&self, ns: &str) -> Arc<Line> {
        let mut lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(lines.entry(ns.to_owned()).or_default())
    }
}

/// One namespace's line: its turn, and the admissions waiting for a charge.
#[derive(Default)]
struct Line {
    turn: tokio::sync::Mutex<()>,
    waiting: Mutex<Vec<Waiting>>,
}

impl Line {
    fn take_waiting(&self) -> Vec<Waiting> {
        std::mem::take(&mut *self.waiting.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// An admission waiting for its charge.
struct Waiting {
    subject: Owned,
    /// Its store key when its name is its own: taken, it is charged nothing.
    key: Option<String>,
    resource: Resource,
    shown: String,
    /// The create's own writes, to commit with the charge.
    ride: Option<Vec<WriteOp>>,
    answer: oneshot::Sender<Result<Charge, ApiError>>,
}

impl Waiting {
    fn refused(self, why: &str) {
        let _ = self
            .answer
            .send(Err(forbidden(self.resource, &self.shown, why)));
    }
}

/// The 403 of a refused charge, as kube-apiserver's `NewForbidden` words it.
fn forbidden(resource: Resource, shown: &str, why: &str) -> ApiError {
    ApiError::Forbidden(format!(
        "{} \"{shown}\" is forbidden: {why}",
        resource.qualified()
    ))
}

/// What is charged, owned, for the batch that charges it.
enum Owned {
    Pod(Box<Pod>),
    Object(Resource),
}

impl Owned {
    fn of(subject: Subject<'_>) -> Self {
        match subject {
            Subject::Pod(p) => Self::Pod(Box::new(p.clone())),
            Subject::Object(r) => Self::Object(r),
        }
    }

    fn subject(&self) -> Subject<'_> {
        match self {
            Self::Pod(p) => Subject::Pod(p),
            Self::Object(r) => Subject::Object(*r),
        }
    }
}

impl Api {
    /// Charges `subject`, being created in `ns` as `resource` `shown` (its name, or its
    /// generateName), to the namespace's quotas; see the module doc. `key` is its store
    /// key when its name is its own (not generated): a create under a name that is
    /// taken charges nothing, for its 409 follows (kube charges it, and gives the
    /// charge back only at the controller's next full recount).
    ///
    /// `ride`, when given, builds the create's own writes; they are committed with the
    /// charge ([`Charge::Committed`]) when the batch's one commit succeeds.
    pub(super) async fn admit_quota(
        &self,
        ns: &str,
        (resource, shown, key): (Resource, &str, Option<&str>),
        subject: Subject<'_>,
        dry_run: bool,
        ride: Option<Ride<'_>>,
    ) -> Result<Charge, ApiError> {
        // Whether the namespace has quotas at all, without decoding them: the batch
        // that charges this create reads them as they stand then.
        let (listed, _) = self.list_raw(
            Resource::ResourceQuotas,
            Some(ns),
            &crate::selectors::Selectors::default(),
        );
        if listed.is_empty() || key.is_some_and(|k| self.get_value(k).is_some()) {
            return Ok(Charge::Admitted);
        }
        if dry_run {
            return quota::charge(&self.quotas_of(ns)?, subject, self.now())
                .map(|_| Charge::Admitted)
                .map_err(|why| forbidden(resource, shown, &why));
        }
        let ride = match ride {
            Some(build) => Some(build()?),
            None => None,
        };
        let (answer, mut answered) = oneshot::channel();
        let waiting = Waiting {
            subject: Owned::of(subject),
            key: key.map(str::to_owned),
            resource,
            shown: shown.to_owned(),
            ride,
            answer,
        };
        let line = self.inner.quota_turns.of(ns);
        line.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(waiting);
        let _turn = line.turn.lock().await;
        // A batch before this turn may have charged it already.
        if let Ok(answer) = answered.try_recv() {
            return answer;
        }
        let batch = line.take_waiting();
        let (api, namespace) = (self.clone(), ns.to_owned());
        let charging = tokio::spawn(async move { api.charge_batch(&namespace, batch).await });
        let _ = charging.await;
        answered.await.unwrap_or_else(|_| {
            Err(ApiError::Timeout(
                "the resource quota charge was interrupted".into(),
            ))
        })
    }

    /// The ResourceQuotas of `ns`.
    fn quotas_of(&self, ns: &str) -> Result<Vec<ResourceQuota>, ApiError> {
        let (items, _) = self.list_raw(
            Resource::ResourceQuotas,
            Some(ns),
            &crate::selectors::Selectors::default(),
        );
        items
            .iter()
            .map(|v| super::typed::<ResourceQuota>(v.as_ref()))
            .collect()
    }

    /// Charges `batch`, in order, to the quotas of `ns`, and answers each admission.
    async fn charge_batch(&self, ns: &str, mut batch: Vec<Waiting>) {
        // Quotas written by this batch: a retry leaves them as charged.
        let mut written: BTreeSet<String> = BTreeSet::new();
        for _ in 0..RETRIES {
            let quotas: Vec<ResourceQuota> = match self.quotas_of(ns) {
                Ok(q) => q,
                Err(e) => return answer_all(batch, &Err(e)),
            }
            .into_iter()
            .filter(|q| !written.contains(q.metadata.name.as_deref().unwrap_or_default()))
            .collect();
            let mut ledger = quota::Ledger::new(&quotas);
            let mut charged = Vec::new();
            for w in batch.drain(..) {
                if w.key
                    .as_deref()
                    .is_some_and(|k| self.get_value(k).is_some())
                {
                    let _ = w.answer.send(Ok(Charge::Admitted));
                    continue;
                }
                match ledger.charge(w.subject.subject(), self.now()) {
                    Err(why) => w.refused(&why),
                    Ok(_) => charged.push(w),
                }
            }
            // The charged amounts become quantities once per batch, not once per create.
            let mut state = quotas.clone();
            for (i, q) in state.iter_mut().enumerate() {
                if let Some(used) = ledger.used_of(i) {
                    q.status.get_or_insert_default().used = Some(used);
                }
            }
            if written.is_empty() && charged.iter().any(|w| w.ride.is_some()) {
                match self
                    .commit_with_charges(ns, &quotas, &state, &mut charged)
                    .await
                {
                    Ok(()) => return,
                    // Something the batch's writes rely on changed: the two steps.
                    Err(ApiError::Conflict { .. } | ApiError::AlreadyExists { .. }) => {}
                    Err(e) => return answer_all(charged, &Err(e)),
                }
            }
            let mut conflicted = false;
            for (read, new) in quotas.iter().zip(state) {
                if read.status == new.status {
                    continue;
                }
                let name = new.metadata.name.clone().unwrap_or_default();
                match self
                    .replace_status(ns, &name, new, WriteOptions::default(), None)
                    .await
                {
                    Ok(_) => {
                        written.insert(name);
                    }
                    Err(ApiError::Conflict { .. }) => {
                        conflicted = true;
                        break;
                    }
                    Err(e) => return answer_all(charged, &Err(e)),
                }
            }
            if !conflicted {
                return answer_all(charged, &Ok(Charge::Admitted));
            }
            batch = charged;
        }
        let e = ApiError::Timeout(
            "couldn't charge the resource quotas of the namespace due to conflicts".into(),
        );
        answer_all(batch, &Err(e));
    }
}

impl Api {
    /// Commits the charged quotas (`state`, read as `quotas`) with the writes of every
    /// create in `charged` that brought its own, in one atomic commit, and answers
    /// them all. On an error nothing is written and nobody is answered; the creates'
    /// writes are gone then, and each builds its own again.
    async fn commit_with_charges(
        &self,
        ns: &str,
        quotas: &[ResourceQuota],
        state: &[ResourceQuota],
        charged: &mut Vec<Waiting>,
    ) -> Result<(), ApiError> {
        let mut ops = Vec::new();
        for (read, new) in quotas.iter().zip(state) {
            if read.status == new.status {
                continue;
            }
            let name = new.metadata.name.as_deref().unwrap_or_default();
            let rv = new
                .metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| {
                    ApiError::Internal(format!("quota {name} has no resourceVersion"))
                })?;
            ops.push(WriteOp::Put {
                key: Resource::ResourceQuotas.key(ns, name),
                object: super::objects::to_value(new)?,
                precondition: Precondition::ResourceVersion(rv),
            });
        }
        // Taken, not copied (a pod's JSON is the bulk of the commit): after a failed
        // commit each create builds its writes again.
        let riding: Vec<Option<Vec<String>>> = charged
            .iter_mut()
            .map(|w| {
                let ride = w.ride.take()?;
                let keys = ride.iter().filter_map(put_key).collect();
                ops.extend(ride);
                Some(keys)
            })
            .collect();
        let changes = self.commit(ops).await?;
        for (w, keys) in charged.drain(..).zip(riding) {
            let answer = if let Some(keys) = keys {
                let mine = changes
                    .iter()
                    .filter(|c| keys.contains(&c.key))
                    .cloned()
                    .collect();
                Charge::Committed(mine)
            } else {
                Charge::Admitted
            };
            let _ = w.answer.send(Ok(answer));
        }
        Ok(())
    }
}

/// The key a write puts, if it puts one (a check puts nothing).
fn put_key(op: &WriteOp) -> Option<String> {
    match op {
        WriteOp::Put { key, .. } => Some(key.clone()),
        _ => None,
    }
}

fn answer_all(batch: Vec<Waiting>, answer: &Result<Charge, ApiError>) {
    for w in batch {
        let _ = w.answer.send(answer.clone());
    }
}

#[cfg(test)]
mod tests;
