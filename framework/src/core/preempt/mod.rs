//! Preemption: when a pending pod fits no agent, the core looks for
//! lower-priority pods of its own to stop on one agent, as kube-scheduler's
//! DefaultPreemption does (`plan`), and holds that agent for the pod while
//! they stop.
//!
//! # Contract
//!
//! - **Only lower priority, only ours.** Victims are mesopod's running
//!   tasks of strictly lower `spec.priority`; a pod with `preemptionPolicy:
//!   Never` preempts nobody. Other frameworks' tasks are never touched.
//! - **All or nothing.** A plan is made only when the pod fits the agent,
//!   by the procurement pipeline, with the plan's victims gone; otherwise
//!   nothing is stopped.
//! - **One plan per pod at a time.** The preemptor is nominated to the
//!   agent (`status.nominatedNodeName`) until it is placed, deleted, or the
//!   nomination expires (the victims' longest grace period plus
//!   [`NOMINATION_SLACK`]). While nominated it makes no second plan.
//! - **The freed room goes to the nominee.** While an agent holds a
//!   nomination, its offers are placed only for its nominees and for pods of
//!   higher priority (kube-scheduler lets those take a nominated node's
//!   room too). Lower-priority pods do not see it, so no pod of mesopod
//!   takes what was freed. What the victims free comes back from the master
//!   as an offer of its own: once every victim has ended, an agent offering
//!   in pieces is declined (refusing nothing), so that the master offers
//!   its room again as one offer the nominee can fit.
//! - **Victims go as kube-scheduler's do:** `DisruptionTarget`
//!   (`PreemptionByScheduler`), a graceful delete with their own grace
//!   period, and the `Preempted` event. The delete is what stops them:
//!   their KILL goes through the same path as any deleted pod's.

mod nominations;
mod plan;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use mesos::proto::{OfferId, Resource, TaskId};
use procurement::NodeView;
use registry::{Flag, PodKey, PodTask, Registry};

use super::Core;
use super::admit::Attempt;
use super::effect::{Effect, Write};
use crate::objects::pod_event;
use nominations::Nomination;
pub(crate) use nominations::Preemption;
use plan::{Budget, Candidate, Preemptor, Rank, Victims, add, covers, scalars, sub, task_scalars};

/// Agents whose plans are compared per preemptor, once that many are found:
/// kube-scheduler's `minCandidateNodesAbsolute`, or its
/// `minCandidateNodesPercentage` of the agents when that is more.
const MIN_CANDIDATES: usize = 100;
const CANDIDATES_PERCENT: usize = 10;

/// How long past the victims' longest grace period a nomination holds its
/// agent: time for the KILLs, the status updates and the master's offer.
pub const NOMINATION_SLACK: Duration = Duration::from_secs(30);

/// How long a floor of running priorities is trusted before it is worked
/// out again (see [`Core::may_preempt`]).
const FLOOR_TTL: Duration = Duration::from_secs(1);

/// What preemption reads in one scheduling round, gathered once, at its
/// first use in the round.
pub(super) struct Census {
    /// Live, placed tasks not being deleted and not already victims, by
    /// agent id.
    tasks: HashMap<String, Vec<PodTask>>,
    /// The resources of the live offers this round did not use, by agent id.
    free: HashMap<String, Vec<Resource>>,
    /// For each agent with no offer out to us: its capacity less what our
    /// live tasks hold there.
    rooms: Vec<[i64; 4]>,
    /// Every agent: id, view, capacity.
    agents: Vec<(String, NodeView, [i64; 4])>,
}

/// A round's preemption context: the offers it used, and its census.
pub(super) struct PreemptRound {
    /// The round's offers.
    views: Vec<procurement::OfferView>,
    /// Indices of the offers the round placed pods on: what is left of
    /// them is not counted as free.
    used: Vec<usize>,
    census: Option<Census>,
}

impl PreemptRound {
    /// A round over `views` that placed pods on the offers at `used`.
    pub(super) fn new(views: Vec<procurement::OfferView>, used: Vec<usize>) -> Self {
        PreemptRound {
            views,
            used,
            census: None,
        }
    }
}

