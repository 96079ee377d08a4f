//! What a built-in object must hold on every write, for the fields operators generate
//! most, as kube-apiserver's `ValidatePod`, `ValidatePodTemplateSpec`, `ValidateService`
//! and the workloads' spec validation check them: a pod spec (a pod's, or the template of
//! a Deployment, StatefulSet, Job, …) needs containers, each with a valid unique name, an
//! image, valid ports and env var names, and volume mounts that name a volume; a Service
//! needs valid, named ports; a workload's replicas are not negative. An operator that
//! builds an object kube refuses must be refused here too, with kube's messages (one
//! cause per problem).
//!
//! A container's probes and hooks (`probes.rs`), its environment (`env.rs`), a pod spec's
//! volume sources (`volumes.rs`), its placement (`scheduling.rs`: DNS policy, node
//! selector, tolerations, topology spread; `affinity.rs`) and security contexts
//! (`security.rs`) have modules of their own. RBAC objects are
//! checked as kube checks them all (`rbac.rs`), ConfigMaps and Secrets too (`config.rs`),
//! a CronJob's schedule and policies (`cron_jobs.rs`, which also needs the stored
//! object), and a Job's pod failure and success policies (`job_policies.rs`).
//!
//! Only JSON (the defaulted object): knows nothing of storage or HTTP.

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde_json::{Map, Value};
use steady_quota::Quantity;

mod affinity;
mod claims;
mod config;
pub(crate) mod cron_jobs;
mod env;
mod job_policies;
mod pod_fields;
mod probes;
mod rbac;
mod scheduling;
mod security;
mod services;
mod volumes;
mod workloads;

use crate::defaults::pod_template_of;
use crate::rbac::RBAC_GROUP;
use crate::schema::{FieldError, FieldErrorReason, Path};
use crate::validation::dns1123_label_problems;

/// The errors of a built-in `group`/`plural` object.
pub(crate) fn validate(group: &str, plural: &str, obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(template) = pod_template_of(group, plural) {
        let at = format!(
            "{}.spec",
            template.trim_start_matches('/').replace('/', ".")
        );
        // A controller keeps its pods running; only Jobs run them to completion.
        let keeps_running = group == "apps" || plural == "replicationcontrollers";
        let restart = if keeps_running { ALWAYS } else { ANY_RESTART };
        let spec = obj.pointer(&format!("{template}/spec"));
        let holder = Holder {
            restart,
            in_pod: false,
        };
        // kube leaves a StatefulSet's pod spec to pod creation (`workloads.rs`)
        if plural != "statefulsets" {
            pod_spec(spec, &Path::At(&at), holder, &mut errors);
        }
        workloads::spec(group, plural, obj, &mut errors);
    }
    match (group, plural) {
        ("", "pods") => pod_spec(obj.get("spec"), &Path::At("spec"), IN_POD, &mut errors),
        ("", "services") => {
            services::service(obj, &mut errors);
        }
        ("", "resourcequotas") => quota_spec(obj, &mut errors),
        ("", "persistentvolumeclaims") => {
            let spec = obj.get("spec").unwrap_or(&Value::Null);
            claims::claim_spec(spec, &Path::At("spec"), &mut errors);
        }
        ("policy", "poddisruptionbudgets") => workloads::spec(group, plural, obj, &mut errors),
        ("", "configmaps") => config::config_map(obj, &mut errors),
        ("", "secrets") => config::secret(obj, &mut errors),
        (RBAC_GROUP, "roles") => rbac::role(obj, true, &mut errors),
        (RBAC_GROUP, "clusterroles") => rbac::role(obj, false, &mut errors),
        (RBAC_GROUP, "rolebindings") => rbac::binding(obj, false, &mut errors),
        (RBAC_GROUP, "clusterrolebindings") => rbac::binding(obj, true, &mut errors),
        _ => {}
    }
    errors
}

/// Whether an update changed what [`validate`] checks: a kind's `spec`, or the top-level
/// fields RBAC objects, ConfigMaps and Secrets keep instead of one. An object whose checked
/// fields an update leaves alone is not checked again, so one stored before a rule existed
/// stays writable.
pub(crate) fn checked_fields_changed(group: &str, plural: &str, old: &Value, new: &Value) -> bool {
    let fields: &[&str] = match (group, plural) {
        (RBAC_GROUP, _) => &["/rules", "/aggregationRule", "/roleRef", "/subjects"],
        ("", "configmaps") => &["/data", "/binaryData"],
        ("", "secrets") => &["/data", "/type", "/metadata/annotations"],
        _ => &["/spec"],
    };
    fields
        .iter()
        .any(|field| old.pointer(field) != new.pointer(field))
}

