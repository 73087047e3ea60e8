//! Kubernetes objects the framework writes: Nodes for agents, Events for pods.

use std::collections::BTreeMap;
use std::time::SystemTime;

use executor::NodeImages;
use k8s_openapi::api::core::v1::{
    ContainerImage, Event, EventSource, Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus,
    NodeSystemInfo, ObjectReference, Pod, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use procurement::NodeView;

use crate::podstatus::timestamp;

/// The component name on our events.
pub const COMPONENT: &str = "mesopod";

/// The Node for an agent: named by hostname, labelled as DESIGN.md says,
/// capacity from the most of each resource the agent has offered.
pub fn node_for(view: &NodeView, capacity: &BTreeMap<&'static str, f64>, now: SystemTime) -> Node {
    let scalar = |name: &str| capacity.get(name).copied().unwrap_or(0.0);
    let labels: BTreeMap<String, String> = view
        .labels()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let mut cap = BTreeMap::new();
    cap.insert("cpu".to_owned(), Quantity(format_cpu(scalar("cpus"))));
    cap.insert(
        "memory".to_owned(),
        Quantity(format!("{}Mi", scalar("mem").floor())),
    );
    cap.insert(
        "ephemeral-storage".to_owned(),
        Quantity(format!("{}Mi", scalar("disk").floor())),
    );
    let gpus = scalar("gpus");
    if gpus > 0.0 {
        cap.insert(
            "nvidia.com/gpu".to_owned(),
            Quantity(format!("{}", gpus.floor())),
        );
    }
    cap.insert("pods".to_owned(), Quantity("110".into()));
    let taints: Vec<Taint> = view
        .taints()
        .iter()
        .map(|t| Taint {
            key: t.key.clone(),
            value: Some(t.value.clone()).filter(|v| !v.is_empty()),
            effect: t.effect.as_str().to_owned(),
            time_added: None,
        })
        .collect();
    let mut node = Node {
        metadata: ObjectMeta {
            name: Some(view.hostname().to_owned()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("mesos://{}", view.agent_id().value)),
            taints: (!taints.is_empty()).then_some(taints),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(cap.clone()),
            allocatable: Some(cap),
            addresses: Some(vec![NodeAddress {
                type_: "Hostname".into(),
                address: view.hostname().to_owned(),
            }]),
            conditions: None,
            node_info: Some(NodeSystemInfo {
                architecture: std::env::consts::ARCH.into(),
                operating_system: std::env::consts::OS.into(),
                os_image: "Mesos agent".into(),
                kubelet_version: format!("mesopod-{}", env!("CARGO_PKG_VERSION")),
                kube_proxy_version: String::new(),
                container_runtime_version: "mesopod-executor".into(),
                kernel_version: String::new(),
                boot_id: String::new(),
                machine_id: String::new(),
                system_uuid: view.agent_id().value.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }),
    };
    set_node_ready(&mut node, true, now);
    node
}

/// Puts what the agent's executor says of its image store on its Node, as
/// kubelet reports its own:
///
/// - `status.images`: each image's names (its digest name, then its tags)
///   and size, largest first, at most kubelet's `--node-status-max-images`
///   default (50) of at most 5 names each, whatever the executor sent.
/// - `ephemeral-storage`. kubelet's capacity is its root directory's
///   filesystem, and its allocatable that less the reservations
///   (`--kube-reserved`, `--system-reserved`) and the hard eviction
///   threshold. On Mesos, the agent's `disk` resource is that allocatable
///   already: the agent offers its work directory's filesystem less what
///   it keeps for itself (or the operator's `--resources=disk:`), and pods
///   may use no more. So allocatable stays the offered `disk` ([`node_for`]),
///   and capacity is the work directory's filesystem as the executor
///   measured it. When that is not known, or is less than the offered
///   `disk` (an operator may declare more than the disk has), capacity
///   stays the offered `disk`: mesopod reports no number it has not read.
///   `disk_mb` is the offered `disk`, in Mesos' megabytes.
pub fn set_node_images(node: &mut Node, images: &NodeImages, disk_mb: f64) {
    let status = node.status.get_or_insert_with(Default::default);
    let listed: Vec<ContainerImage> = executor::node_images::largest_first(images.images.clone())
        .into_iter()
        .map(|i| ContainerImage {
            names: Some(i.names),
            size_bytes: i64::try_from(i.size_bytes).ok(),
        })
        .collect();
    status.images = Some(listed);
    let offered = disk_mb.max(0.0).floor();
    // Mesos' `disk` is in MiB (it calls them megabytes): exact in f64 far
    // beyond any disk.
    let offered_bytes = offered * 1024.0 * 1024.0;
    let capacity = match images.filesystem_bytes {
        Some(fs) if fs as f64 >= offered_bytes => Quantity(format!("{}Ki", fs / 1024)),
        _ => Quantity(format!("{offered}Mi")),
    };
    status
        .capacity
        .get_or_insert_with(Default::default)
        .insert("ephemeral-storage".to_owned(), capacity);
}

/// The taint kube-controller-manager puts on a node whose kubelet went
/// quiet; mesopod places nothing there meanwhile.
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// Makes a Node Ready (as [`node_for`] writes it) or NotReady as the node
/// lifecycle controller marks a node whose kubelet stopped posting status:
/// `Ready=Unknown`, reason `NodeStatusUnknown`, and the unreachable taint.
pub fn set_node_ready(node: &mut Node, ready: bool, now: SystemTime) {
    let (value, reason, message) = if ready {
        (
            "True",
            "AgentOffering",
            "the Mesos agent is registered and offering resources",
        )
    } else {
        (
            "Unknown",
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
        )
    };
    let condition = NodeCondition {
        type_: "Ready".into(),
        status: value.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_heartbeat_time: Some(Time(timestamp(now))),
        last_transition_time: Some(Time(timestamp(now))),
    };
    let status = node.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != "Ready");
    conditions.push(condition);
    let spec = node.spec.get_or_insert_with(Default::default);
    let taints = spec.taints.get_or_insert_with(Vec::new);
    taints.retain(|t| t.key != UNREACHABLE_TAINT);
    if !ready {
        taints.push(Taint {
            key: UNREACHABLE_TAINT.into(),
            value: None,
            effect: "NoSchedule".into(),
            time_added: Some(Time(timestamp(now))),
        });
    }
    if taints.is_empty() {
        spec.taints = None;
    }
}

fn format_cpu(cpus: f64) -> String {
    let milli = (cpus * 1000.0).round();
    if milli % 1000.0 == 0.0 {
        format!("{}", milli / 1000.0)
    } else {
        format!("{milli}m")
    }
}

/// An Event about a pod, as kube-scheduler and the kubelet write them.
pub fn pod_event(pod: &Pod, type_: &str, reason: &str, message: String, now: SystemTime) -> Event {
    let about = PodRef {
        namespace: pod.metadata.namespace.as_deref().unwrap_or("default"),
        name: pod.metadata.name.as_deref().unwrap_or_default(),
        uid: pod.metadata.uid.as_deref(),
        resource_version: pod.metadata.resource_version.clone(),
    };
    event_about(&about, type_, reason, message, now)
}

/// An Event about a Node, as kubelet writes its own: in `default`, with the
/// Node's name as its uid.
pub fn node_event(
    node: &str,
    type_: &str,
    reason: &str,
    message: String,
    now: SystemTime,
) -> Event {
    let about = PodRef {
        namespace: "default",
        name: node,
        uid: Some(node),
        resource_version: None,
    };
    let mut event = event_about(&about, type_, reason, message, now);
    event.involved_object.kind = Some("Node".into());
    event.involved_object.namespace = None;
    event
}

/// The pod an event is about: what its `involvedObject` names.
pub struct PodRef<'a> {
    /// The pod's namespace.
    pub namespace: &'a str,
    /// The pod's name.
    pub name: &'a str,
    /// The pod's uid, if known.
    pub uid: Option<&'a str>,
    /// The pod's resourceVersion the event refers to, if known.
    pub resource_version: Option<String>,
}

