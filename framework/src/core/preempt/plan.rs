//! Which running pods to preempt for a pod on one agent, and which agent's
//! plan to take: kube-scheduler's DefaultPreemption (`selectVictimsOnNode`
//! and `pickOneNodeForPreemption`), over mesopod's own tasks. Pure: the
//! same tasks, offers and budgets give the same plan.
//!
//! Whether a pod fits is decided by the procurement pipeline itself, on a
//! trial offer of what the agent has free plus what the victims hold, so
//! every rule that places pods (resources, roles, ports, node selectors,
//! taints, the executor) also bounds what preemption may take. The
//! reprieve first runs on the four scalars, which decide almost every
//! case, and its victims are then checked by the pipeline; only when that
//! check fails is the reprieve run again, pod by pod, by the pipeline.

use std::cmp::Reverse;
use std::collections::HashSet;
use std::time::SystemTime;

use controllers::Selector;
use mesos::proto::{Offer, OfferId, Resource};
use mesos::resources::Resources;
use procurement::{Cursor, NodeView, OfferView, Placer, ResourceKind};
use registry::PodTask;

/// A disruption budget as preemption weighs it: how many more of its pods
/// may go (`status.disruptionsAllowed`).
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    pub(crate) namespace: String,
    pub(crate) selector: Selector,
    pub(crate) allowed: i32,
    /// `status.disruptedPods`: already counted as gone.
    pub(crate) disrupted: HashSet<String>,
}

impl Budget {
    /// kube's rule: an empty selector selects no pod for a budget.
    fn covers(&self, task: &PodTask) -> bool {
        let key = task.pod_key();
        key.namespace == self.namespace
            && !self.selector.is_everything()
            && self.selector.matches(Some(task.labels()))
            && !self.disrupted.contains(&key.name)
    }
}

/// One agent as a preemption candidate.
pub(crate) struct Candidate<'a> {
    /// The agent, as procurement sees it (its running executor and cordon
    /// taint applied).
    pub(crate) node: NodeView,
    /// What the agent has offered and nobody took: its live offers.
    pub(crate) free: Vec<&'a Resource>,
    /// Its running tasks of lower priority than the preemptor.
    pub(crate) lower: Vec<&'a PodTask>,
}

/// Victims on one agent.
#[derive(Debug, Clone)]
pub(crate) struct Victims<'a> {
    /// Most important first (higher priority, then earlier start).
    pub(crate) tasks: Vec<&'a PodTask>,
    /// How many of them a disruption budget would not allow to go.
    pub(crate) violations: usize,
}

impl<'a> Victims<'a> {
    /// Victims with whether each violates a budget, put most important first.
    fn of(chosen: Vec<(&'a PodTask, bool)>) -> Self {
        let violations = chosen.iter().filter(|(_, v)| *v).count();
        let mut tasks: Vec<&PodTask> = chosen.into_iter().map(|(t, _)| t).collect();
        tasks.sort_by(|a, b| more_important(a, b));
        Victims { tasks, violations }
    }

    /// kube's `pickOneNodeForPreemption` order, lowest best: the fewest
    /// budget violations, then the lowest highest-victim priority, the
    /// smallest sum of priorities, the fewest victims, and the latest start
    /// among the most important victims.
    pub(crate) fn rank(&self) -> Rank {
        let highest = self.tasks.first().map_or(i32::MIN, |t| t.priority());
        // Shifted as kube shifts them, so that negative priorities add up to
        // more, not less, than no victim at all.
        let sum: i64 = self
            .tasks
            .iter()
            .map(|t| i64::from(t.priority()) + i64::from(i32::MAX) + 1)
            .sum();
        let earliest = self
            .tasks
            .iter()
            .filter(|t| t.priority() == highest)
            .map(|t| t.created)
            .min()
            .unwrap_or(SystemTime::UNIX_EPOCH);
        (
            self.violations,
            highest,
            sum,
            self.tasks.len(),
            Reverse(earliest),
        )
    }
}

/// See [`Victims::rank`].
pub(crate) type Rank = (usize, i32, i64, usize, Reverse<SystemTime>);

/// The preemptor and what it needs.
pub(crate) struct Preemptor<'a> {
    pub(crate) placer: &'a Placer,
    pub(crate) task: &'a PodTask,
    /// cpus, mem, disk, gpus in milli-units.
    pub(crate) needs: [i64; 4],
}

