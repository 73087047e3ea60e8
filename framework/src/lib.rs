//! The mesopod framework: the scheduler that turns pending pods into Mesos tasks.
//!
//! Being filled in by the framework issue. What exists is pure and tested:
//! the offer store, the pod queue and the reconciliation rounds.

pub mod admission;
pub mod backoff;
pub mod cli;
pub mod cmd;
pub mod config;
pub mod launch;
pub mod offers;
pub mod podstatus;
pub mod queue;
pub mod reconcile;