fn error(field: &Path, reason: FieldErrorReason, message: String) -> FieldError {
    FieldError {
        field: field.render(),
        reason,
        message,
    }
}

fn required(field: &Path) -> FieldError {
    error(field, FieldErrorReason::Required, "Required value".into())
}

/// `field.Required` with kube's detail.
fn required_because(field: &Path, why: &str) -> FieldError {
    error(
        field,
        FieldErrorReason::Required,
        format!("Required value: {why}"),
    )
}

/// The value at `field`, when it is set (not absent, not null).
fn present<'v>(value: &'v Value, field: &str) -> Option<&'v Value> {
    value.get(field).filter(|v| !v.is_null())
}

/// A qualified name (apimachinery's `ValidateLabelName` and `ValidateQualifiedName`): a
/// label key, a condition type, a gate.
fn qualified_name(name: &str, at: &Path, errors: &mut Vec<FieldError>) {
    for problem in crate::validation::qualified_name_problems(name) {
        errors.push(invalid(at, &Value::from(name), &problem));
    }
}

/// An IP as Go's `netutils.ParseIPSloppy` reads one (IPv4 parts may have leading zeros).
fn parse_ip(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    let parts: Vec<u8> = text
        .split('.')
        .map(|part| {
            let digits =
                !part.is_empty() && part.len() <= 3 && part.bytes().all(|b| b.is_ascii_digit());
            digits.then(|| part.parse::<u8>().ok()).flatten()
        })
        .collect::<Option<Vec<u8>>>()?;
    let octets: [u8; 4] = parts.try_into().ok()?;
    Some(IpAddr::from(octets))
}

/// `field.Invalid` of a list of strings, which kube prints as Go's `[]string{...}`.
fn go_strings_invalid(at: &Path, values: &[&str], why: &str) -> FieldError {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    error(
        at,
        FieldErrorReason::Invalid,
        format!("Invalid value: []string{{{}}}: {why}", quoted.join(", ")),
    )
}

/// A DNS subdomain (kube's `IsDNS1123Subdomain`: object, class and host names).
fn dns_subdomain(name: &str, at: &Path, errors: &mut Vec<FieldError>) {
    for problem in crate::validation::dns1123_subdomain_problems(name) {
        errors.push(invalid(at, &Value::from(name), &problem));
    }
}

/// A DNS label (kube's `IsDNS1123Label`: container, port and namespace names, hostnames).
fn dns_label(name: &str, at: &Path, errors: &mut Vec<FieldError>) {
    for problem in dns1123_label_problems(name) {
        errors.push(invalid(at, &Value::from(name), problem));
    }
}

/// A Go pointer as `%#v` prints it inside a struct kube shows whole: nil, or an address
/// (made up here; kube's is its own).
fn go_pointer(kind: &str, value: Option<&Value>) -> String {
    let address = if value.is_some() {
        "0xc000000000"
    } else {
        "nil"
    };
    format!("({kind})({address})")
}

/// `field.Invalid`: kube prints the value, strings quoted.
fn invalid(field: &Path, value: &Value, why: &str) -> FieldError {
    error(
        field,
        FieldErrorReason::Invalid,
        format!("Invalid value: {value}: {why}"),
    )
}

fn duplicate(field: &Path, value: &str) -> FieldError {
    error(
        field,
        FieldErrorReason::Duplicate,
        format!("Duplicate value: {value:?}"),
    )
}

fn text<'v>(obj: &'v Value, field: &str) -> &'v str {
    obj.get(field).and_then(Value::as_str).unwrap_or_default()
}

fn list<'v>(obj: &'v Value, field: &str) -> &'v [Value] {
    obj.get(field)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The restart policies a pod, a Job's template, and a controller's template may have.
const ANY_RESTART: &[&str] = &["Always", "OnFailure", "Never"];
const ALWAYS: &[&str] = &["Always"];

