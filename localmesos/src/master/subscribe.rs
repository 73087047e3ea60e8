//! Framework lifecycle: SUBSCRIBE (new and failover), broken streams and
//! the failover timeout, TEARDOWN, removal, and master restarts.

use std::sync::Arc;
use std::time::Duration;

use mesos::proto::scheduler::{Event, call, event};

use tokio::sync::mpsc;

use super::{
    Conn, Framework, MAX_COMPLETED, RemovedFramework, Shared, State, allocator, executors, tasks,
};
use crate::agent::{AgentStatus, ExecutorRef};
use crate::faults::RestartOptions;

/// The outcome of a SUBSCRIBE.
pub(crate) enum Subscribed {
    /// The stream to serve, with its id.
    Stream {
        stream_id: String,
        rx: mpsc::UnboundedReceiver<Event>,
        framework_id: String,
        generation: u64,
    },
    /// Refused (the framework was removed, or its principal would change):
    /// the stream carries only the ERROR that says why.
    Refused(mpsc::UnboundedReceiver<Event>),
}

fn error_event(message: &str) -> Event {
    Event {
        r#type: Some(event::Type::Error as i32),
        error: Some(event::Error {
            message: message.to_owned(),
        }),
        ..Default::default()
    }
}

/// SUBSCRIBE: a new framework, or a failover of a known (or, after a master
/// restart, unknown) id. The old stream of a failed-over framework gets
/// `ERROR "Framework failed over"`; its offers are rescinded.
pub(crate) fn subscribe(cx: &Shared, st: &mut State, sub: call::Subscribe) -> Subscribed {
    let info = sub.framework_info.unwrap_or_default();
    let (tx, rx) = mpsc::unbounded_channel();
    if let Some(id) = &info.id
        && st.is_removed_framework(&id.value)
    {
        let _ = tx.send(error_event("Framework has been removed"));
        return Subscribed::Refused(rx);
    }
    // Whoever holds a framework's id must not take it over under another
    // principal: its stream, offers and tasks would be theirs. Mesos
    // refuses this before touching the running subscription.
    if let Some(id) = &info.id
        && let Some(known) = st.frameworks.get(&id.value)
        && known.info.principal != info.principal
    {
        tracing::warn!(
            framework = %id.value,
            "a SUBSCRIBE tried to change framework {}'s principal; refused",
            id.value
        );
        let _ = tx.send(error_event(
            "Changing framework's principal is not allowed.",
        ));
        return Subscribed::Refused(rx);
    }
    let id = match &info.id {
        Some(id) => id.clone(),
        None => st.new_framework_id(),
    };
    let stream_id = uuid::Uuid::new_v4().to_string();
    let mut info = info;
    info.id = Some(id.clone());
    let key = id.value.clone();
    let is_failover = st.frameworks.contains_key(&key);
    if !is_failover {
        st.frameworks
            .insert(key.clone(), Framework::new(id.clone(), info.clone()));
    }
    // Offers made on the old stream are void.
    let rescinded = allocator::remove_framework_offers(st, &key);
    super::inverse_offers::remove_framework(st, &key);
    let master_info = st.master_info(cx.master_addr);
    let Some(fw) = st.frameworks.get_mut(&key) else {
        return Subscribed::Refused(rx);
    };
    if let Some(old) = fw.conn.take() {
        let _ = old.tx.send(error_event("Framework failed over"));
    }
    fw.info = info;
    fw.generation += 1;
    fw.suppressed = sub.suppressed_roles.into_iter().collect();
    fw.conn = Some(Conn {
        stream_id: stream_id.clone(),
        tx: tx.clone(),
    });
    let _ = tx.send(Event {
        r#type: Some(event::Type::Subscribed as i32),
        subscribed: Some(event::Subscribed {
            framework_id: Some(id.clone()),
            heartbeat_interval_seconds: Some(cx.timing.heartbeat_interval.as_secs_f64()),
            master_info: Some(master_info),
        }),
        ..Default::default()
    });
    let _ = tx.send(Event {
        r#type: Some(event::Type::Heartbeat as i32),
        ..Default::default()
    });
    for offer_id in rescinded {
        let _ = tx.send(allocator::rescind_event(&offer_id));
    }
    let generation = fw.generation;
    tasks::resend_in_flight(st, &key);
    cx.allocate_now.notify_one();
    Subscribed::Stream {
        stream_id,
        rx,
        framework_id: key,
        generation,
    }
}

/// The stream of subscription `generation` ended. If it is still the
/// current one, the framework is disconnected: offers go back and the
/// failover timeout starts.
pub(crate) fn stream_closed(cx: &Shared, st: &mut State, framework_id: &str, generation: u64) {
    let Some(fw) = st.frameworks.get_mut(framework_id) else {
        return;
    };
    if fw.generation != generation || fw.conn.is_none() {
        return;
    }
    fw.conn = None;
    disconnected(cx, st, framework_id);
}

