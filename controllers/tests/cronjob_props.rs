//! The CronJob contract as a property, over a few simulated hours: whatever
//! the order of syncs, Job completions, retention (the history limits and
//! the TTL), crashes between a sync's calls, and views that lag the store,
//! **no tick ever gets a second Job** (successful POSTs per derived name,
//! counted over the whole run, deletions included) and **no tick's Job is
//! deleted by retention inside the floor**.
//!
//! The store is the API: creates are create-if-absent, a status write
//! carries the resourceVersion it was read at, deletes carry the uid. What
//! a replica acts on:
//! - a sync sees the store now; or the CronJob as it last wrote it with a
//!   Jobs cache up to five minutes behind (plus the live reads of the
//!   `status.active` Jobs it lacks, as the runner makes them); or both
//!   caches up to five minutes behind (a replica whose watches stalled,
//!   the case the floor exists for);
//! - a sync may stall between its decision and its calls (a GC pause, a
//!   slow API) for up to five minutes: its calls land just before the
//!   next sync of the CronJob, which the work queue never runs alongside
//!   it, or never, if the replica restarts (a new term; the lease fence
//!   refuses a replaced leader's writes);
//! - the TTL controller decides on a Job and its CronJob as seen now, from
//!   a lagging cache, or up to five minutes before its delete lands.
//!
//! Five minutes is half the floor: the floor is what keeps a tick's Job
//! while a stale view may still act on its tick.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use controllers::cronjob::{
    CreateAnswer, SCHEDULED_JOB_FLOOR, SCHEDULED_TIMESTAMP_ANNOTATION, after_create, reconcile,
    unconfirmed_active,
};
use controllers::ttl::{self, TtlDecision};
use controllers::{Action, Status};
use k8s_openapi::api::batch::v1::{
    CronJob, CronJobSpec, Job, JobCondition, JobSpec, JobStatus, JobTemplateSpec,
};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

const FLOOR: Duration = SCHEDULED_JOB_FLOOR;
/// How far back a view may be (less than the floor, which is the point).
const MAX_LAG_SECS: u32 = 300;

fn start() -> Timestamp {
    "2024-06-01T12:00:00Z".parse().expect("start")
}

fn plus(t: Timestamp, millis: i64) -> Timestamp {
    t.checked_add(SignedDuration::from_millis(millis))
        .expect("in range")
}

#[derive(Clone, Debug)]
struct Setup {
    schedule: &'static str,
    policy: &'static str,
    successful_limit: Option<i32>,
    failed_limit: Option<i32>,
    ttl: Option<i32>,
    created_secs_before: i64,
}

#[derive(Clone, Copy, Debug)]
enum View {
    Fresh,
    /// Decided this many seconds ago (TTL only: a CronJob sync that stalls
    /// is [`Op::Sync`]'s `stall`).
    Paused(u32),
    LaggingJobs(u32),
    /// The CronJob and the Jobs as they were this many seconds ago, acted
    /// on now.
    Stale(u32),
}

#[derive(Clone, Debug)]
enum Op {
    /// A sync; `crash_after`: the replica dies after that many calls;
    /// `stall`: its calls land only before the next sync.
    Sync {
        view: View,
        crash_after: Option<u8>,
        stall: bool,
    },
    /// A running Job finishes.
    Finish { pick: usize, failed: bool },
    /// The TTL controller looks at a Job.
    Ttl { pick: usize, view: View },
    /// A new term: a stalled sync's calls are lost; the rest is the store.
    Restart,
    /// The controllers are down this many seconds (time passes, nothing
    /// else).
    Outage(i64),
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        prop::sample::select(vec![
            "* * * * *",
            "* * * * *",
            "* * * * *",
            "*/7 * * * *",
            "0 * * * *",
        ]),
        prop::sample::select(vec!["Allow", "Forbid", "Replace"]),
        prop::sample::select(vec![None, Some(0), Some(1), Some(3)]),
        prop::sample::select(vec![None, Some(0), Some(1)]),
        prop::sample::select(vec![None, Some(0), Some(30), Some(1200)]),
        0..7200i64,
    )
        .prop_map(
            |(schedule, policy, successful_limit, failed_limit, ttl, created_secs_before)| Setup {
                schedule,
                policy,
                successful_limit,
                failed_limit,
                ttl,
                created_secs_before,
            },
        )
}

fn sync_view() -> impl Strategy<Value = View> {
    prop_oneof![
        4 => Just(View::Fresh),
        1 => (1..=MAX_LAG_SECS).prop_map(View::LaggingJobs),
        1 => (1..=MAX_LAG_SECS).prop_map(View::Stale),
    ]
}

