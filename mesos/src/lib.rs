//! The Mesos v1 wire protocol.
