//! Leader election among mesopod replicas, and what leadership switches on.
//!
//! Every replica serves the Kubernetes API; only the one holding the Lease
//! `kube-system/mesopod` runs the scheduler (the Mesos subscription, the core, its
//! sweeps and reconciliation). [`machine`] is the election, sans-IO (client-go's
//! semantics); [`run`] performs its rounds against the store and sets the
//! [`apiserver::Fence`] every scheduler write is checked against, so a leader frozen
//! past its lease writes nothing. Losing the lease (to another replica, or to a store
//! it cannot reach for the renew deadline) ends the scheduler's term: everything the
//! term started stops, and only then does the replica compete again
//! ([`Elector::rejoin`]); its next term is built afresh from the store (`app::terms`).
//! The process stays up throughout, serving the API, so an etcd outage needs no
//! supervisor to restart anyone.

pub mod current;
pub mod flags;
pub mod http;
pub mod machine;
pub mod run;
pub(crate) mod term;

pub use machine::{Attempt, Election, ElectionConfig, LEASE_NAME, LEASE_NAMESPACE, Outcome};
pub use run::{Elector, Leadership, identity};
