//! One module per `mesopod` subcommand: its flags and its entry point.

pub mod bench;
pub mod executor;
pub mod localmesos;
pub mod scheduler;
