//! The hook trait and the closure adapter.

use std::future::Future;
use std::pin::Pin;

use super::decision::Decision;
use super::request::Request;

/// Why a hook could not decide. Any of these holds the attempt, unless
/// the operator chose fail-open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The hook could not be reached (e.g. connection refused).
    #[error("admission hook unreachable: {0}")]
    Unreachable(String),
    /// The hook answered something that is not a decision.
    #[error("admission hook answered garbage: {0}")]
    BadAnswer(String),
    /// The hook did not answer within its deadline.
    #[error("admission hook missed its deadline of {0:?}")]
    Deadline(std::time::Duration),
    /// The hook reported its own failure.
    #[error("admission hook failed: {0}")]
    Failed(String),
}

/// The future a hook returns.
pub type HookFuture<'a> = Pin<Box<dyn Future<Output = Result<Decision, HookError>> + Send + 'a>>;

/// Admits, changes, holds or refuses one attempt. Called once per attempt;
/// the caller stops waiting at the deadline and drops the future, so a hook
/// must not rely on running to completion.
pub trait Hook: Send + Sync + 'static {
    /// A short name for logs and events.
    fn name(&self) -> &str;
    /// Decides on `req`.
    fn admit<'a>(&'a self, req: &'a Request) -> HookFuture<'a>;
}

/// Adapts a synchronous closure into a [`Hook`].
pub struct HookFn<F> {
    f: F,
}

impl<F> HookFn<F>
where
    F: Fn(&Request) -> Result<Decision, HookError> + Send + Sync + 'static,
{
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        Self { f }
    }
}

impl<F> Hook for HookFn<F>
where
    F: Fn(&Request) -> Result<Decision, HookError> + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        "in-process"
    }

    fn admit<'a>(&'a self, req: &'a Request) -> HookFuture<'a> {
        let out = (self.f)(req);
        Box::pin(async move { out })
    }
}