impl Preemptor<'_> {
    /// kube's `selectVictimsOnNode` on the four scalars alone: with every
    /// lower-priority pod gone the pod must have room; then as many as
    /// possible are reprieved, highest priority first, those a budget
    /// protects before the rest. `None` when even removing them all leaves
    /// no room. Cheap: what [`Preemptor::victims_on`] then checks.
    pub(crate) fn scalar_victims<'a>(
        &self,
        free: [i64; 4],
        lower: &[&'a PodTask],
        budgets: &[Budget],
    ) -> Option<Victims<'a>> {
        let mut potential = lower.to_vec();
        potential.sort_by(|a, b| more_important(a, b));
        let all = potential
            .iter()
            .fold(free, |sum, t| add(sum, task_scalars(t)));
        if !covers(all, self.needs) {
            return None;
        }
        // What is free with the pods still removed.
        let mut room = all;
        let mut victims = Vec::new();
        for (task, violates) in reprieve_order(&potential, budgets) {
            let without = sub(room, task_scalars(task));
            if covers(without, self.needs) {
                room = without;
            } else {
                victims.push((task, violates));
            }
        }
        Some(Victims::of(victims))
    }

    /// The victims on `candidate`, decided by the pipeline: the scalar plan
    /// when the pod fits with it, else kube's reprieve with the pipeline
    /// judging every step (ports, roles and the rest then decide). `None`
    /// when the pod does not fit even with every lower-priority pod gone.
    pub(crate) fn victims_on<'a>(
        &self,
        candidate: &Candidate<'a>,
        budgets: &[Budget],
    ) -> Option<Victims<'a>> {
        let free = scalars(candidate.free.iter().copied());
        let fits = |gone: &[&PodTask]| self.fits(candidate, gone);
        if let Some(plan) = self.scalar_victims(free, &candidate.lower, budgets)
            && fits(&plan.tasks)
        {
            return Some(plan);
        }
        let mut potential = candidate.lower.clone();
        potential.sort_by(|a, b| more_important(a, b));
        if !fits(&potential) {
            return None;
        }
        let mut victims = Vec::new();
        let mut gone = potential.clone();
        for (task, violates) in reprieve_order(&potential, budgets) {
            gone.retain(|t| !std::ptr::eq(*t, task));
            if !fits(&gone) {
                gone.push(task);
                victims.push((task, violates));
            }
        }
        Some(Victims::of(victims))
    }

    /// Whether the pod fits the agent with `gone` stopped: the pipeline on a
    /// trial offer of the agent's free resources and theirs.
    fn fits(&self, candidate: &Candidate<'_>, gone: &[&PodTask]) -> bool {
        let resources = candidate.free.iter().map(|r| (*r).clone()).chain(
            gone.iter()
                .filter_map(|t| t.spec.as_ref())
                .flat_map(|s| s.resources.iter().cloned()),
        );
        let Ok(merged) = Resources::from_protos(resources) else {
            return false;
        };
        let node = &candidate.node;
        let offer = Offer {
            id: Some(OfferId::new("preemption-trial")),
            agent_id: Some(node.agent_id().clone()),
            hostname: node.hostname().to_owned(),
            resources: merged.to_protos(),
            ..Offer::default()
        };
        let Ok(view) = OfferView::new(&offer) else {
            return false;
        };
        let view = view.with_node(node.clone());
        self.placer
            .place_round([self.task], &[view], &mut Cursor::default())
            .first()
            .is_some_and(Result::is_ok)
    }
}

/// kube's `MoreImportantPod`: higher priority, then the earlier start.
fn more_important(a: &PodTask, b: &PodTask) -> std::cmp::Ordering {
    b.priority()
        .cmp(&a.priority())
        .then(a.created.cmp(&b.created))
}

/// kube's `filterPodsWithPDBViolation`, then the reprieve order: the pods a
/// budget protects first, each with whether taking it violates a budget.
fn reprieve_order<'a>(potential: &[&'a PodTask], budgets: &[Budget]) -> Vec<(&'a PodTask, bool)> {
    let mut allowed: Vec<i32> = budgets.iter().map(|b| b.allowed).collect();
    let mut violating = Vec::new();
    let mut other = Vec::new();
    for &task in potential {
        let mut violates = false;
        for (budget, left) in budgets.iter().zip(allowed.iter_mut()) {
            if budget.covers(task) {
                *left -= 1;
                violates |= *left < 0;
            }
        }
        if violates {
            violating.push((task, true));
        } else {
            other.push((task, false));
        }
    }
    violating.extend(other);
    violating
}

/// The scalars procurement takes, in [`ResourceKind::SCALARS`] order, in
/// milli-units.
pub(crate) fn scalars<'r>(resources: impl IntoIterator<Item = &'r Resource>) -> [i64; 4] {
    let mut out = [0i64; 4];
    for r in resources {
        let Some(s) = &r.scalar else { continue };
        if let Some(i) = ResourceKind::SCALARS
            .iter()
            .position(|k| k.name() == r.name)
        {
            out[i] += procurement::f64_to_millis(s.value);
        }
    }
    out
}

/// What a task holds.
pub(crate) fn task_scalars(task: &PodTask) -> [i64; 4] {
    task.spec
        .as_ref()
        .map_or([0; 4], |s| scalars(s.resources.iter()))
}

pub(crate) fn add(a: [i64; 4], b: [i64; 4]) -> [i64; 4] {
    std::array::from_fn(|i| a[i] + b[i])
}

pub(crate) fn sub(a: [i64; 4], b: [i64; 4]) -> [i64; 4] {
    std::array::from_fn(|i| a[i] - b[i])
}

pub(crate) fn covers(have: [i64; 4], needs: [i64; 4]) -> bool {
    have.iter().zip(needs).all(|(h, n)| *h >= n)
}
