//! Maintenance: the `Schedule` of `Window`s an operator posts, and the
//! `ClusterStatus` the master reports (DRAINING and DOWN machines).

include!(concat!(env!("OUT_DIR"), "/mesos.v1.maintenance.rs"));
include!(concat!(env!("OUT_DIR"), "/mesos.v1.maintenance.json.rs"));
