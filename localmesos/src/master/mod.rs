//! The master: one lock-protected [`State`] holding frameworks, agents,
//! offers and tasks, and the [`Shared`] context every handler and timer
//! reaches it through.
//!
//! # Invariants
//!
//! - The master is the only writer of task state: task records, their
//!   reliable-update queues, and the resources and task lists the agents'
//!   records keep for them. Agents report what happened
//!   ([`crate::agent::Report`], applied by [`reports::apply`]); every
//!   status an agent or executor produces goes through
//!   [`tasks::status_update`].
//! - Dependencies point one way: `http` → `master` → `agent`. Inside the
//!   master, `mod.rs` uses only `task` (the record); the modules that
//!   change tasks build on `tasks`.
//! - The lock is never held across an `.await`: handlers lock, mutate,
//!   queue events on unbounded channels, and unlock.
//! - An agent's `used + offered` never exceeds its `total` (all three in
//!   unallocated form, without `allocation_info`).
//! - Timers capture the master `epoch` and the generation of what they
//!   watch, and do nothing when either moved on (restart, re-subscribe).

pub(crate) mod accept;
pub(crate) mod agents;
pub(crate) mod allocator;
pub(crate) mod calls;
pub(crate) mod checkpoints;
pub(crate) mod drain;
pub(crate) mod executors;
pub(crate) mod inverse_offers;
pub(crate) mod launch;
pub(crate) mod maintenance;
pub(crate) mod pings;
pub(crate) mod reconcile;
pub(crate) mod recover;
pub(crate) mod reports;
pub(crate) mod subscribe;
pub(crate) mod task;
pub(crate) mod tasks;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use mesos::proto::scheduler::{Event, event};
use mesos::proto::{FrameworkId, FrameworkInfo, MasterInfo, TaskStatus};
use mesos::resources::Resources;
use tokio::sync::{Notify, mpsc};

use crate::agent::Agent;
use crate::config::Timing;
use crate::faults::UpdateFault;
use task::Task;

/// The Mesos release whose behaviour localmesos copies (reported by `/version`).
pub(crate) const MESOS_VERSION: &str = "1.11.0";

/// How many finished tasks and removed frameworks `/state` remembers, as
/// Mesos' `--max_completed_tasks_per_framework` bounds them (1000 there; a
/// smaller bound keeps scale runs lean).
pub(crate) const MAX_COMPLETED: usize = 200;

/// Everything handlers and timers need besides the state itself.
pub(crate) struct Shared {
    state: Mutex<State>,
    pub(crate) timing: Timing,
    pub(crate) master_addr: SocketAddr,
    pub(crate) work_dir: PathBuf,
    /// The work dir outlives this process (not a temporary one): agents
    /// checkpoint, and checkpointing frameworks' executors are left
    /// running on shutdown for the next start to recover.
    pub(crate) persistent: bool,
    /// `host:port` of the "leading" master to redirect schedulers to.
    pub(crate) redirect_to: Option<String>,
    pub(crate) rt: tokio::runtime::Handle,
    /// Wakes the allocator before its interval (REVIVE, freed resources).
    pub(crate) allocate_now: Notify,
    /// Open (`true`) unless a test holds ACCEPT calls back (a slow master).
    pub(crate) accept_gate: tokio::sync::watch::Sender<bool>,
    /// What the cluster enforces; set once at start (`LocalMesos::start`).
    pub(crate) security: std::sync::OnceLock<crate::security::Security>,
    /// What the master's own timeouts read (`master::pings`).
    pub(crate) clock: crate::clock::MasterClock,
    me: Weak<Shared>,
}

impl Shared {
    pub(crate) fn new(
        state: State,
        timing: Timing,
        master_addr: SocketAddr,
        (work_dir, persistent): (PathBuf, bool),
        redirect_to: Option<String>,
        rt: tokio::runtime::Handle,
    ) -> Arc<Shared> {
        Arc::new_cyclic(|me| Shared {
            state: Mutex::new(state),
            timing,
            master_addr,
            work_dir,
            persistent,
            redirect_to,
            rt,
            allocate_now: Notify::new(),
            accept_gate: tokio::sync::watch::Sender::new(true),
            security: std::sync::OnceLock::new(),
            clock: crate::clock::MasterClock::new(),
            me: me.clone(),
        })
    }

    /// What the cluster enforces (nothing but connection limits if unset).
    pub(crate) fn security(&self) -> &crate::security::Security {
        self.security
            .get_or_init(crate::security::Security::default)
    }

    /// Locks the state. A panic while locked cannot leave it half-updated in
    /// a way worse than the panic itself, so a poisoned lock is taken as is.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the state after `delay`, if the cluster still exists.
    pub(crate) fn after(
        &self,
        delay: Duration,
        f: impl FnOnce(&Arc<Shared>, &mut State) + Send + 'static,
    ) {
        let me = self.me.clone();
        self.rt.spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(shared) = me.upgrade() {
                let mut st = shared.lock();
                f(&shared, &mut st);
            }
        });
    }

    /// A weak handle to this context, for work that must not keep the
    /// cluster alive (child-process watchers).
    pub(crate) fn weak(&self) -> Weak<Shared> {
        self.me.clone()
    }
}

/// A subscribed framework's event stream.
pub(crate) struct Conn {
    pub(crate) stream_id: String,
    pub(crate) tx: mpsc::UnboundedSender<Event>,
}

