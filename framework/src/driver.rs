//! The Mesos driver: keeps one subscription open and forwards its events.
//!
//! # Contract
//!
//! - Subscribes with the stored framework id when there is one (failover),
//!   and stores the id the master assigns before anything else happens, so
//!   a crash right after SUBSCRIBED still re-subscribes as the same framework.
//! - A heartbeat watchdog closes a stream that is silent for
//!   [`MISSED_HEARTBEATS`] intervals; reconnects back off from 1 s to 15 s.
//!   The client follows the leading master (307) and tries masters in turn.
//! - `ERROR "Framework failed over"` means another scheduler took over: the
//!   driver reports [`DriverEvent::FailedOver`] and stops for good; it never
//!   fights the new scheduler by re-subscribing.
//! - Calls go through [`MesosHandle`], which refuses them while there is no
//!   subscription, so nothing is sent on a stale stream id.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use mesos::client::ClientError;
use mesos::client::backoff::Retry;
use mesos::client::scheduler::{SchedulerClient, SubscriptionHandle};
use mesos::proto::framework_info::{Capability, capability};
use mesos::proto::scheduler::{Call, Event, call, event};
use mesos::proto::{FrameworkId, FrameworkInfo};
use tokio::sync::{mpsc, watch};

use crate::config::FrameworkConfig;

/// A stream silent for this many heartbeat intervals is considered dead.
pub const MISSED_HEARTBEATS: u32 = 5;
/// Mesos' default heartbeat interval, used until SUBSCRIBED says otherwise.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);
/// Reconnect backoff floor.
pub const RECONNECT_INITIAL: Duration = Duration::from_secs(1);
/// Reconnect backoff cap: a master that comes back is found within 15 s.
pub const RECONNECT_MAX: Duration = Duration::from_secs(15);

/// Where the framework id is kept in the store's meta table.
pub const FRAMEWORK_ID_KEY: &str = "mesos/framework-id";

/// What the driver tells the scheduler core.
#[derive(Debug)]
pub enum DriverEvent {
    /// A subscription is open (new or after a reconnect).
    Subscribed {
        /// Our framework id.
        framework_id: FrameworkId,
        /// The master's heartbeat interval.
        heartbeat: Duration,
        /// The master that accepted.
        master: String,
    },
    /// An event on the open subscription.
    Event(Box<Event>),
    /// The subscription is gone; the driver is reconnecting.
    Disconnected {
        /// Why.
        reason: String,
    },
    /// Another scheduler took over this framework id: stop.
    FailedOver {
        /// The master's message.
        message: String,
    },
}

/// Where the driver keeps the framework id (the store's meta table).
pub trait FrameworkIdStore: Send + Sync + 'static {
    /// The stored id, if any.
    fn load(&self) -> Option<String>;
    /// Stores the id durably.
    fn save<'a>(&'a self, id: &'a str) -> futures::future::BoxFuture<'a, Result<(), String>>;
}

/// Why a call was not sent.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No subscription is open.
    #[error("not subscribed to a Mesos master")]
    NotSubscribed,
    /// The master refused the call or could not be reached.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// Sends calls on the current subscription.
#[derive(Clone)]
pub struct MesosHandle {
    client: SchedulerClient,
    current: watch::Receiver<Option<Subscribed>>,
    /// Bounds the calls in flight: each holds an HTTP/1.1 connection, and a
    /// scheduling round can ACCEPT thousands of offers at once. Unbounded,
    /// those opened thousands of connections together, overflowed the
    /// master's listen backlog and timed out in SYN retries.
    in_flight: Arc<tokio::sync::Semaphore>,
}

/// Calls to the master in flight at once: ample to keep a loopback or LAN
/// master busy, and far from any file descriptor or backlog limit.
pub const MAX_CALLS_IN_FLIGHT: usize = 64;

#[derive(Debug, Clone)]
struct Subscribed {
    handle: SubscriptionHandle,
    framework_id: FrameworkId,
}

impl MesosHandle {
    /// The open subscription: none once the driver is gone (its scheduler term
    /// stopped), whatever it last said.
    fn subscribed(&self) -> Option<Subscribed> {
        if self.current.has_changed().is_err() {
            return None;
        }
        self.current.borrow().clone()
    }

