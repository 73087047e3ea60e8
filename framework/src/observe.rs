//! What the core shows the outside: a snapshot it publishes after every
//! turn of its loop, and the metrics it counts as it goes. Readers (debug
//! handlers, `/metrics`, `/readyz`) never touch the core's state; they may
//! see it one turn late.

use std::sync::RwLock;
use std::time::{Duration, SystemTime};

use mesos::proto::FrameworkId;
use registry::PodKey;

use crate::metrics::Metrics;
use crate::offers::OfferStore;
use crate::queue::PodQueue;
use crate::reconcile::{ReconcileReport, Reconciler};

/// What a snapshot is taken from.
pub(crate) trait Source {
    fn offers(&self) -> &OfferStore;
    fn queue(&self) -> &PodQueue<PodKey>;
    fn reconciler(&self) -> &Reconciler;
    fn framework_id(&self) -> Option<&FrameworkId>;
    fn subscribed(&self) -> bool;
    fn suppressed(&self) -> bool;
    fn now(&self) -> SystemTime;
}

impl OfferRow {
    /// The offer's resources in Mesos' flag syntax.
    pub fn resources(&self) -> String {
        mesos::resources::Resources::from_protos(self.offer.resources.iter().cloned())
            .map(|r| r.to_string())
            .unwrap_or_default()
    }
}

/// One live offer, for `/debug/offers`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OfferRow {
    /// Offer id.
    pub id: String,
    /// Agent id.
    pub agent_id: String,
    /// Agent hostname.
    pub hostname: String,
    /// The offer itself; its resources are written out only when asked.
    #[serde(skip)]
    pub offer: std::sync::Arc<mesos::proto::Offer>,
    /// Seconds since it arrived.
    pub age_seconds: f64,
    /// Seconds until it is declined.
    pub ttl_left_seconds: f64,
}

/// One queued pod, for `/debug/queue`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QueueRow {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Priority.
    pub priority: i32,
    /// Failed attempts.
    pub attempts: u32,
    /// Admission holds.
    pub holds: u32,
    /// Seconds until the next attempt (0 when due).
    pub next_try_in_seconds: f64,
    /// Why the last attempt failed.
    pub last_reason: Option<String>,
}

/// The state of the core after its last turn.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// When it was taken.
    pub taken: Option<SystemTime>,
    /// Live offers.
    pub offers: Vec<OfferRow>,
    /// Queued pods, in scheduling order.
    pub queue: Vec<QueueRow>,
    /// Reconciliation.
    pub reconciliation: Option<ReconcileReport>,
    /// Our framework id.
    pub framework_id: Option<String>,
    /// Whether a subscription is open.
    pub subscribed: bool,
    /// Whether offers are suppressed.
    pub suppressed: bool,
}

fn secs(d: Option<Duration>) -> f64 {
    d.map_or(0.0, |d| d.as_secs_f64())
}

impl Snapshot {
    pub(crate) fn take(src: &impl Source) -> Snapshot {
        let now = src.now();
        let mut offers: Vec<OfferRow> = src
            .offers()
            .iter()
            .map(|o| OfferRow {
                id: o.id().to_owned(),
                agent_id: o.agent_id().to_owned(),
                hostname: o.offer.hostname.clone(),
                offer: o.offer.clone(),
                age_seconds: secs(now.duration_since(o.received).ok()),
                ttl_left_seconds: secs(o.expires.duration_since(now).ok()),
            })
            .collect();
        offers.sort_by(|a, b| a.hostname.cmp(&b.hostname).then(a.id.cmp(&b.id)));
        let queue = src
            .queue()
            .entries()
            .map(|e| QueueRow {
                namespace: e.key.namespace.clone(),
                name: e.key.name.clone(),
                priority: e.priority,
                attempts: e.attempts,
                holds: e.holds,
                next_try_in_seconds: secs(e.next_try.duration_since(now).ok()),
                last_reason: e.last_reason.clone(),
            })
            .collect();
        Snapshot {
            taken: Some(now),
            offers,
            queue,
            reconciliation: Some(src.reconciler().report()),
            framework_id: src.framework_id().map(|f| f.value.clone()),
            subscribed: src.subscribed(),
            suppressed: src.suppressed(),
        }
    }
}