/// Where a pod spec sits: in a pod, or in a workload's template whose controller allows
/// `restart`.
#[derive(Clone, Copy)]
struct Holder {
    restart: &'static [&'static str],
    in_pod: bool,
}

const IN_POD: Holder = Holder {
    restart: ANY_RESTART,
    in_pod: true,
};

/// kube's `ValidatePodSpec` of the pod spec at `at` (`spec`, `spec.template.spec`, …), in
/// its order: volumes, containers, then the pod-level fields.
fn pod_spec(spec: Option<&Value>, at: &Path, holder: Holder, errors: &mut Vec<FieldError>) {
    let empty = Value::Object(Map::new());
    let spec = spec.unwrap_or(&empty);
    let volumes = volumes::volumes(spec, at, errors);
    containers(spec, at, &volumes, errors);
    pod_fields::host_port_conflicts(spec, at, errors);
    pod_fields::host_network_ports(spec, at, holder.in_pod, errors);
    if let Some(policy) = spec.get("restartPolicy").filter(|p| !p.is_null())
        && !policy.as_str().is_some_and(|p| holder.restart.contains(&p))
    {
        errors.push(not_supported(
            &Path::Field(at, "restartPolicy"),
            policy,
            holder.restart,
        ));
    }
    scheduling::dns_and_node_selector(spec, at, errors);
    security::pod_security_context(spec, at, errors);
    affinity::affinity(spec, at, errors);
    pod_fields::dns_config(spec, at, errors);
    pod_fields::gates(spec, at, errors);
    scheduling::topology_spread(spec, at, errors);
    pod_fields::names_and_deadline(spec, at, errors);
    scheduling::tolerations(spec, at, errors);
    pod_fields::aliases_classes_and_os(spec, at, errors);
}

/// Each container of the pod spec: its name, image, ports, environment, mounts, policies,
/// resources, security context, probes and hooks.
fn containers(spec: &Value, at: &Path, volumes: &BTreeSet<String>, errors: &mut Vec<FieldError>) {
    if list(spec, "containers").is_empty() {
        errors.push(required(&Path::Field(at, "containers")));
    }
    let mut names = BTreeSet::new();
    let mut port_names = BTreeSet::new();
    let grace_period = spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64);
    let host_users = security::host_users(spec);
    // kube checks the containers first, then the init containers against them
    for kind in ["containers", "initContainers"] {
        let containers = Path::Field(at, kind);
        for (i, container) in list(spec, kind).iter().enumerate() {
            let at = Path::Item(&containers, i);
            container_name(container, &at, &mut names, errors);
            if text(container, "image").is_empty() {
                errors.push(required(&Path::Field(&at, "image")));
            }
            container_ports(container, &at, &mut port_names, errors);
            env::env(container, &at, errors);
            volumes::mounts(container, &at, volumes, errors);
            pull_and_termination_policies(container, &at, errors);
            resources(container, &at, errors);
            security::container_security_context(container, host_users, &at, errors);
            let init = kind == "initContainers";
            probes::probes_and_hooks(container, &at, init, grace_period, errors);
        }
    }
}

/// kube's `ValidateResourceRequirements`: each resource a container's, no quantity
/// negative, whole numbers for extended resources, requests at most their limits
/// (extended resources cannot be overcommitted: a limit, and a request equal to it).
fn resources(container: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let resources = Path::Field(at, "resources");
    let limits_at = Path::Field(&resources, "limits");
    let requests_at = Path::Field(&resources, "requests");
    let quantities = |which: &str| -> Vec<(String, Quantity)> {
        let listed = container.get("resources").and_then(|r| r.get(which));
        listed
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(name, q)| Some((name.clone(), Quantity::parse(q.as_str()?).ok()?)))
            .collect()
    };
    let limits = quantities("limits");
    for (name, limit) in &limits {
        resource_quantity(name, limit, &limits_at, errors);
    }
    for (name, request) in quantities("requests") {
        resource_quantity(&name, &request, &requests_at, errors);
        let overcommit_allowed = is_native_resource(&name) && !name.starts_with("hugepages-");
        match limits.iter().find(|(limited, _)| *limited == name) {
            Some((_, limit)) if request != *limit && !overcommit_allowed => errors.push(invalid(
                &requests_at,
                &Value::from(request.to_string()),
                &format!("must be equal to {name} limit of {limit}"),
            )),
            Some((_, limit)) if request > *limit => errors.push(invalid(
                &requests_at,
                &Value::from(request.to_string()),
                &format!("must be less than or equal to {name} limit of {limit}"),
            )),
            None if !overcommit_allowed => errors.push(error(
                &limits_at,
                FieldErrorReason::Required,
                "Required value: Limit must be set for non overcommitable resources".into(),
            )),
            _ => {}
        }
    }
}