/// Starts the failover timeout of a disconnected framework.
fn disconnected(cx: &Shared, st: &mut State, framework_id: &str) {
    allocator::remove_framework_offers(st, framework_id);
    super::inverse_offers::remove_framework(st, framework_id);
    let Some(fw) = st.frameworks.get(framework_id) else {
        return;
    };
    let timeout = fw.info.failover_timeout.unwrap_or(0.0);
    let generation = fw.generation;
    let epoch = st.epoch;
    tracing::info!(
        framework = framework_id,
        timeout,
        "framework disconnected; failover timeout started"
    );
    let id = framework_id.to_owned();
    let delay = Duration::try_from_secs_f64(timeout).unwrap_or(Duration::MAX);
    if delay.is_zero() {
        remove_framework(cx, st, framework_id);
        return;
    }
    // Durations beyond a year are effectively forever; tokio caps sleeps anyway.
    cx.after(
        delay.min(Duration::from_secs(365 * 86_400)),
        move |cx, st| {
            let still_gone = st
                .frameworks
                .get(&id)
                .is_some_and(|f| f.conn.is_none() && f.generation == generation);
            if st.epoch == epoch && still_gone {
                tracing::info!(
                    framework = id,
                    "failover timeout expired; removing framework"
                );
                remove_framework(cx, st, &id);
            }
        },
    );
}

/// Removes a framework: kills its tasks and executors, frees everything,
/// closes its stream, and remembers it so it cannot subscribe again.
pub(crate) fn remove_framework(cx: &Shared, st: &mut State, framework_id: &str) {
    allocator::remove_framework_offers(st, framework_id);
    super::inverse_offers::remove_framework(st, framework_id);
    let Some(fw) = st.frameworks.remove(framework_id) else {
        return;
    };
    for task in fw.tasks.values() {
        if let Some(agent) = st.agents.get_mut(&task.agent_id.value)
            && !task.state.is_terminal()
        {
            agent.used -= &task.resources;
        }
    }
    let agent_ids: Vec<String> = st.agents.keys().cloned().collect();
    for a in agent_ids {
        let keys: Vec<(String, String)> = st
            .agents
            .get(&a)
            .map(|ag| {
                ag.executors
                    .keys()
                    .filter(|(f, _)| f == framework_id)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for (f, e) in keys {
            executors::shutdown(cx, st, ExecutorRef::new(&a, &f, &e), true);
        }
    }
    st.removed_frameworks.push_back(RemovedFramework {
        id: framework_id.to_owned(),
        name: fw.info.name.clone(),
    });
    while st.removed_frameworks.len() > MAX_COMPLETED {
        st.removed_frameworks.pop_front();
    }
    // Dropping `fw` drops its sender: the stream ends.
    drop(fw);
}

/// A master restart: every stream drops; calls get 503 during recovery;
/// state is kept (frameworks must re-subscribe within their failover
/// timeout) or lost (a fresh cluster with the same agents).
pub(crate) fn restart(cx: &Arc<Shared>, opts: RestartOptions) {
    let mut st = cx.lock();
    st.epoch += 1;
    st.recovering = true;
    st.offers.clear();
    for agent in st.agents.values_mut() {
        agent.offered = mesos::resources::Resources::new();
    }
    super::inverse_offers::reset(&mut st);
    if opts.keep_state {
        for fw in st.frameworks.values_mut() {
            fw.conn = None;
            fw.filters.clear();
            for t in fw.tasks.values_mut() {
                t.backoff = Duration::ZERO;
            }
        }
        for agent in st.agents.values_mut() {
            if agent.status == AgentStatus::Active {
                agent.status = AgentStatus::Reregistering;
            }
        }
    } else {
        let agent_ids: Vec<String> = st.agents.keys().cloned().collect();
        for a in agent_ids {
            let keys: Vec<(String, String)> = st
                .agents
                .get(&a)
                .map(|ag| ag.executors.keys().cloned().collect())
                .unwrap_or_default();
            for (f, e) in keys {
                executors::shutdown(cx, &mut st, ExecutorRef::new(&a, &f, &e), true);
            }
            if let Some(agent) = st.agents.get_mut(&a) {
                agent.used = mesos::resources::Resources::new();
            }
        }
        st.frameworks.clear();
        st.removed_frameworks.clear();
    }
    let epoch = st.epoch;
    let recovery = Duration::from_millis(opts.recovery_ms);
    let rereg = Duration::from_millis(opts.agent_reregistration_ms);
    drop(st);
    cx.after(recovery, move |cx, st| {
        if st.epoch != epoch {
            return;
        }
        st.recovering = false;
        let ids: Vec<String> = st.frameworks.keys().cloned().collect();
        for id in ids {
            // Disconnected by the restart: their failover timeouts start now.
            disconnected(cx, st, &id);
        }
        cx.after(rereg, move |cx, st| {
            if st.epoch != epoch {
                return;
            }
            for agent in st.agents.values_mut() {
                if agent.status == AgentStatus::Reregistering {
                    agent.status = AgentStatus::Active;
                }
            }
            // The registry kept each agent's drain: those back drain again.
            let ids: Vec<String> = st.agents.keys().cloned().collect();
            for id in ids {
                super::drain::reregistered(cx, st, &id);
            }
            cx.allocate_now.notify_one();
        });
    });
}
