//! One scheduling round's placement: every pod of the round, in order, on
//! what is left of the round's offers. This is what the scheduler runs.
//!
//! # Guarantees
//!
//! - **Deterministic.** The choice depends only on the pods, the offers and
//!   the [`Cursor`] passed in: among the feasible offers sampled, the best
//!   score wins and ties go to the lower hostname, then the lower offer id,
//!   never to arrival or hash order. When no more than [`MAX_CANDIDATES`]
//!   offers fit, the sample is every feasible offer, and the cursor changes
//!   nothing.
//! - **What is left.** A later pod of the round sees what the earlier ones
//!   left of an offer, never the whole offer again.
//! - **Narrowing is invisible.** When the pipeline refuses every node that
//!   lacks a `nodeSelector` entry, a pod with a selector is tried first
//!   only on the offers whose node carries its rarest entry ([`index`]);
//!   if none of those fits, every offer is tried, so the failure names
//!   every agent's reason.

mod index;

use std::sync::Arc;

use mesos::proto::OfferId;
use registry::PodTask;

use crate::demand::PodDemand;
use crate::failure::{AggregateFailure, ProcureError};
use crate::offer::OfferView;
use crate::pipeline::Procurement;
use crate::score::Scoring;
use crate::state::ProcureState;
use index::SelectorIndex;

/// Feasible offers scored per pod before the best is taken. Scoring every
/// offer of a 5,000-agent cluster for every pod costs more than it gains;
/// like kube-scheduler's percentageOfNodesToScore, a sample that starts at
/// a rotating offer keeps placements good and spread while bounding the
/// cost of one attempt.
pub const MAX_CANDIDATES: usize = 64;

/// Where the next scan of the offers starts. Each scan moves it on by one,
/// so successive pods sample different offers first and spread over a
/// large cluster. The caller keeps it between rounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor(pub usize);

impl Cursor {
    /// The start of a scan over `tries` offers, moving the cursor on.
    fn next(&mut self, tries: usize) -> usize {
        let start = self.0 % tries;
        self.0 = self.0.wrapping_add(1);
        start
    }
}

/// Where one pod of a round goes.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Index of the chosen offer in the round's offers.
    pub offer_index: usize,
    /// The chosen offer's id.
    pub offer_id: OfferId,
    /// The task as placed: its spec (agent, resources, ports, executor),
    /// roles and offer id are set.
    pub task: PodTask,
    /// The offer's score for this pod.
    pub score: f64,
}

/// Which offers a task may use in a round (see [`Placer::place_round_where`]).
pub type MayUse<'f> = dyn Fn(&PodTask, &OfferView) -> bool + 'f;

/// A pipeline with its scoring: what the scheduler holds and places with.
#[derive(Clone)]
pub struct Placer {
    pipeline: Arc<dyn Procurement + Send + Sync>,
    scoring: Scoring,
}

impl std::fmt::Debug for Placer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placer")
            .field("scoring", &self.scoring)
            .finish_non_exhaustive()
    }
}

impl Placer {
    /// Places with `pipeline`, choosing by `scoring`.
    pub fn new(pipeline: impl Procurement + Send + Sync + 'static, scoring: Scoring) -> Self {
        Placer {
            pipeline: Arc::new(pipeline),
            scoring,
        }
    }

    /// Places each task of a round, in order, on what is left of `offers`
    /// (see the module's guarantees). Returns one result per task, in the
    /// order given; `cursor` moves on by one per scan.
    ///
    /// # Errors
    /// A task's [`AggregateFailure`] says, agent by agent, why it fits
    /// nowhere; its `agents` is the number of offers.
    pub fn place_round<'t>(
        &self,
        tasks: impl IntoIterator<Item = &'t PodTask>,
        offers: &[OfferView],
        cursor: &mut Cursor,
    ) -> Vec<Result<Placement, AggregateFailure>> {
        self.place_round_where(tasks, offers, cursor, None)
    }

    /// [`Placer::place_round`], where a task may use only the offers that
    /// `may_use` allows it (all, when `None`): the scheduler keeps an agent
    /// whose pods are being preempted for the pods it was freed for. A
    /// restricted task's failure counts only the offers it could use, so
    /// the caller sees the others as not offered.
    pub fn place_round_where<'t>(
        &self,
        tasks: impl IntoIterator<Item = &'t PodTask>,
        offers: &[OfferView],
        cursor: &mut Cursor,
        may_use: Option<&MayUse<'_>>,
    ) -> Vec<Result<Placement, AggregateFailure>> {
        let mut round = Round {
            placer: self,
            offers,
            states: vec![None; offers.len()],
            cursor,
            copies: self.pipeline.modifies_task(),
        };
        let narrows = self.pipeline.enforces_node_selector();
        let mut index = None;
        tasks
            .into_iter()
            .map(|task| {
                let demand = Arc::new(PodDemand::for_task(task));
                if let Some(may_use) = may_use {
                    let allowed: Vec<usize> = (0..offers.len())
                        .filter(|&i| may_use(task, &offers[i]))
                        .collect();
                    if allowed.is_empty() {
                        return Err(AggregateFailure {
                            agents: 0,
                            failures: Vec::new(),
                        });
                    }
                    if allowed.len() < offers.len() {
                        return round.scan(task, &demand, Some(&allowed)).map_err(|mut f| {
                            f.agents = allowed.len();
                            f
                        });
                    }
                }
                if narrows && !demand.node_selector().is_empty() {
                    let only = index
                        .get_or_insert_with(|| SelectorIndex::new(offers))
                        .narrowest(demand.node_selector());
                    if !only.is_empty()
                        && let Ok(placed) = round.scan(task, &demand, Some(only))
                    {
                        return Ok(placed);
                    }
                }
                round.scan(task, &demand, None)
            })
            .collect()
    }
}

