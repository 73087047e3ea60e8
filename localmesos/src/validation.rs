//! Call validation, as Apache Mesos' `validation.cpp` does it: pure
//! functions over a decoded call, with Mesos' messages. A call that fails
//! here gets `400 Bad Request` and changes nothing.

use mesos::proto::executor as exec;
use mesos::proto::framework_info::capability::Type as Cap;
use mesos::proto::maintenance::Schedule;
use mesos::proto::scheduler::{Call, call::Type};
use mesos::proto::task_status::Source;
use mesos::proto::{FrameworkInfo, TaskState, TaskStatus};
use mesos::proto::{MachineId, OfferId, master};

/// Validates a scheduler call before any framework is looked up.
///
/// # Errors
/// Mesos' message for the first rule the call breaks.
pub(crate) fn scheduler_call(call: &Call) -> Result<Type, String> {
    let Some(raw) = call.r#type else {
        return Err("Expecting 'type' to be present".into());
    };
    let kind = Type::try_from(raw).map_err(|_| format!("Unknown call type {raw}"))?;
    if kind == Type::Subscribe {
        let Some(subscribe) = &call.subscribe else {
            return Err("Expecting 'subscribe' to be present".into());
        };
        let Some(info) = &subscribe.framework_info else {
            return Err("Not initialized: subscribe.framework_info".into());
        };
        if let Some(id) = &info.id
            && call.framework_id.as_ref() != Some(id)
        {
            return Err("'framework_id' differs from 'subscribe.framework_info.id'".into());
        }
        return framework_info(info).map(|()| kind);
    }
    if call.framework_id.is_none() {
        return Err("Expecting 'framework_id' to be present".into());
    }
    let present = match kind {
        Type::Accept => call.accept.is_some(),
        Type::Decline => call.decline.is_some(),
        Type::Kill => {
            let kill = call.kill.as_ref();
            if kill.is_some_and(|k| k.task_id.is_none()) {
                return Err("Not initialized: kill.task_id".into());
            }
            kill.is_some()
        }
        Type::Shutdown => {
            let sd = call.shutdown.as_ref();
            if sd.is_some_and(|s| s.executor_id.is_none() || s.agent_id.is_none()) {
                return Err("Not initialized: shutdown.executor_id, shutdown.agent_id".into());
            }
            sd.is_some()
        }
        Type::Acknowledge => {
            let Some(ack) = &call.acknowledge else {
                return Err("Expecting 'acknowledge' to be present".into());
            };
            if ack.agent_id.is_none() || ack.task_id.is_none() {
                return Err("Not initialized: acknowledge.agent_id, acknowledge.task_id".into());
            }
            if uuid::Uuid::from_slice(&ack.uuid).is_err() {
                return Err("Could not parse 'acknowledge.uuid' as a UUID".into());
            }
            true
        }
        Type::Reconcile => {
            let rec = call.reconcile.as_ref();
            if rec.is_some_and(|r| r.tasks.iter().any(|t| t.task_id.is_none())) {
                return Err("Not initialized: reconcile.tasks[].task_id".into());
            }
            rec.is_some()
        }
        Type::Message => {
            let msg = call.message.as_ref();
            if msg.is_some_and(|m| m.agent_id.is_none() || m.executor_id.is_none()) {
                return Err("Not initialized: message.agent_id, message.executor_id".into());
            }
            msg.is_some()
        }
        Type::UpdateFramework => match &call.update_framework {
            Some(update) => {
                let Some(info) = &update.framework_info else {
                    return Err("Not initialized: update_framework.framework_info".into());
                };
                if info.id.as_ref() != call.framework_id.as_ref() {
                    return Err(
                        "'framework_id' differs from 'update_framework.framework_info.id'".into(),
                    );
                }
                framework_info(info)?;
                true
            }
            None => false,
        },
        Type::AcceptInverseOffers => call.accept_inverse_offers.is_some(),
        Type::DeclineInverseOffers => call.decline_inverse_offers.is_some(),
        // Mesos accepts these without a body (they are optional messages).
        Type::Teardown
        | Type::Revive
        | Type::Suppress
        | Type::Request
        | Type::AcknowledgeOperationStatus
        | Type::ReconcileOperations
        | Type::Unknown
        | Type::Subscribe => true,
    };
    if present {
        Ok(kind)
    } else {
        Err(format!(
            "Expecting '{}' to be present",
            mesos::proto::json::WireEnum::wire_name(kind).to_ascii_lowercase()
        ))
    }
}

