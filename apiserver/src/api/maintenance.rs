//! A Node under Mesos maintenance, as the scheduler marks it when the master
//! schedules its machine: a `mesopod.io/maintenance:NoSchedule` taint, which
//! no pod tolerates unless it names it (so a DaemonSet's pods, which tolerate
//! the cordon, are not put back either), the window in two annotations, and a
//! cordon. The cordon is taken away again only if this put it there: a Node
//! its owner cordoned stays cordoned after the window.
//!
//! The scheduler decides when a Node enters and leaves maintenance (from the
//! master's inverse offers and the offers' `unavailability`); this only
//! writes it, by compare-and-set so a user's concurrent cordon or annotation
//! is not lost.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Node, Taint};

use super::objects::{k8s_time, to_value};
use super::pods::first_object;
use super::{Api, RETRIES};
use crate::error::ApiError;
use crate::kinds::node::sync_unschedulable_taint;
use crate::resource::Resource;
use crate::store::{Precondition, WriteOp};

/// The taint of a Node whose machine Mesos has scheduled for maintenance.
pub const MAINTENANCE_TAINT: &str = "mesopod.io/maintenance";
/// When the maintenance window starts (RFC 3339).
pub const MAINTENANCE_START_ANNOTATION: &str = "mesopod.io/maintenance-start";
/// When it ends (RFC 3339); absent for a window with no end.
pub const MAINTENANCE_END_ANNOTATION: &str = "mesopod.io/maintenance-end";
/// Set when the maintenance cordoned the Node, so that only its own cordon
/// is lifted afterwards.
pub const MAINTENANCE_CORDON_ANNOTATION: &str = "mesopod.io/maintenance-cordon";

/// A machine's maintenance window, as Mesos' `Unavailability` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaintenanceWindow {
    /// When the machine may go down.
    pub start: SystemTime,
    /// When it is back; `None` for an unbounded window.
    pub end: Option<SystemTime>,
}

/// Whether `node` carries the maintenance taint.
pub fn under_maintenance(node: &Node) -> bool {
    node.spec
        .iter()
        .flat_map(|s| s.taints.iter().flatten())
        .any(|t| t.key == MAINTENANCE_TAINT)
}

/// The maintenance taint `old` carries, for a writer that rebuilds the taints
/// from the agent and must keep it.
pub(crate) fn maintenance_taint(old: &Node) -> Option<Taint> {
    old.spec
        .iter()
        .flat_map(|s| s.taints.iter().flatten())
        .find(|t| t.key == MAINTENANCE_TAINT)
        .cloned()
}

impl Api {
    /// Marks the Node `name` as under maintenance in `window`, or, with
    /// `None`, clears the mark. An unchanged Node is not rewritten; a
    /// missing one is 404 (its agent has not been seen yet).
    ///
    /// # Errors
    /// 404 for no Node, and the store's errors; a Node that keeps changing
    /// under the write is a 409 after [`RETRIES`] tries.
    pub async fn mark_node_maintenance(
        &self,
        name: &str,
        window: Option<MaintenanceWindow>,
    ) -> Result<Node, ApiError> {
        for _ in 0..RETRIES {
            let (old, rv) = self.get_typed::<Node>(Resource::Nodes, "", name)?;
            let mut new = old.clone();
            match window {
                Some(w) => mark(&mut new, w),
                None => unmark(&mut new),
            }
            sync_unschedulable_taint(&mut new);
            if new == old {
                return Ok(new);
            }
            let op = WriteOp::Put {
                key: Resource::Nodes.key("", name),
                object: to_value(&new)?,
                precondition: Precondition::ResourceVersion(rv),
            };
            match self.commit(vec![op]).await {
                Err(ApiError::Conflict { .. }) => continue,
                other => return first_object(&other?),
            }
        }
        Err(ApiError::stale("nodes", name))
    }
}

fn mark(node: &mut Node, window: MaintenanceWindow) {
    let annotations = node.metadata.annotations.get_or_insert_default();
    annotations.insert(MAINTENANCE_START_ANNOTATION.into(), rfc3339(window.start));
    match window.end {
        Some(end) => annotations.insert(MAINTENANCE_END_ANNOTATION.into(), rfc3339(end)),
        None => annotations.remove(MAINTENANCE_END_ANNOTATION),
    };
    let spec = node.spec.get_or_insert_default();
    if spec.unschedulable != Some(true) {
        spec.unschedulable = Some(true);
        annotations.insert(MAINTENANCE_CORDON_ANNOTATION.into(), "true".into());
    }
    let taints = spec.taints.get_or_insert_default();
    if !taints.iter().any(|t| t.key == MAINTENANCE_TAINT) {
        taints.push(Taint {
            key: MAINTENANCE_TAINT.into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        });
    }
}