    /// Sends a call, filling in the framework id.
    pub async fn call(&self, mut call: Call) -> Result<(), CallError> {
        // Never closed, so the permit always comes.
        let _permit = self.in_flight.acquire().await;
        let sub = self.subscribed().ok_or(CallError::NotSubscribed)?;
        call.framework_id = Some(sub.framework_id.clone());
        self.client.call(&sub.handle, call).await?;
        Ok(())
    }

    /// Whether a subscription is open.
    pub fn is_subscribed(&self) -> bool {
        self.subscribed().is_some()
    }

    /// Our framework id, while subscribed.
    pub fn framework_id(&self) -> Option<String> {
        self.subscribed().map(|s| s.framework_id.value)
    }

    /// The master of the open subscription.
    pub fn master(&self) -> Option<String> {
        self.subscribed().map(|s| s.handle.master)
    }
}

/// The FrameworkInfo mesopod subscribes with.
pub fn framework_info(config: &FrameworkConfig, id: Option<String>) -> FrameworkInfo {
    FrameworkInfo {
        user: config.user.clone(),
        name: config.name.clone(),
        id: id.map(FrameworkId::new),
        failover_timeout: Some(config.failover_timeout.as_secs_f64()),
        checkpoint: Some(true),
        roles: config.roles.clone(),
        principal: config.principal.clone(),
        hostname: None,
        capabilities: vec![
            Capability::of(capability::Type::PartitionAware),
            Capability::of(capability::Type::MultiRole),
            Capability::of(capability::Type::TaskKillingState),
        ],
        ..Default::default()
    }
}

/// Starts the driver task; events arrive on the returned receiver.
pub fn spawn(
    config: FrameworkConfig,
    client: SchedulerClient,
    ids: Arc<dyn FrameworkIdStore>,
) -> (
    MesosHandle,
    mpsc::Receiver<DriverEvent>,
    tokio::task::JoinHandle<()>,
) {
    spawn_gated(
        config,
        client,
        ids,
        std::future::ready(()),
        std::future::pending(),
    )
}

/// [`spawn`], but the driver subscribes only once `start` resolves and stops for good
/// when `stop` does (leader election: only the leader talks to Mesos).
pub fn spawn_gated(
    config: FrameworkConfig,
    client: SchedulerClient,
    ids: Arc<dyn FrameworkIdStore>,
    start: impl Future<Output = ()> + Send + 'static,
    stop: impl Future<Output = ()> + Send + 'static,
) -> (
    MesosHandle,
    mpsc::Receiver<DriverEvent>,
    tokio::task::JoinHandle<()>,
) {
    let (events_tx, events_rx) = mpsc::channel(1024);
    let (current_tx, current_rx) = watch::channel(None);
    let handle = MesosHandle {
        client: client.clone(),
        current: current_rx,
        in_flight: Arc::new(tokio::sync::Semaphore::new(MAX_CALLS_IN_FLIGHT)),
    };
    let task = tokio::spawn(async move {
        tokio::select! {
            () = async {
                start.await;
                run(config, client, ids, events_tx, current_tx).await;
            } => {}
            () = stop => {}
        }
    });
    (handle, events_rx, task)
}