/// One resource of a container's `limits` or `requests` (at `list`), keyed by its name.
fn resource_quantity(name: &str, quantity: &Quantity, list: &Path, errors: &mut Vec<FieldError>) {
    let rendered = format!("{}[{name}]", list.render());
    let field = Path::At(&rendered);
    let standard =
        matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-");
    if !standard && is_native_resource(name) {
        errors.push(invalid(
            &field,
            &Value::from(name),
            "must be a standard resource for containers",
        ));
    }
    if quantity.is_negative() {
        errors.push(invalid(
            &field,
            &Value::from(quantity.to_string()),
            "must be greater than or equal to 0",
        ));
    }
    if !is_native_resource(name) && !quantity.is_whole() {
        // kube prints a quantity here unquoted (a Stringer, not a string)
        errors.push(error(
            &field,
            FieldErrorReason::Invalid,
            format!("Invalid value: {quantity}: must be an integer"),
        ));
    }
}

/// kube's `standardQuotaResources`: the names a quota may limit without a domain.
const STANDARD_QUOTA_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];
/// Quota resources counted in whole objects (kube's `integerResources`).
const INTEGER_QUOTA_RESOURCES: &[&str] = &[
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];
const QUOTA_SCOPES: &[&str] = &[
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
];

/// kube's `ValidateResourceQuotaSpec`: each hard limit a quota resource, not negative,
/// whole where it counts objects; the scopes known, fit for the resources (a scope
/// selects pods, so it limits only pod counts and compute), and not contradictory.
fn quota_spec(quota: &Value, errors: &mut Vec<FieldError>) {
    let hard_at = Path::At("spec.hard");
    let hard = quota.pointer("/spec/hard").and_then(Value::as_object);
    let names: Vec<&str> = hard
        .into_iter()
        .flatten()
        .map(|(n, _)| n.as_str())
        .collect();
    for (name, quantity) in hard.into_iter().flatten() {
        let rendered = format!("{}[{name}]", hard_at.render());
        let field = Path::At(&rendered);
        let standard = STANDARD_QUOTA_RESOURCES.contains(&name.as_str())
            || name.starts_with("hugepages-")
            || name.starts_with("requests.hugepages-");
        if !name.contains('/') && !standard {
            errors.push(invalid(
                &field,
                &Value::from(name.as_str()),
                "must be a standard resource for quota",
            ));
        }
        let Some(quantity) = quantity.as_str().and_then(|q| Quantity::parse(q).ok()) else {
            continue;
        };
        if quantity.is_negative() {
            let shown = Value::from(quantity.to_string());
            errors.push(invalid(
                &field,
                &shown,
                "must be greater than or equal to 0",
            ));
        }
        let integer = INTEGER_QUOTA_RESOURCES.contains(&name.as_str())
            || !is_native_resource(name) && !name.starts_with("count/");
        if integer && !quantity.is_whole() {
            errors.push(error(
                &field,
                FieldErrorReason::Invalid,
                format!("Invalid value: {quantity}: must be an integer"),
            ));
        }
    }
    let scopes: Vec<&str> = list(&quota["spec"], "scopes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if scopes.is_empty() {
        return;
    }
    let scopes_at = Path::At("spec.scopes");
    // kube prints the scopes as a Go slice literal
    let quoted: Vec<String> = scopes.iter().map(|s| format!("{s:?}")).collect();
    let shown = format!("[]core.ResourceQuotaScope{{{}}}", quoted.join(", "));
    let scope_error = |why: &str| {
        error(
            &scopes_at,
            FieldErrorReason::Invalid,
            format!("Invalid value: {shown}: {why}"),
        )
    };
    for scope in &scopes {
        if !QUOTA_SCOPES.contains(scope) {
            errors.push(scope_error("unsupported scope"));
        }
        let pod_compute = [
            "cpu",
            "memory",
            "limits.cpu",
            "limits.memory",
            "requests.cpu",
            "requests.memory",
        ];
        let fits = |resource: &str| match *scope {
            "BestEffort" => resource == "pods",
            "Terminating"
            | "NotTerminating"
            | "NotBestEffort"
            | "PriorityClass"
            | "CrossNamespacePodAffinity" => resource == "pods" || pod_compute.contains(&resource),
            _ => true,
        };
        for name in &names {
            if STANDARD_QUOTA_RESOURCES.contains(name) && !fits(name) {
                errors.push(scope_error("unsupported scope applied to resource"));
            }
        }
    }
    for [a, b] in [
        ["BestEffort", "NotBestEffort"],
        ["Terminating", "NotTerminating"],
    ] {
        if scopes.contains(&a) && scopes.contains(&b) {
            errors.push(scope_error("conflicting scopes"));
        }
    }
}

