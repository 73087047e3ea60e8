//! The scheduler's order to run a pod's containers with new images: a pod's
//! container `image` is the one container field Kubernetes lets a user change on
//! a running pod, and kubelet restarts the container with it.
//!
//! - scheduler → executor (scheduler `MESSAGE`): [`UPDATE_IMAGES_MESSAGE`] followed
//!   by an [`ImageUpdate`] as JSON: the pod's task and the image every container
//!   and init container should have now.
//!
//! The message is idempotent: a container that already has its image is left
//! alone, so the scheduler sends it again freely (after a failover, or when the
//! executor's reports still show the old image).

use serde::{Deserialize, Serialize};

/// Prefix of the order.
pub const UPDATE_IMAGES_MESSAGE: &[u8] = b"mesopod.io/update-images ";

/// The images a pod's containers should run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageUpdate {
    /// The pod's Mesos task.
    pub task_id: String,
    /// Each container's image, by name.
    #[serde(default)]
    pub containers: Vec<ContainerImage>,
    /// Each init container's image, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<ContainerImage>,
}

/// One container's image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerImage {
    /// The container's name.
    pub name: String,
    /// Its image, as the pod's spec says it.
    pub image: String,
}

impl ImageUpdate {
    /// The MESSAGE data.
    pub fn encode(&self) -> Vec<u8> {
        crate::apiclient::protocol::encode(UPDATE_IMAGES_MESSAGE, self)
    }

    /// The order in `data`, if it is one.
    pub fn decode(data: &[u8]) -> Option<ImageUpdate> {
        crate::apiclient::protocol::decode(UPDATE_IMAGES_MESSAGE, data)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_update_survives_the_wire_and_other_messages_are_not_taken_for_one() {
        let update = ImageUpdate {
            task_id: "t".into(),
            containers: vec![ContainerImage {
                name: "main".into(),
                image: "busybox:1.37".into(),
            }],
            init_containers: Vec::new(),
        };
        assert_eq!(ImageUpdate::decode(&update.encode()), Some(update));
        assert_eq!(ImageUpdate::decode(crate::RESEND_STATUS_MESSAGE), None);
        assert_eq!(ImageUpdate::decode(b"mesopod.io/update-images {"), None);
    }
}
