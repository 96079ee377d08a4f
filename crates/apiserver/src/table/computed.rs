//! The cells kube's printers compute rather than read from one field:
//! service addresses and ports, node status and roles, event times, counts
//! and sources, namespace status, a CRD's creation time and `ready/desired`.
//! Each is a `columns::Compute`, named in `kinds.txt`.

use std::collections::BTreeSet;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::format::{
    NONE, UNKNOWN, arr_at, at, human_duration, int_at, is_set, nonempty, parse_time, str_at,
};

// --- workloads ---------------------------------------------------------------

/// `readyReplicas/replicas` of a Deployment or StatefulSet (replicas default 1).
pub(super) fn ready_of_desired(obj: &Value, _: DateTime<Utc>) -> Value {
    let desired = int_at(obj, &["spec", "replicas"]).unwrap_or(1);
    let ready = int_at(obj, &["status", "readyReplicas"]).unwrap_or(0);
    json!(format!("{ready}/{desired}"))
}

// --- namespaces and CRDs -------------------------------------------------------

/// The phase; a namespace without one is `Terminating` once deleted, else `Active`.
pub(super) fn namespace_status(ns: &Value, _: DateTime<Utc>) -> Value {
    json!(nonempty(ns, &["status", "phase"]).unwrap_or_else(|| {
        if is_set(ns, &["metadata", "deletionTimestamp"]) {
            "Terminating"
        } else {
            "Active"
        }
    }))
}

/// CREATED AT as the default table convertor prints it: RFC 3339 in UTC.
pub(super) fn created_at(obj: &Value, _: DateTime<Utc>) -> Value {
    json!(match str_at(obj, &["metadata", "creationTimestamp"]) {
        Some(ts) => match parse_time(ts) {
            Some(t) => t.to_rfc3339_opts(SecondsFormat::Secs, true),
            None => ts.to_string(),
        },
        // Go's zero time.
        None => "0001-01-01T00:00:00Z".to_string(),
    })
}

// --- services ------------------------------------------------------------------