/// kube's `IsNativeResource`: no domain, or kubernetes.io's.
fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

fn not_supported(field: &Path, value: &Value, supported: &[&str]) -> FieldError {
    let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    error(
        field,
        FieldErrorReason::NotSupported,
        format!(
            "Unsupported value: {value}: supported values: {}",
            supported.join(", ")
        ),
    )
}

/// A DNS-1123 label, unique among `seen`: container and volume names.
fn unique_label(
    name: &str,
    field: &Path,
    seen: &mut BTreeSet<String>,
    errors: &mut Vec<FieldError>,
) {
    if name.is_empty() {
        errors.push(required(field));
        return;
    }
    dns_label(name, field, errors);
    if !seen.insert(name.to_owned()) {
        errors.push(duplicate(field, name));
    }
}

fn container_name(
    container: &Value,
    at: &Path,
    seen: &mut BTreeSet<String>,
    errors: &mut Vec<FieldError>,
) {
    let field = Path::Field(at, "name");
    unique_label(text(container, "name"), &field, seen, errors);
}

/// kube's `validatePullPolicy` and the termination message policy's check (both are
/// defaulted, so only a value kube does not know is refused).
fn pull_and_termination_policies(container: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    if let Some(policy) = container.get("imagePullPolicy").filter(|p| !p.is_null())
        && !matches!(policy.as_str(), Some("Always" | "IfNotPresent" | "Never"))
    {
        errors.push(not_supported(
            &Path::Field(at, "imagePullPolicy"),
            policy,
            &["Always", "IfNotPresent", "Never"],
        ));
    }
    if let Some(policy) = container
        .get("terminationMessagePolicy")
        .filter(|p| !p.is_null())
        && !matches!(policy.as_str(), Some("File" | "FallbackToLogsOnError"))
    {
        errors.push(invalid(
            &Path::Field(at, "terminationMessagePolicy"),
            policy,
            "must be 'File' or 'FallbackToLogsOnError'",
        ));
    }
}

const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

/// A port number in 1..=65535, or a Required error when it is missing or zero.
fn port_number(port: Option<&Value>, field: &Path, errors: &mut Vec<FieldError>) {
    match port.filter(|p| !p.is_null() && p.as_i64() != Some(0)) {
        None => errors.push(required(field)),
        Some(p) if !p.as_i64().is_some_and(|n| (1..=65535).contains(&n)) => {
            errors.push(invalid(field, p, PORT_RANGE));
        }
        Some(_) => {}
    }
}

fn protocol(port: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    if let Some(protocol) = port.get("protocol").filter(|p| !p.is_null())
        && !matches!(protocol.as_str(), Some("TCP" | "UDP" | "SCTP"))
    {
        errors.push(not_supported(
            &Path::Field(at, "protocol"),
            protocol,
            &["SCTP", "TCP", "UDP"],
        ));
    }
}

fn container_ports(
    container: &Value,
    at: &Path,
    seen: &mut BTreeSet<String>,
    errors: &mut Vec<FieldError>,
) {
    let ports = Path::Field(at, "ports");
    for (i, port) in list(container, "ports").iter().enumerate() {
        let at = Path::Item(&ports, i);
        let name = text(port, "name");
        if !name.is_empty() {
            let field = Path::Field(&at, "name");
            for problem in port_name_problems(name) {
                errors.push(invalid(&field, &Value::from(name), problem));
            }
            if !seen.insert(name.to_owned()) {
                errors.push(duplicate(&field, name));
            }
        }
        let number = Path::Field(&at, "containerPort");
        port_number(port.get("containerPort"), &number, errors);
        if let Some(host) = port
            .get("hostPort")
            .filter(|p| p.as_i64().is_some_and(|n| n != 0))
        {
            port_number(Some(host), &Path::Field(&at, "hostPort"), errors);
        }
        protocol(port, &at, errors);
    }
}