fn unmark(node: &mut Node) {
    let ours = node
        .metadata
        .annotations
        .as_mut()
        .and_then(|a| {
            a.remove(MAINTENANCE_START_ANNOTATION);
            a.remove(MAINTENANCE_END_ANNOTATION);
            a.remove(MAINTENANCE_CORDON_ANNOTATION)
        })
        .is_some();
    if node
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.is_empty())
    {
        node.metadata.annotations = None;
    }
    let spec = node.spec.get_or_insert_default();
    if ours {
        spec.unschedulable = None;
    }
    if let Some(taints) = spec.taints.as_mut() {
        taints.retain(|t| t.key != MAINTENANCE_TAINT);
        if taints.is_empty() {
            spec.taints = None;
        }
    }
}

fn rfc3339(t: SystemTime) -> String {
    k8s_time(t).0.to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use super::*;

    fn agent_node(name: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]},
        }))
        .unwrap()
    }

    fn taint_keys(node: &Node) -> Vec<String> {
        let mut keys: Vec<String> = node
            .spec
            .iter()
            .flat_map(|s| s.taints.iter().flatten())
            .map(|t| t.key.clone())
            .collect();
        keys.sort();
        keys
    }

    fn window() -> MaintenanceWindow {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        MaintenanceWindow {
            start,
            end: Some(start + Duration::from_secs(3600)),
        }
    }

    #[tokio::test]
    async fn a_window_cordons_and_taints_and_its_end_takes_only_its_own_cordon_away() {
        let api = Api::in_memory().await.unwrap();
        api.upsert_node(agent_node("a")).await.unwrap();
        let marked = api
            .mark_node_maintenance("a", Some(window()))
            .await
            .unwrap();
        assert_eq!(marked.spec.as_ref().unwrap().unschedulable, Some(true));
        assert_eq!(
            taint_keys(&marked),
            [
                "dedicated",
                MAINTENANCE_TAINT,
                "node.kubernetes.io/unschedulable"
            ]
        );
        let notes = marked.metadata.annotations.clone().unwrap();
        assert_eq!(notes[MAINTENANCE_START_ANNOTATION], "2027-01-15T08:00:00Z");
        assert_eq!(notes[MAINTENANCE_END_ANNOTATION], "2027-01-15T09:00:00Z");
        assert!(under_maintenance(&marked));

        // The agent's own writer rebuilds the taints and keeps the mark.
        let rewritten = api.upsert_node(agent_node("a")).await.unwrap();
        assert!(under_maintenance(&rewritten));
        assert_eq!(rewritten.spec.as_ref().unwrap().unschedulable, Some(true));

        let cleared = api.mark_node_maintenance("a", None).await.unwrap();
        assert_eq!(taint_keys(&cleared), ["dedicated"]);
        assert_eq!(cleared.spec.as_ref().unwrap().unschedulable, None);
        assert_eq!(cleared.metadata.annotations, None);
    }

    #[tokio::test]
    async fn a_node_its_owner_cordoned_stays_cordoned_after_the_window() {
        let api = Api::in_memory().await.unwrap();
        api.upsert_node(agent_node("b")).await.unwrap();
        let mut head = api.get_node("b").unwrap();
        head.metadata.resource_version = None;
        head.spec.as_mut().unwrap().unschedulable = Some(true);
        api.replace_object("", "b", head, Default::default(), None)
            .await
            .unwrap();
        let marked = api
            .mark_node_maintenance("b", Some(window()))
            .await
            .unwrap();
        let notes = marked.metadata.annotations.clone().unwrap();
        assert!(!notes.contains_key(MAINTENANCE_CORDON_ANNOTATION));
        // Marking twice changes nothing.
        let again = api
            .mark_node_maintenance("b", Some(window()))
            .await
            .unwrap();
        assert_eq!(
            again.metadata.resource_version,
            marked.metadata.resource_version
        );
        let cleared = api.mark_node_maintenance("b", None).await.unwrap();
        assert_eq!(cleared.spec.as_ref().unwrap().unschedulable, Some(true));
        assert_eq!(
            taint_keys(&cleared),
            ["dedicated", "node.kubernetes.io/unschedulable"]
        );
    }

    #[tokio::test]
    async fn a_node_not_seen_yet_is_not_found() {
        let api = Api::in_memory().await.unwrap();
        let err = api
            .mark_node_maintenance("nowhere", None)
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::NotFound { .. }), "{err:?}");
    }
}
