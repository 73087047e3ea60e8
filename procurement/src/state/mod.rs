//! `ProcureState`: the spec procured so far and what is left of one offer.
//!
//! # How it stays exact and cheap
//! The offer is parsed once into a shared, immutable pool. The state keeps
//! only what changes: the scalar amounts left per offered resource, and an
//! append-only log of everything taken. A [`Checkpoint`] is the log's length
//! plus a few shared pointers, so taking one costs nothing; rolling back
//! pops the log and gives each amount back, in integer millis, so the state
//! is restored bit for bit. Specs and what is left are written out as Mesos
//! resources only when asked for.
//!
//! # Several pods on one offer
//! [`ProcureState::begin_pod`] starts a new pod; a pipeline then takes from
//! what the earlier pods left, and [`ProcureState::spec`] is the pod's spec
//! (a round works on a copy per candidate, so a failure needs no rollback;
//! an all-or-nothing pipeline rolls back to its [`Checkpoint`] itself). A
//! port taken by one pod is never given to another, and the executor is
//! procured by the first pod only.

mod results;

use std::sync::Arc;

use mesos::proto::{AgentId, ExecutorInfo, Offer, OfferId};
use registry::PodTask;

use crate::demand::PodDemand;
use crate::failure::{Owner, ProcureError};
use crate::node::OfferError;
use crate::pool::{OfferPool, ResourceKind};
use crate::quantity::millis_to_f64;

/// The most distinct reservation roles one procurement takes from. An offer
/// to one framework holds its few roles plus `*`; a pod listing more roles
/// than this that the offer holds uses the first ones.
const MAX_ROLES: usize = 16;

/// Roles resolved to the pool's role indices.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RoleIds {
    ids: [u16; MAX_ROLES],
    len: usize,
}

impl RoleIds {
    fn as_slice(&self) -> &[u16] {
        &self.ids[..self.len]
    }
}

/// One thing taken from the offer, or one port mapping made.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Take {
    Scalar {
        entry: u16,
        millis: i64,
        owner: Owner,
    },
    Port {
        entry: u16,
        port: u16,
        owner: Owner,
    },
    /// The demand's host-port want `want` is served by `host_port`.
    Map {
        want: u16,
        host_port: u16,
    },
}

/// The executor of the pod being procured.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum PodExecutor {
    /// None attached (yet).
    #[default]
    None,
    /// The executor some pod of this state procured: its info plus the
    /// executor-owned takes of the log.
    Procured,
    /// An executor already running on the agent, attached exactly as given.
    Running(Arc<ExecutorInfo>),
    /// An executor already running on the agent whose launch info is not
    /// known: the configured info, with the offer's framework id.
    Configured(Arc<ExecutorInfo>),
}

/// A point [`ProcureState::rollback`] can return to.
#[derive(Debug, Clone)]
#[must_use = "a checkpoint does nothing unless rolled back to"]
pub struct Checkpoint {
    log_len: usize,
    pod_start: usize,
    roles: Option<Arc<[String]>>,
    pod_executor: PodExecutor,
    procured_executor: Option<Arc<ExecutorInfo>>,
}

/// The procurement pipeline's state over one offer.
#[derive(Clone)]
pub struct ProcureState {
    pool: Arc<OfferPool>,
    /// Per offered resource, the scalar millis left.
    left: Vec<i64>,
    log: Vec<Take>,
    /// Where the current pod's takes start in `log`.
    pod_start: usize,
    /// The current pod's roles, in the order resources are taken.
    roles: Option<Arc<[String]>>,
    pod_executor: PodExecutor,
    /// The executor this state procured (for its first pod), if any.
    procured_executor: Option<Arc<ExecutorInfo>>,
    /// Memo of the current pod's demand; not part of the logical state.
    demand: Option<Arc<PodDemand>>,
}

/// The offer, what has been taken and what is left, not the parsed pod.
impl std::fmt::Debug for ProcureState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcureState")
            .field("offer", &self.pool.offer_id.value)
            .field("agent", &self.pool.hostname)
            .field("earlier_pods_takes", &self.pod_start)
            .field("current_pod", &&self.log[self.pod_start..])
            .field("roles", &self.roles)
            .field("remaining", &self.remaining().to_string())
            .finish()
    }
}

impl ProcureState {
    /// A state holding an empty spec and a copy of the offer's resources.
    ///
    /// # Errors
    /// [`OfferError`] when the offer has no id or no agent id.
    pub fn new(offer: &Offer) -> Result<Self, OfferError> {
        Ok(Self::from_pool(Arc::new(OfferPool::from_offer(offer)?)))
    }

