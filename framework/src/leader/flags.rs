//! kube-scheduler's leader election flags.

use std::time::Duration;

use super::machine::{ElectionConfig, LEASE_NAME, LEASE_NAMESPACE};

/// `--leader-elect*`, with kube-scheduler's names and defaults.
#[derive(Debug, Clone, clap::Args)]
pub struct LeaderArgs {
    /// Elect a leader among replicas sharing one store; only the leader schedules.
    /// Default: off with the redb store, which only one process can open.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub leader_elect: Option<bool>,
    /// How long a follower waits after the last observed renewal before taking over.
    #[arg(long, default_value = "15s", value_parser = mesos::duration::parse_flag)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader retries renewing before it gives up leading.
    #[arg(long, default_value = "10s", value_parser = mesos::duration::parse_flag)]
    pub leader_elect_renew_deadline: Duration,
    /// How often replicas try to acquire or renew the lease.
    #[arg(long, default_value = "2s", value_parser = mesos::duration::parse_flag)]
    pub leader_elect_retry_period: Duration,
    /// The only lock kind there is: `leases`.
    #[arg(long, default_value = "leases")]
    pub leader_elect_resource_lock: String,
    /// The Lease's name.
    #[arg(long, default_value = LEASE_NAME)]
    pub leader_elect_resource_name: String,
    /// The Lease's namespace.
    #[arg(long, default_value = LEASE_NAMESPACE)]
    pub leader_elect_resource_namespace: String,
}

impl LeaderArgs {
    /// The election these flags ask for, if any; `shared_store` is whether the store
    /// can be shared by several processes (etcd), which turns it on by default.
    ///
    /// # Errors
    /// A lock other than `leases`, or durations client-go refuses.
    pub fn election_for(&self, shared_store: bool) -> anyhow::Result<Option<ElectionConfig>> {
        if !self.leader_elect.unwrap_or(shared_store) {
            return Ok(None);
        }
        if self.leader_elect_resource_lock != "leases" {
            anyhow::bail!(
                "--leader-elect-resource-lock must be leases, not {:?}",
                self.leader_elect_resource_lock
            );
        }
        let cfg = ElectionConfig {
            identity: super::identity(),
            namespace: self.leader_elect_resource_namespace.clone(),
            name: self.leader_elect_resource_name.clone(),
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
        };
        cfg.check()
            .map_err(|e| anyhow::anyhow!("bad --leader-elect flags: {e}"))?;
        Ok(Some(cfg))
    }

    /// [`LeaderArgs::election_for`] with this build's one store, redb (etcd, which turns
    /// election on by default, arrives with `--etcd-servers`).
    ///
    /// # Errors
    /// As [`LeaderArgs::election_for`].
    pub fn election(&self) -> anyhow::Result<Option<ElectionConfig>> {
        self.election_for(false)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        leader: LeaderArgs,
    }

    fn parse(args: &[&str]) -> LeaderArgs {
        Cli::try_parse_from(std::iter::once("mesopod").chain(args.iter().copied()))
            .unwrap()
            .leader
    }

    #[test]
    fn leader_elect_is_on_by_default_only_with_a_shared_store_and_takes_kube_schedulers_defaults() {
        assert!(parse(&[]).election_for(false).unwrap().is_none());
        let on = parse(&[]).election_for(true).unwrap().unwrap();
        assert_eq!(
            (on.lease_duration, on.renew_deadline, on.retry_period),
            (
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2)
            )
        );
        assert_eq!(
            (on.namespace.as_str(), on.name.as_str()),
            ("kube-system", "mesopod")
        );
        let (host, uuid) = on.identity.rsplit_once('_').unwrap();
        assert!(!host.is_empty() && uuid.len() == 36, "{}", on.identity);
        assert!(parse(&["--leader-elect"]).election().unwrap().is_some());
        assert!(
            parse(&["--leader-elect=false"])
                .election_for(true)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn inconsistent_durations_and_other_locks_are_refused_with_client_gos_words() {
        let e = parse(&["--leader-elect", "--leader-elect-renew-deadline=20s"])
            .election()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "bad --leader-elect flags: leaseDuration must be greater than renewDeadline"
        );
        let e = parse(&["--leader-elect", "--leader-elect-resource-lock=endpoints"])
            .election()
            .unwrap_err();
        assert!(e.to_string().contains("must be leases"), "{e}");
    }
}
