//! HorizontalPodAutoscaler (`autoscaling/v2`): a target's replicas kept between
//! `minReplicas` and `maxReplicas` by its pods' CPU or memory use. The HPA controller
//! (`controllers::hpa`) keeps its status and writes the target's `scale`.
//!
//! As kube-apiserver: `minReplicas` defaults to 1, no metrics means CPU at 80%
//! utilization, and a given `behavior` has its missing rules filled with kube's
//! defaults (`defaults.rs`); the checks are `ValidateHorizontalPodAutoscaler`'s
//! (`validation.rs`). Beyond kube, what mesopod cannot honour is refused at create
//! with the field's path: `Pods`, `Object` and `External` metrics (there is no custom
//! or external metrics API to read them from) and resources other than `cpu` and
//! `memory` (the executors sample nothing else), so an autoscaler is never accepted
//! and then ignored.
//!
//! Only `autoscaling/v2` is served: `autoscaling/v1` would need the conversion of its
//! `targetCPUUtilizationPercentage` and annotations both ways on every read, write and
//! watch.

mod defaults;
pub(crate) mod table;
mod validation;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;

use super::Kind;
use super::apps::{WithStatus, keep_metadata, next_generation};
use crate::resource::Resource;
use crate::validation::Causes;

pub use defaults::{DEFAULT_CPU_UTILIZATION, scale_down_defaults, scale_up_defaults};

impl Kind for HorizontalPodAutoscaler {
    const RESOURCE: Resource = Resource::HorizontalPodAutoscalers;

    fn normalize(&mut self) {
        defaults::apply(self);
    }

    fn validate(&self, causes: &mut Causes) {
        validation::spec(&self.spec.clone().unwrap_or_default(), causes);
        validation::status(self.status.as_ref(), causes);
    }

    fn prepare_create(&mut self) {
        self.metadata.generation = Some(1);
        self.status = None;
    }

    fn prepare_update(&mut self, old: &Self) {
        self.status.clone_from(&old.status);
        let changed = self.spec != old.spec;
        next_generation(&mut self.metadata, &old.metadata, changed);
    }
}

impl WithStatus for HorizontalPodAutoscaler {
    fn keep_for_status(&mut self, old: &Self) {
        self.spec.clone_from(&old.spec);
        keep_metadata(&mut self.metadata, &old.metadata, false);
    }

    /// `ValidateHorizontalPodAutoscalerStatusUpdate`: the counts only (the stored spec
    /// was valid when written).
    fn validate_status(&self, _old: &Self, causes: &mut Causes) {
        validation::status(self.status.as_ref(), causes);
    }
}

#[cfg(test)]
mod tests;
