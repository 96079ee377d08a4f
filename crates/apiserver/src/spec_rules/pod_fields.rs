//! The pod-level fields of kube's `ValidatePodSpec` that have no module of their own: host
//! ports that collide, a host-network pod's ports, the DNS config, readiness and
//! scheduling gates, the names a pod refers to (service account, node, priority class,
//! runtime class), its hostname and subdomain, its deadline, host aliases, preemption
//! policy and OS.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{
    dns_label, dns_subdomain, duplicate, error, go_strings_invalid, invalid, list, not_supported,
    parse_ip, qualified_name, required, text,
};
use crate::schema::{FieldError, FieldErrorReason, Path};

const IP_MSG: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

/// kube's `checkHostPortConflicts`: no two ports of the containers (of one init container,
/// as they run one at a time) claim the same protocol, host IP and host port.
pub(super) fn host_port_conflicts(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let containers = Path::Field(at, "containers");
    let mut claimed = BTreeSet::new();
    for (i, container) in list(spec, "containers").iter().enumerate() {
        container_host_ports(container, &Path::Item(&containers, i), &mut claimed, errors);
    }
    let inits = Path::Field(at, "initContainers");
    for (i, container) in list(spec, "initContainers").iter().enumerate() {
        let mut claimed = BTreeSet::new();
        container_host_ports(container, &Path::Item(&inits, i), &mut claimed, errors);
    }
}

fn container_host_ports(
    container: &Value,
    at: &Path,
    claimed: &mut BTreeSet<String>,
    errors: &mut Vec<FieldError>,
) {
    let ports = Path::Field(at, "ports");
    for (i, port) in list(container, "ports").iter().enumerate() {
        let host_port = port.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
        if host_port == 0 {
            continue;
        }
        let key = format!(
            "{}/{}/{host_port}",
            text(port, "protocol"),
            text(port, "hostIP")
        );
        if !claimed.insert(key.clone()) {
            errors.push(duplicate(
                &Path::Field(&Path::Item(&ports, i), "hostPort"),
                &key,
            ));
        }
    }
}

/// kube's `validatePodHostNetworkDeps`: on the host's network a container port is its host
/// port (a template may leave the host port out; the pod gets it by default).
pub(super) fn host_network_ports(
    spec: &Value,
    at: &Path,
    in_pod: bool,
    errors: &mut Vec<FieldError>,
) {
    if spec.get("hostNetwork") != Some(&Value::Bool(true)) {
        return;
    }
    let containers = Path::Field(at, "containers");
    for (i, container) in list(spec, "containers").iter().enumerate() {
        let container_at = Path::Item(&containers, i);
        let ports = Path::Field(&container_at, "ports");
        for (j, port) in list(container, "ports").iter().enumerate() {
            let number = |field: &str| port.get(field).and_then(Value::as_i64).unwrap_or(0);
            let (host, container_port) = (number("hostPort"), number("containerPort"));
            if (in_pod || host != 0) && host != container_port {
                errors.push(invalid(
                    &Path::Field(&Path::Item(&ports, j), "hostPort"),
                    &host.into(),
                    "must match `containerPort` when `hostNetwork` is true",
                ));
            }
        }
    }
}

/// kube's `validatePodDNSConfig`: `dnsPolicy: None` needs name servers; at most 3 of them,
/// each an IP; at most 32 search domains in 2048 characters, each a DNS subdomain; named
/// options.
pub(super) fn dns_config(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let at = Path::Field(at, "dnsConfig");
    let config = spec.get("dnsConfig").filter(|c| c.is_object());
    let servers: Vec<&str> = config
        .map(|c| list(c, "nameservers"))
        .unwrap_or_default()
        .iter()
        .map(|s| s.as_str().unwrap_or_default())
        .collect();
    let servers_at = Path::Field(&at, "nameservers");
    if text(spec, "dnsPolicy") == "None" {
        if config.is_none() {
            errors.push(error(
                &at,
                FieldErrorReason::Required,
                "Required value: must provide `dnsConfig` when `dnsPolicy` is None".into(),
            ));
            return;
        }
        if servers.is_empty() {
            errors.push(error(
                &servers_at,
                FieldErrorReason::Required,
                "Required value: must provide at least one DNS nameserver when `dnsPolicy` is None"
                    .into(),
            ));
            return;
        }
    }
    let Some(config) = config else {
        return;
    };
    if servers.len() > 3 {
        errors.push(go_strings_invalid(
            &servers_at,
            &servers,
            "must not have more than 3 nameservers",
        ));
    }
    for (i, server) in servers.iter().enumerate() {
        if parse_ip(server).is_none() {
            errors.push(invalid(
                &Path::Item(&servers_at, i),
                &Value::from(*server),
                IP_MSG,
            ));
        }
    }
    let searches: Vec<&str> = list(config, "searches")
        .iter()
        .map(|s| s.as_str().unwrap_or_default())
        .collect();
    let searches_at = Path::Field(&at, "searches");
    if searches.len() > 32 {
        errors.push(go_strings_invalid(
            &searches_at,
            &searches,
            "must not have more than 32 search paths",
        ));
    }
    if searches.join(" ").len() > 2048 {
        errors.push(go_strings_invalid(
            &searches_at,
            &searches,
            "must not have more than 2048 characters (including spaces) in the search list",
        ));
    }
    for (i, search) in searches.iter().enumerate() {
        let search = search.strip_suffix('.').unwrap_or(search);
        dns_subdomain(search, &Path::Item(&searches_at, i), errors);
    }
    let options = Path::Field(&at, "options");
    for (i, option) in list(config, "options").iter().enumerate() {
        if text(option, "name").is_empty() {
            errors.push(error(
                &Path::Item(&options, i),
                FieldErrorReason::Required,
                "Required value: must not be empty".into(),
            ));
        }
    }
}