/// A framework the master knows.
pub(crate) struct Framework {
    pub(crate) id: FrameworkId,
    pub(crate) info: FrameworkInfo,
    /// `None` while disconnected (failover timeout running).
    pub(crate) conn: Option<Conn>,
    /// Bumped on every subscription; failover timers compare it.
    pub(crate) generation: u64,
    pub(crate) suppressed: BTreeSet<String>,
    /// Refusals per agent: resources the framework declined, until when.
    pub(crate) filters: HashMap<String, (Resources, Instant)>,
    /// Live tasks and tasks whose updates are not all acknowledged.
    pub(crate) tasks: HashMap<String, Task>,
    pub(crate) completed: VecDeque<Task>,
    pub(crate) registered_time: f64,
}

impl Framework {
    /// A framework `id` with `info`, not connected.
    pub(crate) fn new(id: FrameworkId, info: FrameworkInfo) -> Self {
        Framework {
            id,
            info,
            conn: None,
            generation: 0,
            suppressed: BTreeSet::new(),
            filters: HashMap::new(),
            tasks: HashMap::new(),
            completed: VecDeque::new(),
            registered_time: crate::clock::now_secs(),
        }
    }

    /// `FrameworkInfo.checkpoint`.
    pub(crate) fn checkpoints(&self) -> bool {
        self.info.checkpoint.unwrap_or(false)
    }

    pub(crate) fn partition_aware(&self) -> bool {
        self.info
            .has_capability(mesos::proto::framework_info::capability::Type::PartitionAware)
    }

    pub(crate) fn roles(&self) -> Vec<String> {
        self.info.effective_roles()
    }

    /// Queues an event on the stream, if connected.
    pub(crate) fn send(&self, event: Event) -> bool {
        self.conn.as_ref().is_some_and(|c| c.tx.send(event).is_ok())
    }

    pub(crate) fn send_update(&self, status: TaskStatus) -> bool {
        self.send(Event {
            r#type: Some(event::Type::Update as i32),
            update: Some(event::Update {
                status: Some(status),
            }),
            ..Default::default()
        })
    }
}

/// An outstanding offer.
pub(crate) struct OfferRec {
    pub(crate) framework_id: String,
    pub(crate) agent_id: String,
    pub(crate) role: String,
    /// Unallocated form.
    pub(crate) resources: Resources,
}

/// A framework the master removed (torn down or failed over too late).
pub(crate) struct RemovedFramework {
    pub(crate) id: String,
    pub(crate) name: String,
}

/// The whole cluster as the master sees it.
pub(crate) struct State {
    pub(crate) master_id: String,
    /// Bumped on master restart; timers of an older epoch do nothing.
    pub(crate) epoch: u64,
    /// Scheduler calls get 503 while set.
    pub(crate) recovering: bool,
    pub(crate) frameworks: HashMap<String, Framework>,
    pub(crate) removed_frameworks: VecDeque<RemovedFramework>,
    /// Ordered so allocation walks agents in a stable order.
    pub(crate) agents: BTreeMap<String, Agent>,
    pub(crate) offers: HashMap<String, OfferRec>,
    pub(crate) update_fault: UpdateFault,
    next_framework: u64,
    next_offer: u64,
    pub(crate) next_agent: u64,
    /// Where the allocator starts among frameworks, so none is always first.
    pub(crate) alloc_rotation: usize,
    /// The maintenance schedule, machine modes and inverse offers.
    pub(crate) maintenance: maintenance::Maintenance,
    /// Deactivated and draining agents.
    pub(crate) drain: drain::Drains,
}

impl State {
    pub(crate) fn new() -> Self {
        Self {
            master_id: uuid::Uuid::new_v4().to_string(),
            epoch: 0,
            recovering: false,
            frameworks: HashMap::new(),
            removed_frameworks: VecDeque::new(),
            agents: BTreeMap::new(),
            offers: HashMap::new(),
            update_fault: UpdateFault::default(),
            next_framework: 0,
            next_offer: 0,
            next_agent: 0,
            alloc_rotation: 0,
            maintenance: maintenance::Maintenance::default(),
            drain: drain::Drains::default(),
        }
    }

    /// Mesos-shaped ids: `<master id>-0000`, `<master id>-O12`, `<master id>-S3`.
    pub(crate) fn new_framework_id(&mut self) -> FrameworkId {
        let id = FrameworkId::new(format!("{}-{:04}", self.master_id, self.next_framework));
        self.next_framework += 1;
        id
    }

    pub(crate) fn new_offer_id(&mut self) -> String {
        let id = format!("{}-O{}", self.master_id, self.next_offer);
        self.next_offer += 1;
        id
    }

    pub(crate) fn is_removed_framework(&self, id: &str) -> bool {
        self.removed_frameworks.iter().any(|f| f.id == id)
    }

    pub(crate) fn master_info(&self, addr: SocketAddr) -> MasterInfo {
        let ip = match addr.ip() {
            std::net::IpAddr::V4(v4) => u32::from_le_bytes(v4.octets()),
            std::net::IpAddr::V6(_) => 0,
        };
        MasterInfo {
            id: self.master_id.clone(),
            ip,
            port: u32::from(addr.port()),
            hostname: Some(addr.ip().to_string()),
            version: Some(MESOS_VERSION.to_owned()),
            address: Some(mesos::proto::Address {
                hostname: Some(addr.ip().to_string()),
                ip: Some(addr.ip().to_string()),
                port: i32::from(addr.port()),
            }),
        }
    }
}
