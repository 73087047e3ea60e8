//! The election's rounds against the store: read the Lease, write what the
//! [`Election`] asks, set the [`Fence`] from the outcome, publish the leadership.

use std::sync::Arc;
use std::time::Instant;

use apiserver::{Api, Clock, Fence};
use k8s_openapi::api::coordination::v1::Lease;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::machine::{Attempt, Election, ElectionConfig, Outcome};

/// Where this replica stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    /// Following; the Lease's holder as last read.
    Follower {
        /// The holder, if any.
        holder: Option<String>,
    },
    /// Leading: the fence is held.
    Leader,
    /// Led, and lost the lease: this replica's scheduler term is over. It competes
    /// again once the term has stopped ([`Elector::rejoin`]).
    Lost,
}

/// `<hostname>_<uuid>`, client-go's identity for a leader-elected component.
pub fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// What the scheduler term tells the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    /// Stop leading (the term ended on its own): give the lease up.
    Resign,
    /// The term that lost has stopped: compete again.
    Rejoin,
}

/// The running election of one replica.
pub struct Elector {
    identity: String,
    state: watch::Receiver<Leadership>,
    paused: watch::Sender<bool>,
    commands: mpsc::UnboundedSender<Command>,
    fence: Arc<Fence>,
    api: Api,
    cfg: ElectionConfig,
    clock: Arc<dyn Clock>,
    task: JoinHandle<()>,
}