/// Readiness gates name qualified condition types; scheduling gates are qualified names,
/// each once.
pub(super) fn gates(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let readiness = Path::Field(at, "readinessGates");
    for (i, gate) in list(spec, "readinessGates").iter().enumerate() {
        let condition = text(gate, "conditionType");
        qualified_name(
            condition,
            &Path::Field(&Path::Item(&readiness, i), "conditionType"),
            errors,
        );
    }
    let scheduling = Path::Field(at, "schedulingGates");
    let mut seen = BTreeSet::new();
    for (i, gate) in list(spec, "schedulingGates").iter().enumerate() {
        let name = text(gate, "name");
        let item = Path::Item(&scheduling, i);
        qualified_name(name, &item, errors);
        if !seen.insert(name) {
            errors.push(duplicate(&item, name));
        }
    }
}

/// What a pod names and how long it may run: its service account and node (DNS
/// subdomains), its deadline (1 to 2^31-1 seconds), its hostname and subdomain (DNS
/// labels).
pub(super) fn names_and_deadline(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    for field in ["serviceAccountName", "nodeName"] {
        subdomain(spec, field, at, errors);
    }
    if let Some(deadline) = spec.get("activeDeadlineSeconds").filter(|d| !d.is_null())
        && !deadline
            .as_i64()
            .is_some_and(|d| (1..=i64::from(i32::MAX)).contains(&d))
    {
        errors.push(invalid(
            &Path::Field(at, "activeDeadlineSeconds"),
            deadline,
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    for field in ["hostname", "subdomain"] {
        let name = text(spec, field);
        if !name.is_empty() {
            dns_label(name, &Path::Field(at, field), errors);
        }
    }
}

/// What `ValidatePodSpec` checks after the tolerations: host aliases (an IP, subdomain
/// host names), the priority and runtime class names, the preemption policy and the OS.
pub(super) fn aliases_classes_and_os(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let aliases = Path::Field(at, "hostAliases");
    for (i, alias) in list(spec, "hostAliases").iter().enumerate() {
        let item = Path::Item(&aliases, i);
        let ip = text(alias, "ip");
        if parse_ip(ip).is_none() {
            errors.push(invalid(&Path::Field(&item, "ip"), &Value::from(ip), IP_MSG));
        }
        let names = Path::Field(&item, "hostnames");
        for (j, name) in list(alias, "hostnames").iter().enumerate() {
            dns_subdomain(
                name.as_str().unwrap_or_default(),
                &Path::Item(&names, j),
                errors,
            );
        }
    }
    subdomain(spec, "priorityClassName", at, errors);
    if let Some(class) = spec.get("runtimeClassName").and_then(Value::as_str) {
        dns_subdomain(class, &Path::Field(at, "runtimeClassName"), errors);
    }
    if let Some(policy) = spec.get("preemptionPolicy").filter(|p| !p.is_null()) {
        let field = Path::Field(at, "preemptionPolicy");
        match policy.as_str() {
            Some("PreemptLowerPriority" | "Never") => {}
            Some("") => errors.push(required(&field)),
            _ => errors.push(not_supported(
                &field,
                policy,
                &["PreemptLowerPriority", "Never"],
            )),
        }
    }
    os(spec, at, errors);
}

/// kube's `validateOS`, and `validateLinux`: a Linux pod carries no Windows options.
fn os(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let Some(os) = spec.get("os").filter(|o| o.is_object()) else {
        return;
    };
    let os_at = Path::Field(at, "os");
    match text(os, "name") {
        "" => errors.push(error(
            &Path::Field(&os_at, "name"),
            FieldErrorReason::Required,
            "Required value: cannot be empty".into(),
        )),
        "linux" => {
            let forbidden = |at: &Path| {
                error(
                    &Path::Field(&Path::Field(at, "securityContext"), "windowsOptions"),
                    FieldErrorReason::Forbidden,
                    "Forbidden: windows options cannot be set for a linux pod".into(),
                )
            };
            if spec
                .pointer("/securityContext/windowsOptions")
                .is_some_and(|w| !w.is_null())
            {
                errors.push(forbidden(at));
            }
            for kind in ["containers", "initContainers", "ephemeralContainers"] {
                let all = Path::Field(at, kind);
                for (i, container) in list(spec, kind).iter().enumerate() {
                    let options = container.pointer("/securityContext/windowsOptions");
                    if options.is_some_and(|w| !w.is_null()) {
                        errors.push(forbidden(&Path::Item(&all, i)));
                    }
                }
            }
        }
        "windows" => {}
        other => errors.push(not_supported(
            &os_at,
            &Value::from(other),
            &["linux", "windows"],
        )),
    }
}

/// A name at `field` of the spec, when set, that must be a DNS subdomain.
fn subdomain(spec: &Value, field: &str, at: &Path, errors: &mut Vec<FieldError>) {
    let name = text(spec, field);
    if !name.is_empty() {
        dns_subdomain(name, &Path::Field(at, field), errors);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::pod_spec_errors as pod_errors;
    use serde_json::json;

    #[test]
    fn pod_level_fields_operators_write_pass() {
        let extra = json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["10.96.0.10"],
                "searches": ["svc.cluster.local."], "options": [{"name": "ndots", "value": "2"}]},
            "readinessGates": [{"conditionType": "example.com/ready"}],
            "schedulingGates": [{"name": "example.com/quota"}],
            "serviceAccountName": "app", "nodeName": "steady-node", "activeDeadlineSeconds": 600,
            "hostname": "db-0", "subdomain": "db", "priorityClassName": "high",
            "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["db.local"]}],
            "preemptionPolicy": "Never", "os": {"name": "linux"}});
        assert_eq!(pod_errors(extra), Vec::<String>::new());
    }

    #[test]
    fn pod_level_fields_kube_refuses_are_refused_with_its_messages() {
        let extra = json!({"dnsPolicy": "None",
            "dnsConfig": {"nameservers": ["1.1.1.1", "8.8.8.8", "9.9.9.9", "dns"], "options": [{}]},
            "schedulingGates": [{"name": "gate"}, {"name": "gate"}],
            "nodeName": "Node_1", "activeDeadlineSeconds": 0, "hostname": "db.0",
            "hostAliases": [{"ip": "localhost"}], "preemptionPolicy": "Always", "os": {"name": "mac"}});
        assert_eq!(
            pod_errors(extra),
            [
                "spec.dnsConfig.nameservers: Invalid value: []string{\"1.1.1.1\", \"8.8.8.8\", \"9.9.9.9\", \"dns\"}: must not have more than 3 nameservers",
                "spec.dnsConfig.nameservers[3]: Invalid value: \"dns\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "spec.dnsConfig.options[0]: Required value: must not be empty",
                "spec.schedulingGates[1]: Duplicate value: \"gate\"",
                "spec.nodeName: Invalid value: \"Node_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
                "spec.hostname: Invalid value: \"db.0\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.hostAliases[0].ip: Invalid value: \"localhost\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "spec.preemptionPolicy: Unsupported value: \"Always\": supported values: \"PreemptLowerPriority\", \"Never\"",
                "spec.os: Unsupported value: \"mac\": supported values: \"linux\", \"windows\"",
            ]
        );
        assert_eq!(
            pod_errors(json!({"dnsPolicy": "None"})),
            ["spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"]
        );
    }

    #[test]
    fn host_ports_are_claimed_once_and_match_on_the_host_network() {
        let containers = json!([
            {"name": "a", "image": "app:1", "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]},
            {"name": "b", "image": "app:1", "ports": [{"containerPort": 81, "hostPort": 8080, "protocol": "TCP"}]}]);
        assert_eq!(
            pod_errors(json!({"containers": containers})),
            ["spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//8080\""]
        );
        let on_host = json!({"hostNetwork": true, "containers": [{"name": "a", "image": "app:1",
            "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]}]});
        assert_eq!(
            pod_errors(on_host),
            [
                "spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true"
            ]
        );
    }
}
