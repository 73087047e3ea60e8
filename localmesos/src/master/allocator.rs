//! The allocator: every allocation interval, what no task holds and no
//! offer holds goes out again, at most one offer per agent per framework.
//!
//! # Rules (Mesos' hierarchical allocator, simplified)
//!
//! - Only connected frameworks get offers, and only for roles they have
//!   not suppressed.
//! - An offer for role `r` carries the agent's unreserved resources plus
//!   those statically reserved to `r`; every resource has
//!   `allocation_info.role = r`. Reserved resources never go to other roles.
//! - A refusal filter (DECLINE / ACCEPT `refuse_seconds`, default 5 s) keeps
//!   an agent's resources from a framework until it expires, unless more
//!   than what was refused became available.
//! - Nothing smaller than Mesos' minimum allocatable (0.01 cpus or 32 MB
//!   of memory) is offered.
//! - Frameworks take turns being first, so none starves another.
//! - Agents with GPUs are offered only to frameworks with the
//!   GPU_RESOURCES capability (Mesos' `--filter_gpu_resources`), so GPU
//!   machines are not filled by work that does not need them.

use std::collections::HashMap;
use std::time::Instant;

use mesos::proto::scheduler::{Event, event};
use mesos::proto::{AgentId, ExecutorId, FrameworkId, Offer, OfferId, Resource, resource};
use mesos::resources::Resources;

use super::{OfferRec, Shared, State};
use crate::agent::AgentStatus;

/// Mesos' `--min_allocatable_resources` default (`cpus:0.01|mem:32`), in
/// milli-units.
const MIN_CPUS_MILLI: i64 = 10;
const MIN_MEM_MILLI: i64 = 32_000;

fn allocatable(r: &Resources) -> bool {
    r.scalar_milli("cpus") >= MIN_CPUS_MILLI || r.scalar_milli("mem") >= MIN_MEM_MILLI
}

pub(crate) fn rescind_event(offer_id: &str) -> Event {
    Event {
        r#type: Some(event::Type::Rescind as i32),
        rescind: Some(event::Rescind {
            offer_id: Some(OfferId::new(offer_id)),
        }),
        ..Default::default()
    }
}

/// One allocation round.
pub(crate) fn allocate(cx: &Shared, st: &mut State) {
    if st.recovering {
        return;
    }
    let now = Instant::now();
    let mut order: Vec<String> = st
        .frameworks
        .iter()
        .filter(|(_, f)| f.conn.is_some())
        .map(|(id, _)| id.clone())
        .collect();
    if order.is_empty() {
        return;
    }
    order.sort();
    let n = order.len();
    order.rotate_left(st.alloc_rotation % n);
    st.alloc_rotation = st.alloc_rotation.wrapping_add(1);

    let mut made: HashMap<String, Vec<Offer>> = HashMap::new();
    let agent_ids: Vec<String> = st
        .agents
        .iter()
        .filter(|(id, a)| {
            a.status == AgentStatus::Active
                && a.silent_since.is_none()
                && !st.drain.is_deactivated(id)
        })
        .map(|(id, _)| id.clone())
        .collect();
    for agent_id in agent_ids {
        for fw_id in &order {
            let Some(agent) = st.agents.get(&agent_id) else {
                break;
            };
            // Steady state: everything is offered or used. Checked without
            // computing `available`, which allocates, so idle rounds over
            // thousands of agents stay cheap.
            if agent.used.is_empty() && agent.offered == agent.total {
                break;
            }
            let available = agent.available();
            if available.is_empty() {
                break;
            }
            let has_gpus = agent.total.scalar_milli("gpus") > 0;
            let Some(fw) = st.frameworks.get_mut(fw_id) else {
                continue;
            };
            if has_gpus
                && !fw
                    .info
                    .has_capability(mesos::proto::framework_info::capability::Type::GpuResources)
            {
                continue;
            }
            if let Some((_, until)) = fw.filters.get(&agent_id)
                && *until <= now
            {
                fw.filters.remove(&agent_id);
            }
            let mut chosen = None;
            for role in fw.roles() {
                if fw.suppressed.contains(&role) {
                    continue;
                }
                let mut candidate = available.unreserved();
                if role != "*" {
                    candidate += &available.filter_role(&role);
                }
                if !allocatable(&candidate) {
                    continue;
                }
                if let Some((refused, _)) = fw.filters.get(&agent_id)
                    && refused.contains(&candidate)
                {
                    continue;
                }
                chosen = Some((role, candidate));
                break;
            }
            let Some((role, candidate)) = chosen else {
                continue;
            };
            let executor_ids: Vec<ExecutorId> = agent
                .executors
                .iter()
                .filter(|((f, _), e)| f == fw_id && e.custom)
                .map(|((_, e), _)| ExecutorId::new(e.clone()))
                .collect();
            let offer_id = st.new_offer_id();
            let Some(agent) = st.agents.get_mut(&agent_id) else {
                break;
            };
            agent.offered += &candidate;
            let Some(agent) = st.agents.get(&agent_id) else {
                break;
            };
            let offer = Offer {
                id: Some(OfferId::new(offer_id.clone())),
                framework_id: Some(FrameworkId::new(fw_id.clone())),
                agent_id: Some(AgentId::new(agent_id.clone())),
                hostname: agent.hostname.clone(),
                resources: candidate
                    .iter()
                    .map(|r| Resource {
                        allocation_info: Some(resource::AllocationInfo {
                            role: Some(role.clone()),
                        }),
                        ..r.clone()
                    })
                    .collect(),
                executor_ids,
                attributes: agent.attributes.clone(),
                unavailability: st.maintenance.unavailability_of(agent),
                url: agent_url(agent),
                allocation_info: Some(resource::AllocationInfo {
                    role: Some(role.clone()),
                }),
            };
            st.offers.insert(
                offer_id.clone(),
                OfferRec {
                    framework_id: fw_id.clone(),
                    agent_id: agent_id.clone(),
                    role,
                    resources: candidate,
                },
            );
            if let Some(timeout) = cx.timing.offer_timeout {
                let epoch = st.epoch;
                cx.after(timeout, move |_, st| {
                    if st.epoch == epoch
                        && let Some(rec) = remove_offer(st, &offer_id)
                        && let Some(fw) = st.frameworks.get(&rec.framework_id)
                    {
                        fw.send(rescind_event(&offer_id));
                    }
                });
            }
            made.entry(fw_id.clone()).or_default().push(offer);
        }
    }
    for (fw_id, offers) in made {
        if let Some(fw) = st.frameworks.get(&fw_id) {
            fw.send(Event {
                r#type: Some(event::Type::Offers as i32),
                offers: Some(event::Offers { offers }),
                ..Default::default()
            });
        }
    }
    // As Mesos' allocator, after the offers of the round.
    super::inverse_offers::generate(cx, st);
}