impl Core {
    /// Tries to make room for the attempt's pod by preemption; the hostname
    /// it is nominated to when it is (or already was). `deferring`: some
    /// agent had no offer out, so room may be on its way; then nothing is
    /// preempted while an agent has room beyond what mesopod's tasks hold.
    pub(super) fn preempt(
        &mut self,
        attempt: &Attempt,
        round: &mut PreemptRound,
        deferring: bool,
        now: SystemTime,
    ) -> Option<String> {
        if !may_preempt_others(&attempt.pod) {
            return None;
        }
        if let Some(n) = self.preemption.nominations.get(&attempt.key) {
            let fresh_offer = n.regrouped && self.offers.iter().any(|o| o.agent_id() == n.agent);
            if n.expires > now && !fresh_offer {
                return Some(n.hostname.clone());
            }
            // Its victims are gone and an offer the agent made since does
            // not hold it (another framework took the room): plan again.
            self.preemption.forget(&attempt.key);
        }
        if attempt.task.priority() <= self.priority_floor(now) {
            // Nothing runs below it: the common case costs nothing more.
            return None;
        }
        let needs = self.needs.pod_needs_millis(&attempt.task).ok()?;
        let census = match &mut round.census {
            Some(census) => census,
            None => {
                let used: HashSet<&str> = round
                    .used
                    .iter()
                    .filter_map(|&i| round.views.get(i))
                    .map(|v| v.id().value.as_str())
                    .collect();
                let census = self.census(&used);
                round.census.insert(census)
            }
        };
        if deferring && room_coming_back(census, needs) {
            return None;
        }
        let priority = attempt.task.priority();
        let held = self.held_agents();
        let nominated: HashSet<&str> = self
            .preemption
            .nominations
            .values()
            .map(|n| n.agent.as_str())
            .collect();
        let budgets: Vec<Budget> = self.preemption.budgets.values().cloned().collect();
        let preemptor = Preemptor {
            placer: &self.placer,
            task: &attempt.task,
            needs,
        };
        let n = census.agents.len();
        if n == 0 {
            return None;
        }
        let start = self.preemption.cursor % n;
        self.preemption.cursor = self.preemption.cursor.wrapping_add(1);
        let wanted = (n * CANDIDATES_PERCENT / 100).max(MIN_CANDIDATES);
        // Every candidate's plan on the scalars first (cheap), in scan order.
        let mut scans: Vec<(usize, Vec<&PodTask>, Victims<'_>)> = Vec::new();
        for j in 0..n {
            let i = (start + j) % n;
            let agent = &census.agents[i].0;
            if held.contains(agent)
                || nominated.contains(agent.as_str())
                || self.liveness.is_not_ready(agent)
            {
                continue;
            }
            let lower: Vec<&PodTask> = census
                .tasks
                .get(agent)
                .into_iter()
                .flatten()
                .filter(|t| t.priority() < priority)
                .collect();
            if lower.is_empty() {
                continue;
            }
            let free = scalars(census.free.get(agent).into_iter().flatten());
            if let Some(plan) = preemptor.scalar_victims(free, &lower, &budgets) {
                scans.push((i, lower, plan));
                if scans.len() >= wanted {
                    break;
                }
            }
        }
        // Then the best by kube's order, checked by the pipeline, best first
        // until no scalar plan left could beat the best checked one.
        let mut ranked: Vec<(Rank, usize, usize)> = scans
            .iter()
            .enumerate()
            .map(|(k, (_, _, plan))| (plan.rank(), k, scans[k].0))
            .collect();
        ranked.sort_unstable();
        let mut best: Option<((Rank, usize), usize, Victims<'_>)> = None;
        for (rank, k, i) in ranked {
            if best.as_ref().is_some_and(|(b, ..)| (rank, k) >= *b) {
                break;
            }
            let (agent, view, _) = &census.agents[i];
            let mut node = view.clone();
            // Its lower-priority pods run there, so our executor does.
            if let Some(info) = self.agents.executor_on(agent, self.lookup.as_ref()) {
                node = node.with_executor_running(info);
            }
            if self.cordoned.contains(node.hostname()) {
                node = node.cordoned();
            }
            let candidate = Candidate {
                node,
                free: census.free.get(agent).into_iter().flatten().collect(),
                lower: scans[k].1.clone(),
            };
            if let Some(victims) = preemptor.victims_on(&candidate, &budgets) {
                let checked = (victims.rank(), k);
                if best.as_ref().is_none_or(|(b, ..)| checked < *b) {
                    best = Some((checked, i, victims));
                }
            }
        }
        let (_, i, victims) = best?;
        let victims: Vec<PodTask> = victims.tasks.iter().map(|t| (*t).clone()).collect();
        let (agent, view, _) = &census.agents[i];
        let (agent, hostname) = (agent.clone(), view.hostname().to_owned());
        drop(scans);
        if let Some(tasks) = census.tasks.get_mut(&agent) {
            tasks.retain(|t| !victims.iter().any(|v| v.id == t.id));
        }
        self.stop_victims(attempt, &victims, &hostname, now);
        let longest = victims
            .iter()
            .map(crate::launch::grace_period)
            .max()
            .unwrap_or_default();
        for v in &victims {
            self.preemption
                .victim_of
                .insert(v.id.clone(), attempt.key.clone());
        }
        self.preemption.nominations.insert(
            attempt.key.clone(),
            Nomination {
                agent,
                hostname: hostname.clone(),
                priority,
                remaining: victims.len(),
                victims: victims.iter().map(|v| v.id.clone()).collect(),
                expires: now + longest + NOMINATION_SLACK,
                regrouped: false,
            },
        );
        self.observed.metrics.preemption_attempts.inc();
        self.observed
            .metrics
            .preemption_victims
            .add(victims.len() as u64);
        Some(hostname)
    }

    /// Marks and deletes each victim, with the event kube-scheduler writes.
    fn stop_victims(
        &mut self,
        attempt: &Attempt,
        victims: &[PodTask],
        host: &str,
        now: SystemTime,
    ) {
        let scheduler = attempt
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.clone())
            .unwrap_or_else(|| "default-scheduler".into());
        let mut writes = Vec::with_capacity(victims.len() * 2);
        for victim in victims {
            let key = victim.pod_key();
            tracing::info!(
                victim = %format!("{}/{}", key.namespace, key.name),
                preemptor = %format!("{}/{}", attempt.key.namespace, attempt.key.name),
                node = host,
                "preempting a lower-priority pod"
            );
            let about = Pod {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    namespace: Some(key.namespace.clone()),
                    name: Some(key.name.clone()),
                    uid: Some(key.uid.clone()),
                    ..Default::default()
                },
                ..Pod::default()
            };
            let message = format!("Preempted by pod {} on node {host}", attempt.key.uid);
            writes.push(Write::Event(Box::new(pod_event(
                &about,
                "Normal",
                "Preempted",
                message,
                now,
            ))));
            writes.push(Write::Preempt {
                key,
                scheduler: scheduler.clone(),
            });
        }
        self.emit(Effect::Store(writes));
    }

