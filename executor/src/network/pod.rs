//! What a pod asks of the network: its own namespace or the agent's, and its
//! `hostPort`s.

use k8s_openapi::api::core::v1::Pod;

use super::PortMapping;

/// `spec.hostNetwork: true`: the pod stays in the agent's network.
pub fn host_network(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.host_network) == Some(true)
}

/// Every container port with a `hostPort`, as `portmap` takes them (init
/// containers' too, as kubelet maps them).
pub fn host_ports(pod: &Pod) -> Vec<PortMapping> {
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            Some(PortMapping {
                host_port: u16::try_from(p.host_port?).ok().filter(|h| *h != 0)?,
                container_port: u16::try_from(p.container_port).ok()?,
                protocol: p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn host_ports_and_host_network_come_from_the_spec() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"hostNetwork": false, "containers": [{"name": "c", "ports": [
                {"containerPort": 80, "hostPort": 8080},
                {"containerPort": 53, "hostPort": 5353, "protocol": "UDP"},
                {"containerPort": 9000}
            ]}]}
        }))
        .unwrap();
        assert!(!host_network(&pod));
        let ports = host_ports(&pod);
        assert_eq!(ports.len(), 2);
        assert_eq!((ports[0].host_port, ports[0].container_port), (8080, 80));
        assert_eq!(ports[1].protocol, "udp");
    }
}
