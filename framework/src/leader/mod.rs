//! Leader election among mesopod replicas, and what leadership switches on.
//!
//! Every replica serves the Kubernetes API; only the one holding the Lease
//! `kube-system/mesopod` runs the scheduler (the Mesos subscription, the core, its
//! sweeps and reconciliation). [`machine`] is the election, sans-IO (client-go's
//! semantics); [`run`] performs its rounds against the store and sets the
//! [`apiserver::Fence`] every scheduler write is checked against, so a leader frozen
//! past its lease writes nothing. Losing the lease ends the scheduler's term (as
//! kube-scheduler, the binary then exits and its supervisor restarts it as a follower).

pub mod flags;
pub mod http;
pub mod machine;
pub mod run;
pub(crate) mod term;

pub use machine::{Attempt, Election, ElectionConfig, LEASE_NAME, LEASE_NAMESPACE, Outcome};
pub use run::{Elector, Leadership, identity};
