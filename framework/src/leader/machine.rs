//! The election itself, sans-IO: client-go's `LeaderElector` over a Lease, fed the
//! monotonic `now`, the wall time it stamps, and the Lease as last read; its outputs are
//! the write to attempt and what the outcome means for leadership.
//!
//! As client-go: a Lease held by another identity may be taken only once it went
//! unchanged for `lease_duration` by *our* clock (never by its `renewTime`, which another
//! machine's clock wrote); a leader that has not renewed within `renew_deadline` has lost.

use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

/// client-go's `JitterFactor`: a follower waits `retry_period × (1 + 1.2 × rand)`.
pub const JITTER_FACTOR: f64 = 1.2;

/// Who elects and on which Lease (kube-scheduler's flags and defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionConfig {
    /// This replica's identity (`<hostname>_<uuid>`).
    pub identity: String,
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// How long a non-leader waits after the last observed change before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up.
    pub renew_deadline: Duration,
    /// How often each replica tries to acquire or renew.
    pub retry_period: Duration,
}

/// The Lease mesopod elects on: `kube-system/mesopod`.
pub const LEASE_NAMESPACE: &str = "kube-system";
/// See [`LEASE_NAMESPACE`].
pub const LEASE_NAME: &str = "mesopod";

impl ElectionConfig {
    /// kube-scheduler's defaults (15s, 10s, 2s) for `identity`.
    pub fn with_defaults(identity: String) -> Self {
        Self {
            identity,
            namespace: LEASE_NAMESPACE.into(),
            name: LEASE_NAME.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// client-go's checks (`NewLeaderElector`), with its messages.
    ///
    /// # Errors
    /// The first rule the durations break.
    pub fn check(&self) -> Result<(), String> {
        if self.lease_duration <= self.renew_deadline {
            return Err("leaseDuration must be greater than renewDeadline".into());
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err("renewDeadline must be greater than retryPeriod*JitterFactor".into());
        }
        if self.lease_duration.is_zero() || self.retry_period.is_zero() {
            return Err("leaseDuration and retryPeriod must be greater than zero".into());
        }
        if self.identity.is_empty() {
            return Err("Lock identity is empty".into());
        }
        Ok(())
    }
}

/// The write one round of the election asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// No Lease yet: create it with us as holder.
    Create(Lease),
    /// Take or renew the Lease, still at resourceVersion `rv`.
    Update {
        /// The Lease to write.
        lease: Lease,
        /// Its resourceVersion when read.
        rv: u64,
    },
    /// Another holder's Lease is still fresh: write nothing this round.
    Wait,
}

/// What a round meant for leadership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// We lead from now on; fence writes on `rv`.
    Acquired {
        /// The Lease's resourceVersion after our write.
        rv: u64,
    },
    /// We still lead; fence writes on `rv`.
    Renewed {
        /// The Lease's resourceVersion after our write.
        rv: u64,
    },
    /// We led and do not any more.
    Lost,
    /// Nothing changed (still following, or a failed renewal within the deadline).
    Unchanged,
}

/// One replica's election state.
#[derive(Debug)]
pub struct Election {
    cfg: ElectionConfig,
    leading: bool,
    last_renew: Option<Instant>,
    /// The resourceVersion of the Lease last seen, and when we first saw it.
    observed: Option<(u64, Instant)>,
    holder: Option<String>,
}

impl Election {
    /// A follower that has seen nothing yet.
    pub fn new(cfg: ElectionConfig) -> Self {
        Self {
            cfg,
            leading: false,
            last_renew: None,
            observed: None,
            holder: None,
        }
    }

    /// The settings.
    pub fn config(&self) -> &ElectionConfig {
        &self.cfg
    }

    /// Whether we lead.
    pub fn is_leader(&self) -> bool {
        self.leading
    }

    /// The holder of the Lease as last seen.
    pub fn holder(&self) -> Option<&str> {
        self.holder.as_deref()
    }

    /// How long to wait before the next round: the retry period while leading, jittered
    /// by `rand` (in `[0, 1)`) while following, as client-go's acquire and renew loops.
    pub fn next_round_in(&self, rand: f64) -> Duration {
        if self.leading {
            self.cfg.retry_period
        } else {
            self.cfg
                .retry_period
                .mul_f64(1.0 + JITTER_FACTOR * rand.clamp(0.0, 1.0))
        }
    }

    /// A leader that has not renewed within the renew deadline has lost (checked before
    /// each round, so one that was frozen steps down before it writes anything).
    pub fn expire(&mut self, now: Instant) -> Outcome {
        match self.last_renew {
            Some(at)
                if self.leading && now.saturating_duration_since(at) > self.cfg.renew_deadline =>
            {
                self.leading = false;
                Outcome::Lost
            }
            _ => Outcome::Unchanged,
        }
    }

    /// One round: what to write given the Lease as just read (`current`, with its
    /// resourceVersion), at monotonic `now` and wall time `wall`.
    pub fn attempt(
        &mut self,
        now: Instant,
        wall: SystemTime,
        current: Option<(Lease, u64)>,
    ) -> (Attempt, Outcome) {
        let stamp = Some(MicroTime(apiserver::k8s_time(wall).0));
        let Some((lease, rv)) = current else {
            self.holder = None;
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.cfg.identity.clone()),
                    lease_duration_seconds: Some(self.duration_seconds()),
                    acquire_time: stamp.clone(),
                    renew_time: stamp,
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return (Attempt::Create(lease), Outcome::Unchanged);
        };
        if self.observed.is_none_or(|(seen, _)| seen != rv) {
            self.observed = Some((rv, now));
        }
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        self.holder.clone_from(&holder);
        let ours = holder.as_deref() == Some(self.cfg.identity.as_str());
        if let Some(_other) = holder.as_ref().filter(|_| !ours) {
            let since = self.observed.map_or(now, |(_, at)| at);
            // Held by someone else: if we thought we led, we do not any more.
            let outcome = if self.leading {
                self.leading = false;
                Outcome::Lost
            } else {
                Outcome::Unchanged
            };
            if now.saturating_duration_since(since) < self.cfg.lease_duration {
                return (Attempt::Wait, outcome);
            }
        }
        let mut next = lease;
        next.spec = Some(LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(self.duration_seconds()),
            acquire_time: if ours {
                spec.acquire_time
            } else {
                stamp.clone()
            },
            renew_time: stamp,
            lease_transitions: Some(if ours {
                spec.lease_transitions.unwrap_or(0)
            } else {
                spec.lease_transitions.unwrap_or(0).saturating_add(1)
            }),
            ..spec
        });
        (Attempt::Update { lease: next, rv }, Outcome::Unchanged)
    }

    /// The result of the round's write: `Ok(rv)` the Lease's new resourceVersion, `Err`
    /// it was not written (another writer was first, or the store failed).
    pub fn settle(&mut self, now: Instant, written: Result<u64, ()>) -> Outcome {
        match written {
            Ok(rv) => {
                self.observed = Some((rv, now));
                self.last_renew = Some(now);
                self.holder = Some(self.cfg.identity.clone());
                if self.leading {
                    Outcome::Renewed { rv }
                } else {
                    self.leading = true;
                    Outcome::Acquired { rv }
                }
            }
            Err(()) => self.expire(now),
        }
    }

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.cfg.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
