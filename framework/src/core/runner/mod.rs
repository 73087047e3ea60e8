//! The thin async runner around the [`Core`]: it receives inputs, steps
//! the core, performs the effects and steps their results.

mod budget_watch;
mod launch;
mod node_watch;
mod perform;
mod watch;

use std::sync::Arc;

use apiserver::{Api, Clock};
use k8s_openapi::api::core::v1::Pod;
use registry::InMemoryRegistry;
use tokio::sync::mpsc;

use super::{Core, CoreConfig, CoreError, Input, Launch, Lookup, MAX_BATCH, Step};
use crate::admission::Admission;
use crate::config::SchedulingConfig;
use crate::driver::MesosHandle;
use crate::logs::AgentDirectory;
use crate::observe::Observed;

/// Everything the core and its runner need from outside.
pub struct CoreParts {
    /// The API shim (store).
    pub api: Api,
    /// Calls to Mesos.
    pub mesos: MesosHandle,
    /// The task registry, which the core owns: it is its one writer, and
    /// everyone else reads it through a [`registry::RegistryReader`].
    pub registry: InMemoryRegistry,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The procurement pipeline with its scoring: where pods go.
    pub placer: procurement::Placer,
    /// Admission hooks.
    pub admission: Admission,
    /// Pod resource rules (to show hooks what a pod will be charged).
    pub needs: procurement::PodResourcesProcurement,
    /// Scheduling settings.
    pub config: SchedulingConfig,
    /// Agent addresses for the log source.
    pub directory: Arc<AgentDirectory>,
    /// Where the core publishes what the debug handlers show.
    pub observed: Arc<Observed>,
    /// The sending side of the core's own input channel (for the pod watch
    /// and the launch tasks).
    pub inputs: mpsc::UnboundedSender<Input>,
}

/// The store, as the core may read it.
struct StoreLookup(Api);

impl Lookup for StoreLookup {
    fn meta(&self, key: &str) -> Option<Vec<u8>> {
        self.0.get_meta(key)
    }

    fn pods(&self) -> Vec<Pod> {
        self.0
            .list_pods(None, "", "")
            .map(|l| l.items)
            .unwrap_or_default()
    }

    fn pod(&self, key: &registry::PodKey) -> Option<Pod> {
        let pod = self.0.get_pod(&key.namespace, &key.name).ok()?;
        (key.uid.is_empty() || pod.metadata.uid.as_deref() == Some(key.uid.as_str())).then_some(pod)
    }
}

/// Runs the core: one task, one input at a time.
pub struct Runner {
    core: Core,
    api: Api,
    mesos: MesosHandle,
    clock: Arc<dyn Clock>,
    admission: Admission,
    observed: Arc<Observed>,
    inputs: mpsc::UnboundedSender<Input>,
    /// What the launch tasks report: stepped as soon as it comes, even in
    /// the middle of a turn (see `perform`).
    launch_tx: mpsc::UnboundedSender<Launch>,
    launches: mpsc::UnboundedReceiver<Launch>,
    sweep_interval: std::time::Duration,
}

/// How often the debug snapshot is refreshed: a snapshot copies every
/// offer and queued pod, too much to do on every turn at scale, and a
/// person reading `/debug/` cannot tell 200 ms apart.
const PUBLISH_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

impl Runner {
    /// A core over `parts`, and its runner.
    pub fn new(parts: CoreParts) -> Self {
        let sweep_interval = parts.config.sweep_interval;
        let core = Core::new(CoreConfig {
            registry: parts.registry,
            placer: parts.placer,
            admission: parts.admission.clone(),
            needs: parts.needs,
            config: parts.config,
            lookup: Box::new(StoreLookup(parts.api.clone())),
            directory: parts.directory,
            observed: parts.observed.clone(),
        });
        let (launch_tx, launches) = mpsc::unbounded_channel();
        Runner {
            launch_tx,
            launches,
            core,
            api: parts.api,
            mesos: parts.mesos,
            clock: parts.clock,
            admission: parts.admission,
            observed: parts.observed,
            inputs: parts.inputs,
            sweep_interval,
        }
    }

    /// Recovers from the store, then runs until the input channel closes
    /// or the framework is taken over.
    ///
    /// # Errors
    /// [`CoreError::FailedOver`] when another scheduler took over;
    /// [`CoreError::Store`] when the store cannot be read at start.
    pub async fn run(
        mut self,
        mut inputs: mpsc::UnboundedReceiver<Input>,
    ) -> Result<(), CoreError> {
        let list = self.api.list_pods(None, "", "")?;
        let pods = list.items.into_iter().map(Arc::new).collect();
        let effects = self.core.step(Step::Recovered(pods), self.clock.now());
        self.perform(effects).await?;
        watch::spawn_pod_watch(self.api.clone(), list.resource_version, self.inputs.clone());
        node_watch::spawn_node_watch(self.api.clone(), self.inputs.clone());
        budget_watch::spawn_budget_watch(self.api.clone(), self.inputs.clone());
        self.publish();
        // Turn at least as often as the snapshot is due, so the debug
        // pages trail the core by one publish interval at most.
        let mut tick = tokio::time::interval(self.sweep_interval.min(PUBLISH_EVERY));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next_sweep = std::time::Instant::now();
        let mut next_publish = std::time::Instant::now();
        let mut batch = Vec::new();
        loop {
            tokio::select! {
                input = inputs.recv() => match input {
                    None => return Ok(()),
                    Some(first) => {
                        batch.push(first);
                        while batch.len() < MAX_BATCH {
                            match inputs.try_recv() {
                                Ok(more) => batch.push(more),
                                Err(_) => break,
                            }
                        }
                    }
                },
                Some(report) = self.launches.recv() => batch.push(Input::Launch(report)),
                _ = tick.tick() => {}
            }
            let t0 = std::time::Instant::now();
            let inputs_handled = batch.len();
            let now = self.clock.now();
            let mut effects = Vec::new();
            for input in batch.drain(..) {
                effects.extend(self.core.step(Step::Input(input), now));
            }
            // The inputs' effects first (status writes above all): a pod's
            // update must not wait behind the CPU of a scheduling round,
            // and the round then sees the offers and tasks those inputs
            // settled.
            let mut effects_n = effects.len();
            self.perform(effects).await?;
            let t1 = std::time::Instant::now();
            // Pacing is about CPU, not about the business clock: it reads
            // the monotonic clock, so a test's frozen clock cannot stop it.
            let pace = std::time::Instant::now();
            let now = self.clock.now();
            let mut effects = Vec::new();
            if pace >= next_sweep {
                next_sweep = pace + self.sweep_interval;
                effects.extend(self.core.step(Step::Tick, now));
            }
            let (queued, offers) = self.core.load();
            effects.extend(self.core.step(Step::Schedule, now));
            let t2 = std::time::Instant::now();
            effects_n += effects.len();
            self.perform(effects).await?;
            // Where a turn's time went: the first thing to read when the
            // loop falls behind (RUST_LOG=mesopod::turns=trace).
            tracing::trace!(
                target: "mesopod::turns",
                inputs_handled,
                effects = effects_n,
                queued,
                offers,
                inputs_us = (t1 - t0).as_micros() as u64,
                sweep_schedule_us = (t2 - t1).as_micros() as u64,
                perform_us = t2.elapsed().as_micros() as u64,
                "turn"
            );
            if pace >= next_publish {
                next_publish = pace + PUBLISH_EVERY;
                self.publish();
            }
        }
    }

    /// Refreshes what the debug handlers and metrics show.
    fn publish(&self) {
        self.observed.publish(self.core.snapshot(self.clock.now()));
    }
}
