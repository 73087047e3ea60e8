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
//! `autoscaling/v2` is the stored version; `autoscaling/v1` is served too, converted
//! to and from v2 at the edge of every read, write and watch (`v1`), with the same
//! store key, resourceVersion and watch stream.

mod defaults;
pub(crate) mod table;
pub(crate) mod v1;
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
        // kube's v2 conversion drops them both ways: they belong to v1's view alone.
        v1::drop_round_trip(&mut self.metadata);
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
