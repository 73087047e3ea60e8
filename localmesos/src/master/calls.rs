//! The calls of a subscribed framework, after the HTTP layer checked the
//! framework and its stream id.

use mesos::proto::executor::{Event as ExecEvent, event as exev};
use mesos::proto::scheduler::{Call, call::Type};

use super::{
    Shared, State, accept, allocator, executors, inverse_offers, reconcile, subscribe, tasks,
};
use crate::agent::ExecutorRef;

/// What the HTTP layer answers.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    /// 202.
    Accepted,
    /// 200 with an empty body (UPDATE_FRAMEWORK).
    Ok,
    /// 501: a call type localmesos does not implement.
    NotImplemented,
}

/// Applies a validated call of framework `fw_id`.
pub(crate) fn dispatch(
    cx: &Shared,
    st: &mut State,
    fw_id: &str,
    kind: Type,
    call: Call,
) -> Outcome {
    match kind {
        Type::Teardown => {
            subscribe::remove_framework(cx, st, fw_id);
        }
        Type::Accept => {
            if let Some(acc) = call.accept {
                accept::accept(cx, st, fw_id, acc);
            }
        }
        Type::Decline => {
            if let Some(dec) = call.decline {
                accept::decline(st, fw_id, dec);
            }
        }
        Type::Revive => {
            let roles = call.revive.map(|r| r.roles).unwrap_or_default();
            if let Some(fw) = st.frameworks.get_mut(fw_id) {
                if roles.is_empty() {
                    fw.suppressed.clear();
                } else {
                    for r in &roles {
                        fw.suppressed.remove(r);
                    }
                }
                fw.filters.clear();
            }
            cx.allocate_now.notify_one();
        }
        Type::Suppress => {
            let roles = call.suppress.map(|r| r.roles).unwrap_or_default();
            if let Some(fw) = st.frameworks.get_mut(fw_id) {
                let roles = if roles.is_empty() { fw.roles() } else { roles };
                fw.suppressed.extend(roles);
            }
        }
        Type::Kill => {
            if let Some(kill) = call.kill {
                kill_task(cx, st, fw_id, kill);
            }
        }
        Type::Shutdown => {
            if let Some(sd) = call.shutdown {
                let agent = sd.agent_id.unwrap_or_default().value;
                let exec = sd.executor_id.unwrap_or_default().value;
                executors::shutdown(cx, st, ExecutorRef::new(&agent, fw_id, &exec), false);
            }
        }
        Type::Acknowledge => {
            if let Some(ack) = call.acknowledge {
                let task = ack.task_id.unwrap_or_default().value;
                tasks::acknowledge(cx, st, fw_id, &task, &ack.uuid);
            }
        }
        Type::Reconcile => {
            let list = call.reconcile.map(|r| r.tasks).unwrap_or_default();
            reconcile::reconcile(st, fw_id, &list);
        }
        Type::Message => {
            if let Some(msg) = call.message {
                let agent = msg.agent_id.unwrap_or_default().value;
                let exec = msg.executor_id.unwrap_or_default().value;
                // Messages are best effort in Mesos: dropped when the executor
                // is unknown or not subscribed.
                if let Some(ex) = st
                    .agents
                    .get_mut(&agent)
                    .and_then(|a| a.executors.get_mut(&(fw_id.to_owned(), exec)))
                    && ex.sub.is_some()
                {
                    ex.deliver(ExecEvent {
                        r#type: Some(exev::Type::Message as i32),
                        message: Some(exev::Message { data: msg.data }),
                        ..Default::default()
                    });
                }
            }
        }
        Type::UpdateFramework => {
            if let Some(update) = call.update_framework
                && let Some(fw) = st.frameworks.get_mut(fw_id)
            {
                if let Some(info) = update.framework_info {
                    fw.info = info;
                }
                fw.suppressed = update.suppressed_roles.into_iter().collect();
                allocator::remove_framework_offers(st, fw_id)
                    .iter()
                    .for_each(|id| {
                        if let Some(fw) = st.frameworks.get(fw_id) {
                            fw.send(allocator::rescind_event(id));
                        }
                    });
                cx.allocate_now.notify_one();
            }
            return Outcome::Ok;
        }
        Type::AcceptInverseOffers => {
            if let Some(acc) = call.accept_inverse_offers {
                let ids = &acc.inverse_offer_ids;
                inverse_offers::answer(cx, st, fw_id, ids, acc.filters.as_ref(), true);
            }
        }
        Type::DeclineInverseOffers => {
            if let Some(dec) = call.decline_inverse_offers {
                let ids = &dec.inverse_offer_ids;
                inverse_offers::answer(cx, st, fw_id, ids, dec.filters.as_ref(), false);
            }
        }
        // Mesos accepts and ignores REQUEST (its allocator does nothing with it).
        Type::Request => {}
        Type::AcknowledgeOperationStatus
        | Type::ReconcileOperations
        | Type::Unknown
        | Type::Subscribe => {
            return Outcome::NotImplemented;
        }
    }
    Outcome::Accepted
}

/// KILL: a live task is killed on its agent; an unknown one gets the
/// reconciliation answer.
fn kill_task(cx: &Shared, st: &mut State, fw_id: &str, kill: mesos::proto::scheduler::call::Kill) {
    let Some(task_id) = kill.task_id else { return };
    let Some(fw) = st.frameworks.get(fw_id) else {
        return;
    };
    match fw.tasks.get(&task_id.value) {
        Some(t) if t.state == mesos::proto::TaskState::TaskUnreachable => {
            if let Some(status) = reconcile::explicit(st, fw, &task_id, Some(&t.agent_id)) {
                fw.send_update(status);
            }
        }
        Some(t) if !t.state.is_terminal() => {
            executors::kill_task(cx, st, fw_id, &task_id.value, kill.kill_policy);
        }
        Some(_) => {}
        None => {
            if let Some(status) = reconcile::explicit(st, fw, &task_id, kill.agent_id.as_ref()) {
                fw.send_update(status);
            }
        }
    }
}
