//! The mesopod framework: the scheduler that turns pending pods into Mesos tasks.
//!
//! Filled in by the framework issue; for now it only holds the command line.

pub mod cli;