async fn run(
    config: FrameworkConfig,
    client: SchedulerClient,
    ids: Arc<dyn FrameworkIdStore>,
    events: mpsc::Sender<DriverEvent>,
    current: watch::Sender<Option<Subscribed>>,
) {
    let mut backoff = Retry::new(RECONNECT_INITIAL, RECONNECT_MAX);
    loop {
        let outcome = subscribe_once(
            &config,
            &client,
            ids.as_ref(),
            &events,
            &current,
            &mut backoff,
        )
        .await;
        current.send_replace(None);
        match outcome {
            Ended::FailedOver(message) => {
                let _ = events.send(DriverEvent::FailedOver { message }).await;
                return;
            }
            Ended::Closed => return,
            Ended::Lost(reason) => {
                tracing::warn!(%reason, "Mesos subscription lost; reconnecting");
                if events
                    .send(DriverEvent::Disconnected { reason })
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

enum Ended {
    /// The subscription broke; reconnect.
    Lost(String),
    /// Another scheduler took over.
    FailedOver(String),
    /// The core is gone; stop.
    Closed,
}

async fn subscribe_once(
    config: &FrameworkConfig,
    client: &SchedulerClient,
    ids: &dyn FrameworkIdStore,
    events: &mpsc::Sender<DriverEvent>,
    current: &watch::Sender<Option<Subscribed>>,
    backoff: &mut Retry,
) -> Ended {
    let stored = ids.load();
    let info = framework_info(config, stored.clone());
    let call = Call {
        framework_id: stored.map(FrameworkId::new),
        r#type: Some(call::Type::Subscribe as i32),
        subscribe: Some(call::Subscribe {
            framework_info: Some(info),
            suppressed_roles: Vec::new(),
        }),
        ..Default::default()
    };
    let sub = match client.subscribe(call).await {
        Ok(sub) => sub,
        Err(e) => return Ended::Lost(format!("subscribe failed: {e}")),
    };
    let mut stream = sub.events;
    let mut heartbeat = DEFAULT_HEARTBEAT;
    loop {
        let next = tokio::time::timeout(heartbeat * MISSED_HEARTBEATS, stream.next()).await;
        let event = match next {
            Err(_) => {
                return Ended::Lost(format!(
                    "no event for {MISSED_HEARTBEATS} heartbeat intervals"
                ));
            }
            Ok(None) => return Ended::Lost("the master closed the stream".into()),
            Ok(Some(Err(e))) => return Ended::Lost(format!("stream error: {e}")),
            Ok(Some(Ok(event))) => event,
        };
        match event.kind() {
            Some(event::Type::Subscribed) => {
                let Some(subscribed) = event.subscribed.as_ref() else {
                    return Ended::Lost("SUBSCRIBED without its payload".into());
                };
                let Some(framework_id) = subscribed.framework_id.clone() else {
                    return Ended::Lost("SUBSCRIBED without a framework id".into());
                };
                if let Err(e) = ids.save(&framework_id.value).await {
                    // Without a stored id a restart would register a new
                    // framework and orphan every task: do not go on.
                    return Ended::Lost(format!("cannot store the framework id: {e}"));
                }
                if let Some(secs) = subscribed.heartbeat_interval_seconds
                    && secs.is_finite()
                    && secs > 0.0
                {
                    heartbeat = Duration::from_secs_f64(secs);
                }
                backoff.reset();
                current.send_replace(Some(Subscribed {
                    handle: sub.handle.clone(),
                    framework_id: framework_id.clone(),
                }));
                let msg = DriverEvent::Subscribed {
                    framework_id,
                    heartbeat,
                    master: sub.handle.master.clone(),
                };
                if events.send(msg).await.is_err() {
                    return Ended::Closed;
                }
            }
            Some(event::Type::Error) => {
                let message = event.error.map(|e| e.message).unwrap_or_default();
                if message.contains("failed over") {
                    return Ended::FailedOver(message);
                }
                return Ended::Lost(format!("master sent ERROR: {message}"));
            }
            _ => {
                if events
                    .send(DriverEvent::Event(Box::new(event)))
                    .await
                    .is_err()
                {
                    return Ended::Closed;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mesos::proto::framework_info::capability::Type;

    #[test]
    fn framework_info_declares_what_mesopod_needs() {
        let config = FrameworkConfig {
            roles: vec!["pods".into()],
            principal: Some("mesopod".into()),
            ..FrameworkConfig::default()
        };
        let info = framework_info(&config, Some("fw-1".into()));
        assert_eq!(info.id, Some(FrameworkId::new("fw-1")));
        assert_eq!(info.checkpoint, Some(true));
        assert_eq!(info.failover_timeout, Some(7.0 * 24.0 * 3600.0));
        assert_eq!(info.roles, ["pods"]);
        assert_eq!(info.principal.as_deref(), Some("mesopod"));
        for cap in [
            Type::PartitionAware,
            Type::MultiRole,
            Type::TaskKillingState,
        ] {
            assert!(info.has_capability(cap), "{cap}");
        }
    }
}
