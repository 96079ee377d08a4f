//! A Service's spec, as kube's `ValidateService` checks it: ports (valid, named when
//! several), what only some types carry, session affinity and its timeout, the cluster
//! IPs with their families and policy (`ValidateServiceClusterIPsRelatedFields`),
//! external IPs, load-balancer source ranges, and the internal traffic policy and traffic
//! distribution. Allocation (`service_allocation.rs`) has filled in what kube's registry
//! fills in before these run.

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde_json::{Map, Value};

use super::{
    dns_label, dns_subdomain, duplicate, error, go_strings_invalid, invalid, list, not_supported,
    parse_ip, port_name_problems, port_number, protocol, required, required_because, text,
};
use crate::schema::{FieldError, FieldErrorReason, Path};

const IP_MSG: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
const CIDR_MSG: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// Everything [`super::validate`] checks of a Service, in `ValidateService`'s order.
pub(super) fn service(service: &Value, errors: &mut Vec<FieldError>) {
    service_ports(service, errors);
    service_type_fields(service, errors);
    let empty = Value::Object(Map::new());
    let spec = service.get("spec").unwrap_or(&empty);
    session_affinity(spec, errors);
    if text(spec, "type") != "ExternalName" {
        cluster_ips(spec, errors);
    }
    external_ips(spec, errors);
    source_ranges(spec, errors);
    traffic_policies(spec, errors);
}

fn session_affinity(spec: &Value, errors: &mut Vec<FieldError>) {
    let at = Path::At("spec.sessionAffinity");
    let config_at = Path::At("spec.sessionAffinityConfig");
    let config = spec.get("sessionAffinityConfig").filter(|c| !c.is_null());
    match spec.get("sessionAffinity").and_then(Value::as_str) {
        // defaulted: absent only where defaults did not run
        None => {}
        Some("") => errors.push(required(&at)),
        Some("ClientIP") => {
            let when = "when session affinity type is ClientIP";
            let Some(config) = config else {
                return errors.push(required_because(&config_at, when));
            };
            let client_at = Path::Field(&config_at, "clientIP");
            let Some(client) = config.get("clientIP").filter(|c| !c.is_null()) else {
                return errors.push(required_because(&client_at, when));
            };
            let timeout_at = Path::Field(&client_at, "timeoutSeconds");
            match client.get("timeoutSeconds").filter(|t| !t.is_null()) {
                None => errors.push(required_because(&timeout_at, when)),
                Some(timeout) if !timeout.as_i64().is_some_and(|t| (1..=86400).contains(&t)) => {
                    errors.push(invalid(
                        &timeout_at,
                        timeout,
                        "must be greater than 0 and less than 86400",
                    ));
                }
                Some(_) => {}
            }
        }
        Some("None") if config.is_some() => errors.push(error(
            &config_at,
            FieldErrorReason::Forbidden,
            "Forbidden: must not be set when session affinity is None".into(),
        )),
        Some("None") => {}
        Some(other) => errors.push(not_supported(
            &at,
            &Value::from(other),
            &["ClientIP", "None"],
        )),
    }
}