/// Mesos' `validateInverseOffers` for ACCEPT_/DECLINE_INVERSE_OFFERS of
/// framework `fw_id`: ids unique, each outstanding (`lookup` gives its
/// framework and agent), each the caller's, all on one agent. Mesos logs a
/// failure and ignores the whole call (it is still answered 202).
///
/// # Errors
/// Mesos' message for the first rule broken.
pub(crate) fn inverse_offer_ids<'a>(
    ids: &[OfferId],
    fw_id: &str,
    lookup: impl Fn(&str) -> Option<(&'a str, &'a str)>,
) -> Result<(), String> {
    if ids.is_empty() {
        return Err("No inverse offers specified".into());
    }
    let mut seen = std::collections::HashSet::new();
    for id in ids {
        if !seen.insert(id.value.as_str()) {
            return Err(format!("Duplicate offer {} in offer list", id.value));
        }
    }
    let mut agent: Option<&str> = None;
    for id in ids {
        let Some((owner, on)) = lookup(&id.value) else {
            return Err(format!("Inverse offer {} is no longer valid", id.value));
        };
        if owner != fw_id {
            return Err(format!(
                "Offer {} has invalid framework {owner} while framework {fw_id} is expected",
                id.value
            ));
        }
        match agent {
            Some(first) if first != on => {
                return Err(format!(
                    "Aggregated offers must belong to one single agent. Offer {} uses agent {on} and agent {first}",
                    id.value
                ));
            }
            _ => agent = Some(on),
        }
    }
    Ok(())
}

/// Validates an operator call (`POST /api/v1`), as Mesos'
/// `validation::master::call::validate` does for the maintenance calls. A
/// type number this build does not know is treated as absent, as a proto2
/// parser drops an unknown enum value.
///
/// # Errors
/// Mesos' message.
pub(crate) fn operator_call(call: &master::Call) -> Result<master::call::Type, String> {
    use master::call::Type as Op;
    let kind = call
        .r#type
        .and_then(|t| Op::try_from(t).ok())
        .ok_or_else(|| "Expecting 'type' to be present".to_owned())?;
    let missing = match kind {
        Op::UpdateMaintenanceSchedule => call.update_maintenance_schedule.is_none(),
        Op::StartMaintenance => call.start_maintenance.is_none(),
        Op::StopMaintenance => call.stop_maintenance.is_none(),
        Op::DrainAgent => call.drain_agent.is_none(),
        Op::DeactivateAgent => call.deactivate_agent.is_none(),
        Op::ReactivateAgent => call.reactivate_agent.is_none(),
        _ => false,
    };
    if missing {
        return Err(format!(
            "Expecting '{}' to be present",
            mesos::proto::json::WireEnum::wire_name(kind).to_ascii_lowercase()
        ));
    }
    // Mesos declares these `agent_id`s required: its parser refuses a call
    // without one (400 too).
    let no_agent = match kind {
        Op::DrainAgent => call
            .drain_agent
            .as_ref()
            .is_some_and(|c| c.agent_id.is_none()),
        Op::DeactivateAgent => call
            .deactivate_agent
            .as_ref()
            .is_some_and(|c| c.agent_id.is_none()),
        Op::ReactivateAgent => call
            .reactivate_agent
            .as_ref()
            .is_some_and(|c| c.agent_id.is_none()),
        _ => false,
    };
    if no_agent {
        return Err("Expecting 'agent_id' to be present".into());
    }
    Ok(kind)
}

