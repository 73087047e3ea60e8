//! Losing the leader lease, as the core sees it: one more [`super::Input`].
//!
//! Another replica leads from now on, with the same framework id, the same
//! offers' agents and the same pods. This core must not act on anything it
//! still holds: no DECLINE of offers the master already gave the new leader,
//! no KILL, no binding of a pod the new leader is placing, no status. It
//! forgets its offers, its queue and the round it was admitting, asks for
//! nothing more, and reports that it steps down ([`super::Effect::StepDown`]),
//! on which the runner ends it without performing that turn's effects.

use super::{Core, Effect};

impl Core {
    pub(super) fn on_lease_lost(&mut self) {
        if self.stepped_down {
            return;
        }
        tracing::warn!("lost the leader lease: this replica stops scheduling");
        self.stepped_down = true;
        // Dropped, not declined: the master rescinds them from this stream
        // and offers the agents to the new leader's.
        let offers = self.offers.clear();
        self.admitting = None;
        self.subscription.subscribed = false;
        self.subscription.reconciler.abort();
        self.observed.set_master(None, None);
        tracing::debug!(offers, "forgot the offers held");
        self.out.clear();
        self.out.push(Effect::StepDown);
    }

    /// Whether this core lost the leader lease: it asks for nothing any more.
    pub fn stepped_down(&self) -> bool {
        self.stepped_down
    }
}
