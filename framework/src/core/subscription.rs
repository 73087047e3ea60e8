//! The subscription: which framework we are, whether a master listens,
//! whether offers are suppressed, and reconciliation with that master.

use std::collections::HashMap;
use std::time::SystemTime;

use mesos::proto::FrameworkId;

use crate::reconcile::Reconciler;

/// What the core knows of its Mesos subscription.
#[derive(Debug)]
pub(crate) struct Subscription {
    pub(crate) framework_id: Option<FrameworkId>,
    pub(crate) subscribed: bool,
    /// Offers suppressed (as far as the last REVIVE or SUPPRESS sent says;
    /// a failed call sets it back).
    pub(crate) suppressed: bool,
    pub(crate) last_revive: Option<SystemTime>,
    /// The REVIVE time before the one in flight, restored if it fails.
    pub(crate) revive_before: Option<SystemTime>,
    pub(crate) reconciler: Reconciler,
    /// When each agent last came back from a partition (`core::heal`).
    pub(crate) healed: HashMap<String, SystemTime>,
    /// When offers were last suppressed (the node discovery's clock).
    pub(crate) suppressed_at: Option<SystemTime>,
    /// Until when a node discovery keeps offers coming with nothing pending.
    pub(crate) discovering_until: Option<SystemTime>,
}

impl Subscription {
    pub(crate) fn new(reconciler: Reconciler) -> Self {
        Subscription {
            framework_id: None,
            subscribed: false,
            suppressed: false,
            last_revive: None,
            revive_before: None,
            reconciler,
            healed: HashMap::new(),
            suppressed_at: None,
            discovering_until: None,
        }
    }
}
