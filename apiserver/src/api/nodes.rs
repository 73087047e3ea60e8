//! Nodes: the framework writes them from its agents, through here; users read them,
//! and cordon them and annotate them through the plain kinds' path (`kinds/node.rs`).

use k8s_openapi::api::core::v1::Node;

use super::objects::{stamp_new, to_value};
use super::pods::first_object;
use super::{Api, ObjectList, ObjectStream, RETRIES};
use crate::error::ApiError;
use crate::resource::Resource;
use crate::store::{Precondition, WriteOp};
use crate::validation::{Causes, check_metadata, check_subdomain_name};

const NODES: Resource = Resource::Nodes;

impl Api {
    /// Creates or replaces the node named in `node.metadata.name`, keeping its uid and
    /// creation time across updates. An unchanged node is not rewritten.
    pub async fn upsert_node(&self, node: Node) -> Result<Node, ApiError> {
        let mut causes = Causes::default();
        check_metadata(&mut causes, &node.metadata, check_subdomain_name);
        let name = node.metadata.name.clone().unwrap_or_default();
        causes.into_result("Node", &name)?;
        for _ in 0..RETRIES {
            let mut new = node.clone();
            let existing = self.get_typed::<Node>(NODES, "", &name).ok();
            let precondition = match &existing {
                Some((old, rv)) => {
                    new.metadata.uid.clone_from(&old.metadata.uid);
                    new.metadata
                        .creation_timestamp
                        .clone_from(&old.metadata.creation_timestamp);
                    new.metadata
                        .resource_version
                        .clone_from(&old.metadata.resource_version);
                    new.metadata.namespace = None;
                    // The executor's streaming endpoint is written apart from the
                    // agent's resources: a writer that does not know it keeps it.
                    if let (Some(st), Some(old_st)) = (new.status.as_mut(), old.status.as_ref())
                        && st.daemon_endpoints.is_none()
                    {
                        st.daemon_endpoints.clone_from(&old_st.daemon_endpoints);
                    }
                    // So are the images its executor reported: a scheduler
                    // that has not heard it yet (a new leader) keeps them.
                    if let (Some(st), Some(old_st)) = (new.status.as_mut(), old.status.as_ref())
                        && st.images.is_none()
                    {
                        st.images.clone_from(&old_st.images);
                    }
                    // A cordon and annotations are the users' (`kinds/node.rs`).
                    let spec = new.spec.get_or_insert_default();
                    spec.unschedulable = old.spec.as_ref().and_then(|s| s.unschedulable);
                    if new.metadata.annotations.is_none() {
                        new.metadata
                            .annotations
                            .clone_from(&old.metadata.annotations);
                    }
                    // So is a Mesos maintenance's taint (`maintenance.rs`).
                    if let Some(taint) = super::maintenance::maintenance_taint(old) {
                        let taints = spec.taints.get_or_insert_default();
                        if !taints.iter().any(|t| t.key == taint.key) {
                            taints.push(taint);
                        }
                    }
                    crate::kinds::node::sync_unschedulable_taint(&mut new);
                    if new == *old {
                        return Ok(new);
                    }
                    Precondition::ResourceVersion(*rv)
                }
                None => {
                    new.metadata.namespace = None;
                    stamp_new(&mut new.metadata, self.now());
                    Precondition::Absent
                }
            };
            let op = WriteOp::Put {
                key: NODES.key("", &name),
                object: to_value(&new)?,
                precondition,
            };
            match self.commit(vec![op]).await {
                Err(ApiError::Conflict { .. } | ApiError::AlreadyExists { .. }) => continue,
                other => return first_object(&other?),
            }
        }
        Err(ApiError::stale("nodes", &name))
    }

    /// Removes a node; 404 if there is none.
    pub async fn delete_node(&self, name: &str) -> Result<(), ApiError> {
        self.commit(vec![WriteOp::Delete {
            key: NODES.key("", name),
            precondition: Precondition::None,
        }])
        .await
        .map(|_| ())
    }

    /// The node `name`; 404 if missing.
    pub fn get_node(&self, name: &str) -> Result<Node, ApiError> {
        self.get_typed(NODES, "", name).map(|(n, _)| n)
    }

    /// Nodes matching the selectors (empty selects all).
    pub fn list_nodes(
        &self,
        label_selector: &str,
        field_selector: &str,
    ) -> Result<ObjectList<Node>, ApiError> {
        self.list_typed(NODES, None, label_selector, field_selector)
    }

    /// Node changes after `from`.
    pub fn watch_nodes(&self, from: u64) -> Result<ObjectStream<Node>, ApiError> {
        self.watch_typed(NODES, None, from)
    }
}