    pub(crate) fn from_pool(pool: Arc<OfferPool>) -> Self {
        let left = pool.entries.iter().map(|e| e.scalar).collect();
        ProcureState {
            pool,
            left,
            log: Vec::with_capacity(8),
            pod_start: 0,
            roles: None,
            pod_executor: PodExecutor::None,
            procured_executor: None,
            demand: None,
        }
    }

    /// Makes this state a fresh one over `pool`, keeping its buffers: a
    /// scan over thousands of offers then allocates nothing per offer.
    pub(crate) fn reset_to(&mut self, pool: &Arc<OfferPool>) {
        if !Arc::ptr_eq(&self.pool, pool) {
            self.pool = pool.clone();
        }
        self.left.clear();
        self.left.extend(self.pool.entries.iter().map(|e| e.scalar));
        self.log.clear();
        self.pod_start = 0;
        self.roles = None;
        self.pod_executor = PodExecutor::None;
        self.procured_executor = None;
    }

    /// The offer this state takes from.
    pub fn offer_id(&self) -> &OfferId {
        &self.pool.offer_id
    }

    /// The agent that made the offer.
    pub fn agent_id(&self) -> &AgentId {
        &self.pool.agent_id
    }

    /// Starts procuring for another pod, keeping what earlier pods took.
    pub fn begin_pod(&mut self) {
        self.pod_start = self.log.len();
        self.roles = None;
        self.pod_executor = PodExecutor::None;
    }

