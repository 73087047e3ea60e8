//! The column definitions of each resource's Table, as Kubernetes' printers define them.

use serde_json::{Value, json};

use crate::resource::Resource;

fn col(name: &str, ty: &str, format: &str, priority: u8, description: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

/// The column definitions of `resource`.
pub fn columns(resource: Resource) -> Vec<Value> {
    let name = col(
        "Name",
        "string",
        "name",
        0,
        "Name must be unique within a namespace.",
    );
    let age = col(
        "Age",
        "string",
        "",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    match resource {
        Resource::Pods => vec![
            name,
            col(
                "Ready",
                "string",
                "",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            col(
                "Status",
                "string",
                "",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            col(
                "Restarts",
                "string",
                "",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            age,
            col(
                "IP",
                "string",
                "",
                1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            col(
                "Node",
                "string",
                "",
                1,
                "NodeName is a request to schedule this pod onto a specific node.",
            ),
            col(
                "Nominated Node",
                "string",
                "",
                1,
                "nominatedNodeName is set when this pod preempts other pods on the node.",
            ),
            col(
                "Readiness Gates",
                "string",
                "",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness.",
            ),
        ],
        Resource::Nodes => vec![
            name,
            col("Status", "string", "", 0, "The status of the node"),
            col("Roles", "string", "", 0, "The roles of the node"),
            age,
            col(
                "Version",
                "string",
                "",
                0,
                "Kubelet Version reported by the node.",
            ),
            col(
                "Internal-IP",
                "string",
                "",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ),
            col(
                "External-IP",
                "string",
                "",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ),
            col(
                "OS-Image",
                "string",
                "",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            col(
                "Kernel-Version",
                "string",
                "",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            col(
                "Container-Runtime",
                "string",
                "",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        Resource::Events => vec![
            col(
                "Last Seen",
                "string",
                "",
                0,
                "The time at which the most recent occurrence of this event was recorded.",
            ),
            col(
                "Type",
                "string",
                "",
                0,
                "Type of this event (Normal, Warning), new types could be added in the future",
            ),
            col(
                "Reason",
                "string",
                "",
                0,
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            col(
                "Object",
                "string",
                "",
                0,
                "The object that this event is about.",
            ),
            col(
                "Subobject",
                "string",
                "",
                1,
                "The field path of the involved object this event is about.",
            ),
            col(
                "Source",
                "string",
                "",
                1,
                "The component reporting this event.",
            ),
            col(
                "Message",
                "string",
                "",
                0,
                "A human-readable description of the status of this operation.",
            ),
            col(
                "First Seen",
                "string",
                "",
                1,
                "The time at which the event was first recorded.",
            ),
            col(
                "Count",
                "string",
                "",
                1,
                "The number of times this event has occurred.",
            ),
            col(
                "Name",
                "string",
                "name",
                1,
                "Name must be unique within a namespace.",
            ),
        ],
        Resource::Namespaces => vec![
            name,
            col("Status", "string", "", 0, "The status of the namespace"),
            age,
        ],
        other => crate::kinds::columns(other).unwrap_or_else(|| vec![name, age]),
    }
}