/// EXTERNAL-IP: external IPs, a load balancer's ingress, or an external name.
pub(super) fn service_external_ip(svc: &Value, _: DateTime<Utc>) -> Value {
    let ty = nonempty(svc, &["spec", "type"]).unwrap_or("ClusterIP");
    let external_ips: Vec<&str> = arr_at(svc, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    json!(match ty {
        "ClusterIP" | "NodePort" => {
            if external_ips.is_empty() {
                NONE.to_string()
            } else {
                external_ips.join(",")
            }
        }
        "LoadBalancer" => {
            // Server-side printing is always "wide": no truncation.
            let ingress: BTreeSet<&str> = arr_at(svc, &["status", "loadBalancer", "ingress"])
                .iter()
                .filter_map(|i| nonempty(i, &["ip"]).or_else(|| nonempty(i, &["hostname"])))
                .collect();
            let mut all: Vec<&str> = ingress.into_iter().collect();
            all.extend(external_ips);
            if all.is_empty() {
                "<pending>".to_string()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => str_at(svc, &["spec", "externalName"])
            .unwrap_or("")
            .to_string(),
        _ => UNKNOWN.to_string(),
    })
}

/// PORT(S): `port[:nodePort]/protocol`, comma-separated.
pub(super) fn service_ports(svc: &Value, _: DateTime<Utc>) -> Value {
    let ports: Vec<String> = arr_at(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = int_at(p, &["port"]).unwrap_or(0);
            let protocol = nonempty(p, &["protocol"]).unwrap_or("TCP");
            match int_at(p, &["nodePort"]).filter(|n| *n > 0) {
                Some(node_port) => format!("{port}:{node_port}/{protocol}"),
                None => format!("{port}/{protocol}"),
            }
        })
        .collect();
    json!(if ports.is_empty() {
        NONE.to_string()
    } else {
        ports.join(",")
    })
}

// --- nodes -----------------------------------------------------------------------

/// STATUS: Ready / NotReady / Unknown, plus SchedulingDisabled when cordoned.
pub(super) fn node_status(node: &Value, _: DateTime<Utc>) -> Value {
    let ready = arr_at(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| str_at(c, &["type"]) == Some("Ready"));
    let mut status = vec![match ready {
        Some(c) if str_at(c, &["status"]) == Some("True") => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if at(node, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled");
    }

    json!(status.join(","))
}

/// ROLES from `node-role.kubernetes.io/<role>` and `kubernetes.io/role` labels.
pub(super) fn node_roles(node: &Value, _: DateTime<Utc>) -> Value {
    let mut roles = BTreeSet::new();
    if let Some(labels) = at(node, &["metadata", "labels"]).and_then(Value::as_object) {
        for (key, value) in labels {
            if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if let Some(v) = value
                .as_str()
                .filter(|v| key == "kubernetes.io/role" && !v.is_empty())
            {
                roles.insert(v.to_string());
            }
        }
    }
    json!(if roles.is_empty() {
        NONE.to_string()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    })
}

// --- events ----------------------------------------------------------------------
// Core v1 and events.k8s.io/v1 events (the latter use `regarding`, `note`,
// `deprecated*` fields and `reportingController`).

struct EventTimes {
    first_seen: String,
    last_seen: String,
    count: i64,
}

fn event_times(ev: &Value, now: DateTime<Utc>) -> EventTimes {
    let first_str = |keys: &[&str]| keys.iter().find_map(|k| nonempty(ev, &[k]));
    let age = |ts: &str| match parse_time(ts) {
        Some(t) => human_duration(now - t),
        None => UNKNOWN.to_string(),
    };

    let first_seen = match first_str(&["firstTimestamp", "deprecatedFirstTimestamp"]) {
        Some(ts) => age(ts),
        None => first_str(&["eventTime"]).map_or_else(|| UNKNOWN.to_string(), age),
    };
    let mut last_seen = match first_str(&["lastTimestamp", "deprecatedLastTimestamp"]) {
        Some(ts) => age(ts),
        None => first_seen.clone(),
    };
    let mut count = int_at(ev, &["count"])
        .or_else(|| int_at(ev, &["deprecatedCount"]))
        .unwrap_or(0);
    match at(ev, &["series"]).filter(|s| s.is_object()) {
        Some(series) => {
            last_seen =
                str_at(series, &["lastObservedTime"]).map_or_else(|| UNKNOWN.to_string(), age);
            count = int_at(series, &["count"]).unwrap_or(0);
        }
        None if count == 0 => count = 1,
        None => {}
    }

    EventTimes {
        first_seen,
        last_seen,
        count,
    }
}

pub(super) fn event_last_seen(ev: &Value, now: DateTime<Utc>) -> Value {
    json!(event_times(ev, now).last_seen)
}

pub(super) fn event_first_seen(ev: &Value, now: DateTime<Utc>) -> Value {
    json!(event_times(ev, now).first_seen)
}

pub(super) fn event_count(ev: &Value, now: DateTime<Utc>) -> Value {
    json!(event_times(ev, now).count)
}

/// OBJECT: `kind/name` of the object the event is about.
pub(super) fn event_object(ev: &Value, _: DateTime<Utc>) -> Value {
    let regarding = at(ev, &["involvedObject"])
        .or_else(|| at(ev, &["regarding"]))
        .unwrap_or(&Value::Null);
    let kind = str_at(regarding, &["kind"]).unwrap_or("").to_lowercase();
    json!(match nonempty(regarding, &["name"]) {
        Some(name) => format!("{kind}/{name}"),
        None => kind,
    })
}

/// SOURCE: `component, host`.
pub(super) fn event_source(ev: &Value, _: DateTime<Utc>) -> Value {
    let first_str = |keys: &[&str]| keys.iter().find_map(|k| nonempty(ev, &[k]));
    let source = at(ev, &["source"]).or_else(|| at(ev, &["deprecatedSource"]));
    let component = source
        .and_then(|s| nonempty(s, &["component"]))
        .or_else(|| first_str(&["reportingComponent", "reportingController"]))
        .unwrap_or("");
    let instance = source
        .and_then(|s| nonempty(s, &["host"]))
        .or_else(|| first_str(&["reportingInstance"]))
        .unwrap_or("");
    json!(if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    })
}

pub(super) fn event_message(ev: &Value, _: DateTime<Utc>) -> Value {
    let first_str = |keys: &[&str]| keys.iter().find_map(|k| nonempty(ev, &[k]));
    json!(first_str(&["message", "note"]).unwrap_or("").trim())
}

#[cfg(test)]
mod tests {
    use crate::table::test_support::{
        ago, assert_shape, builtin, cells, column_names, render, single, wide_names,
    };
    use serde_json::{Value, json};

    fn service(spec: Value, status: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": ago(86400)},
            "spec": spec,
            "status": status
        })
    }

    #[test]
    fn services() {
        let cols = builtin("", "Service");
        let t = render(
            &cols,
            &[
                service(
                    json!({
                        "type": "ClusterIP",
                        "clusterIP": "10.96.0.10",
                        "clusterIPs": ["10.96.0.10"],
                        "ports": [
                            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
                            {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443}
                        ],
                        "selector": {"tier": "frontend", "app": "web"}
                    }),
                    json!({}),
                ),
                service(
                    json!({
                        "type": "NodePort",
                        "clusterIP": "10.96.1.1",
                        "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP", "nodePort": 30053}],
                        "externalIPs": ["192.0.2.1", "192.0.2.2"]
                    }),
                    json!({}),
                ),
                service(
                    json!({"type": "LoadBalancer", "clusterIP": "10.96.2.2", "ports": [{"port": 443, "protocol": "TCP", "nodePort": 31443}]}),
                    json!({"loadBalancer": {}}),
                ),
                service(
                    json!({"type": "LoadBalancer", "clusterIP": "10.96.2.3", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 31080}], "externalIPs": ["192.0.2.9"]}),
                    json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}, {"hostname": "lb.example.com"}]}}),
                ),
                service(
                    json!({"type": "ExternalName", "externalName": "db.example.com"}),
                    json!({}),
                ),
                service(
                    json!({"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"], "selector": {"app": "db"}}),
                    json!({}),
                ),
            ],
        );
        assert_shape(&t);
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Type",
                "Cluster-IP",
                "External-IP",
                "Port(s)",
                "Age",
                "Selector"
            ]
        );
        assert_eq!(wide_names(&t), ["Selector"]);
        assert_eq!(
            cells(&t, 0),
            [
                json!("web"),
                json!("ClusterIP"),
                json!("10.96.0.10"),
                json!("<none>"),
                json!("80/TCP,443/TCP"),
                json!("24h"),
                json!("app=web,tier=frontend")
            ]
        );
        assert_eq!(
            cells(&t, 1)[1..5].to_vec(),
            [
                json!("NodePort"),
                json!("10.96.1.1"),
                json!("192.0.2.1,192.0.2.2"),
                json!("80:30080/TCP,53:30053/UDP")
            ]
        );
        assert_eq!(cells(&t, 1)[6], json!("<none>"));
        assert_eq!(
            cells(&t, 2)[1..5].to_vec(),
            [
                json!("LoadBalancer"),
                json!("10.96.2.2"),
                json!("<pending>"),
                json!("443:31443/TCP")
            ]
        );
        assert_eq!(
            cells(&t, 3)[3],
            json!("203.0.113.7,lb.example.com,192.0.2.9")
        );
        assert_eq!(
            cells(&t, 4)[1..5].to_vec(),
            [
                json!("ExternalName"),
                json!("<none>"),
                json!("db.example.com"),
                json!("<none>")
            ]
        );
        assert_eq!(cells(&t, 5)[2], json!("None"));
        assert_eq!(cells(&t, 5)[4], json!("<none>"));
        assert_eq!(cells(&t, 5)[6], json!("app=db"));
    }

    // --- nodes -------------------------------------------------------------

    fn node(labels: Value, ready: &str, unschedulable: bool) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-1", "creationTimestamp": ago(10 * 86400), "labels": labels},
            "spec": {"unschedulable": unschedulable},
            "status": {
                "conditions": [
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": ready}
                ],
                "addresses": [
                    {"type": "InternalIP", "address": "172.18.0.2"},
                    {"type": "Hostname", "address": "node-1"}
                ],
                "nodeInfo": {
                    "kubeletVersion": "v1.30.0",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "kernelVersion": "6.1.0-18-amd64",
                    "containerRuntimeVersion": "containerd://1.7.13"
                }
            }
        })
    }

    #[test]
    fn nodes() {
        let cols = builtin("", "Node");
        let t = render(
            &cols,
            &[
                node(
                    json!({
                        "kubernetes.io/hostname": "node-1",
                        "node-role.kubernetes.io/control-plane": "",
                        "node-role.kubernetes.io/etcd": "true"
                    }),
                    "True",
                    false,
                ),
                node(json!({"kubernetes.io/role": "worker"}), "False", true),
                node(json!({}), "Unknown", false),
            ],
        );
        assert_shape(&t);
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Status",
                "Roles",
                "Age",
                "Version",
                "Internal-IP",
                "External-IP",
                "OS-Image",
                "Kernel-Version",
                "Container-Runtime"
            ]
        );
        assert_eq!(
            wide_names(&t),
            [
                "Internal-IP",
                "External-IP",
                "OS-Image",
                "Kernel-Version",
                "Container-Runtime"
            ]
        );
        assert_eq!(
            cells(&t, 0),
            [
                json!("node-1"),
                json!("Ready"),
                json!("control-plane,etcd"),
                json!("10d"),
                json!("v1.30.0"),
                json!("172.18.0.2"),
                json!("<none>"),
                json!("Debian GNU/Linux 12 (bookworm)"),
                json!("6.1.0-18-amd64"),
                json!("containerd://1.7.13")
            ]
        );
        assert_eq!(cells(&t, 1)[1], json!("NotReady,SchedulingDisabled"));
        assert_eq!(cells(&t, 1)[2], json!("worker"));
        assert_eq!(cells(&t, 2)[1], json!("NotReady"));
        assert_eq!(cells(&t, 2)[2], json!("<none>"));

        let (_, c) = single(
            &cols,
            json!({"metadata": {"name": "bare"}, "spec": {"unschedulable": true}}),
        );
        assert_eq!(
            c,
            [
                json!("bare"),
                json!("Unknown,SchedulingDisabled"),
                json!("<none>"),
                json!("<unknown>"),
                json!(""),
                json!("<none>"),
                json!("<none>"),
                json!("<unknown>"),
                json!("<unknown>"),
                json!("<unknown>")
            ]
        );
    }

    // --- events ------------------------------------------------------------

    #[test]
    fn core_events() {
        let cols = builtin("", "Event");
        let t = render(
            &cols,
            &[
                json!({
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": "web.17c3a", "namespace": "default", "creationTimestamp": ago(600)},
                    "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default", "fieldPath": "spec.containers{app}"},
                    "reason": "BackOff",
                    "message": "Back-off restarting failed container\n",
                    "type": "Warning",
                    "source": {"component": "kubelet", "host": "node-1"},
                    "firstTimestamp": ago(600),
                    "lastTimestamp": ago(45),
                    "count": 12
                }),
                json!({
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": "web.17c3b", "creationTimestamp": ago(30)},
                    "involvedObject": {"kind": "Deployment", "name": "web"},
                    "reason": "ScalingReplicaSet",
                    "message": "Scaled up replica set web-7d4b9c to 3",
                    "type": "Normal",
                    "eventTime": "2024-05-10T11:59:30.000000Z",
                    "reportingComponent": "deployment-controller",
                    "reportingInstance": ""
                }),
                json!({
                    "metadata": {"name": "series"},
                    "involvedObject": {"kind": "Node"},
                    "type": "Normal",
                    "reason": "Ping",
                    "message": "m",
                    "eventTime": ago(7200),
                    "series": {"count": 5, "lastObservedTime": ago(10)}
                }),
            ],
        );
        assert_shape(&t);
        assert_eq!(
            column_names(&t),
            [
                "Last Seen",
                "Type",
                "Reason",
                "Object",
                "Subobject",
                "Source",
                "Message",
                "First Seen",
                "Count",
                "Name"
            ]
        );
        assert_eq!(
            wide_names(&t),
            ["Subobject", "Source", "First Seen", "Count", "Name"]
        );
        assert_eq!(
            cells(&t, 0),
            [
                json!("45s"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/web-1"),
                json!("spec.containers{app}"),
                json!("kubelet, node-1"),
                json!("Back-off restarting failed container"),
                json!("10m"),
                json!(12),
                json!("web.17c3a")
            ]
        );
        assert_eq!(
            cells(&t, 1),
            [
                json!("30s"),
                json!("Normal"),
                json!("ScalingReplicaSet"),
                json!("deployment/web"),
                json!(""),
                json!("deployment-controller"),
                json!("Scaled up replica set web-7d4b9c to 3"),
                json!("30s"),
                json!(1),
                json!("web.17c3b")
            ]
        );
        let c = cells(&t, 2);
        assert_eq!(c[0], json!("10s"));
        assert_eq!(c[3], json!("node"));
        assert_eq!(c[7], json!("120m"));
        assert_eq!(c[8], json!(5));
    }

    #[test]
    fn events_k8s_io_events() {
        let (t, c) = single(
            &builtin("events.k8s.io", "Event"),
            json!({
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": "lease.1", "namespace": "kube-system"},
                "eventTime": ago(3600),
                "reportingController": "kube-controller-manager",
                "reportingInstance": "cp-1",
                "action": "Elected",
                "reason": "LeaderElection",
                "regarding": {"kind": "Lease", "name": "kube-controller-manager", "namespace": "kube-system"},
                "note": "cp-1 became leader",
                "type": "Normal",
                "deprecatedCount": 2,
                "deprecatedLastTimestamp": ago(100)
            }),
        );
        assert_eq!(
            column_names(&t)[..4],
            ["Last Seen", "Type", "Reason", "Object"]
        );
        assert_eq!(
            c,
            [
                json!("100s"),
                json!("Normal"),
                json!("LeaderElection"),
                json!("lease/kube-controller-manager"),
                json!(""),
                json!("kube-controller-manager, cp-1"),
                json!("cp-1 became leader"),
                json!("60m"),
                json!(2),
                json!("lease.1")
            ]
        );

        let (_, c) = single(
            &builtin("events.k8s.io", "Event"),
            json!({"metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "p"}}),
        );
        assert_eq!(c[0], json!("<unknown>"));
        assert_eq!(c[7], json!("<unknown>"));
        assert_eq!(c[8], json!(1));
    }

    // --- apps --------------------------------------------------------------
}
