//! Fitness scoring among the offers a pod fits.
//!
//! An offer is all an agent has free, so "allocated" is measured against
//! the offer: the share of the offer's cpus and mem the pod (with its
//! executor, if it brings one) would take. Bin-packing prefers the largest
//! share (the tightest fit, leaving big offers whole for big pods);
//! spreading prefers the smallest (the agent with the most room left).

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