/// kube's `IsValidPortName` (an IANA service name): container port names, and a Service's
/// `targetPort` given by name.
fn port_name_problems(name: &str) -> Vec<&'static str> {
    let mut problems = Vec::new();
    if name.len() > 15 {
        problems.push("must be no more than 15 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        problems.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    } else if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        problems.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        problems.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        problems.push("must not begin or end with a hyphen");
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each error as kube prints it, `field: message` (shared by the sibling modules' tests).
    /// The errors of a pod whose spec is one valid container plus `extra` (shared by the
    /// sibling modules' tests).
    pub(super) fn pod_spec_errors(extra: Value) -> Vec<String> {
        let mut spec = json!({"containers": [{"name": "c", "image": "app:1"}]});
        spec.as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        messages(&validate("", "pods", &json!({"spec": spec})))
    }

    pub(super) fn messages(errors: &[FieldError]) -> Vec<String> {
        errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    #[test]
    fn a_valid_pod_and_deployment_pass() {
        let spec = json!({
            "containers": [{"name": "web", "image": "nginx",
                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                "env": [{"name": "MY_ENV.NAME", "value": "1"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "restartPolicy": "Always"
        });
        assert!(validate("", "pods", &json!({"spec": spec})).is_empty());
        let deployment = json!({"spec": {"replicas": 2, "template": {"spec": spec}}});
        assert!(validate("apps", "deployments", &deployment).is_empty());
    }

    #[test]
    fn a_pod_an_operator_got_wrong_is_refused_with_every_problem() {
        let pod = json!({"spec": {"containers": [
            {"name": "Web_Server", "image": "nginx",
             "ports": [{"containerPort": 80, "name": "this-port-name-is-too-long"},
                       {"containerPort": 70000, "protocol": "HTTP"}],
             "env": [{"name": "1BAD"}],
             "volumeMounts": [{"name": "missing", "mountPath": "/m"}]},
            {"name": "Web_Server"}
        ]}});
        let found = messages(&validate("", "pods", &pod));
        let expected = [
            "spec.containers[0].name: Invalid value: \"Web_Server\": a lowercase RFC 1123 label",
            "spec.containers[0].ports[0].name: Invalid value: \"this-port-name-is-too-long\": must be no more than 15 characters",
            "spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "spec.containers[0].ports[1].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            "spec.containers[0].env[0].name: Invalid value: \"1BAD\": a valid environment variable name",
            "spec.containers[0].volumeMounts[0].name: Not found: \"missing\"",
            "spec.containers[1].name: Duplicate value: \"Web_Server\"",
            "spec.containers[1].image: Required value",
        ];
        for line in expected {
            assert!(
                found.iter().any(|f| f.starts_with(line)),
                "{line}\nin {found:#?}"
            );
        }
        assert_eq!(
            messages(&validate("", "pods", &json!({"spec": {}}))),
            ["spec.containers: Required value"]
        );
    }

    #[test]
    fn an_init_container_named_as_a_container_is_the_duplicate() {
        let pod = json!({"spec": {"containers": [{"name": "app", "image": "app:1"}],
            "initContainers": [{"name": "app", "image": "migrate:1"}]}});
        assert_eq!(
            messages(&validate("", "pods", &pod)),
            ["spec.initContainers[0].name: Duplicate value: \"app\""]
        );
    }

    #[test]
    fn container_resources_are_checked_as_kube_checks_them() {
        let container = |resources: Value| json!({"spec": {"containers": [{"name": "c", "image": "nginx", "resources": resources}]}});
        let at = "spec.containers[0].resources";
        let cases = [
            (
                json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
                vec![format!(
                    "{at}.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"
                )],
            ),
            (
                json!({"limits": {"memory": "-1Mi"}}),
                vec![format!(
                    "{at}.limits[memory]: Invalid value: \"-1Mi\": must be greater than or equal to 0"
                )],
            ),
            (
                json!({"requests": {"example.com/gpu": "1"}}),
                vec![format!(
                    "{at}.limits: Required value: Limit must be set for non overcommitable resources"
                )],
            ),
            (
                json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}),
                vec![format!(
                    "{at}.requests: Invalid value: \"1\": must be equal to example.com/gpu limit of 2"
                )],
            ),
            (
                json!({"limits": {"example.com/gpu": "500m"}}),
                vec![format!(
                    "{at}.limits[example.com/gpu]: Invalid value: 500m: must be an integer"
                )],
            ),
            (
                json!({"limits": {"gpu": "1"}}),
                vec![format!(
                    "{at}.limits[gpu]: Invalid value: \"gpu\": must be a standard resource for containers"
                )],
            ),
            (
                json!({"requests": {"cpu": "500m", "hugepages-2Mi": "0"}, "limits": {"cpu": "1", "hugepages-2Mi": "0"}}),
                vec![],
            ),
        ];
        for (resources, expected) in cases {
            assert_eq!(
                messages(&validate("", "pods", &container(resources.clone()))),
                expected,
                "{resources}"
            );
        }
    }

    #[test]
    fn quota_specs_are_checked_as_kube_checks_them() {
        let quota = |spec: Value| json!({"spec": spec});
        let cases = [
            (json!({"hard": {"pods": "10", "requests.cpu": "4", "count/deployments.apps": "3"}}), vec![]),
            (
                json!({"hard": {"pods": "1.5", "cpu": "-1", "widgets": "1"}}),
                vec![
                    "spec.hard[cpu]: Invalid value: \"-1\": must be greater than or equal to 0".to_string(),
                    "spec.hard[pods]: Invalid value: 1500m: must be an integer".to_string(),
                    "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource for quota".to_string(),
                ],
            ),
            (
                json!({"hard": {"pods": "1", "services": "1"}, "scopes": ["BestEffort", "NotBestEffort"]}),
                vec![
                    "spec.scopes: Invalid value: []core.ResourceQuotaScope{\"BestEffort\", \"NotBestEffort\"}: unsupported scope applied to resource".to_string(),
                    "spec.scopes: Invalid value: []core.ResourceQuotaScope{\"BestEffort\", \"NotBestEffort\"}: unsupported scope applied to resource".to_string(),
                    "spec.scopes: Invalid value: []core.ResourceQuotaScope{\"BestEffort\", \"NotBestEffort\"}: conflicting scopes".to_string(),
                ],
            ),
        ];
        for (spec, expected) in cases {
            assert_eq!(
                messages(&validate("", "resourcequotas", &quota(spec.clone()))),
                expected,
                "{spec}"
            );
        }
    }

    #[test]
    fn templates_replicas_and_services() {
        let deployment = json!({"spec": {"replicas": -1,
            "template": {"spec": {"containers": [{"name": "x"}], "restartPolicy": "Never"}}}});
        assert_eq!(
            messages(&validate("apps", "deployments", &deployment)),
            [
                "spec.template.spec.containers[0].image: Required value",
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
        let cronjob = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}});
        assert_eq!(
            messages(&validate("batch", "cronjobs", &cronjob)),
            ["spec.jobTemplate.spec.template.spec.containers: Required value"]
        );
        let service = json!({"spec": {"ports": [
            {"port": 99999, "protocol": "TCP"}, {"port": 53, "targetPort": "DNS_port"}
        ]}});
        let found = messages(&validate("", "services", &service));
        assert_eq!(found[0], "spec.ports[0].name: Required value");
        assert_eq!(
            found[1],
            "spec.ports[0].port: Invalid value: 99999: must be between 1 and 65535, inclusive"
        );
        assert_eq!(found[2], "spec.ports[1].name: Required value");
        assert!(found[3].starts_with("spec.ports[1].targetPort: Invalid value: \"DNS_port\""));
        assert_eq!(
            messages(&validate("", "services", &json!({"spec": {}}))),
            ["spec.ports: Required value"]
        );
        let external = json!({"spec": {"type": "ExternalName", "externalName": "x.example"}});
        assert!(validate("", "services", &external).is_empty());
        let headless =
            json!({"spec": {"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"]}});
        assert!(validate("", "services", &headless).is_empty());
    }
}
