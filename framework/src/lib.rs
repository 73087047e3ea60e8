//! The mesopod framework: the scheduler that turns pending pods into Mesos tasks.
//!
//! Filled in by the framework issue; for now it holds the command line.

pub mod cli;
pub mod cmd;
