//! The executor's view of its agent: subscribe for events, send calls.
//!
//! A trait, so the executor loop can be driven by the HTTP client in
//! production and by an in-process agent in tests.

use std::future::Future;
use std::pin::Pin;

use futures::Stream;
use mesos::proto::executor::{Call, Event};

/// The events of one subscription, until the connection drops.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Event, AgentError>> + Send>>;

/// Why talking to the agent failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// The connection failed or dropped; trying again may work.
    #[error("agent unreachable: {0}")]
    Unreachable(String),
    /// The agent answered with an error (4xx/5xx).
    #[error("agent refused the call: {0}")]
    Refused(String),
}

/// An agent's v1 executor API.
pub trait Agent: Send + Sync {
    /// Sends SUBSCRIBE and returns the event stream.
    fn subscribe(&self, call: Call)
    -> impl Future<Output = Result<EventStream, AgentError>> + Send;
    /// Sends UPDATE or MESSAGE (202 = `Ok`).
    fn call(&self, call: Call) -> impl Future<Output = Result<(), AgentError>> + Send;
}

/// The real agent: the v1 executor API over HTTP.
impl Agent for mesos::client::ExecutorClient {
    async fn subscribe(&self, call: Call) -> Result<EventStream, AgentError> {
        let stream = mesos::client::ExecutorClient::subscribe(self, call)
            .await
            .map_err(agent_error)?;
        Ok(Box::pin(futures::StreamExt::map(stream, |item| {
            item.map_err(agent_error)
        })))
    }

    async fn call(&self, call: Call) -> Result<(), AgentError> {
        mesos::client::ExecutorClient::call(self, call)
            .await
            .map_err(agent_error)
    }
}

/// 4xx means the agent looked at the call and said no; everything else
/// (connection errors, 503 while it recovers, broken streams) may pass.
fn agent_error(e: mesos::client::ClientError) -> AgentError {
    match e.status() {
        Some(status) if (400..500).contains(&status) => AgentError::Refused(e.to_string()),
        _ => AgentError::Unreachable(e.to_string()),
    }
}