    /// What preemption reads this round.
    fn census(&self, used_offers: &HashSet<&str>) -> Census {
        let victims: HashSet<&TaskId> = self
            .preemption
            .nominations
            .values()
            .flat_map(|n| &n.victims)
            .collect();
        let mut tasks: HashMap<String, Vec<PodTask>> = HashMap::new();
        let mut used: HashMap<String, [i64; 4]> = HashMap::new();
        for task in self.registry.list(&|t| t.is_live() && t.spec.is_some()) {
            let Some(spec) = &task.spec else { continue };
            let agent = spec.agent_id.value.clone();
            let sum = used.entry(agent.clone()).or_default();
            *sum = add(*sum, task_scalars(&task));
            if !task.has(Flag::Deleted) && task.has(Flag::Launched) && !victims.contains(&task.id) {
                tasks.entry(agent).or_default().push(task);
            }
        }
        let mut free: HashMap<String, Vec<Resource>> = HashMap::new();
        let mut offered = HashSet::new();
        for o in self.offers.iter() {
            offered.insert(o.agent_id().to_owned());
            if !used_offers.contains(o.id()) {
                free.entry(o.agent_id().to_owned())
                    .or_default()
                    .extend(o.offer.resources.iter().cloned());
            }
        }
        let agents: Vec<(String, NodeView, [i64; 4])> = self
            .agents
            .nodes()
            .into_iter()
            .filter(|(id, view, _)| !self.maintenance.fences(id, view.hostname()))
            .map(|(id, view, capacity)| (id.to_owned(), view.clone(), capacity))
            .collect();
        let rooms = agents
            .iter()
            .filter(|(agent, ..)| !offered.contains(agent))
            .map(|(agent, _, capacity)| {
                sub(*capacity, used.get(agent).copied().unwrap_or_default())
            })
            .collect();
        Census {
            tasks,
            free,
            rooms,
            agents,
        }
    }

