//! The cells kube's printers compute for Endpoints, EndpointSlices, Ingresses
//! and IngressClasses: address lists cut at three (`+ N more...`), ingress
//! hosts, load-balancer addresses and ports, class parameters.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::format::{NONE, arr_at, int_at, nonempty, str_at, value_text};

const SHOWN: usize = 3;

/// The first three of `items`, then ` + N more...` for the rest.
fn first_three(items: &[String]) -> String {
    let shown = items[..items.len().min(SHOWN)].join(",");
    if items.len() > SHOWN {
        format!("{shown} + {} more...", items.len() - SHOWN)
    } else {
        shown
    }
}

/// Go's `net.JoinHostPort`: IPv6 addresses in brackets.
fn host_port(ip: &str, port: i64) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// ENDPOINTS of an Endpoints object: `ip:port` per address and port.
pub(super) fn endpoints(ep: &Value, _: DateTime<Utc>) -> Value {
    let subsets = arr_at(ep, &["subsets"]);
    if subsets.is_empty() {
        return json!(NONE);
    }
    let mut all = Vec::new();
    for subset in subsets {
        let ips: Vec<&str> = arr_at(subset, &["addresses"])
            .iter()
            .map(|a| str_at(a, &["ip"]).unwrap_or(""))
            .collect();
        let ports = arr_at(subset, &["ports"]);
        if ports.is_empty() {
            // A headless service's endpoints have no ports.
            all.extend(ips.iter().map(|ip| ip.to_string()));
        }
        for port in ports {
            let port = int_at(port, &["port"]).unwrap_or(0);
            all.extend(ips.iter().map(|ip| host_port(ip, port)));
        }
    }
    json!(first_three(&all))
}

/// `<unset>` for an empty list, as kube's `listWithMoreString` prints it.
fn unset_if_empty(text: String) -> Value {
    json!(if text.is_empty() {
        "<unset>".to_string()
    } else {
        text
    })
}

/// PORTS of an EndpointSlice: number, else name, else `*`.
pub(super) fn endpoint_slice_ports(slice: &Value, _: DateTime<Utc>) -> Value {
    let ports: Vec<String> = arr_at(slice, &["ports"])
        .iter()
        .map(|p| match (int_at(p, &["port"]), str_at(p, &["name"])) {
            (Some(port), _) => port.to_string(),
            (None, Some(name)) => name.to_string(),
            (None, None) => "*".to_string(),
        })
        .collect();
    unset_if_empty(first_three(&ports))
}

/// ENDPOINTS of an EndpointSlice: every endpoint's addresses.
pub(super) fn endpoint_slice_endpoints(slice: &Value, _: DateTime<Utc>) -> Value {
    let addresses: Vec<String> = arr_at(slice, &["endpoints"])
        .iter()
        .flat_map(|e| arr_at(e, &["addresses"]))
        .map(value_text)
        .collect();
    unset_if_empty(first_three(&addresses))
}

/// HOSTS: the first three rules' hosts, `*` when no rule names one.
pub(super) fn ingress_hosts(ingress: &Value, _: DateTime<Utc>) -> Value {
    let rules = arr_at(ingress, &["spec", "rules"]);
    let hosts: Vec<&str> = rules
        .iter()
        .take(SHOWN)
        .filter_map(|r| nonempty(r, &["host"]))
        .collect();
    json!(if hosts.is_empty() {
        "*".to_string()
    } else if rules.len() > SHOWN {
        format!("{} + {} more...", hosts.join(","), rules.len() - SHOWN)
    } else {
        hosts.join(",")
    })
}

/// ADDRESS: the load balancer's IPs or host names, sorted; server-side
/// printing is "wide", so never cut.
pub(super) fn ingress_address(ingress: &Value, _: DateTime<Utc>) -> Value {
    let addresses: BTreeSet<&str> = arr_at(ingress, &["status", "loadBalancer", "ingress"])
        .iter()
        .filter_map(|i| nonempty(i, &["ip"]).or_else(|| nonempty(i, &["hostname"])))
        .collect();
    json!(addresses.into_iter().collect::<Vec<_>>().join(","))
}

pub(super) fn ingress_ports(ingress: &Value, _: DateTime<Utc>) -> Value {
    json!(if arr_at(ingress, &["spec", "tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    })
}

/// PARAMETERS: `Kind[.apiGroup]/name`, `<none>` without parameters.
pub(super) fn ingress_class_parameters(class: &Value, _: DateTime<Utc>) -> Value {
    let Some(params) = class.pointer("/spec/parameters").filter(|p| p.is_object()) else {
        return json!(NONE);
    };
    let kind = str_at(params, &["kind"]).unwrap_or("");
    let name = str_at(params, &["name"]).unwrap_or("");
    json!(match str_at(params, &["apiGroup"]) {
        Some(group) => format!("{kind}.{group}/{name}"),
        None => format!("{kind}/{name}"),
    })
}
