//! Agent health as Mesos' master judges it: it pings every agent each
//! `--agent_ping_timeout` and marks one unreachable after
//! `--max_agent_ping_timeouts` pings in a row go unanswered. A partitioned
//! agent ([`super::agents::partition`]) stops answering from that moment
//! on the [`crate::clock::MasterClock`]; it turns unreachable once the
//! master's clock has run past the whole budget, which tests reach by
//! advancing the clock rather than by waiting.

use std::sync::Arc;
use std::time::Duration;

use super::{Shared, State, agents};
use crate::agent::AgentStatus;

/// How long an agent may stay silent before it is unreachable.
pub(crate) fn budget(cx: &Shared) -> Duration {
    cx.timing
        .agent_ping_timeout
        .saturating_mul(cx.timing.max_agent_ping_timeouts)
}

/// Marks unreachable every silent agent whose budget ran out.
pub(crate) fn check(cx: &Shared, st: &mut State) {
    let now = cx.clock.now();
    let budget = budget(cx);
    let expired: Vec<String> = st
        .agents
        .values()
        .filter(|a| matches!(a.status, AgentStatus::Active | AgentStatus::Reregistering))
        .filter(|a| {
            a.silent_since
                .is_some_and(|t| now.saturating_sub(t) >= budget)
        })
        .map(|a| a.id.value.clone())
        .collect();
    for id in expired {
        tracing::warn!(agent = %id, after = ?budget, "agent did not answer its pings: marked unreachable");
        agents::mark_unreachable(cx, st, &id);
    }
}

/// Checks once per ping timeout of real time (at most a second apart), so
/// a real partition is noticed on time as well as an advanced one.
pub(crate) async fn run(cx: Arc<Shared>) {
    let tick = cx
        .timing
        .agent_ping_timeout
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        tokio::time::sleep(tick).await;
        check(&cx, &mut cx.lock());
    }
}

/// Advances the master's clock and applies what fell due.
pub(crate) fn advance(cx: &Shared, by: Duration) {
    cx.clock.advance(by);
    check(cx, &mut cx.lock());
}
