//! Performing a launch's effects off the loop: the bindings of an
//! [`Effect::Bind`] and the calls of an [`Effect::Accept`], each batch on a
//! task of its own, reported back on the runner's launch channel. What they mean is
//! the core's to decide (`core::launch`); this only writes, sends and
//! reports.
//!
//! Binding waits for the store's group commit and an ACCEPT for the
//! master; awaited inside the loop, a round of 2,048 pods held up every
//! status update and the next round's placement for a quarter of a second.
//!
//! [`Effect::Bind`]: crate::core::Effect::Bind
//! [`Effect::Accept`]: crate::core::Effect::Accept

use apiserver::{Api, ApiError};
use futures::future::join_all;
use mesos::client::ClientError;
use mesos::proto::TaskId;
use tokio::sync::mpsc;

use crate::core::{Accept, AcceptOutcome, Bind, BoundPod, Launch};
use crate::driver::{CallError, MesosHandle};

/// Binds every pod concurrently and reports all outcomes at once. The
/// values a failed binding carried are written on their own first: other
/// pods on that agent may launch with them.
pub(super) fn spawn_binds(api: Api, reports: mpsc::UnboundedSender<Launch>, binds: Vec<Bind>) {
    let ids: Vec<TaskId> = binds.iter().map(|b| b.task.clone()).collect();
    let reporter = reports.clone();
    let work = tokio::spawn(async move {
        let results = join_all(binds.iter().map(|b| bind_one(&api, b))).await;
        let orphaned = binds
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_err())
            .flat_map(|(b, _)| b.binding.meta.iter().cloned());
        join_all(orphaned.map(|(key, value)| {
            let api = api.clone();
            async move {
                if let Err(e) = api.put_meta(&key, value).await {
                    tracing::warn!(error = %e, "could not store an executor info");
                }
            }
        }))
        .await;
        let report = binds
            .into_iter()
            .zip(results)
            .map(|(b, r)| (b.task, r.map_err(|e| e.to_string())))
            .collect();
        let _ = reporter.send(Launch::Bound(report));
    });
    // A bug that panicked the task must not hold its pods for ever: they
    // are reported unbound, and wait again as the store has them.
    guard(work, reports, move || {
        let failed = ids
            .into_iter()
            .map(|id| (id, Err("the binding task failed".to_owned())))
            .collect();
        Launch::Bound(failed)
    });
}

async fn bind_one(api: &Api, b: &Bind) -> Result<BoundPod, ApiError> {
    let pod = api
        .bind_pod_raw(&b.key.namespace, &b.key.name, &b.binding)
        .await?;
    let json = serde_json::to_vec(pod.as_ref())
        .map_err(|e| ApiError::Internal(format!("cannot encode a bound pod: {e}")))?;
    Ok(BoundPod {
        json,
        rv: apiserver::store::object_rv(&pod),
    })
}

/// Sends every ACCEPT concurrently and reports all answers at once.
pub(super) fn spawn_accepts(
    mesos: MesosHandle,
    reports: mpsc::UnboundedSender<Launch>,
    accepts: Vec<Accept>,
) {
    let sent: Vec<_> = accepts
        .iter()
        .map(|a| (a.offer.clone(), a.tasks.clone()))
        .collect();
    let reporter = reports.clone();
    let work = tokio::spawn(async move {
        let results = join_all(accepts.into_iter().map(|a| {
            let mesos = mesos.clone();
            async move {
                let outcome = outcome(mesos.call(a.call).await);
                (a.offer, a.tasks, outcome)
            }
        }))
        .await;
        let _ = reporter.send(Launch::Accepted(results));
    });
    // A panicked task may have sent any of its calls: the master is asked.
    guard(work, reports, move || {
        let unknown = sent
            .into_iter()
            .map(|(offer, tasks)| {
                let why = "the ACCEPT task failed".to_owned();
                (offer, tasks, AcceptOutcome::Unknown(why))
            })
            .collect();
        Launch::Accepted(unknown)
    });
}

/// What an ACCEPT's result says about its tasks. An answer with an error
/// status, or a call that never left (no subscription, no connection),
/// launched nothing; a connection that broke once the call was on its way
/// leaves it unknown.
fn outcome(result: Result<(), CallError>) -> AcceptOutcome {
    let e = match result {
        Ok(()) => return AcceptOutcome::Taken,
        Err(e) => e,
    };
    let launched_nothing = match &e {
        CallError::NotSubscribed => true,
        CallError::Client(ClientError::Http(http)) => http.is_connect(),
        CallError::Client(ClientError::Redirect(_) | ClientError::InvalidEndpoint(_)) => true,
        CallError::Client(client) => client.status().is_some(),
    };
    if launched_nothing {
        AcceptOutcome::Refused(e.to_string())
    } else {
        AcceptOutcome::Unknown(e.to_string())
    }
}

/// Reports `fallback` if `work` panicked, so its pods are never stuck.
fn guard(
    work: tokio::task::JoinHandle<()>,
    reports: mpsc::UnboundedSender<Launch>,
    fallback: impl FnOnce() -> Launch + Send + 'static,
) {
    tokio::spawn(async move {
        if let Err(e) = work.await
            && e.is_panic()
        {
            tracing::error!("a launch task failed; its pods are reported back");
            let _ = reports.send(fallback());
        }
    });
}
