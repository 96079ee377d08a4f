//! How traffic reaches pods: Service (core/v1) and Ingress (networking.k8s.io/v1).

use k8s_pb::api::core::v1 as core;
use k8s_pb::api::networking::v1 as networking;
use serde_json::{Map, Value};

use super::{Obj, ProtobufError, int_or_string, with_meta};

pub(super) fn service(svc: core::Service) -> Result<Map<String, Value>, ProtobufError> {
    let mut o = with_meta(svc.metadata);
    if let Some(spec) = svc.spec {
        o.object("spec", service_spec(spec)?);
    }
    if let Some(status) = svc.status {
        o.object("status", service_status(status));
    }
    Ok(o.0)
}

fn service_spec(spec: core::ServiceSpec) -> Result<Map<String, Value>, ProtobufError> {
    let mut o = Obj::default();
    let ports = spec
        .ports
        .into_iter()
        .map(service_port)
        .collect::<Result<Vec<_>, _>>()?;
    o.list("ports", ports);
    o.string_map("selector", spec.selector);
    o.omit_empty("clusterIP", spec.cluster_ip);
    o.strings("clusterIPs", spec.cluster_ips);
    o.omit_empty("type", spec.r#type);
    o.strings("externalIPs", spec.external_ips);
    o.omit_empty("sessionAffinity", spec.session_affinity);
    o.omit_empty("loadBalancerIP", spec.load_balancer_ip);
    o.strings("loadBalancerSourceRanges", spec.load_balancer_source_ranges);
    o.omit_empty("externalName", spec.external_name);
    o.omit_empty("externalTrafficPolicy", spec.external_traffic_policy);
    o.omit_empty("healthCheckNodePort", spec.health_check_node_port);
    o.omit_empty("publishNotReadyAddresses", spec.publish_not_ready_addresses);
    if let Some(config) = spec.session_affinity_config {
        let mut c = Obj::default();
        if let Some(client_ip) = config.client_ip {
            let mut ip = Obj::default();
            ip.pointer("timeoutSeconds", client_ip.timeout_seconds);
            c.0.insert("clientIP".into(), Value::Object(ip.0));
        }
        o.0.insert("sessionAffinityConfig".into(), Value::Object(c.0));
    }
    o.strings("ipFamilies", spec.ip_families);
    o.pointer("ipFamilyPolicy", spec.ip_family_policy);
    o.pointer(
        "allocateLoadBalancerNodePorts",
        spec.allocate_load_balancer_node_ports,
    );
    o.pointer("loadBalancerClass", spec.load_balancer_class);
    o.pointer("internalTrafficPolicy", spec.internal_traffic_policy);
    o.pointer("trafficDistribution", spec.traffic_distribution);
    Ok(o.0)
}

fn service_port(p: core::ServicePort) -> Result<Value, ProtobufError> {
    let mut o = Obj::default();
    o.omit_empty("name", p.name);
    o.omit_empty("protocol", p.protocol);
    o.pointer("appProtocol", p.app_protocol);
    o.always("port", p.port);
    o.value(
        "targetPort",
        p.target_port.map(int_or_string).transpose()?.flatten(),
    );
    o.omit_empty("nodePort", p.node_port);
    Ok(Value::Object(o.0))
}

fn service_status(status: core::ServiceStatus) -> Map<String, Value> {
    // Conditions are controller-owned; only the load balancer is carried over.
    let mut o = Obj::default();
    if let Some(lb) = status.load_balancer {
        let mut l = Obj::default();
        l.list(
            "ingress",
            lb.ingress.into_iter().map(load_balancer_ingress).collect(),
        );
        o.object("loadBalancer", l.0);
    }
    o.0
}

fn load_balancer_ingress(i: core::LoadBalancerIngress) -> Value {
    let mut o = Obj::default();
    o.omit_empty("ip", i.ip);
    o.omit_empty("hostname", i.hostname);
    o.pointer("ipMode", i.ip_mode);
    let ports = i
        .ports
        .into_iter()
        .map(|p| {
            let mut ps = Obj::default();
            ps.always("port", p.port);
            ps.omit_empty("protocol", p.protocol);
            ps.pointer("error", p.error);
            Value::Object(ps.0)
        })
        .collect();
    o.list("ports", ports);
    Value::Object(o.0)
}

/// Status is server-owned and ignored.
pub(super) fn ingress(i: networking::Ingress) -> Map<String, Value> {
    let mut o = with_meta(i.metadata);
    if let Some(spec) = i.spec {
        let mut s = Obj::default();
        s.pointer("ingressClassName", spec.ingress_class_name);
        s.value("defaultBackend", spec.default_backend.map(ingress_backend));
        let tls = spec
            .tls
            .into_iter()
            .map(|t| {
                let mut r = Obj::default();
                r.strings("hosts", t.hosts);
                r.omit_empty("secretName", t.secret_name);
                Value::Object(r.0)
            })
            .collect();
        s.list("tls", tls);
        s.list("rules", spec.rules.into_iter().map(ingress_rule).collect());
        o.object("spec", s.0);
    }
    o.0
}

fn ingress_rule(rule: networking::IngressRule) -> Value {
    let mut o = Obj::default();
    o.omit_empty("host", rule.host);
    // Go inlines IngressRuleValue: its `http` sits beside `host`.
    if let Some(http) = rule.ingress_rule_value.and_then(|v| v.http) {
        let paths = http
            .paths
            .into_iter()
            .map(|p| {
                let mut r = Obj::default();
                r.omit_empty("path", p.path);
                r.pointer("pathType", p.path_type);
                r.0.insert(
                    "backend".into(),
                    ingress_backend(p.backend.unwrap_or_default()),
                );
                Value::Object(r.0)
            })
            .collect();
        let mut h = Obj::default();
        h.0.insert("paths".into(), Value::Array(paths));
        o.0.insert("http".into(), Value::Object(h.0));
    }
    Value::Object(o.0)
}

fn ingress_backend(backend: networking::IngressBackend) -> Value {
    let mut o = Obj::default();
    if let Some(service) = backend.service {
        let mut s = Obj::default();
        s.always("name", service.name);
        if let Some(port) = service.port {
            let mut p = Obj::default();
            p.omit_empty("name", port.name);
            p.omit_empty("number", port.number);
            s.0.insert("port".into(), Value::Object(p.0));
        }
        o.0.insert("service".into(), Value::Object(s.0));
    }
    if let Some(resource) = backend.resource {
        let mut r = Obj::default();
        r.pointer("apiGroup", resource.api_group);
        r.always("kind", resource.kind);
        r.always("name", resource.name);
        o.0.insert("resource".into(), Value::Object(r.0));
    }
    Value::Object(o.0)
}

#[cfg(test)]
mod tests {
    use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
    use prost::Message;
    use serde_json::json;

    use super::*;
    use crate::protobuf::tests::{body, decode_ok, go_meta, s};
    use crate::protobuf::{ProtobufError, decode};

    /// Mirrors `kubectl create service nodeport web --tcp=80:8080 --node-port=30080`
    /// plus a named string target port and the pointer fields.
    #[test]
    fn service_decodes() {
        let svc = core::Service {
            metadata: Some(go_meta("web", "default")),
            spec: Some(core::ServiceSpec {
                ports: vec![
                    core::ServicePort {
                        name: s("80-8080"),
                        protocol: s("TCP"),
                        app_protocol: None,
                        port: Some(80),
                        target_port: Some(IntOrString {
                            r#type: Some(0),
                            int_val: Some(8080),
                            str_val: s(""),
                        }),
                        node_port: Some(30080),
                    },
                    core::ServicePort {
                        name: s("metrics"),
                        protocol: s("TCP"),
                        app_protocol: s("http"),
                        port: Some(9090),
                        target_port: Some(IntOrString {
                            r#type: Some(1),
                            int_val: Some(0),
                            str_val: s("metrics"),
                        }),
                        node_port: Some(0),
                    },
                ],
                selector: [("app".to_string(), "web".to_string())].into(),
                cluster_ip: s("10.0.0.10"),
                cluster_ips: vec!["10.0.0.10".to_string()],
                r#type: s("NodePort"),
                external_ips: vec!["192.0.2.1".to_string()],
                session_affinity: s("ClientIP"),
                load_balancer_ip: s(""),
                external_name: s(""),
                external_traffic_policy: s("Local"),
                health_check_node_port: Some(0),
                publish_not_ready_addresses: Some(true),
                ip_families: vec!["IPv4".to_string()],
                ip_family_policy: s("SingleStack"),
                internal_traffic_policy: s("Cluster"),
                ..Default::default()
            }),
            status: Some(core::ServiceStatus {
                load_balancer: Some(core::LoadBalancerStatus::default()),
                conditions: vec![],
            }),
        };
        assert_eq!(
            decode_ok(&body("v1", "Service", svc.encode_to_vec())),
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    "ports": [
                        {"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080, "nodePort": 30080},
                        {"name": "metrics", "protocol": "TCP", "appProtocol": "http", "port": 9090, "targetPort": "metrics"},
                    ],
                    "selector": {"app": "web"},
                    "clusterIP": "10.0.0.10",
                    "clusterIPs": ["10.0.0.10"],
                    "type": "NodePort",
                    "externalIPs": ["192.0.2.1"],
                    "sessionAffinity": "ClientIP",
                    "externalTrafficPolicy": "Local",
                    "publishNotReadyAddresses": true,
                    "ipFamilies": ["IPv4"],
                    "ipFamilyPolicy": "SingleStack",
                    "internalTrafficPolicy": "Cluster",
                },
            })
        );
    }

    #[test]
    fn external_name_service_and_status_decode() {
        let svc = core::Service {
            metadata: Some(go_meta("ext", "")),
            spec: Some(core::ServiceSpec {
                r#type: s("ExternalName"),
                external_name: s("example.com"),
                cluster_ip: s(""),
                session_affinity: s(""),
                ..Default::default()
            }),
            status: Some(core::ServiceStatus {
                load_balancer: Some(core::LoadBalancerStatus {
                    ingress: vec![core::LoadBalancerIngress {
                        ip: s("203.0.113.5"),
                        hostname: s(""),
                        ..Default::default()
                    }],
                }),
                conditions: vec![],
            }),
        };
        assert_eq!(
            decode_ok(&body("v1", "Service", svc.encode_to_vec())),
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "ext"},
                "spec": {"type": "ExternalName", "externalName": "example.com"},
                "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.5"}]}},
            })
        );
    }

    #[test]
    fn invalid_int_or_string_type_is_malformed() {
        let svc = core::Service {
            spec: Some(core::ServiceSpec {
                ports: vec![core::ServicePort {
                    port: Some(80),
                    target_port: Some(IntOrString {
                        r#type: Some(7),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(matches!(
            decode(&body("v1", "Service", svc.encode_to_vec())),
            Err(ProtobufError::Malformed(_))
        ));
    }
}