/// A machine as Mesos' messages show it: its JSON (`{"hostname":…,"ip":…}`).
pub(crate) fn machine_text(id: &MachineId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

/// Mesos' `maintenance::validation::machine`: a hostname or an IP, and an
/// IP that parses as IPv4.
///
/// # Errors
/// Mesos' message.
pub(crate) fn machine(id: &MachineId) -> Result<(), String> {
    let hostname = id.hostname.as_deref().unwrap_or_default();
    let ip = id.ip.as_deref().unwrap_or_default();
    if hostname.is_empty() && ip.is_empty() {
        return Err("Both 'hostname' and 'ip' for a machine are empty".into());
    }
    if !ip.is_empty() && ip.parse::<std::net::Ipv4Addr>().is_err() {
        return Err(format!("Failed to parse IPv4: {ip}"));
    }
    Ok(())
}

/// Mesos' `maintenance::validation::machines` (START/STOP_MAINTENANCE,
/// `/machine/down`, `/machine/up`): a non-empty list of valid machines,
/// none twice. `key` is how machines compare (hostname case-insensitive).
///
/// # Errors
/// Mesos' message.
pub(crate) fn machines<K: Eq + std::hash::Hash>(
    ids: &[MachineId],
    key: impl Fn(&MachineId) -> K,
) -> Result<(), String> {
    if ids.is_empty() {
        return Err("List of machines is empty".into());
    }
    let mut seen = std::collections::HashSet::new();
    for id in ids {
        machine(id)?;
        if !seen.insert(key(id)) {
            return Err(format!(
                "Machine '{}' appears more than once in the schedule",
                machine_text(id)
            ));
        }
    }
    Ok(())
}

/// Mesos' `maintenance::validation::schedule`: every window names machines
/// and has a non-negative duration, every machine is valid and in one
/// window only, and no DOWN machine (`is_down`) is left out.
///
/// # Errors
/// Mesos' message.
pub(crate) fn schedule<K: Eq + std::hash::Hash>(
    schedule: &Schedule,
    key: impl Fn(&MachineId) -> K,
    down: &[MachineId],
) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for (i, window) in schedule.windows.iter().enumerate() {
        // proto2 `required` in Mesos: its parser refuses the message.
        if window
            .unavailability
            .as_ref()
            .is_none_or(|u| u.start.is_none())
        {
            return Err(format!(
                "Missing required fields: windows[{i}].unavailability.start"
            ));
        }
        if window.machine_ids.is_empty() {
            return Err("List of machines in the maintenance window is empty".into());
        }
        let negative = window
            .unavailability
            .as_ref()
            .and_then(|u| u.duration.as_ref())
            .is_some_and(|d| d.nanoseconds < 0);
        if negative {
            return Err("Unavailability 'duration' is negative".into());
        }
        for id in &window.machine_ids {
            machine(id)?;
            if !seen.insert(key(id)) {
                return Err(format!(
                    "Machine '{}' appears more than once in the schedule",
                    machine_text(id)
                ));
            }
        }
    }
    if let Some(id) = down.iter().find(|id| !seen.contains(&key(id))) {
        return Err(format!(
            "Machine '{}' is deactivated and cannot be removed from the schedule",
            machine_text(id)
        ));
    }
    Ok(())
}

/// Mesos' FrameworkInfo rules that a subscription must pass.
fn framework_info(info: &FrameworkInfo) -> Result<(), String> {
    let multi = info.has_capability(Cap::MultiRole);
    if !multi && !info.roles.is_empty() {
        return Err("'FrameworkInfo.roles' is set but the MULTI_ROLE capability is not".into());
    }
    if multi && info.role.is_some() {
        return Err(
            "'FrameworkInfo.role' must not be set together with the MULTI_ROLE capability".into(),
        );
    }
    for role in info.effective_roles() {
        role_name(&role)?;
    }
    if let Some(t) = info.failover_timeout
        && !(t.is_finite() && t >= 0.0)
    {
        return Err(format!("Invalid 'FrameworkInfo.failover_timeout' {t}"));
    }
    Ok(())
}

/// Mesos' role name rules (`roles::validate`).
fn role_name(role: &str) -> Result<(), String> {
    if role == "*" {
        return Ok(());
    }
    let bad = role.is_empty()
        || role
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == ".." || part.starts_with('-'))
        || role
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '\\' || c == '*');
    if bad {
        Err(format!("Invalid role name '{role}'"))
    } else {
        Ok(())
    }
}

/// Mesos' ID rules (`common::validation::validateID`): no `/`, no NUL, no
/// whitespace, not `.` or `..`, not empty.
pub(crate) fn id(kind: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("{kind} must not be empty"));
    }
    if value == "." || value == ".." {
        return Err(format!("{kind} '{value}' is disallowed"));
    }
    if value
        .chars()
        .any(|c| c == '/' || c == '\0' || c.is_whitespace())
    {
        return Err(format!("{kind} '{value}' contains invalid characters"));
    }
    Ok(())
}

/// Validates an executor call as the agent does before looking anything up.
///
/// # Errors
/// Mesos' message for the first rule the call breaks.
pub(crate) fn executor_call(call: &exec::Call) -> Result<exec::call::Type, String> {
    let Some(raw) = call.r#type else {
        return Err("Expecting 'type' to be present".into());
    };
    let kind = exec::call::Type::try_from(raw).map_err(|_| format!("Unknown call type {raw}"))?;
    let (Some(executor_id), Some(_)) = (&call.executor_id, &call.framework_id) else {
        return Err("Not initialized: executor_id, framework_id".into());
    };
    match kind {
        exec::call::Type::Subscribe if call.subscribe.is_none() => {
            Err("Expecting 'subscribe' to be present".into())
        }
        exec::call::Type::Message if call.message.is_none() => {
            Err("Expecting 'message' to be present".into())
        }
        exec::call::Type::Update => {
            let Some(status) = call.update.as_ref().and_then(|u| u.status.as_ref()) else {
                return Err("Expecting 'update' to be present".into());
            };
            executor_update(executor_id, status).map(|()| kind)
        }
        _ => Ok(kind),
    }
}

