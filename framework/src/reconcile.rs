//! Task reconciliation rounds, as a pure state machine.
//!
//! # Algorithm (Mesos' recommendation)
//!
//! After every (re)subscribe, ask the master explicitly for every task we
//! believe is not terminal. Wait with truncated exponential backoff; drop
//! every task that received *any* update since the round began; ask again
//! for the rest, until none remain. One round at a time. Besides, now and
//! then ask implicitly (empty task list): the master then reports every task
//! it knows, which surfaces tasks we do not.
//!
//! The reconciler reads no clock and sends nothing: `poll(now)` says what to
//! send, and the caller sends it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use mesos::client::backoff::Retry;

/// First wait for answers before asking again.
pub const INITIAL_RETRY: Duration = Duration::from_secs(1);
/// Longest wait between two asks within one round: a master that is slow
/// to answer (agents still re-registering) is asked at least this often.
pub const MAX_RETRY: Duration = Duration::from_secs(120);
/// Default period of implicit reconciliation.
pub const DEFAULT_IMPLICIT_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// What to send to the master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReconcileRequest {
    /// RECONCILE with these (task id, agent id) pairs.
    Explicit(Vec<(String, Option<String>)>),
    /// RECONCILE with no tasks.
    Implicit,
}

/// The round in progress.
#[derive(Debug, Clone)]
pub struct Round {
    /// When the round began.
    pub started: SystemTime,
    /// Tasks still waiting for an answer, with their agent when known.
    pub waiting: BTreeMap<String, Option<String>>,
    /// How many times the round has asked.
    pub asks: u32,
    next_ask: SystemTime,
    backoff: Retry,
}

/// A report for the debug handlers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Rounds completed since start.
    pub rounds_completed: u64,
    /// Tasks waiting for an answer in the current round.
    pub waiting: Vec<String>,
    /// When the current round began.
    pub round_started: Option<SystemTime>,
    /// The last implicit reconciliation.
    pub last_implicit: Option<SystemTime>,
}

/// Explicit rounds plus periodic implicit reconciliation.
#[derive(Debug)]
pub struct Reconciler {
    round: Option<Round>,
    queued: Option<BTreeMap<String, Option<String>>>,
    implicit_interval: Duration,
    last_implicit: Option<SystemTime>,
    implicit_requested: bool,
    rounds_completed: u64,
}

impl Reconciler {
    /// A reconciler that asks implicitly every `implicit_interval`.
    pub fn new(implicit_interval: Duration) -> Self {
        Self {
            round: None,
            queued: None,
            implicit_interval,
            last_implicit: None,
            implicit_requested: false,
            rounds_completed: 0,
        }
    }

    /// Begins an explicit round for `tasks` (task id, agent id). If a round
    /// is running, this one waits for it (one round at a time); a later
    /// request replaces an earlier queued one.
    pub fn start_explicit(
        &mut self,
        tasks: impl IntoIterator<Item = (String, Option<String>)>,
        now: SystemTime,
    ) {
        let tasks: BTreeMap<_, _> = tasks.into_iter().collect();
        if self.round.is_some() {
            self.queued = Some(tasks);
            return;
        }
        self.begin(tasks, now);
    }

    fn begin(&mut self, tasks: BTreeMap<String, Option<String>>, now: SystemTime) {
        if tasks.is_empty() {
            self.rounds_completed += 1;
            return;
        }
        self.round = Some(Round {
            started: now,
            waiting: tasks,
            asks: 0,
            next_ask: now,
            backoff: Retry::new(INITIAL_RETRY, MAX_RETRY),
        });
    }

    /// Abandons the current round (the subscription was lost; a new one will start).
    pub fn abort(&mut self) {
        self.round = None;
        self.queued = None;
    }

    /// An update arrived for a task: it no longer waits in this round.
    pub fn observe_update(&mut self, task_id: &str) {
        if let Some(round) = &mut self.round {
            round.waiting.remove(task_id);
        }
    }

    /// The task is gone from our books (unregistered): stop asking for it.
    pub fn forget(&mut self, task_id: &str) {
        self.observe_update(task_id);
        if let Some(q) = &mut self.queued {
            q.remove(task_id);
        }
    }

    /// Asks for an implicit reconciliation at the next poll.
    pub fn request_implicit(&mut self) {
        self.implicit_requested = true;
    }

