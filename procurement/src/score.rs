//! Fitness scoring among the offers a pod fits, and `best_fit`.
//!
//! An offer is all an agent has free, so "allocated" is measured against
//! the offer: the share of the offer's cpus and mem the pod (with its
//! executor, if it brings one) would take. Bin-packing prefers the largest
//! share (the tightest fit, leaving big offers whole for big pods);
//! spreading prefers the smallest (the agent with the most room left).

use std::cmp::Ordering;
use std::sync::Arc;

use mesos::proto::OfferId;
use mesos::resources::Resources;
use registry::{PodTask, Spec};

use crate::demand::PodDemand;
use crate::failure::{AggregateFailure, ProcureError};
use crate::offer::OfferView;
use crate::pipeline::Procurement;
use crate::pool::ResourceKind;
use crate::state::ProcureState;

/// Which offers scoring prefers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Most allocated: fill agents before starting on empty ones.
    BinPack,
    /// Least allocated: spread pods over agents.
    Spread,
}

/// How offers are scored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scoring {
    /// Bin-packing or spreading.
    pub strategy: Strategy,
    /// Weight of cpus.
    pub cpus_weight: f64,
    /// Weight of mem.
    pub mem_weight: f64,
}

impl Default for Scoring {
    fn default() -> Self {
        Scoring {
            strategy: Strategy::BinPack,
            cpus_weight: 1.0,
            mem_weight: 1.0,
        }
    }
}

impl Scoring {
    /// The score of the pod just procured in `state`, in [0, 1]; higher is better.
    pub fn score(&self, state: &ProcureState) -> f64 {
        let share = |kind| {
            let offered = state.offered_millis(kind);
            if offered <= 0 {
                0.0
            } else {
                state.pod_taken_millis(kind) as f64 / offered as f64
            }
        };
        let weights = [
            (ResourceKind::Cpus, self.cpus_weight.max(0.0)),
            (ResourceKind::Mem, self.mem_weight.max(0.0)),
        ];
        let total: f64 = weights.iter().map(|(_, w)| w).sum();
        if total <= 0.0 || !total.is_finite() {
            return 0.0;
        }
        let s: f64 = weights
            .iter()
            .map(|&(k, w)| {
                let used = share(k).clamp(0.0, 1.0);
                w * match self.strategy {
                    Strategy::BinPack => used,
                    Strategy::Spread => 1.0 - used,
                }
            })
            .sum();
        s / total
    }
}

/// Where a pod goes: the chosen offer, the pod's spec and what is left.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Index of the chosen offer in the slice given to [`best_fit`].
    pub offer_index: usize,
    /// The chosen offer's id.
    pub offer_id: OfferId,
    /// What the pod's task gets: agent, resources, ports, executor.
    pub spec: Spec,
    /// What is left of the offer after this pod.
    pub remaining: Resources,
    /// The offer's score.
    pub score: f64,
    /// The state after placement, to place more pods on what is left.
    pub state: ProcureState,
}

/// Tries `pipeline` for `task` on every offer and picks the best scoring
/// one. Ties go to the lower hostname, then the lower offer id, so the
/// choice never depends on the order offers arrived in.
///
/// On success, `task` is as the winning attempt left it (the built-in
/// procurements do not change it); the caller records the spec. On failure,
/// `task` is unchanged and the error says, agent by agent, why.
///
/// # Errors
/// [`AggregateFailure`] when no offer fits.
pub fn best_fit<P: Procurement + ?Sized>(
    pipeline: &P,
    scoring: &Scoring,
    task: &mut PodTask,
    offers: &[OfferView],
) -> Result<Placement, AggregateFailure> {
    let demand = Arc::new(PodDemand::for_task(task));
    let mut failures: Vec<(usize, ProcureError)> = Vec::new();
    // Every attempt starts from the task as given: when the pipeline may
    // change it, each attempt works on a copy and the winner's copy is kept.
    let copy = pipeline.modifies_task();
    let mut best: Option<(usize, f64, Option<PodTask>)> = None;
    // Two states, swapped when an offer becomes the best: the scan reuses
    // their buffers instead of allocating per offer.
    let (mut state, mut best_state) = match offers.first() {
        Some(o) => (o.state(), o.state()),
        None => {
            return Err(AggregateFailure::default());
        }
    };
    state.seed_demand(demand.clone());
    best_state.seed_demand(demand);
    for (i, offer) in offers.iter().enumerate() {
        offer.reset_state(&mut state);
        let mut scratch = copy.then(|| task.clone());
        let attempt = match scratch.as_mut() {
            Some(t) => pipeline.procure(t, offer.node(), &mut state),
            None => pipeline.procure(task, offer.node(), &mut state),
        };
        match attempt {
            // Hostnames are copied only if the pod fits nowhere.
            Err(e) => failures.push((i, e)),
            Ok(()) => {
                let score = scoring.score(&state);
                let better = match &best {
                    None => true,
                    Some((j, s, _)) => match score.total_cmp(s) {
                        Ordering::Greater => true,
                        Ordering::Less => false,
                        Ordering::Equal => {
                            let (a, b) = (offer, &offers[*j]);
                            (a.node().hostname(), &a.id().value)
                                < (b.node().hostname(), &b.id().value)
                        }
                    },
                };
                if better {
                    std::mem::swap(&mut state, &mut best_state);
                    best = Some((i, score, scratch));
                }
            }
        }
    }
    match best {
        Some((i, score, won)) => {
            let state = best_state;
            if let Some(won) = won {
                *task = won;
            }
            let (spec, remaining) = state.result();
            Ok(Placement {
                offer_index: i,
                offer_id: offers[i].id().clone(),
                spec,
                remaining,
                score,
                state,
            })
        }
        None => Err(AggregateFailure {
            agents: offers.len(),
            failures: failures
                .into_iter()
                .map(|(i, e)| (offers[i].node().hostname().to_owned(), e))
                .collect(),
        }),
    }
}

/// A pipeline with its scoring: what the scheduling loop holds.
pub struct Placer {
    pipeline: Box<dyn Procurement + Send + Sync>,
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
            pipeline: Box::new(pipeline),
            scoring,
        }
    }

    /// The best offer for `task`; see [`best_fit`].
    ///
    /// # Errors
    /// [`AggregateFailure`] when no offer fits.
    pub fn best_fit(
        &self,
        task: &mut PodTask,
        offers: &[OfferView],
    ) -> Result<Placement, AggregateFailure> {
        best_fit(&*self.pipeline, &self.scoring, task, offers)
    }

    /// Places `task` on what is left in `state` (another pod on an offer
    /// already used this round).
    ///
    /// # Errors
    /// Why it does not fit; `state` and `task` are then unchanged.
    pub fn place(
        &self,
        state: &mut ProcureState,
        task: &mut PodTask,
        node: &crate::node::NodeView,
    ) -> Result<Spec, ProcureError> {
        state.place(&*self.pipeline, task, node)
    }
}