    /// Marks the current state so it can be restored exactly.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            log_len: self.log.len(),
            pod_start: self.pod_start,
            roles: self.roles.clone(),
            pod_executor: self.pod_executor.clone(),
            procured_executor: self.procured_executor.clone(),
        }
    }

    /// The log's length: a mark for [`ProcureState::undo_to`], for a
    /// procurement that only takes and must give back on its own failure.
    pub(crate) fn log_mark(&self) -> usize {
        self.log.len()
    }

    /// Gives back everything taken since `mark`.
    pub(crate) fn undo_to(&mut self, mark: usize) {
        while self.log.len() > mark {
            if let Some(Take::Scalar { entry, millis, .. }) = self.log.pop()
                && let Some(l) = self.left.get_mut(usize::from(entry))
            {
                *l += millis;
            }
        }
    }

    /// Restores the state to `cp`, giving back everything taken since.
    /// A checkpoint older than an earlier rollback target is honoured as far
    /// as the log still reaches.
    pub fn rollback(&mut self, cp: Checkpoint) {
        self.undo_to(cp.log_len);
        self.pod_start = cp.pod_start;
        self.roles = cp.roles;
        self.pod_executor = cp.pod_executor;
        self.procured_executor = cp.procured_executor;
    }

    /// The demand of `task`'s pod, worked out on first use and then reused
    /// for as long as the task carries the same pod object.
    pub fn demand_for(&mut self, task: &PodTask) -> Arc<PodDemand> {
        match &self.demand {
            Some(d) if d.is_for(task) => d.clone(),
            _ => {
                let d = Arc::new(PodDemand::for_task(task));
                self.demand = Some(d.clone());
                d
            }
        }
    }

    /// As [`ProcureState::demand_for`], borrowed: no reference count moves.
    pub(crate) fn ensure_demand(&mut self, task: &PodTask) -> &PodDemand {
        if !self.demand.as_ref().is_some_and(|d| d.is_for(task)) {
            self.demand = None;
        }
        self.demand
            .get_or_insert_with(|| Arc::new(PodDemand::for_task(task)))
    }

    /// Supplies a demand worked out beforehand (one per pod, shared by every
    /// offer's state), so no attempt parses the pod again.
    pub fn seed_demand(&mut self, demand: Arc<PodDemand>) {
        self.demand = Some(demand);
    }

    /// The current pod's roles, if the roles procurement has chosen them.
    pub fn pod_roles(&self) -> Option<&Arc<[String]>> {
        self.roles.as_ref()
    }

    /// Sets the current pod's roles: resources are taken in this order.
    pub fn set_pod_roles(&mut self, roles: Arc<[String]>) {
        self.roles = Some(roles);
    }

    /// The current pod's roles, else the task's.
    pub(crate) fn roles_for(&self, task: &PodTask) -> Arc<[String]> {
        self.roles.clone().unwrap_or_else(|| task.roles.clone())
    }

    /// How much of `kind` is left in `roles`.
    pub fn available(&self, kind: ResourceKind, roles: &[String]) -> f64 {
        millis_to_f64(self.available_millis(kind, &self.role_ids(roles)))
    }

    /// `roles` as the pool's role indices, in order, repeats and roles the
    /// offer does not hold dropped. Resolved once per procurement so the
    /// loops over the offer compare integers, not strings.
    pub(crate) fn role_ids(&self, roles: &[String]) -> RoleIds {
        let mut out = RoleIds {
            ids: [0; MAX_ROLES],
            len: 0,
        };
        for role in roles {
            if let Some(id) = self.pool.role_index(role)
                && !out.ids[..out.len].contains(&id)
                && out.len < MAX_ROLES
            {
                out.ids[out.len] = id;
                out.len += 1;
            }
        }
        out
    }

    pub(crate) fn available_millis(&self, kind: ResourceKind, roles: &RoleIds) -> i64 {
        let mut sum = 0;
        self.for_each_entry(kind, roles, |i| {
            sum += self.left[i];
            true
        });
        sum
    }

    /// Calls `f` with each usable entry of `kind` in `roles`, in role order
    /// then offer order, until `f` returns false.
    fn for_each_entry(
        &self,
        kind: ResourceKind,
        roles: &RoleIds,
        mut f: impl FnMut(usize) -> bool,
    ) {
        for &ri in roles.as_slice() {
            for (i, e) in self.pool.entries.iter().enumerate() {
                if e.kind == Some(kind) && e.role == ri && !f(i) {
                    return;
                }
            }
        }
    }

    pub(crate) fn take_millis(
        &mut self,
        kind: ResourceKind,
        need: i64,
        roles: &RoleIds,
        owner: Owner,
    ) -> Result<(), ProcureError> {
        if need <= 0 || kind == ResourceKind::Ports {
            return Ok(());
        }
        let available = self.available_millis(kind, roles);
        if available < need {
            return Err(ProcureError::Insufficient {
                resource: kind,
                owner,
                asked: millis_to_f64(need),
                available: millis_to_f64(available),
            });
        }
        let mut entries = [0usize; 16];
        let mut n = 0;
        let mut overflow = Vec::new();
        self.for_each_entry(kind, roles, |i| {
            if n < entries.len() {
                entries[n] = i;
                n += 1;
            } else {
                overflow.push(i);
            }
            true
        });
        let mut rest = need;
        for &i in entries[..n].iter().chain(overflow.iter()) {
            let t = self.left[i].min(rest);
            if t > 0 {
                self.left[i] -= t;
                self.log.push(Take::Scalar {
                    entry: entry_id(i),
                    millis: t,
                    owner,
                });
                rest -= t;
            }
            if rest == 0 {
                break;
            }
        }
        Ok(())
    }

    /// Whether any pod of this state already took `port`.
    pub fn port_taken(&self, port: u16) -> bool {
        self.log
            .iter()
            .any(|t| matches!(t, Take::Port { port: p, .. } if *p == port))
    }

    /// The offered entry holding `port` in `roles`, taken or not.
    pub(crate) fn port_entry(&self, port: u16, roles: &RoleIds) -> Option<usize> {
        let mut found = None;
        let p = u64::from(port);
        self.for_each_entry(ResourceKind::Ports, roles, |i| {
            if self.pool.entries[i]
                .ranges
                .iter()
                .any(|&(b, e)| b <= p && p <= e)
            {
                found = Some(i);
                return false;
            }
            true
        });
        found
    }

    /// Takes `port` from entry `entry` (found with `port_entry`, not taken).
    pub(crate) fn take_port(&mut self, entry: usize, port: u16, owner: Owner) {
        self.log.push(Take::Port {
            entry: entry_id(entry),
            port,
            owner,
        });
    }

    /// The lowest free offered port in `roles`, in role order.
    pub(crate) fn free_port(&self, roles: &RoleIds) -> Option<(usize, u16)> {
        let mut found = None;
        self.for_each_entry(ResourceKind::Ports, roles, |i| {
            for &(b, e) in &self.pool.entries[i].ranges {
                let mut p = b;
                while p <= e {
                    let Ok(port) = u16::try_from(p) else {
                        return false;
                    };
                    if !self.port_taken(port) {
                        found = Some((i, port));
                        return false;
                    }
                    p += 1;
                }
            }
            true
        });
        found
    }

    /// Records that the demand's host-port want `want` is served by `host_port`.
    pub(crate) fn map_port(&mut self, want: usize, host_port: u16) {
        self.log.push(Take::Map {
            want: u16::try_from(want).unwrap_or(u16::MAX),
            host_port,
        });
    }

    pub(crate) fn set_pod_executor(&mut self, e: PodExecutor) {
        self.pod_executor = e;
    }

    pub(crate) fn procured_executor(&self) -> Option<&Arc<ExecutorInfo>> {
        self.procured_executor.as_ref()
    }

    pub(crate) fn set_procured_executor(&mut self, info: Arc<ExecutorInfo>) {
        self.procured_executor = Some(info);
    }
}

fn entry_id(i: usize) -> u16 {
    // An offer with more than 65535 resources does not exist; saturate rather than wrap.
    u16::try_from(i).unwrap_or(u16::MAX)
}
