//! A replica's scheduler term: with leader election, the scheduler's parts (the
//! driver, the core, the shim's sweeps) start once it leads and stop when it loses the
//! lease (the core hears that as an input and steps down); without, they run
//! at once, for good.

use std::sync::Arc;
use std::time::Duration;

use apiserver::{Api, Clock};
use futures::future::BoxFuture;
use tokio::sync::mpsc;

use super::{ElectionConfig, Elector};
use crate::core::{CoreError, Input};

/// This replica's scheduler term: with leader election, the scheduler's parts start
/// once it leads and stop when it loses the lease; without, they run at once, for good.
pub(crate) struct Term {
    pub(crate) elector: Option<Arc<Elector>>,
    pub(crate) api: Api,
}

impl Term {
    pub(crate) fn begin(
        api: &Api,
        election: Option<ElectionConfig>,
        clock: &Arc<dyn Clock>,
    ) -> Result<Self, String> {
        let Some(election) = election else {
            return Ok(Self {
                elector: None,
                api: api.clone(),
            });
        };
        election.check()?;
        let fence = apiserver::Fence::new(&election.namespace, &election.name);
        tracing::info!(identity = %election.identity, lease = %format!("{}/{}", election.namespace, election.name), "attempting to acquire leader lease");
        let elector = Elector::spawn(api.clone(), election, fence.clone(), clock.clone());
        Ok(Self {
            elector: Some(Arc::new(elector)),
            api: api.fenced(fence),
        })
    }

    /// Resolves once this replica may schedule.
    pub(crate) fn start(&self) -> BoxFuture<'static, ()> {
        match &self.elector {
            Some(e) => Box::pin(e.leading()),
            None => Box::pin(std::future::ready(())),
        }
    }

    /// Resolves when this replica's term ends (never without leader election).
    pub(crate) fn stop(&self) -> BoxFuture<'static, ()> {
        match &self.elector {
            Some(e) => Box::pin(e.lost()),
            None => Box::pin(std::future::pending()),
        }
    }

    /// `work` within the term: started once leading, dropped when the lease is lost.
    pub(crate) fn gate<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let (start, stop) = (self.start(), self.stop());
        async move {
            tokio::select! {
                _ = async { start.await; work.await } => {}
                () = stop => {}
            }
        }
    }

    /// The core within the term: started once leading; losing the lease is
    /// an input to it ([`Input::LeaseLost`]), on which it steps down and ends
    /// ([`CoreError::LostLease`]). A core that does not end within the renew
    /// deadline (stuck in a write) is dropped: the fence refuses what it does.
    pub(crate) fn run(
        &self,
        core: impl Future<Output = Result<(), CoreError>> + Send + 'static,
        inputs: mpsc::UnboundedSender<Input>,
    ) -> impl Future<Output = Result<(), CoreError>> + Send + 'static {
        let (start, stop) = (self.start(), self.stop());
        let grace = self
            .elector
            .as_ref()
            .map_or(Duration::ZERO, |e| e.config().renew_deadline);
        async move {
            let mut core = Box::pin(async move {
                start.await;
                core.await
            });
            tokio::select! {
                r = &mut core => return r,
                () = stop => {}
            }
            // Already ended (its receiver gone) is as good as stepped down.
            let _ = inputs.send(Input::LeaseLost);
            match tokio::time::timeout(grace, core).await {
                Ok(r) => r,
                Err(_) => {
                    tracing::warn!(
                        ?grace,
                        "the scheduler core did not step down in time; stopping it"
                    );
                    Err(CoreError::LostLease)
                }
            }
        }
    }
}
