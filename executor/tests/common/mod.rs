//! What the executor's tests share: an agent in the test's hands for the
//! executor loop, and the pod runtime's helpers.
#![allow(dead_code, unused_imports, unreachable_pub, clippy::unwrap_used)]

pub mod agent;
pub mod pods;
