//! HTTP clients for the v1 scheduler and executor APIs.
//!
//! Both speak one [`Codec`](crate::codec::Codec) per client: every request
//! carries `Content-Type` and an explicit `Accept` for it (Mesos answers
//! JSON to a missing or `*/*` Accept, which is what reqwest sends unless
//! told otherwise). Event streams are RecordIO, decoded with the bounds of
//! [`recordio`](crate::recordio).
//!
//! Redirects are followed by hand, not by reqwest: Mesos answers `307` with
//! a protocol-relative `Location: //leader:5050/api/v1/scheduler`, and the
//! scheduler must learn *which* master accepted its subscription, because
//! every later call goes to that master with that stream id.
//!
//! # What the clients do not do
//!
//! They never retry on their own, resubscribe, or watch heartbeats: those
//! are policy and belong to the caller (the framework and the executor),
//! which wait between attempts by [`backoff`].

pub mod backoff;
mod error;
pub mod executor;
mod http;
pub mod scheduler;
pub mod security;

pub use error::ClientError;
pub use executor::ExecutorClient;
pub use scheduler::{SchedulerClient, Subscription, SubscriptionHandle};
pub use security::{ClientSecurity, Credential, SecurityError};

use std::pin::Pin;

use futures::Stream;

/// A typed event stream; ends after the server closes it.
pub type EventStream<E> = Pin<Box<dyn Stream<Item = Result<E, ClientError>> + Send>>;