/// A round under way: what is left of each offer it used.
struct Round<'r> {
    placer: &'r Placer,
    offers: &'r [OfferView],
    /// What is left of each offer once a pod of this round took from it.
    states: Vec<Option<ProcureState>>,
    cursor: &'r mut Cursor,
    /// Whether the pipeline may change the task: built-in procurements
    /// never do, so one copy serves every candidate.
    copies: bool,
}

impl Round<'_> {
    /// Tries the pod on `only` these offers, or on all, from the cursor.
    fn scan(
        &mut self,
        task: &PodTask,
        demand: &Arc<PodDemand>,
        only: Option<&[usize]>,
    ) -> Result<Placement, AggregateFailure> {
        let views = self.offers;
        let n = views.len();
        let failure = |failures: &[(usize, ProcureError)]| AggregateFailure {
            agents: n,
            failures: failures
                .iter()
                .map(|(i, e)| (views[*i].node().hostname().to_owned(), e.clone()))
                .collect(),
        };
        let Some(first) = views.first() else {
            return Err(failure(&[]));
        };
        let pipeline = &self.placer.pipeline;
        let mut task = task.clone();
        let tries = only.map_or(n, <[usize]>::len);
        let start = self.cursor.next(tries);
        // Two states, swapped when a candidate becomes the best: most
        // candidates fail (a node selector matches a tenth of the agents),
        // and a failure then costs no allocation. Hostnames are copied only
        // if the pod fits nowhere.
        let mut scratch = first.state();
        let mut best_state = first.state();
        let mut best: Option<(usize, f64, Option<PodTask>)> = None;
        let mut failures: Vec<(usize, ProcureError)> = Vec::new();
        let mut feasible = 0;
        for j in 0..tries {
            let k = (start + j) % tries;
            let i = only.map_or(k, |o| o[k]);
            // A candidate works on its own copy of the offer's state (what
            // is left of it if this round used it already), so a failure
            // needs no rollback.
            match &self.states[i] {
                Some(used) => scratch.clone_from(used),
                None => views[i].reset_state(&mut scratch),
            }
            scratch.seed_demand(demand.clone());
            scratch.begin_pod();
            let outcome = if self.copies {
                let mut copy = task.clone();
                pipeline
                    .procure(&mut copy, views[i].node(), &mut scratch)
                    .map(|()| Some(copy))
            } else {
                pipeline
                    .procure(&mut task, views[i].node(), &mut scratch)
                    .map(|()| None)
            };
            match outcome {
                Err(e) => failures.push((i, e)),
                Ok(candidate) => {
                    let score = self.placer.scoring.score(&scratch);
                    let better = best.as_ref().is_none_or(|(bi, bs, ..)| {
                        score > *bs
                            || (score == *bs
                                && (views[i].node().hostname(), &views[i].id().value)
                                    < (views[*bi].node().hostname(), &views[*bi].id().value))
                    });
                    if better {
                        std::mem::swap(&mut scratch, &mut best_state);
                        best = Some((i, score, candidate));
                    }
                    feasible += 1;
                    if feasible >= MAX_CANDIDATES {
                        break;
                    }
                }
            }
        }
        let Some((i, score, placed)) = best else {
            return Err(failure(&failures));
        };
        // Only the winner's spec is written out: it costs more than the attempt.
        if let Some(changed) = placed {
            task = changed;
        }
        if let Some(roles) = best_state.pod_roles() {
            task.roles = roles.clone();
        }
        task.spec = Some(Arc::new(best_state.spec()));
        task.offer_id = Some(views[i].id().clone());
        // Later pods of the round see what is left of the offer.
        self.states[i] = Some(best_state);
        Ok(Placement {
            offer_index: i,
            offer_id: views[i].id().clone(),
            task,
            score,
        })
    }
}