    /// What to send now, if anything. Call after every input and on ticks.
    pub fn poll(&mut self, now: SystemTime) -> Vec<ReconcileRequest> {
        let mut out = Vec::new();
        let finished = self.round.as_ref().is_some_and(|r| r.waiting.is_empty());
        if finished {
            self.round = None;
            self.rounds_completed += 1;
            if let Some(next) = self.queued.take() {
                self.begin(next, now);
            }
        }
        if let Some(round) = &mut self.round
            && round.next_ask <= now
        {
            round.asks += 1;
            round.next_ask = now + round.backoff.next_delay();
            out.push(ReconcileRequest::Explicit(
                round
                    .waiting
                    .iter()
                    .map(|(t, a)| (t.clone(), a.clone()))
                    .collect(),
            ));
        }
        let implicit_due = self.last_implicit.is_none_or(|last| {
            now.duration_since(last).unwrap_or_default() >= self.implicit_interval
        });
        if self.implicit_requested || implicit_due {
            self.implicit_requested = false;
            self.last_implicit = Some(now);
            out.push(ReconcileRequest::Implicit);
        }
        out
    }

    /// When `poll` next has something to do.
    pub fn next_wakeup(&self) -> Option<SystemTime> {
        let explicit = self.round.as_ref().map(|r| r.next_ask);
        let implicit = self.last_implicit.map(|t| t + self.implicit_interval);
        match (explicit, implicit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The tasks the current round still waits to hear about.
    pub fn waiting(&self) -> impl Iterator<Item = &str> {
        self.round
            .iter()
            .flat_map(|r| r.waiting.keys().map(String::as_str))
    }

    /// Whether an explicit round is in progress.
    pub fn in_progress(&self) -> bool {
        self.round.is_some()
    }

    /// For the debug handlers.
    pub fn report(&self) -> ReconcileReport {
        ReconcileReport {
            rounds_completed: self.rounds_completed,
            waiting: self.waiting().map(str::to_owned).collect(),
            round_started: self.round.as_ref().map(|r| r.started),
            last_implicit: self.last_implicit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn tasks(ids: &[&str]) -> Vec<(String, Option<String>)> {
        ids.iter()
            .map(|i| (i.to_string(), Some("a1".into())))
            .collect()
    }

    fn explicit_ids(reqs: &[ReconcileRequest]) -> Vec<Vec<String>> {
        reqs.iter()
            .filter_map(|r| match r {
                ReconcileRequest::Explicit(t) => Some(t.iter().map(|(id, _)| id.clone()).collect()),
                ReconcileRequest::Implicit => None,
            })
            .collect()
    }

    #[test]
    fn a_round_asks_again_with_backoff_for_tasks_without_an_answer() {
        let mut r = Reconciler::new(Duration::from_secs(900));
        r.start_explicit(tasks(&["t1", "t2"]), t(0));
        let first = r.poll(t(0));
        assert_eq!(explicit_ids(&first), [["t1", "t2"]]);
        assert!(
            first.contains(&ReconcileRequest::Implicit),
            "first poll also reconciles implicitly"
        );
        assert!(r.poll(t(0)).is_empty());
        r.observe_update("t1");
        assert_eq!(explicit_ids(&r.poll(t(1))), [["t2"]]);
        assert!(r.poll(t(2)).is_empty(), "second wait is 2 s");
        assert_eq!(explicit_ids(&r.poll(t(3))), [["t2"]]);
        r.observe_update("t2");
        assert!(r.poll(t(100)).is_empty());
        assert!(!r.in_progress());
        assert_eq!(r.report().rounds_completed, 1);
    }

    #[test]
    fn one_round_at_a_time() {
        let mut r = Reconciler::new(Duration::from_secs(900));
        r.start_explicit(tasks(&["t1"]), t(0));
        r.poll(t(0));
        r.start_explicit(tasks(&["t9"]), t(0));
        assert!(explicit_ids(&r.poll(t(1))) == [["t1"]]);
        r.observe_update("t1");
        assert_eq!(explicit_ids(&r.poll(t(2))), [["t9"]]);
    }

    #[test]
    fn implicit_reconciliation_runs_every_interval_and_on_request() {
        let mut r = Reconciler::new(Duration::from_secs(60));
        assert_eq!(r.poll(t(0)), [ReconcileRequest::Implicit]);
        assert!(r.poll(t(59)).is_empty());
        assert_eq!(r.poll(t(60)), [ReconcileRequest::Implicit]);
        r.request_implicit();
        assert_eq!(r.poll(t(61)), [ReconcileRequest::Implicit]);
        assert_eq!(r.next_wakeup(), Some(t(121)));
    }

    #[test]
    fn an_empty_round_completes_at_once() {
        let mut r = Reconciler::new(Duration::from_secs(60));
        r.start_explicit(Vec::new(), t(0));
        assert!(!r.in_progress());
        assert_eq!(r.report().rounds_completed, 1);
    }
}