/// kube's `ValidateServiceClusterIPsRelatedFields`.
fn cluster_ips(spec: &Value, errors: &mut Vec<FieldError>) {
    let ips_at = Path::At("spec.clusterIPs");
    let families_at = Path::At("spec.ipFamilies");
    let ips: Vec<&str> = strings(spec, "clusterIPs");
    let cluster_ip = text(spec, "clusterIP");
    if !cluster_ip.is_empty() {
        if ips.is_empty() {
            errors.push(required(&ips_at));
        } else if ips[0] != cluster_ip {
            errors.push(go_strings_invalid(
                &ips_at,
                &ips,
                "first value must match `clusterIP`",
            ));
        }
    } else if !ips.is_empty() {
        errors.push(go_strings_invalid(
            &ips_at,
            &ips,
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let families: Vec<&str> = strings(spec, "ipFamilies");
    let mut seen = BTreeSet::new();
    for (i, family) in families.iter().enumerate() {
        let item = Path::Item(&families_at, i);
        if !matches!(*family, "IPv4" | "IPv6") {
            errors.push(not_supported(
                &item,
                &Value::from(*family),
                &["IPv4", "IPv6"],
            ));
        }
        if !seen.insert(*family) {
            errors.push(duplicate(&item, family));
        }
    }
    if let Some(policy) = spec.get("ipFamilyPolicy").and_then(Value::as_str)
        && !matches!(
            policy,
            "SingleStack" | "PreferDualStack" | "RequireDualStack"
        )
    {
        errors.push(not_supported(
            &Path::At("spec.ipFamilyPolicy"),
            &Value::from(policy),
            &["PreferDualStack", "RequireDualStack", "SingleStack"],
        ));
    }
    let mut invalid_ips = false;
    for (i, ip) in ips.iter().enumerate() {
        if i == 0 && *ip == "None" {
            if ips.len() > 1 {
                invalid_ips = true;
                errors.push(go_strings_invalid(
                    &ips_at,
                    &ips,
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        if parse_ip(ip).is_none() {
            invalid_ips = true;
            errors.push(invalid(&Path::Item(&ips_at, i), &Value::from(*ip), IP_MSG));
        }
    }
    if ips.len() > 2 {
        errors.push(go_strings_invalid(
            &ips_at,
            &ips,
            "may only hold up to 2 values",
        ));
    }
    if invalid_ips {
        return;
    }
    let parsed: Vec<IpAddr> = ips.iter().filter_map(|ip| parse_ip(ip)).collect();
    if ips.len() > 1 && !(parsed.len() == 2 && parsed[0].is_ipv4() != parsed[1].is_ipv4()) {
        errors.push(go_strings_invalid(
            &ips_at,
            &ips,
            "may specify no more than one IP for each IP family",
        ));
    }
    let headless = ips.len() == 1 && ips[0] == "None";
    if headless {
        return;
    }
    for (i, (ip, family)) in parsed.iter().zip(&families).enumerate() {
        let expected = match (*family, ip.is_ipv6()) {
            ("IPv4", true) => "IPv4",
            ("IPv6", false) => "IPv6",
            _ => continue,
        };
        errors.push(invalid(
            &Path::Item(&ips_at, i),
            &Value::from(ips[i]),
            &format!("expected an {expected} value as indicated by `ipFamilies[{i}]`"),
        ));
    }
}

/// External IPs: valid, and not unspecified, loopback or link-local (kube's
/// `ValidateNonSpecialIP`).
fn external_ips(spec: &Value, errors: &mut Vec<FieldError>) {
    let all = Path::At("spec.externalIPs");
    for (i, ip) in strings(spec, "externalIPs").iter().enumerate() {
        let at = Path::Item(&all, i);
        let Some(parsed) = parse_ip(ip) else {
            errors.push(invalid(&at, &Value::from(*ip), IP_MSG));
            continue;
        };
        let shown = Value::from(*ip);
        if parsed.is_unspecified() {
            errors.push(invalid(
                &at,
                &shown,
                &format!("may not be unspecified ({ip})"),
            ));
        }
        if parsed.is_loopback() {
            errors.push(invalid(
                &at,
                &shown,
                "may not be in the loopback range (127.0.0.0/8, ::1/128)",
            ));
        }
        let (link_local, link_local_multicast) = match parsed {
            IpAddr::V4(v4) => (v4.is_link_local(), v4.octets()[..3] == [224, 0, 0]),
            IpAddr::V6(v6) => (
                v6.segments()[0] & 0xffc0 == 0xfe80,
                v6.segments()[0] & 0xff0f == 0xff02,
            ),
        };
        if link_local {
            errors.push(invalid(
                &at,
                &shown,
                "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
            ));
        }
        if link_local_multicast {
            errors.push(invalid(
                &at,
                &shown,
                "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
            ));
        }
    }
}

/// `loadBalancerSourceRanges`: only on a load balancer, each a CIDR (blanks around it
/// allowed, as kube allows them). kube names the field `LoadBalancerSourceRanges` here.
fn source_ranges(spec: &Value, errors: &mut Vec<FieldError>) {
    let ranges = strings(spec, "loadBalancerSourceRanges");
    if ranges.is_empty() {
        return;
    }
    let at = Path::At("spec.LoadBalancerSourceRanges");
    if text(spec, "type") != "LoadBalancer" {
        errors.push(error(
            &at,
            FieldErrorReason::Forbidden,
            "Forbidden: may only be used when `type` is 'LoadBalancer'".into(),
        ));
    }
    for (i, range) in ranges.iter().enumerate() {
        let range = range.trim();
        if !is_cidr(range) {
            errors.push(invalid(&Path::Item(&at, i), &Value::from(range), CIDR_MSG));
        }
    }
}

fn traffic_policies(spec: &Value, errors: &mut Vec<FieldError>) {
    if let Some(policy) = spec.get("internalTrafficPolicy").and_then(Value::as_str)
        && !matches!(policy, "Cluster" | "Local")
    {
        errors.push(not_supported(
            &Path::At("spec.internalTrafficPolicy"),
            &Value::from(policy),
            &["Cluster", "Local"],
        ));
    }
    if let Some(distribution) = spec.get("trafficDistribution").and_then(Value::as_str)
        && distribution != "PreferClose"
    {
        errors.push(not_supported(
            &Path::At("spec.trafficDistribution"),
            &Value::from(distribution),
            &["PreferClose"],
        ));
    }
}

fn strings<'v>(spec: &'v Value, field: &str) -> Vec<&'v str> {
    list(spec, field)
        .iter()
        .map(|v| v.as_str().unwrap_or_default())
        .collect()
}

/// A CIDR as Go's `netutils.ParseCIDRSloppy` reads one.
fn is_cidr(text: &str) -> bool {
    let Some((ip, bits)) = text.split_once('/') else {
        return false;
    };
    let Some(ip) = parse_ip(ip) else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

/// A Service's ports: required but for an `ExternalName` or headless Service, each valid,
/// and named (uniquely) when there is more than one.
fn service_ports(service: &Value, errors: &mut Vec<FieldError>) {
    let empty = Value::Object(Map::new());
    let spec = service.get("spec").unwrap_or(&empty);
    let ports = list(spec, "ports");
    let headless = text(spec, "clusterIP") == "None";
    if ports.is_empty() && !headless && text(spec, "type") != "ExternalName" {
        errors.push(required(&Path::At("spec.ports")));
    }
    let mut names = BTreeSet::new();
    let all = Path::At("spec.ports");
    for (i, port) in ports.iter().enumerate() {
        let at = Path::Item(&all, i);
        let field = Path::Field(&at, "name");
        let name = text(port, "name");
        if name.is_empty() {
            if ports.len() > 1 {
                errors.push(required(&field));
            }
        } else {
            dns_label(name, &field, errors);
            if !names.insert(name.to_owned()) {
                errors.push(duplicate(&field, name));
            }
        }
        port_number(port.get("port"), &Path::Field(&at, "port"), errors);
        let target_field = Path::Field(&at, "targetPort");
        match port.get("targetPort") {
            Some(Value::String(target)) => {
                for problem in port_name_problems(target) {
                    errors.push(invalid(
                        &target_field,
                        &Value::from(target.as_str()),
                        problem,
                    ));
                }
            }
            Some(target @ Value::Number(_)) => port_number(Some(target), &target_field, errors),
            _ => {}
        }
        protocol(port, &at, errors);
    }
}

/// What only some types of Service may carry, with kube's messages: node ports need a
/// type that has them, an `ExternalName` Service its external name and no cluster IP, an
/// external traffic policy a Service reached from outside, and
/// `allocateLoadBalancerNodePorts` a load balancer.
fn service_type_fields(service: &Value, errors: &mut Vec<FieldError>) {
    let empty = Value::Object(Map::new());
    let spec = service.get("spec").unwrap_or(&empty);
    let service_type = text(spec, "type");
    let all = Path::At("spec.ports");
    if service_type == "ClusterIP" {
        for (i, port) in list(spec, "ports").iter().enumerate() {
            if port
                .get("nodePort")
                .and_then(Value::as_i64)
                .is_some_and(|n| n != 0)
            {
                let at = Path::Item(&all, i);
                errors.push(error(
                    &Path::Field(&at, "nodePort"),
                    FieldErrorReason::Forbidden,
                    "Forbidden: may not be used when `type` is 'ClusterIP'".into(),
                ));
            }
        }
    }
    if service_type == "ExternalName" {
        for field in ["clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            let set = spec.get(field).is_some_and(|v| {
                !(v.is_null() || v.as_str() == Some("") || v.as_array().is_some_and(Vec::is_empty))
            });
            if set {
                errors.push(error(
                    &Path::At(&format!("spec.{field}")),
                    FieldErrorReason::Forbidden,
                    "Forbidden: may not be set for ExternalName services".into(),
                ));
            }
        }
        let name = text(spec, "externalName");
        let name = name.strip_suffix('.').unwrap_or(name);
        let field = Path::At("spec.externalName");
        if name.is_empty() {
            errors.push(required(&field));
        }
        if !name.is_empty() {
            dns_subdomain(name, &field, errors);
        }
    }
    let policy = text(spec, "externalTrafficPolicy");
    let external = spec
        .as_object()
        .is_some_and(crate::defaults::externally_accessible);
    if !policy.is_empty() && !external {
        errors.push(invalid(
            &Path::At("spec.externalTrafficPolicy"),
            &Value::from(policy),
            "may only be set for externally-accessible services",
        ));
    }
    if service_type != "LoadBalancer"
        && spec
            .get("allocateLoadBalancerNodePorts")
            .is_some_and(|v| !v.is_null())
    {
        errors.push(error(
            &Path::At("spec.allocateLoadBalancerNodePorts"),
            FieldErrorReason::Forbidden,
            "Forbidden: may only be used when `type` is 'LoadBalancer'".into(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::messages;
    use super::super::validate;
    use serde_json::{Value, json};

    fn service_errors(spec: Value) -> Vec<String> {
        messages(&validate("", "services", &json!({"spec": spec})))
    }

    #[test]
    fn allocated_services_pass() {
        let spec = json!({"type": "LoadBalancer", "ports": [{"port": 80, "nodePort": 30080}],
            "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack", "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
            "externalIPs": ["192.0.2.10"], "loadBalancerSourceRanges": [" 10.0.0.0/8 "],
            "externalTrafficPolicy": "Cluster", "internalTrafficPolicy": "Cluster",
            "trafficDistribution": "PreferClose"});
        assert_eq!(service_errors(spec), Vec::<String>::new());
    }

    #[test]
    fn services_kube_refuses_are_refused_with_its_messages() {
        let spec = json!({"type": "ClusterIP", "ports": [{"port": 80}],
            "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.11", "10.96.0.12"],
            "ipFamilies": ["IPv4", "IPv4"], "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 0}},
            "externalIPs": ["127.0.0.1", "0.0.0.0"], "loadBalancerSourceRanges": ["10.0.0.0/33"],
            "internalTrafficPolicy": "Node"});
        assert_eq!(
            service_errors(spec),
            [
                "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less than 86400",
                "spec.clusterIPs: Invalid value: []string{\"10.96.0.11\", \"10.96.0.12\"}: first value must match `clusterIP`",
                "spec.ipFamilies[1]: Duplicate value: \"IPv4\"",
                "spec.clusterIPs: Invalid value: []string{\"10.96.0.11\", \"10.96.0.12\"}: may specify no more than one IP for each IP family",
                "spec.externalIPs[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
                "spec.externalIPs[1]: Invalid value: \"0.0.0.0\": may not be unspecified (0.0.0.0)",
                "spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'",
                "spec.LoadBalancerSourceRanges[0]: Invalid value: \"10.0.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                "spec.internalTrafficPolicy: Unsupported value: \"Node\": supported values: \"Cluster\", \"Local\"",
            ]
        );
    }
}
