//! Service bodies built as Go encodes them.

use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::json;

use crate::protobuf::tests::{assert_decodes, body, go_meta, s};
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
    assert_decodes(
        &svc,
        json!({"metadata": {"name": "web", "namespace": "default"},
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
        }),
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
    assert_decodes(
        &svc,
        json!({"metadata": {"name": "ext"},
            "spec": {"type": "ExternalName", "externalName": "example.com"},
            "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.5"}]}},
        }),
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
