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
