//! The scheduler term running now, as the debug pages and [`crate::app::App`] reach
//! it: each term (each time this replica leads) has its own registry, Mesos
//! subscription and core input channel, built afresh from the store as a new process
//! would; a new term replaces the handles of the last one, which stay readable (a
//! follower shows its last term's registry, no subscription) until then.

use std::sync::{Arc, PoisonError, RwLock};

use registry::RegistryReader;
use tokio::sync::mpsc;

use crate::core::Input;
use crate::driver::MesosHandle;

/// One term's handles.
#[derive(Clone)]
pub struct Handles {
    /// Its registry, read-only.
    pub registry: RegistryReader,
    /// Its Mesos subscription.
    pub mesos: MesosHandle,
    /// Its core's inputs.
    pub inputs: mpsc::UnboundedSender<Input>,
}

struct Inner {
    handles: Handles,
    /// Why the last term ended, if one did.
    ended: Option<String>,
}

/// The current term's [`Handles`], shared.
#[derive(Clone)]
pub struct Current(Arc<RwLock<Inner>>);

impl Current {
    /// Starts with `first`.
    pub fn new(first: Handles) -> Self {
        Self(Arc::new(RwLock::new(Inner {
            handles: first,
            ended: None,
        })))
    }

    /// A new term begins with `next`.
    pub fn replace(&self, next: Handles) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .handles = next;
    }

    /// The term ended, for `why`.
    pub fn ended(&self, why: String) {
        self.0.write().unwrap_or_else(PoisonError::into_inner).ended = Some(why);
    }

    /// Why the last term ended (its core's error), if one did.
    pub fn last_end(&self) -> Option<String> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .ended
            .clone()
    }

    fn get(&self) -> Handles {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .handles
            .clone()
    }

    /// The term's registry.
    pub fn registry(&self) -> RegistryReader {
        self.get().registry
    }

    /// The term's Mesos subscription.
    pub fn mesos(&self) -> MesosHandle {
        self.get().mesos
    }

    /// The term's core inputs.
    pub fn inputs(&self) -> mpsc::UnboundedSender<Input> {
        self.get().inputs
    }
}