/// Status updates kept per task for `/debug/registry/tasks/{id}`.
pub const STATUS_HISTORY: usize = 10;

/// One status update as the debug handlers show it. Kept for every task
/// the registry holds, so it holds names as static strings, not copies:
/// at 50,000 tasks the copies were tens of megabytes.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StatusRow {
    /// Mesos state name.
    pub state: &'static str,
    /// Source, if given.
    pub source: Option<&'static str>,
    /// Reason, if given.
    pub reason: Option<&'static str>,
    /// Message, if given.
    pub message: Option<Box<str>>,
    /// What the registry did with it.
    pub outcome: Outcome,
    /// When mesopod received it (seconds since the epoch).
    pub received_unix: f64,
}

/// What the registry did with a status update, shown as one phrase
/// (`applied: Pending -> Running`, `duplicate`, ...).
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The task moved (or stayed) from one state to another.
    Applied {
        /// The state before.
        from: &'static str,
        /// The state after.
        to: &'static str,
    },
    /// Anything else, in a word or two.
    Other(std::borrow::Cow<'static, str>),
}

impl serde::Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Outcome::Applied { from, to } => {
                s.collect_str(&format_args!("applied: {from} -> {to}"))
            }
            Outcome::Other(text) => s.serialize_str(text),
        }
    }
}

/// Shared between the core (writer) and the HTTP handlers (readers).
#[derive(Debug, Default)]
pub struct Observed {
    snapshot: RwLock<Snapshot>,
    history:
        std::sync::Mutex<std::collections::HashMap<String, std::collections::VecDeque<StatusRow>>>,
    master: RwLock<(Option<String>, Option<Duration>)>,
    last_event: RwLock<Option<SystemTime>>,
    /// The counters.
    pub metrics: Metrics,
}

impl Observed {
    /// Replaces the snapshot.
    pub fn publish(&self, s: Snapshot) {
        if let Ok(mut slot) = self.snapshot.write() {
            *slot = s;
        }
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot.read().map(|s| s.clone()).unwrap_or_default()
    }

    /// Records the master and heartbeat of the open subscription.
    pub fn set_master(&self, master: Option<String>, heartbeat: Option<Duration>) {
        if let Ok(mut m) = self.master.write() {
            *m = (master, heartbeat);
        }
    }

    /// The master and heartbeat interval of the open subscription.
    pub fn master(&self) -> (Option<String>, Option<Duration>) {
        self.master.read().map(|m| m.clone()).unwrap_or_default()
    }

    /// Records that Mesos said something (any event, heartbeats included).
    pub fn saw_event(&self, at: SystemTime) {
        if let Ok(mut e) = self.last_event.write() {
            *e = Some(at);
        }
    }

    /// Remembers a status update of a task (the last [`STATUS_HISTORY`]).
    pub fn record_status(&self, task_id: &str, row: StatusRow) {
        if let Ok(mut h) = self.history.lock() {
            // Most tasks see two or three updates in their life.
            let q = h
                .entry(task_id.to_owned())
                .or_insert_with(|| std::collections::VecDeque::with_capacity(3));
            if q.len() == STATUS_HISTORY {
                q.pop_front();
            }
            q.push_back(row);
        }
    }

    /// Forgets a task's history (it left the registry).
    pub fn forget_task(&self, task_id: &str) {
        if let Ok(mut h) = self.history.lock() {
            h.remove(task_id);
        }
    }

    /// A task's recent status updates, oldest first.
    pub fn history(&self, task_id: &str) -> Vec<StatusRow> {
        self.history
            .lock()
            .ok()
            .and_then(|h| h.get(task_id).map(|q| q.iter().cloned().collect()))
            .unwrap_or_default()
    }

    /// When Mesos last said something.
    pub fn last_event(&self) -> Option<SystemTime> {
        self.last_event.read().ok().and_then(|e| *e)
    }
}
