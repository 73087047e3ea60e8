//! The cronjob controller's sync ([`crate::cronjob`]) and the TTL-after-finished
//! controller's ([`crate::ttl`]).
//!
//! A CronJob's tick is guarded by its Job's name: the create is create-if-absent, and
//! an `AlreadyExists` answer is read back and handed to [`cronjob::after_create`],
//! which adopts the Job if it is this CronJob's (made by a leader that died before
//! recording it) or drops the tick otherwise. Nothing here remembers a tick: a new
//! leader starts from the stored CronJob and Jobs.

use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiError;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Preconditions};

use super::Cx;
use super::queue::Key;
use crate::cronjob::{self, CreateAnswer};
use crate::ttl::{self, TtlDecision};
use crate::{Action, Event, Propagation, Status, controller_of};

/// The controllers' names on their events.
const COMPONENT: &str = "cronjob-controller";

/// Syncs the CronJob `key`; returns when to look again (its next slot).
pub(super) async fn sync(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let now = super::timestamp(cx.api.now());
    let Some(cached) = cx.caches.cronjobs.get(key) else {
        cx.cronjobs_written.forget(key);
        return Ok(None);
    };
    let cj = cx.cronjobs_written.newest(key, cached);
    let cached_jobs = cx.caches.jobs.in_namespace(&key.0);
    let mut jobs: Vec<Job> = Vec::new();
    {
        let known: Vec<&Job> = cached_jobs.iter().map(AsRef::as_ref).collect();
        // A Job the status lists but the cache lacks is read live before it is
        // called missing: the Jobs' watch may simply be behind.
        for r in cronjob::unconfirmed_active(&cj, &known) {
            let Some(name) = r.name.as_deref() else {
                continue;
            };
            match cx.api.get_job(&key.0, name) {
                Ok(j) if j.metadata.uid == r.uid => jobs.push(j),
                Ok(_) | Err(ApiError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
    let mut all: Vec<&Job> = cached_jobs.iter().map(AsRef::as_ref).collect();
    all.extend(jobs.iter());
    let planned = match cronjob::reconcile(&cj, &all, now, cronjob::SCHEDULED_JOB_FLOOR) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(namespace = %key.0, cronjob = %key.1, error = %e, "cannot reconcile");
            return Ok(None);
        }
    };
    let mut actions = planned.actions.into_iter();
    while let Some(action) = actions.next() {
        match action {
            Action::CreateJob { job } => {
                let name = job.metadata.name.clone().unwrap_or_default();
                let answer = match cx.api.create_job(&key.0, job).await {
                    Ok(created) => Ok(created),
                    Err(ApiError::AlreadyExists { .. }) => Err(cx.api.get_job(&key.0, &name)?),
                    Err(e) => {
                        let event =
                            Event::warning("FailedCreate", format!("Error creating job: {e}"));
                        super::events::record(&cx.api, COMPONENT, cj.as_ref(), &event).await;
                        return Err(e);
                    }
                };
                let rest: Vec<Action> = actions.collect();
                let rest = match &answer {
                    Ok(created) => cronjob::after_create(&cj, CreateAnswer::Created(created), rest),
                    Err(existing) => {
                        tracing::debug!(namespace = %key.0, cronjob = %key.1, job = %name, "the tick's Job exists already");
                        cronjob::after_create(&cj, CreateAnswer::AlreadyExists(existing), rest)
                    }
                };
                actions = rest.into_iter();
            }
            Action::DeleteJob {
                name,
                uid,
                propagation,
            } => {
                if let Err(e) = delete_job(cx, &key.0, &name, &uid, propagation).await {
                    let event = Event::warning("FailedDelete", format!("Deleted job: {e}"));
                    super::events::record(&cx.api, COMPONENT, cj.as_ref(), &event).await;
                    return Err(e);
                }
            }
            Action::WriteStatus(Status::CronJob(status)) => {
                let mut new = (*cj).clone();
                new.status = Some(status);
                let written = cx.api.replace_cronjob_status(&key.0, &key.1, new).await?;
                cx.cronjobs_written.store(key.clone(), written);
            }
            Action::Event(e) => {
                super::events::record(&cx.api, COMPONENT, cj.as_ref(), &e).await;
            }
            other => {
                tracing::warn!(namespace = %key.0, cronjob = %key.1, action = ?other, "not a cronjob controller's action");
            }
        }
    }
    Ok(planned.requeue_after)
}

/// DELETE a Job with `propagation`, under its uid when known; gone already is done.
async fn delete_job(
    cx: &Cx,
    ns: &str,
    name: &str,
    uid: &str,
    propagation: Propagation,
) -> Result<(), ApiError> {
    let opts = DeleteOptions {
        propagation_policy: Some(propagation.as_str().into()),
        preconditions: (!uid.is_empty()).then(|| Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteOptions::default()
    };
    match cx.api.delete_job_with(ns, name, &opts).await {
        Ok(()) | Err(ApiError::NotFound { .. }) => Ok(()),
        // The precondition failed: a Job made anew under the name, not this one.
        Err(ApiError::Conflict { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The TTL controller's sync of the Job `key`.
pub(super) async fn sync_ttl(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let now = super::timestamp(cx.api.now());
    let Some(job) = cx.caches.jobs.get(key) else {
        return Ok(None);
    };
    let owner = |job: &Job| -> Option<Arc<CronJob>> {
        let r = controller_of(&job.metadata).filter(|r| r.kind == "CronJob")?;
        cx.caches
            .cronjobs
            .get(&(key.0.clone(), r.name.clone()))
            .filter(|c| c.metadata.uid.as_deref() == Some(r.uid.as_str()))
    };
    let decide = |job: &Job| {
        ttl::reconcile(
            job,
            owner(job).as_deref(),
            now,
            cronjob::SCHEDULED_JOB_FLOOR,
        )
    };
    match decide(&job) {
        TtlDecision::Keep => Ok(None),
        TtlDecision::RequeueAfter(d) => Ok(Some(d)),
        TtlDecision::NoFinishTime(why) => Err(ApiError::Internal(why)),
        TtlDecision::Delete { .. } => {
            // The TTL may have changed since the cache saw the Job: decide again on
            // the stored one, as KCM does.
            let live = match cx.api.get_job(&key.0, &key.1) {
                Ok(j) => j,
                Err(ApiError::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            let decision = decide(&live);
            match decision.action() {
                Some(Action::DeleteJob {
                    name,
                    uid,
                    propagation,
                }) => {
                    tracing::debug!(namespace = %key.0, job = %name, "ttlSecondsAfterFinished passed: deleting");
                    delete_job(cx, &key.0, &name, &uid, propagation).await?;
                    Ok(None)
                }
                _ => match decision {
                    TtlDecision::RequeueAfter(d) => Ok(Some(d)),
                    _ => Ok(None),
                },
            }
        }
    }
}

/// A Job changed: its CronJob (if a CronJob controls it) and the TTL controller look.
pub(super) fn job_changed(cx: &Cx, old: Option<&Job>, new: Option<&Job>) {
    for job in [old, new].into_iter().flatten() {
        if let Some(r) = controller_of(&job.metadata).filter(|r| r.kind == "CronJob") {
            let ns = job.metadata.namespace.clone().unwrap_or_default();
            cx.cronjobs.add((ns, r.name.clone()));
        }
    }
    if let Some(job) = new
        && job
            .spec
            .as_ref()
            .and_then(|s| s.ttl_seconds_after_finished)
            .is_some()
        && crate::job::is_finished(job)
    {
        cx.job_ttl.add(super::cache::key_of(&job.metadata));
    }
}