/// An Event about the pod `about` names (for a pod known by its key).
pub fn event_about(
    about: &PodRef<'_>,
    type_: &str,
    reason: &str,
    message: String,
    now: SystemTime,
) -> Event {
    let (namespace, name) = (about.namespace.to_owned(), about.name.to_owned());
    let nanos = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{nanos:x}")),
            namespace: Some(namespace.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            api_version: Some("v1".into()),
            namespace: Some(namespace),
            name: Some(name),
            uid: about.uid.map(str::to_owned),
            resource_version: about.resource_version.clone(),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message),
        type_: Some(type_.into()),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: None,
        }),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(COMPONENT.into()),
        first_timestamp: Some(Time(timestamp(now))),
        last_timestamp: Some(Time(timestamp(now))),
        event_time: Some(MicroTime(timestamp(now))),
        action: Some(reason.into()),
        count: Some(1),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cpu_quantities_read_like_kubernetes() {
        assert_eq!(format_cpu(4.0), "4");
        assert_eq!(format_cpu(0.25), "250m");
    }

    fn image(name: &str, size: u64) -> executor::node_images::NodeImage {
        executor::node_images::NodeImage {
            names: (0..7).map(|i| format!("{name}:{i}")).collect(),
            size_bytes: size,
        }
    }

    fn node() -> Node {
        let mut cap = BTreeMap::new();
        cap.insert("ephemeral-storage".to_owned(), Quantity("1000Mi".into()));
        Node {
            status: Some(NodeStatus {
                capacity: Some(cap.clone()),
                allocatable: Some(cap),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_node_lists_the_largest_fifty_images_largest_first_with_five_names_each() {
        // As an executor that neither sorts nor caps might send them.
        let images = NodeImages {
            version: 1,
            images: (0..80u64)
                .map(|i| image(&format!("r/i{i}"), i * 10))
                .collect(),
            filesystem_bytes: None,
        };
        let mut node = node();
        set_node_images(&mut node, &images, 1000.0);
        let listed = node.status.as_ref().unwrap().images.clone().unwrap();
        assert_eq!(listed.len(), 50);
        let sizes: Vec<i64> = listed.iter().map(|i| i.size_bytes.unwrap()).collect();
        let expected: Vec<i64> = (30..80).rev().map(|i| i * 10).collect();
        assert_eq!(sizes, expected);
        let names = listed[0].names.clone().unwrap();
        assert_eq!(
            names,
            ["r/i79:0", "r/i79:1", "r/i79:2", "r/i79:3", "r/i79:4"]
        );
        // Unknown filesystem: capacity is the offered disk, as before.
        let status = node.status.unwrap();
        let cap = &status.capacity.unwrap()["ephemeral-storage"];
        assert_eq!(cap.0, "1000Mi");
        assert_eq!(status.allocatable.unwrap()["ephemeral-storage"].0, "1000Mi");
    }

    #[test]
    fn ephemeral_storage_capacity_is_the_measured_filesystem_and_allocatable_the_offered_disk() {
        let mut images = NodeImages {
            version: 1,
            images: Vec::new(),
            filesystem_bytes: Some(2000 << 20),
        };
        let mut node = node();
        set_node_images(&mut node, &images, 1000.0);
        let status = node.status.clone().unwrap();
        assert_eq!(status.capacity.unwrap()["ephemeral-storage"].0, "2048000Ki");
        assert_eq!(status.allocatable.unwrap()["ephemeral-storage"].0, "1000Mi");
        assert_eq!(status.images, Some(Vec::new()), "an empty store lists none");
        // A filesystem smaller than the declared disk: no capacity below allocatable.
        images.filesystem_bytes = Some(500 << 20);
        set_node_images(&mut node, &images, 1000.0);
        let status = node.status.unwrap();
        assert_eq!(status.capacity.unwrap()["ephemeral-storage"].0, "1000Mi");
    }

    #[test]
    fn events_name_the_pod_they_are_about() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".into());
        pod.metadata.uid = Some("u1".into());
        let e = pod_event(
            &pod,
            "Normal",
            "Scheduled",
            "placed".into(),
            SystemTime::UNIX_EPOCH,
        );
        assert_eq!(e.involved_object.name.as_deref(), Some("web"));
        assert_eq!(e.involved_object.uid.as_deref(), Some("u1"));
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
        assert!(e.metadata.name.unwrap().starts_with("web."));
    }
}