impl Elector {
    /// Starts electing with `cfg` over `api`'s store, setting `fence`.
    pub fn spawn(api: Api, cfg: ElectionConfig, fence: Arc<Fence>, clock: Arc<dyn Clock>) -> Self {
        let api = api.unfenced();
        let (state_tx, state) = watch::channel(Leadership::Follower { holder: None });
        let (paused, paused_rx) = watch::channel(false);
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(rounds(
            api.clone(),
            Election::new(cfg.clone()),
            fence.clone(),
            clock.clone(),
            state_tx,
            paused_rx,
            commands_rx,
        ));
        Self {
            identity: cfg.identity.clone(),
            state,
            paused,
            commands,
            fence,
            api,
            cfg,
            clock,
            task,
        }
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Where this replica stands now.
    pub fn leadership(&self) -> Leadership {
        self.state.borrow().clone()
    }

    /// The settings.
    pub fn config(&self) -> &ElectionConfig {
        &self.cfg
    }

    /// Resolves once this replica leads (never, if it lost before).
    pub fn leading(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.state.clone();
        async move {
            if rx.wait_for(|l| *l == Leadership::Leader).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Resolves once this replica has led and lost the lease (at once if it has and
    /// has not rejoined yet).
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.state.clone();
        async move {
            if rx.wait_for(|l| *l == Leadership::Lost).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Gives the lease up if this replica leads (its scheduler term ended without
    /// losing it: taken over in Mesos, or failed): [`Leadership::Lost`] follows, so
    /// that the term's end is one path whatever ended it.
    pub fn resign(&self) {
        let _ = self.commands.send(Command::Resign);
    }

    /// Competes again after [`Leadership::Lost`], once the scheduler term that led has
    /// stopped: a new term only starts on a new acquisition, and the fence it sets
    /// would let the old term's writes through were that term still running.
    pub fn rejoin(&self) {
        let _ = self.commands.send(Command::Rejoin);
    }

    /// Stops (`true`) or resumes the rounds, as if only the elector were frozen
    /// (SIGSTOP): the fence keeps what it held. For fault tests.
    pub fn pause(&self, paused: bool) {
        self.paused.send_replace(paused);
    }

    /// Gives the lease up if we hold it (client-go's `ReleaseOnCancel`: holder emptied,
    /// duration 1s), so a follower takes over at its next round instead of after the
    /// lease duration. Stops the rounds.
    pub async fn release(&self) {
        self.task.abort();
        give_up(&self.api, &self.cfg, &self.fence, &self.clock).await;
    }
}

/// Empties the fence and, if the Lease is still at our last renewal, its holder.
async fn give_up(api: &Api, cfg: &ElectionConfig, fence: &Fence, clock: &Arc<dyn Clock>) {
    let mut renewal = fence.renewing().await;
    let Some(rv) = renewal.get() else { return };
    renewal.set(None);
    let Ok(Some((mut lease, current))) = api.get_lease(&cfg.namespace, &cfg.name) else {
        return;
    };
    if current != rv {
        return;
    }
    let now = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        apiserver::k8s_time(clock.now()).0,
    ));
    if let Some(spec) = lease.spec.as_mut() {
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time.clone_from(&now);
        spec.acquire_time = now;
    }
    match api.write_lease(&cfg.namespace, lease, Some(rv)).await {
        Ok(_) => tracing::info!(identity = %cfg.identity, "released the leader lease"),
        Err(e) => tracing::warn!(error = %e, "could not release the leader lease"),
    }
}

/// After a loss: waits for the term to stop ([`Command::Rejoin`]), then follows afresh.
/// `false` when the elector is being dropped.
async fn rejoined(
    commands: &mut mpsc::UnboundedReceiver<Command>,
    election: &mut Election,
    state: &watch::Sender<Leadership>,
) -> bool {
    loop {
        match commands.recv().await {
            Some(Command::Rejoin) => break,
            Some(Command::Resign) => {}
            None => return false,
        }
    }
    *election = Election::new(election.config().clone());
    state.send_replace(Leadership::Follower { holder: None });
    tracing::info!(identity = %election.config().identity, "rejoining the leader election");
    true
}

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector")
            .field("identity", &self.identity)
            .field("leadership", &self.leadership())
            .finish()
    }
}

impl Drop for Elector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn rounds(
    api: Api,
    mut election: Election,
    fence: Arc<Fence>,
    clock: Arc<dyn Clock>,
    state: watch::Sender<Leadership>,
    mut paused: watch::Receiver<bool>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let (ns, name) = {
        let c = election.config();
        (c.namespace.clone(), c.name.clone())
    };
    loop {
        if paused.wait_for(|p| !*p).await.is_err() {
            return;
        }
        let outcome = match round(&api, &mut election, &fence, &clock, &ns, &name).await {
            Ok(outcome) => outcome,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the leader lease");
                election.expire(Instant::now())
            }
        };
        match outcome {
            Outcome::Acquired { .. } => {
                tracing::info!(identity = %election.config().identity, lease = %format!("{ns}/{name}"), "successfully acquired lease");
                state.send_replace(Leadership::Leader);
            }
            Outcome::Lost => {
                fence.renewing().await.set(None);
                tracing::error!(identity = %election.config().identity, "leaderelection lost");
                state.send_replace(Leadership::Lost);
                if !rejoined(&mut commands, &mut election, &state).await {
                    return;
                }
                continue;
            }
            Outcome::Renewed { .. } | Outcome::Unchanged => {}
        }
        if !election.is_leader() {
            let holder = election.holder().map(str::to_owned);
            state.send_if_modified(|s| {
                let next = Leadership::Follower { holder };
                let changed = *s != next;
                *s = next;
                changed
            });
        }
        let rand = f64::from(uuid::Uuid::new_v4().as_bytes()[0]) / 256.0;
        let wait = election.next_round_in(rand);
        let command = tokio::select! {
            () = tokio::time::sleep(wait) => None,
            // A pause takes effect at once (a frozen process renews nothing).
            _ = paused.wait_for(|p| *p) => None,
            command = commands.recv() => match command {
                Some(command) => Some(command),
                None => return,
            },
        };
        if command == Some(Command::Resign) && election.is_leader() {
            give_up(&api, election.config(), &fence, &clock).await;
            tracing::warn!(identity = %election.config().identity, "resigned the leader lease");
            state.send_replace(Leadership::Lost);
            if !rejoined(&mut commands, &mut election, &state).await {
                return;
            }
        }
    }
}

/// One round; `Err` only when the Lease cannot be read.
async fn round(
    api: &Api,
    election: &mut Election,
    fence: &Fence,
    clock: &Arc<dyn Clock>,
    ns: &str,
    name: &str,
) -> Result<Outcome, apiserver::ApiError> {
    if election.expire(Instant::now()) == Outcome::Lost {
        return Ok(Outcome::Lost);
    }
    let current: Option<(Lease, u64)> = api.get_lease(ns, name)?;
    let (attempt, outcome) = election.attempt(Instant::now(), clock.now(), current);
    if outcome == Outcome::Lost {
        return Ok(outcome);
    }
    let (lease, expected) = match attempt {
        Attempt::Wait => return Ok(outcome),
        Attempt::Create(lease) => (lease, None),
        Attempt::Update { lease, rv } => (lease, Some(rv)),
    };
    // Fenced writes wait for this one commit, so our own renewal never fails them.
    let mut renewal = fence.renewing().await;
    let written = api.write_lease(ns, lease, expected).await;
    if let Err(e) = &written {
        tracing::debug!(error = %e, "the leader lease was not written");
    }
    let outcome = election.settle(Instant::now(), written.map_err(|_| ()));
    match outcome {
        Outcome::Acquired { rv } | Outcome::Renewed { rv } => renewal.set(Some(rv)),
        Outcome::Lost => renewal.set(None),
        Outcome::Unchanged => {}
    }
    Ok(outcome)
}
