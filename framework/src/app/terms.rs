//! The scheduler's terms: each time this replica leads, its scheduler (the Mesos
//! driver, the core with a registry of its own, the shim's sweeps) is built afresh and
//! recovers from the store, as a newly started process would; when the term ends (the
//! lease lost, say to an etcd outage, or the framework taken over in Mesos) all of it
//! stops, and the process stays up, serving the API, and competes for the lease again.
//! Without leader election there is one term, for good: its end is the process's.

use std::pin::Pin;
use std::sync::Arc;

use apiserver::{Api, Clock};
use futures::FutureExt as _;
use mesos::client::scheduler::SchedulerClient;
use procurement::{PipelineConfig, ResourceDefaults, Scoring, default_pipeline};
use registry::{InMemoryRegistry, Retention};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::AppError;
use crate::admission::Admission;
use crate::config::{FrameworkConfig, SchedulingConfig};
use crate::core::{CoreError, CoreParts, Input, Runner};
use crate::driver::{self, DriverEvent, FrameworkIdStore};
use crate::leader::current::{Current, Handles};
use crate::leader::term::Term;
use crate::logs::AgentDirectory;
use crate::node_identity::NodeIdentities;
use crate::observe::Observed;

type CoreFuture = Pin<Box<dyn Future<Output = Result<(), CoreError>> + Send>>;

/// What every term is built from.
pub(super) struct Kit {
    pub(super) framework: FrameworkConfig,
    pub(super) client: SchedulerClient,
    pub(super) ids: Arc<dyn FrameworkIdStore>,
    pub(super) pipeline: PipelineConfig,
    pub(super) scoring: Scoring,
    pub(super) admission: Admission,
    pub(super) resource_defaults: ResourceDefaults,
    pub(super) scheduling: SchedulingConfig,
    pub(super) controllers: controllers::runner::Options,
    pub(super) directory: Arc<AgentDirectory>,
    pub(super) observed: Arc<Observed>,
    pub(super) clock: Arc<dyn Clock>,
    /// The scheduler's handle (fenced under leader election).
    pub(super) api: Api,
    /// Executors' node keys, registered through each term's subscription.
    pub(super) node_keys: Arc<apiserver::auth::node_keys::NodeKeys>,
    /// What a registration is answered with.
    pub(super) endpoint: crate::node_identity::ApiEndpoint,
    /// Where executors' streaming endpoints go, and the key that signs streams.
    pub(super) streams: (Arc<crate::streams::StreamEndpoints>, String),
}

/// One term's running parts.
pub(super) struct Running {
    pub(super) handles: Handles,
    core: CoreFuture,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops what is left of the term (its core has ended).
    async fn stop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

/// A term dropped mid-way (the process shutting down) stops its tasks too.
impl Drop for Running {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Kit {
    /// A term's parts, started once `term` leads and stopped when it loses the lease.
    /// Build it only once the last term has stopped and (under leader election) this
    /// replica leads again: the term's stop future resolves at once on a loss not yet
    /// followed by a new acquisition.
    pub(super) fn build(&self, term: &Term) -> Result<Running, AppError> {
        let pipeline = default_pipeline(&self.pipeline)?;
        let registry = InMemoryRegistry::with_retention(Retention {
            max_finished: self.scheduling.retain_finished,
            max_age: self.scheduling.retain_finished_for,
        });
        let reader = registry.reader();
        // Unbounded: every producer is bounded by what exists (pods in the
        // store, the master's events), and a full channel would stall the
        // pod watch until the store cut it off and it had to relist
        // everything, which at 50,000 pods happened again and again.
        let (inputs_tx, inputs_rx) = mpsc::unbounded_channel();
        let (mesos, mut driver_events, driver_task) = driver::spawn_gated(
            self.framework.clone(),
            self.client.clone(),
            self.ids.clone(),
            term.start(),
            term.stop(),
        );
        let identities = NodeIdentities::new(
            self.node_keys.clone(),
            self.api.clone(),
            mesos.clone(),
            self.endpoint.clone(),
        )
        .with_streams(self.streams.0.clone(), self.streams.1.clone());
        let forward = {
            let inputs = inputs_tx.clone();
            let observed = self.observed.clone();
            let clock = self.clock.clone();
            tokio::spawn(async move {
                while let Some(ev) = driver_events.recv().await {
                    observed.saw_event(clock.now());
                    if matches!(&ev, DriverEvent::Event(e) if e.kind() == Some(mesos::proto::scheduler::event::Type::Heartbeat))
                    {
                        continue;
                    }
                    if identities.intercept(&ev) {
                        continue;
                    }
                    if inputs.send(Input::Driver(ev)).is_err() {
                        return;
                    }
                }
            })
        };
        let core = Runner::new(CoreParts {
            api: self.api.clone(),
            mesos: mesos.clone(),
            registry,
            clock: self.clock.clone(),
            placer: procurement::Placer::new(pipeline, self.scoring),
            admission: self.admission.clone(),
            needs: procurement::PodResourcesProcurement::new(self.resource_defaults)?,
            config: self.scheduling.clone(),
            directory: self.directory.clone(),
            observed: self.observed.clone(),
            inputs: inputs_tx.clone(),
        });
        let core = term.run(core.run(inputs_rx), inputs_tx.clone()).boxed();
        // The shim's own sweeps (terminating namespaces, expired events). A
        // terminating pod leaves only once the core knows its task ended
        // (or its agent is lost), never because a grace period ran out
        // while its containers may still run.
        let deletions = apiserver::Deletions::FinalizedByNodes;
        let sweeper = tokio::spawn(term.gate(apiserver::sweep_with(self.api.clone(), deletions)));
        // The workload controllers, on the leader only and through its fenced handle.
        let controllers = tokio::spawn(term.gate(controllers::runner::run_with(
            self.api.clone(),
            self.controllers,
        )));
        Ok(Running {
            handles: Handles {
                registry: reader,
                mesos,
                inputs: inputs_tx,
            },
            core,
            tasks: vec![driver_task, forward, sweeper, controllers],
        })
    }
}

/// Runs term after term: `first` (already built), then, under leader election, a new
/// one each time this replica leads again. Ends only without leader election, with
/// the one term's result.
pub(super) async fn supervise(
    kit: Kit,
    term: Term,
    first: Running,
    current: Current,
) -> Result<(), CoreError> {
    let mut running = first;
    loop {
        let result = (&mut running.core).await;
        running.stop().await;
        current.ended(match &result {
            Ok(()) => "the scheduler's inputs closed".to_owned(),
            Err(e) => e.to_string(),
        });
        let Some(elector) = term.elector.clone() else {
            return result;
        };
        match &result {
            Err(CoreError::LostLease) => {}
            Err(e) => {
                // Ended while leading (taken over in Mesos, a store failure): the lease
                // goes too, so that another replica, or this one afresh, takes over.
                tracing::warn!(error = %e, "the scheduler stopped; giving up the leader lease");
                elector.resign();
            }
            Ok(()) => elector.resign(),
        }
        elector.lost().await;
        tracing::info!("the scheduler stepped down; this replica follows until it leads again");
        elector.rejoin();
        elector.leading().await;
        running = match kit.build(&term) {
            Ok(running) => running,
            Err(e) => {
                tracing::error!(error = %e, "cannot start the scheduler");
                elector.resign();
                elector.lost().await;
                return Err(CoreError::Panicked(e.to_string()));
            }
        };
        current.replace(running.handles.clone());
    }
}
