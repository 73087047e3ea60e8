//! A CronJob `ns/backup` and a small world that performs a sync's actions
//! as the runner would (stopping nowhere: every call succeeds unless a
//! test says otherwise), with `now` moved by hand.

mod history;
mod schedule;
mod sync;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{
    CronJob, CronJobSpec, CronJobStatus, Job, JobCondition, JobSpec, JobStatus, JobTemplateSpec,
};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;

use super::*;
use crate::action::EventType;

const FLOOR: Duration = SCHEDULED_JOB_FLOOR;

fn ts(s: &str) -> Timestamp {
    s.parse().expect("test timestamp")
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// CronJob `ns/backup` on `schedule`, created 2024-06-01T11:00:00Z, with the
/// API's defaults (Allow, limits 3 and 1).
fn cronjob(schedule: &str) -> CronJob {
    CronJob {
        metadata: ObjectMeta {
            name: Some("backup".into()),
            namespace: Some("ns".into()),
            uid: Some("cj-uid".into()),
            creation_timestamp: Some(Time(ts("2024-06-01T11:00:00Z"))),
            resource_version: Some("1".into()),
            ..Default::default()
        },
        spec: Some(CronJobSpec {
            schedule: schedule.into(),
            concurrency_policy: Some("Allow".into()),
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(1),
            suspend: Some(false),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(&[("app", "backup")])),
                    annotations: Some(labels(&[("team", "ops")])),
                    ..Default::default()
                }),
                spec: Some(JobSpec {
                    template: PodTemplateSpec {
                        metadata: None,
                        spec: Some(PodSpec {
                            containers: vec![Container {
                                name: "dump".into(),
                                image: Some("busybox".into()),
                                ..Default::default()
                            }],
                            restart_policy: Some("Never".into()),
                            ..Default::default()
                        }),
                    },
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

fn spec(cj: &mut CronJob) -> &mut CronJobSpec {
    cj.spec.get_or_insert_with(Default::default)
}

/// The API as the tests see it: the CronJob, its Jobs, and what was done.
struct World {
    cj: CronJob,
    jobs: Vec<Job>,
    /// Successful POSTs per Job name, over the whole test.
    creates: BTreeMap<String, u32>,
    deleted: Vec<String>,
    events: Vec<Event>,
    next_uid: u32,
}

impl World {
    fn new(cj: CronJob) -> Self {
        World {
            cj,
            jobs: Vec::new(),
            creates: BTreeMap::new(),
            deleted: Vec::new(),
            events: Vec::new(),
            next_uid: 0,
        }
    }

    fn plan(&self, now: Timestamp) -> Reconciled {
        let jobs: Vec<&Job> = self.jobs.iter().collect();
        reconcile(&self.cj, &jobs, now, FLOOR).expect("reconcile")
    }

    /// One sync at `now`, its actions performed; returns what it planned.
    fn sync(&mut self, now: Timestamp) -> Reconciled {
        let planned = self.plan(now);
        self.perform(planned.actions.clone(), now);
        planned
    }

    /// [`World::sync`], when only the outcome in the world matters.
    fn tick(&mut self, now: Timestamp) {
        let _ = self.sync(now);
    }

    fn perform(&mut self, actions: Vec<Action>, now: Timestamp) {
        let cj = self.cj.clone();
        let mut actions = actions.into_iter();
        while let Some(action) = actions.next() {
            match action {
                Action::CreateJob { job } => {
                    let name = job.metadata.name.clone().unwrap_or_default();
                    let answer = if let Some(existing) = self.job(&name).cloned() {
                        after_create(
                            &cj,
                            CreateAnswer::AlreadyExists(&existing),
                            actions.collect(),
                        )
                    } else {
                        let created = self.store(job, now);
                        *self.creates.entry(name).or_default() += 1;
                        after_create(&cj, CreateAnswer::Created(&created), actions.collect())
                    };
                    actions = answer.into_iter();
                }
                Action::DeleteJob { name, uid, .. } => {
                    self.jobs.retain(|j| {
                        !(j.metadata.name.as_deref() == Some(name.as_str())
                            && j.metadata.uid.as_deref() == Some(uid.as_str()))
                    });
                    self.deleted.push(name);
                }
                Action::WriteStatus(Status::CronJob(s)) => self.cj.status = Some(s),
                Action::Event(e) => self.events.push(e),
                other => panic!("not a cronjob action: {other:?}"),
            }
        }
    }

    /// The API's create: uid, resourceVersion, creation time.
    fn store(&mut self, mut job: Job, now: Timestamp) -> Job {
        self.next_uid += 1;
        job.metadata.uid = Some(format!("job-uid-{}", self.next_uid));
        job.metadata.resource_version = Some(format!("{}", self.next_uid));
        job.metadata.creation_timestamp = Some(Time(now));
        self.jobs.push(job.clone());
        job
    }

    fn job(&self, name: &str) -> Option<&Job> {
        self.jobs
            .iter()
            .find(|j| j.metadata.name.as_deref() == Some(name))
    }

    /// The Job `name` started at `start` and finished (`Complete` or
    /// `Failed`) at `end`.
    fn finish(&mut self, name: &str, kind: &str, start: &str, end: &str) {
        let job = self
            .jobs
            .iter_mut()
            .find(|j| j.metadata.name.as_deref() == Some(name))
            .expect("job to finish");
        finish(job, kind, start, end);
    }

    fn status(&self) -> CronJobStatus {
        self.cj.status.clone().unwrap_or_default()
    }

    fn active_names(&self) -> Vec<String> {
        self.status()
            .active
            .iter()
            .flatten()
            .filter_map(|r| r.name.clone())
            .collect()
    }

    fn job_names(&self) -> Vec<String> {
        self.jobs
            .iter()
            .filter_map(|j| j.metadata.name.clone())
            .collect()
    }
}

fn finish(job: &mut Job, kind: &str, start: &str, end: &str) {
    let status = job.status.get_or_insert_with(JobStatus::default);
    status.start_time = Some(Time(ts(start)));
    if kind == "Complete" {
        status.completion_time = Some(Time(ts(end)));
    }
    status.conditions = Some(vec![JobCondition {
        type_: kind.into(),
        status: "True".into(),
        last_transition_time: Some(Time(ts(end))),
        ..Default::default()
    }]);
}

/// The Jobs a sync creates, by name.
fn created(r: &Reconciled) -> Vec<String> {
    r.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateJob { job } => job.metadata.name.clone(),
            _ => None,
        })
        .collect()
}

/// The Jobs a sync deletes, by name.
fn deletes(r: &Reconciled) -> Vec<String> {
    r.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeleteJob { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// `(reason, message)` of a sync's events, in order.
fn events(r: &Reconciled) -> Vec<(String, String)> {
    r.events()
        .map(|e| (e.reason.clone(), e.message.clone()))
        .collect()
}

fn reasons(r: &Reconciled) -> Vec<String> {
    r.events().map(|e| e.reason.clone()).collect()
}

fn requeue(r: &Reconciled) -> Option<Duration> {
    r.requeue_after
}

/// A requeue for `at` seen from `now`, with KCM's 100 ms.
fn until_slot(now: &str, at: &str) -> Option<Duration> {
    Some(ts(at).duration_since(ts(now)).unsigned_abs() + NEXT_SCHEDULE_DELTA)
}