/// The agent's rules for an executor's status update.
fn executor_update(
    executor_id: &mesos::proto::ExecutorId,
    status: &TaskStatus,
) -> Result<(), String> {
    if status.task_id.is_none() {
        return Err("Not initialized: update.status.task_id".into());
    }
    let Some(uuid) = &status.uuid else {
        return Err("Expecting 'uuid' to be present".into());
    };
    if uuid::Uuid::from_slice(uuid).is_err() {
        return Err("Invalid 'uuid': not a 16-byte UUID".into());
    }
    if let Some(id) = &status.executor_id
        && id != executor_id
    {
        return Err(format!(
            "ExecutorID in Call: {executor_id} does not match ExecutorID in TaskStatus: {id}"
        ));
    }
    if status.source != Some(Source::SourceExecutor as i32) {
        return Err(format!(
            "Received Call from executor {executor_id} with invalid source, expecting 'SOURCE_EXECUTOR'"
        ));
    }
    if status.state == TaskState::TaskStaging as i32 {
        return Err(format!(
            "Received TASK_STAGING from executor {executor_id} which is not allowed"
        ));
    }
    if TaskState::try_from(status.state).is_err() {
        return Err(format!("Unknown task state {}", status.state));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mesos::proto::scheduler::call;
    use mesos::proto::{FrameworkId, framework_info};

    fn subscribe(info: FrameworkInfo) -> Call {
        Call {
            r#type: Some(Type::Subscribe as i32),
            subscribe: Some(call::Subscribe {
                framework_info: Some(info),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn subscribe_with_roles_but_without_multi_role_is_rejected() {
        let info = FrameworkInfo {
            roles: vec!["a".into()],
            ..Default::default()
        };
        assert!(scheduler_call(&subscribe(info)).is_err());
        let info = FrameworkInfo {
            roles: vec!["a".into()],
            capabilities: vec![framework_info::Capability::of(Cap::MultiRole)],
            ..Default::default()
        };
        assert_eq!(scheduler_call(&subscribe(info)), Ok(Type::Subscribe));
    }

    #[test]
    fn failover_subscribe_needs_matching_framework_id() {
        let info = FrameworkInfo {
            id: Some(FrameworkId::new("f1")),
            ..Default::default()
        };
        let mut c = subscribe(info);
        assert!(scheduler_call(&c).is_err());
        c.framework_id = Some(FrameworkId::new("f1"));
        assert!(scheduler_call(&c).is_ok());
    }

    #[test]
    fn ids_with_slashes_or_spaces_are_invalid() {
        assert!(id("task", "a/b").is_err());
        assert!(id("task", "a b").is_err());
        assert!(id("task", "..").is_err());
        assert!(id("task", "").is_err());
        assert!(id("task", "web-1.abc").is_ok());
    }

    #[test]
    fn inverse_offer_answers_follow_mesos_order_of_checks() {
        let ids = |v: &[&str]| v.iter().map(|i| OfferId::new(*i)).collect::<Vec<_>>();
        let lookup = |id: &str| match id {
            "i1" => Some(("fw", "a1")),
            "i2" => Some(("fw", "a2")),
            "other" => Some(("fw2", "a1")),
            _ => None,
        };
        assert_eq!(
            inverse_offer_ids(&[], "fw", lookup),
            Err("No inverse offers specified".into())
        );
        assert_eq!(
            inverse_offer_ids(&ids(&["x", "i1", "i1"]), "fw", lookup),
            Err("Duplicate offer i1 in offer list".into())
        );
        assert_eq!(
            inverse_offer_ids(&ids(&["i1", "x"]), "fw", lookup),
            Err("Inverse offer x is no longer valid".into())
        );
        assert!(matches!(
            inverse_offer_ids(&ids(&["other"]), "fw", lookup),
            Err(e) if e.contains("has invalid framework fw2")
        ));
        assert!(matches!(
            inverse_offer_ids(&ids(&["i1", "i2"]), "fw", lookup),
            Err(e) if e.starts_with("Aggregated offers must belong to one single agent")
        ));
        assert_eq!(inverse_offer_ids(&ids(&["i1"]), "fw", lookup), Ok(()));
    }

    #[test]
    fn operator_calls_need_their_maintenance_body() {
        use master::call::Type as Op;
        let call = |t: Op| master::Call {
            r#type: Some(t as i32),
            ..Default::default()
        };
        assert_eq!(
            operator_call(&call(Op::StopMaintenance)),
            Err("Expecting 'stop_maintenance' to be present".into())
        );
        assert_eq!(operator_call(&call(Op::GetState)), Ok(Op::GetState));
        let unknown = master::Call {
            r#type: Some(999),
            ..Default::default()
        };
        assert_eq!(
            operator_call(&unknown),
            Err("Expecting 'type' to be present".into())
        );
    }
}
