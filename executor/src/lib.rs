//! The mesopod executor: runs pods as supervised processes on a Mesos agent.
//!
//! Filled in by the executor issue; nothing here pretends to work yet.
