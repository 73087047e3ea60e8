//! A local Mesos master with agents, faithful to the v1 HTTP APIs.
//!
//! Filled in by the localmesos issue; nothing here pretends to work yet.