fn ttl_view() -> impl Strategy<Value = View> {
    prop_oneof![
        2 => Just(View::Fresh),
        1 => (1..=MAX_LAG_SECS).prop_map(View::Paused),
        1 => (1..=MAX_LAG_SECS).prop_map(View::LaggingJobs),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (sync_view(), prop::option::weighted(0.2, 0..6u8), prop::bool::weighted(0.2))
            .prop_map(|(view, crash_after, stall)| Op::Sync { view, crash_after, stall }),
        4 => (any::<usize>(), prop::bool::weighted(0.3))
            .prop_map(|(pick, failed)| Op::Finish { pick, failed }),
        3 => (any::<usize>(), ttl_view()).prop_map(|(pick, view)| Op::Ttl { pick, view }),
        1 => Just(Op::Restart),
        1 => (300..2400i64).prop_map(Op::Outage),
    ]
}

/// Steps: a time advance (ms, up to 90 s) and what happens then.
fn steps() -> impl Strategy<Value = Vec<(i64, Op)>> {
    prop::collection::vec((0..90_000i64, op()), 150..450)
}

fn cronjob(s: &Setup) -> CronJob {
    CronJob {
        metadata: ObjectMeta {
            name: Some("tick".into()),
            namespace: Some("ns".into()),
            uid: Some("cj-uid".into()),
            resource_version: Some("1".into()),
            creation_timestamp: Some(Time(plus(start(), -s.created_secs_before * 1000))),
            ..Default::default()
        },
        spec: Some(CronJobSpec {
            schedule: s.schedule.into(),
            concurrency_policy: Some(s.policy.into()),
            successful_jobs_history_limit: s.successful_limit,
            failed_jobs_history_limit: s.failed_limit,
            job_template: JobTemplateSpec {
                metadata: None,
                spec: Some(JobSpec {
                    ttl_seconds_after_finished: s.ttl,
                    template: PodTemplateSpec {
                        metadata: None,
                        spec: Some(PodSpec {
                            containers: vec![Container {
                                name: "c".into(),
                                ..Default::default()
                            }],
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

fn finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

fn name(job: &Job) -> &str {
    job.metadata.name.as_deref().unwrap_or_default()
}

fn uid(job: &Job) -> &str {
    job.metadata.uid.as_deref().unwrap_or_default()
}

#[derive(Clone)]
struct Snapshot {
    at: Timestamp,
    cj: CronJob,
    jobs: Vec<Job>,
}

struct Sim {
    now: Timestamp,
    cj: CronJob,
    jobs: Vec<Job>,
    creates: BTreeMap<String, u32>,
    retention_deletes: usize,
    next: u64,
    past: VecDeque<Snapshot>,
    /// A stalled sync: what it saw, and the calls it has yet to make.
    stalled: Option<(Snapshot, Vec<Action>, Option<u8>)>,
}

impl Sim {
    fn new(s: &Setup) -> Self {
        let cj = cronjob(s);
        Sim {
            now: start(),
            past: VecDeque::from([Snapshot {
                at: start(),
                cj: cj.clone(),
                jobs: Vec::new(),
            }]),
            cj,
            jobs: Vec::new(),
            creates: BTreeMap::new(),
            retention_deletes: 0,
            next: 1,
            stalled: None,
        }
    }

    fn record(&mut self) {
        self.past.push_back(Snapshot {
            at: self.now,
            cj: self.cj.clone(),
            jobs: self.jobs.clone(),
        });
        let horizon = plus(self.now, -i64::from(MAX_LAG_SECS + 120) * 1000);
        while self.past.len() > 1 && self.past.get(1).is_some_and(|s| s.at <= horizon) {
            self.past.pop_front();
        }
    }

    /// The latest state at least `secs` old (or the oldest kept).
    fn back(&self, secs: u32) -> Snapshot {
        let at = plus(self.now, -i64::from(secs) * 1000);
        self.past
            .iter()
            .rev()
            .find(|s| s.at <= at)
            .or(self.past.front())
            .cloned()
            .expect("a snapshot")
    }

    fn fresh(&self) -> Snapshot {
        Snapshot {
            at: self.now,
            cj: self.cj.clone(),
            jobs: self.jobs.clone(),
        }
    }

    /// What a replica acts on, and its `now`.
    fn view(&self, view: View) -> Snapshot {
        match view {
            View::Fresh => self.fresh(),
            View::Paused(secs) => self.back(secs),
            View::Stale(secs) => Snapshot {
                at: self.now,
                ..self.back(secs)
            },
            View::LaggingJobs(secs) => {
                let mut v = self.back(secs);
                v.cj = self.cj.clone();
                v.at = self.now;
                // The runner's live reads of the active Jobs its cache lacks.
                let cached: Vec<&Job> = v.jobs.iter().collect();
                let live: Vec<Job> = unconfirmed_active(&v.cj, &cached)
                    .into_iter()
                    .filter_map(|r| {
                        self.jobs
                            .iter()
                            .find(|j| j.metadata.uid == r.uid && r.uid.is_some())
                            .cloned()
                    })
                    .collect();
                v.jobs.extend(live);
                v
            }
        }
    }

    fn sync(
        &mut self,
        view: View,
        crash_after: Option<u8>,
        stall: bool,
    ) -> Result<(), TestCaseError> {
        // The work queue runs one sync of a key at a time: a stalled one
        // finishes first.
        if let Some((v, actions, crash_after)) = self.stalled.take() {
            self.perform(&v, actions, crash_after)?;
        }
        let v = self.view(view);
        let jobs: Vec<&Job> = v.jobs.iter().collect();
        let planned = reconcile(&v.cj, &jobs, v.at, FLOOR).expect("reconcile never fails");
        if stall {
            self.stalled = Some((v, planned.actions, crash_after));
            return Ok(());
        }
        self.perform(&v, planned.actions, crash_after)
    }

    /// The runner's loop over a sync's calls, against the store now.
    fn perform(
        &mut self,
        v: &Snapshot,
        actions: Vec<Action>,
        crash_after: Option<u8>,
    ) -> Result<(), TestCaseError> {
        let mut budget = crash_after.map_or(usize::MAX, usize::from);
        let mut actions = actions.into_iter();
        while let Some(action) = actions.next() {
            if budget == 0 {
                break;
            }
            budget -= 1;
            match action {
                Action::CreateJob { job } => {
                    let rest: Vec<Action> = actions.collect();
                    let adjusted = if let Some(existing) =
                        self.jobs.iter().find(|j| name(j) == name(&job)).cloned()
                    {
                        after_create(&v.cj, CreateAnswer::AlreadyExists(&existing), rest)
                    } else {
                        let created = self.create(job);
                        let n = self.creates.entry(name(&created).to_owned()).or_default();
                        *n += 1;
                        prop_assert_eq!(*n, 1, "a second Job for tick {}", name(&created));
                        after_create(&v.cj, CreateAnswer::Created(&created), rest)
                    };
                    actions = adjusted.into_iter();
                }
                Action::DeleteJob {
                    name: n, uid: u, ..
                } => {
                    let Some(i) = self
                        .jobs
                        .iter()
                        .position(|j| name(j) == n && (u.is_empty() || uid(j) == u))
                    else {
                        continue; // NotFound or a failed precondition: gone already
                    };
                    let job = self.jobs.remove(i);
                    // Retention deletes what its view saw finished; Replace
                    // deletes what it saw running.
                    let seen = v.jobs.iter().find(|j| uid(j) == uid(&job));
                    if seen.is_some_and(finished) {
                        self.check_floor(&job)?;
                    }
                }
                Action::WriteStatus(Status::CronJob(status)) => {
                    if v.cj.metadata.resource_version != self.cj.metadata.resource_version {
                        break; // Conflict: the sync fails here.
                    }
                    self.cj.status = Some(status);
                    self.next += 1;
                    self.cj.metadata.resource_version = Some(self.next.to_string());
                }
                Action::Event(_) => {}
                other => prop_assert!(false, "not a CronJob action: {:?}", other),
            }
        }
        Ok(())
    }

    fn ttl(&mut self, pick: usize, view: View) -> Result<(), TestCaseError> {
        let v = self.view(view);
        if v.jobs.is_empty() {
            return Ok(());
        }
        let job = &v.jobs[pick % v.jobs.len()];
        let decision = ttl::reconcile(job, Some(&v.cj), v.at, FLOOR);
        if let TtlDecision::Delete { name: n, uid: u } = decision
            && let Some(i) = self.jobs.iter().position(|j| name(j) == n && uid(j) == u)
        {
            let gone = self.jobs.remove(i);
            self.check_floor(&gone)?;
        }
        Ok(())
    }

    fn finish(&mut self, pick: usize, failed: bool) {
        let now = self.now;
        let running: Vec<usize> = (0..self.jobs.len())
            .filter(|i| !finished(&self.jobs[*i]))
            .collect();
        if running.is_empty() {
            return;
        }
        let job = &mut self.jobs[running[pick % running.len()]];
        let status = job.status.get_or_insert_with(JobStatus::default);
        status.start_time = job.metadata.creation_timestamp.clone();
        let kind = if failed { "Failed" } else { "Complete" };
        if !failed {
            status.completion_time = Some(Time(now));
        }
        status.conditions = Some(vec![JobCondition {
            type_: kind.into(),
            status: "True".into(),
            last_transition_time: Some(Time(now)),
            ..Default::default()
        }]);
    }

    fn create(&mut self, mut job: Job) -> Job {
        self.next += 1;
        job.metadata.uid = Some(format!("uid-{}", self.next));
        job.metadata.resource_version = Some(self.next.to_string());
        job.metadata.creation_timestamp = Some(Time(self.now));
        self.jobs.push(job.clone());
        job
    }

    /// A tick's Job deleted by retention: not inside the floor of its slot,
    /// nor of its creation.
    fn check_floor(&mut self, job: &Job) -> Result<(), TestCaseError> {
        self.retention_deletes += 1;
        let Some(slot) = job
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SCHEDULED_TIMESTAMP_ANNOTATION))
        else {
            return Ok(());
        };
        let slot: Timestamp = slot.parse().expect("the controller writes RFC 3339");
        let created = job.metadata.creation_timestamp.as_ref().expect("stored").0;
        let floor = SignedDuration::try_from(FLOOR).expect("floor");
        prop_assert!(
            self.now.duration_since(slot) >= floor && self.now.duration_since(created) >= floor,
            "{} (slot {}, created {}) deleted at {}, inside the floor",
            name(job),
            slot,
            created,
            self.now
        );
        Ok(())
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn no_tick_runs_twice_and_retention_never_deletes_inside_the_floor(
        s in setup(),
        steps in steps(),
    ) {
        let mut sim = Sim::new(&s);
        for (advance, op) in steps {
            sim.now = plus(sim.now, advance);
            match op {
                Op::Sync { view, crash_after, stall } => sim.sync(view, crash_after, stall)?,
                Op::Finish { pick, failed } => sim.finish(pick, failed),
                Op::Ttl { pick, view } => sim.ttl(pick, view)?,
                Op::Restart => sim.stalled = None,
                Op::Outage(secs) => {
                    sim.stalled = None;
                    sim.now = plus(sim.now, secs * 1000);
                }
            }
            sim.record();
        }
        // The world did run: ticks were created, and with a limit or a TTL
        // some were retired.
        if s.schedule == "* * * * *" {
            prop_assert!(!sim.creates.is_empty(), "no tick ever ran");
        }
        prop_assert!(sim.creates.values().all(|n| *n == 1));
    }
}

#[test]
fn the_simulation_retires_jobs_when_limits_allow() {
    // A deterministic run to show the property is not vacuous: an
    // every-minute CronJob with limits of 0 and quick Jobs retires its ticks
    // once the floor lets it, and never creates one twice.
    let s = Setup {
        schedule: "* * * * *",
        policy: "Allow",
        successful_limit: Some(0),
        failed_limit: Some(0),
        ttl: None,
        created_secs_before: 30,
    };
    let mut sim = Sim::new(&s);
    for i in 0..(3 * 60 * 4) {
        sim.now = plus(sim.now, 15_000);
        sim.sync(View::Fresh, None, false).expect("sync");
        sim.finish(i, i % 5 == 0);
        sim.record();
    }
    assert!(sim.creates.len() >= 170, "{}", sim.creates.len());
    assert!(sim.retention_deletes >= 150, "{}", sim.retention_deletes);
    // Only the last ten minutes' ticks remain.
    assert!(sim.jobs.len() <= 12, "{}", sim.jobs.len());
}

#[test]
fn a_crash_before_the_status_write_then_an_outage_does_not_run_the_tick_twice() {
    // The path the recorded-tick guard exists for: an hourly CronJob's
    // 12:00 Job is created, the replica dies before the status write, the
    // Job finishes, and nobody syncs the CronJob until past the floor. The
    // TTL controller comes first: the Job is past its TTL and its floor,
    // but the CronJob's status still has 12:00 to run.
    let s = Setup {
        schedule: "0 * * * *",
        policy: "Allow",
        successful_limit: Some(3),
        failed_limit: Some(1),
        ttl: Some(0),
        created_secs_before: 600,
    };
    let mut sim = Sim::new(&s);
    sim.now = plus(start(), 1_000);
    sim.sync(View::Fresh, Some(1), false)
        .expect("the create lands");
    assert_eq!(sim.jobs.len(), 1);
    assert!(sim.cj.status.is_none(), "the crash lost the status write");
    sim.now = plus(sim.now, 5_000);
    sim.finish(0, false);
    sim.record();
    sim.now = plus(sim.now, 20 * 60 * 1000);
    sim.ttl(0, View::Fresh).expect("ttl");
    assert_eq!(sim.jobs.len(), 1, "held until the CronJob records its tick");
    sim.sync(View::Fresh, None, false).expect("sync");
    assert_eq!(sim.creates.get("tick-28620720"), Some(&1));
    // Recorded now; the TTL may take it, and the tick stays run.
    sim.ttl(0, View::Fresh).expect("ttl");
    assert!(sim.jobs.is_empty());
    sim.now = plus(sim.now, 60_000);
    sim.sync(View::Fresh, None, false).expect("sync");
    assert_eq!(sim.creates.values().sum::<u32>(), 1);
}
