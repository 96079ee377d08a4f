//! kube-scheduler's NodePorts for the simulated nodes: a pod whose containers ask for a
//! host port fits only a node where no pod already holds that port for the same protocol
//! on the same address (`0.0.0.0`, the default, clashes with every address).
//!
//! Must not know: the other filters, or how a node is chosen.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

pub(super) const PORTS_TAKEN: &str = "node(s) didn't have free ports for the requested pod ports";

/// A host port as kube's `HostPortInfo` keys it: address, protocol, port.
pub(super) struct HostPort {
    ip: String,
    protocol: String,
    port: i32,
}

impl HostPort {
    /// kube's `CheckConflict`: the same protocol and port, on the same address or where
    /// either listens on every address.
    fn clashes(&self, other: &HostPort) -> bool {
        let any = |ip: &str| ip == "0.0.0.0";
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || any(&self.ip) || any(&other.ip))
    }
}

/// The host ports the pod's containers ask for (kube's `getContainerPorts`).
pub(super) fn wanted(pod: &Pod) -> Vec<HostPort> {
    let containers = pod.spec.iter().flat_map(|s| &s.containers);
    let ports = containers.flat_map(|c| c.ports.iter().flatten());
    ports
        .filter_map(|p| {
            let port = p.host_port.filter(|port| *port > 0)?;
            let ip = p.host_ip.as_deref().filter(|ip| !ip.is_empty());
            Some(HostPort {
                ip: ip.unwrap_or("0.0.0.0").to_string(),
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                port,
            })
        })
        .collect()
}

/// Whether a pod among `running` (one node's) already holds a port of `asked`.
pub(super) fn taken<'a>(asked: &[HostPort], running: impl Iterator<Item = &'a Arc<Pod>>) -> bool {
    !asked.is_empty()
        && running
            .flat_map(|pod| wanted(pod))
            .any(|used| asked.iter().any(|port| port.clashes(&used)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(ports: Value) -> Arc<Pod> {
        let body = json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": ports}]}});
        Arc::new(serde_json::from_value(body).expect("pod"))
    }

    #[test]
    fn a_host_port_clashes_on_the_same_protocol_and_overlapping_address() {
        let http = wanted(&pod(json!([{"containerPort": 80, "hostPort": 8080}])));
        let on_node = |ports: Value| vec![pod(ports)];
        let same = json!([{"containerPort": 1, "hostPort": 8080}]);
        assert!(taken(&http, on_node(same).iter()));
        let udp = json!([{"containerPort": 1, "hostPort": 8080, "protocol": "UDP"}]);
        assert!(!taken(&http, on_node(udp).iter()));
        let one_address = json!([{"containerPort": 1, "hostPort": 8080, "hostIP": "10.0.0.1"}]);
        assert!(
            taken(&http, on_node(one_address.clone()).iter()),
            "0.0.0.0 clashes with any"
        );
        let other = wanted(&pod(
            json!([{"containerPort": 1, "hostPort": 8080, "hostIP": "10.0.0.2"}]),
        ));
        assert!(!taken(&other, on_node(one_address).iter()));
        let unpublished = json!([{"containerPort": 8080}]);
        assert!(!taken(&http, on_node(unpublished).iter()));
    }
}