/// How to reach an agent's own endpoints (`None` for simulated agents), as
/// offers and inverse offers carry it.
pub(crate) fn agent_url(agent: &crate::agent::Agent) -> Option<mesos::proto::Url> {
    agent.endpoint.map(|e| mesos::proto::Url {
        scheme: "http".into(),
        address: Some(mesos::proto::Address {
            hostname: Some(agent.hostname.clone()),
            ip: Some(e.ip().to_string()),
            port: i32::from(e.port()),
        }),
        path: Some("/slave(1)".into()),
        ..Default::default()
    })
}

/// Removes an offer and gives its resources back to its agent.
pub(crate) fn remove_offer(st: &mut State, offer_id: &str) -> Option<OfferRec> {
    let rec = st.offers.remove(offer_id)?;
    if let Some(agent) = st.agents.get_mut(&rec.agent_id) {
        agent.offered -= &rec.resources;
    }
    Some(rec)
}

/// Removes every offer of a framework (silently); returns their ids.
pub(crate) fn remove_framework_offers(st: &mut State, framework_id: &str) -> Vec<String> {
    let ids: Vec<String> = st
        .offers
        .iter()
        .filter(|(_, o)| o.framework_id == framework_id)
        .map(|(id, _)| id.clone())
        .collect();
    for id in &ids {
        remove_offer(st, id);
    }
    ids
}

/// Rescinds every offer on an agent (RESCIND to each framework).
pub(crate) fn rescind_agent_offers(st: &mut State, agent_id: &str) {
    let ids: Vec<String> = st
        .offers
        .iter()
        .filter(|(_, o)| o.agent_id == agent_id)
        .map(|(id, _)| id.clone())
        .collect();
    for id in ids {
        if let Some(rec) = remove_offer(st, &id)
            && let Some(fw) = st.frameworks.get(&rec.framework_id)
        {
            fw.send(rescind_event(&id));
        }
    }
}

/// Installs a refusal filter for `agent_id` on a framework.
pub(crate) fn refuse(
    st: &mut State,
    framework_id: &str,
    agent_id: &str,
    resources: Resources,
    seconds: f64,
) {
    if seconds <= 0.0 {
        return;
    }
    let Some(fw) = st.frameworks.get_mut(framework_id) else {
        return;
    };
    let until = Instant::now() + std::time::Duration::from_secs_f64(seconds);
    let entry = fw
        .filters
        .entry(agent_id.to_owned())
        .or_insert_with(|| (Resources::new(), until));
    entry.0 += &resources;
    entry.1 = entry.1.max(until);
}

/// The allocation loop: one round per interval, or sooner when woken.
pub(crate) async fn run(cx: std::sync::Arc<Shared>) {
    let mut iv = tokio::time::interval(cx.timing.allocation_interval);
    iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = iv.tick() => {}
            () = cx.allocate_now.notified() => {}
        }
        let mut st = cx.lock();
        allocate(&cx, &mut st);
    }
}