    /// The lowest priority of a live task (`i32::MAX` with none): worked out
    /// at most once a second, and lowered at once when a lower one is
    /// placed, so it is never above the truth for long.
    fn priority_floor(&mut self, now: SystemTime) -> i32 {
        match self.preemption.floor {
            Some((floor, at)) if now < at + FLOOR_TTL => floor,
            _ => {
                // Read in place: the filter copies no task.
                let floor = std::cell::Cell::new(i32::MAX);
                let _ = self.registry.list(&|t| {
                    if t.is_live() {
                        floor.set(floor.get().min(t.priority()));
                    }
                    false
                });
                self.preemption.floor = Some((floor.get(), now));
                floor.get()
            }
        }
    }

    /// Of the due pods, when no offer is out: those that might preempt
    /// (above the lowest priority running, and allowed to). The rest wait
    /// for offers, as they always did.
    pub(super) fn may_preempt(&mut self, ready: Vec<PodKey>, now: SystemTime) -> Vec<PodKey> {
        let floor = self.priority_floor(now);
        ready
            .into_iter()
            .filter(|k| {
                self.pending.entry(k).is_some_and(|e| e.priority > floor)
                    && self.pending.pod(k).is_some_and(may_preempt_others)
                    && self.preemption.nominated(k).is_none()
            })
            .collect()
    }

    /// An offer came from `agent`: the pods nominated to it whose victims
    /// have all ended are due now (the offer carries their room). Others
    /// that wait for a nomination are not woken by every offer, as deferred
    /// pods are: a cluster of thousands of agents offers all the time.
    pub(super) fn wake_nominees(&mut self, agent: &str, now: SystemTime) {
        let Some(due) = self.preemption.freed.get(agent) else {
            return;
        };
        for key in due {
            self.pending.queue_mut().wake(key, now);
        }
    }

    /// A task ended. When it was a nomination's last victim, the offers its
    /// agent has out are declined (refusing nothing): they were made before
    /// the victims' room came back, and would split the agent's room in
    /// pieces the nominee may not fit. The master then offers it whole.
    pub(super) fn on_task_ended(&mut self, task: &TaskId) {
        if self.preemption.victim_of.is_empty() {
            return;
        }
        let Some(agent) = self.preemption.victim_ended(task) else {
            return;
        };
        let decline: Vec<OfferId> = self
            .offers
            .iter()
            .filter(|o| o.agent_id() == agent)
            .filter_map(|o| o.offer.id.clone())
            .collect();
        for id in &decline {
            let _ = self.offers.take(&id.value);
        }
        self.decline_refusing(decline, 0.0);
    }
}

/// Whether the pod may preempt (`preemptionPolicy` is not `Never`).
fn may_preempt_others(pod: &Arc<Pod>) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.preemption_policy.as_deref())
        != Some("Never")
}

/// Whether an agent with no offer out has room beyond what mesopod's tasks
/// hold: resources on their way back (an ACCEPT's leftovers, a task that
/// just ended), worth waiting for rather than stopping pods.
fn room_coming_back(census: &Census, needs: [i64; 4]) -> bool {
    census.rooms.iter().any(|room| covers(*room, needs))
}
