//! `OfferView`: an offer prepared once for many placement attempts.

use std::sync::Arc;

use mesos::proto::{Offer, OfferId};

use crate::node::{NodeView, OfferError};
use crate::pool::OfferPool;
use crate::state::ProcureState;

/// An offer parsed once: the agent as a node, and its resources in the form
/// the pipeline takes from. Keep one per live offer; every attempt on it
/// starts with [`OfferView::state`], which shares the parsed offer.
#[derive(Debug, Clone)]
pub struct OfferView {
    /// Shared, so that handing a round its views copies no labels or taints.
    node: Arc<NodeView>,
    pool: Arc<OfferPool>,
}

impl OfferView {
    /// Parses `offer`.
    ///
    /// # Errors
    /// [`OfferError`] when the offer has no id or agent id, or a malformed
    /// taint attribute.
    pub fn new(offer: &Offer) -> Result<Self, OfferError> {
        Ok(OfferView {
            node: Arc::new(NodeView::from_offer(offer)?),
            pool: Arc::new(OfferPool::from_offer(offer)?),
        })
    }

    /// The offer's id.
    pub fn id(&self) -> &OfferId {
        &self.pool.offer_id
    }

    /// The agent as the procurements see it.
    pub fn node(&self) -> &NodeView {
        &self.node
    }

    /// Replaces the node view (e.g. to add the running executor's info).
    #[must_use]
    pub fn with_node(mut self, node: NodeView) -> Self {
        self.node = Arc::new(node);
        self
    }

    /// The view of the same offer on an agent that already runs `info`, our
    /// executor (see [`NodeView::with_running_executor`]).
    #[must_use]
    pub fn with_running_executor(self, info: Arc<mesos::proto::ExecutorInfo>) -> Self {
        let node = (*self.node).clone().with_running_executor(info);
        self.with_node(node)
    }

    /// A fresh state over the whole offer.
    pub fn state(&self) -> ProcureState {
        ProcureState::from_pool(self.pool.clone())
    }

    /// Turns `state` into a fresh state over this offer, reusing its
    /// buffers (and keeping its memoised pod demand).
    pub fn reset_state(&self, state: &mut ProcureState) {
        state.reset_to(&self.pool);
    }

    /// The offer's resources as the master sent them.
    pub fn resources(&self) -> &[mesos::proto::Resource] {
        &self.pool.templates
    }
}
