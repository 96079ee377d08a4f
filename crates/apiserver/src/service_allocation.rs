//! What kube-apiserver's Service registry allocates, keeps and drops by type on a create
//! or update (`storage/alloc.go`, `patchAllocatedValues`, `dropTypeDependentFields`),
//! after the defaults and before validation:
//!
//! - every type but `ExternalName` gets a cluster IP (a headless one keeps `None`), and
//!   `clusterIPs`, `ipFamilies` and `ipFamilyPolicy` for this single-stack IPv4 cluster
//!   (a headless Service without a selector is `RequireDualStack` over both families, as
//!   kube shows it);
//! - `NodePort` and `LoadBalancer` Services get a node port per port number (from
//!   30000–32767, unique across Services; one asked for is checked), and a `LoadBalancer`
//!   with `externalTrafficPolicy: Local` a health-check node port; a `LoadBalancer` with
//!   `allocateLoadBalancerNodePorts: false` only the ones asked for;
//! - an update that leaves out what was allocated keeps it (node ports by port name);
//! - a change of type drops what the new type does not have, where the update left it
//!   as stored (node ports when going back to `ClusterIP`, the cluster IP when becoming
//!   `ExternalName`).
//!
//! Deviation: node ports and cluster IPs in use are read from the store when a Service
//! asks for one, so two Services created at the same instant could draw the same port
//! (kube's allocator is a transaction of its own; one draw in 2,768 makes that rare), and
//! a drawn cluster IP is not checked against those in use (one in about a million).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde_json::{Map, Value, json};

use crate::ApiServer;
use crate::defaults::externally_accessible;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::registry::ResourceType;
use crate::schema::{FieldError, FieldErrorReason};

/// kube-apiserver's default `--service-node-port-range`.
const NODE_PORTS: std::ops::RangeInclusive<i64> = 30_000..=32_767;

/// kube-apiserver's default `--service-cluster-ip-range`, 10.96.0.0/12: its base address
/// and size.
const SERVICE_RANGE: (u32, u32) = (0x0A60_0000, 1 << 20);
const SERVICE_RANGE_TEXT: &str = "10.96.0.0/12";

impl ApiServer {
    /// Allocates and drops what kube's registry does for the Service `svc` (`old`: the
    /// stored one, on an update).
    pub(crate) fn allocate_service(
        &self,
        rt: &ResourceType,
        old: Option<&Value>,
        svc: &mut Value,
    ) -> ApiResult<()> {
        let name = meta::name(svc).unwrap_or_default().to_owned();
        let namespace = meta::namespace(svc).unwrap_or_default().to_owned();
        let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let old_spec = old.and_then(|o| o.get("spec")).and_then(Value::as_object);
        if let Some(old_spec) = old_spec {
            normalize_cluster_ips(old_spec, spec);
            keep_allocated(old_spec, spec);
        }
        if type_of(spec) != "ExternalName" {
            let had_ip = old_spec.is_some_and(|old| type_of(old) != "ExternalName");
            let first_listed = spec
                .get("clusterIPs")
                .and_then(Value::as_array)
                .and_then(|ips| ips.first());
            let requested = spec
                .get("clusterIP")
                .filter(|ip| !unset(Some(ip)))
                .or(first_listed)
                .and_then(Value::as_str)
                .filter(|ip| !ip.is_empty() && *ip != "None" && !had_ip)
                .map(str::to_owned);
            if let Some(ip) = requested
                && let Some(why) = self.cluster_ip_unavailable(rt, &namespace, &name, &ip)
            {
                let error = FieldError {
                    field: "spec.clusterIPs".into(),
                    reason: FieldErrorReason::Invalid,
                    message: format!(
                        "Invalid value: []string{{{ip:?}}}: failed to allocate IP {ip}: {why}"
                    ),
                };
                return Err(ApiError::invalid(&rt.kind, &name, &[error]));
            }
            let allocate = || self.random_cluster_ip();
            allocate_cluster_ip(spec, allocate);
        }
        if has_node_ports(spec) {
            let mut read = None;
            let mut in_use = || -> BTreeSet<i64> {
                read.get_or_insert_with(|| self.node_ports_in_use(rt, &namespace, &name))
                    .clone()
            };
            let mut draw = |taken: &BTreeSet<i64>| self.draw_node_port(taken);
            allocate_node_ports(spec, old_spec, &mut in_use, &mut draw)
                .map_err(|e| ApiError::invalid(&rt.kind, &name, &[e]))?;
            if needs_health_check(spec) {
                allocate_health_check(spec, old_spec, &mut in_use, &mut draw)
                    .map_err(|why| ApiError::internal(format!("Internal error occurred: {why}")))?;
            }
        }
        if let Some(old_spec) = old_spec {
            drop_type_dependent_fields(old_spec, spec);
        }
        if let Some(old) = old
            && type_of_value(old) == "LoadBalancer"
            && type_of(spec) != "LoadBalancer"
        {
            svc["status"] = json!({"loadBalancer": {}});
        }
        Ok(())
    }

    /// An address of the service range above the band kube keeps for addresses asked for
    /// (its first 256), drawn from the server's seeded RNG so a simulation run is
    /// reproducible. Not checked against the addresses in use: one draw in about a million.
    fn random_cluster_ip(&self) -> String {
        let (high, low) = self.with_rng(|rng| {
            (
                rand::Rng::random_range(rng, 0..255u32),
                rand::Rng::random_range(rng, 0..4096u32),
            )
        });
        let offset = 257 + high * 4096 + low;
        Ipv4Addr::from(SERVICE_RANGE.0 + offset).to_string()
    }

    /// Why the cluster IP `requested` (not kept from the stored Service) cannot be had, in
    /// kube's words: outside the range, or another Service's.
    fn cluster_ip_unavailable(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        requested: &str,
    ) -> Option<String> {
        let ip = requested.parse::<Ipv4Addr>().ok()?;
        let offset = u32::from(ip).wrapping_sub(SERVICE_RANGE.0);
        if offset == 0 || offset >= SERVICE_RANGE.1 - 1 {
            return Some(format!(
                "the provided IP ({ip}) is not in the valid range. The range of valid IPs is {SERVICE_RANGE_TEXT}"
            ));
        }
        let services: Vec<Value> = self.current_builtin_objects(rt, None).unwrap_or_default();
        services
            .iter()
            .filter(|s| !(meta::namespace(s) == Some(namespace) && meta::name(s) == Some(name)))
            .any(|s| s.pointer("/spec/clusterIP").and_then(Value::as_str) == Some(requested))
            .then(|| "provided IP is already allocated".to_string())
    }

    /// Every node port (and health-check node port) of the Services but this one.
    fn node_ports_in_use(&self, rt: &ResourceType, namespace: &str, name: &str) -> BTreeSet<i64> {
        let services: Vec<Value> = self.current_builtin_objects(rt, None).unwrap_or_default();
        services
            .iter()
            .filter(|s| !(meta::namespace(s) == Some(namespace) && meta::name(s) == Some(name)))
            .filter_map(|s| s.get("spec").and_then(Value::as_object))
            .flat_map(|spec| {
                node_ports(spec).chain(spec.get("healthCheckNodePort").and_then(Value::as_i64))
            })
            .collect()
    }

    /// A free node port, at random as kube's allocator draws them; `None` when the range
    /// is full.
    fn draw_node_port(&self, taken: &BTreeSet<i64>) -> Option<i64> {
        let size = NODE_PORTS.end() - NODE_PORTS.start() + 1;
        let start = self.with_rng(|rng| rand::Rng::random_range(rng, 0..size));
        (0..size)
            .map(|offset| NODE_PORTS.start() + (start + offset) % size)
            .find(|port| !taken.contains(port))
    }
}

fn type_of(spec: &Map<String, Value>) -> &str {
    spec.get("type").and_then(Value::as_str).unwrap_or_default()
}

fn type_of_value(svc: &Value) -> &str {
    svc.pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn has_node_ports(spec: &Map<String, Value>) -> bool {
    matches!(type_of(spec), "NodePort" | "LoadBalancer")
}

/// kube's `NeedsHealthCheck`: a `LoadBalancer` that keeps traffic on the node it came to.
fn needs_health_check(spec: &Map<String, Value>) -> bool {
    type_of(spec) == "LoadBalancer"
        && spec.get("externalTrafficPolicy").and_then(Value::as_str) == Some("Local")
}

fn unset(value: Option<&Value>) -> bool {
    value.is_none_or(|v| {
        v.is_null()
            || v.as_i64() == Some(0)
            || v.as_str() == Some("")
            || v.as_array().is_some_and(Vec::is_empty)
    })
}

fn ports(spec: &Map<String, Value>) -> &[Value] {
    spec.get("ports")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// kube's `NormalizeClusterIPs` on an update: the one of `clusterIP` and `clusterIPs` the
/// update changed wins, so a change of `clusterIP` alone moves `clusterIPs` with it (and
/// is then refused as a change of an allocated address, not as a mismatch).
fn normalize_cluster_ips(old_spec: &Map<String, Value>, spec: &mut Map<String, Value>) {
    let same = |field: &str, spec: &Map<String, Value>| old_spec.get(field) == spec.get(field);
    let cluster_ip = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if !same("clusterIP", spec) && same("clusterIPs", spec) {
        match cluster_ip.filter(|ip| !ip.is_empty()) {
            None => {
                spec.remove("clusterIPs");
            }
            Some(ip) => {
                let ips = spec.entry("clusterIPs").or_insert_with(|| json!([]));
                match ips.as_array_mut() {
                    Some(list) if !list.is_empty() => list[0] = json!(ip),
                    _ => *ips = json!([ip]),
                }
            }
        }
    } else if same("clusterIP", spec) && !same("clusterIPs", spec) {
        let first = spec
            .get("clusterIPs")
            .and_then(Value::as_array)
            .and_then(|ips| ips.first())
            .cloned();
        match first {
            Some(ip) => {
                spec.insert("clusterIP".into(), ip);
            }
            None => {
                spec.remove("clusterIP");
            }
        }
    }
}

/// kube's `patchAllocatedValues`: what an update leaves out of what was allocated is kept.
fn keep_allocated(old_spec: &Map<String, Value>, spec: &mut Map<String, Value>) {
    let old_type = type_of(old_spec).to_owned();
    if old_type != "ExternalName" && type_of(spec) != "ExternalName" {
        for field in ["clusterIP", "clusterIPs"] {
            if unset(spec.get(field))
                && let Some(value) = old_spec.get(field).filter(|v| !unset(Some(v)))
            {
                spec.insert(field.into(), value.clone());
            }
        }
    }
    if unset(spec.get("ipFamilyPolicy"))
        && let Some(policy) = old_spec.get("ipFamilyPolicy")
    {
        spec.insert("ipFamilyPolicy".into(), policy.clone());
    }
    if matches!(old_type.as_str(), "NodePort" | "LoadBalancer") && has_node_ports(spec) {
        let used: BTreeSet<i64> = ports(spec)
            .iter()
            .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
            .filter(|n| *n != 0)
            .collect();
        let old_by_name: Vec<(&str, i64)> = ports(old_spec)
            .iter()
            .filter_map(|p| {
                let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
                Some((name, p.get("nodePort")?.as_i64()?))
            })
            .collect();
        if let Some(Value::Array(new_ports)) = spec.get_mut("ports") {
            for port in new_ports.iter_mut() {
                let name = port.get("name").and_then(Value::as_str).unwrap_or_default();
                if !unset(port.get("nodePort")) {
                    continue;
                }
                if let Some(&(_, node_port)) = old_by_name
                    .iter()
                    .find(|(old_name, n)| *old_name == name && !used.contains(n))
                    && let Some(port) = port.as_object_mut()
                {
                    port.insert("nodePort".into(), json!(node_port));
                }
            }
        }
    }
    if needs_health_check(old_spec)
        && needs_health_check(spec)
        && unset(spec.get("healthCheckNodePort"))
        && let Some(port) = old_spec.get("healthCheckNodePort")
    {
        spec.insert("healthCheckNodePort".into(), port.clone());
    }
}

/// The cluster IP and its families, for a Service that is not `ExternalName`.
fn allocate_cluster_ip(spec: &mut Map<String, Value>, random_cluster_ip: impl FnOnce() -> String) {
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    let selectorless = spec
        .get("selector")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty);
    if unset(spec.get("ipFamilyPolicy")) {
        let policy = if headless && selectorless {
            "RequireDualStack"
        } else {
            "SingleStack"
        };
        spec.insert("ipFamilyPolicy".into(), json!(policy));
    }
    if unset(spec.get("ipFamilies")) {
        let families = if headless && selectorless {
            json!(["IPv4", "IPv6"])
        } else {
            json!(["IPv4"])
        };
        spec.insert("ipFamilies".into(), families);
    }
    let first_of_list = spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .and_then(|ips| ips.first())
        .cloned();
    if unset(spec.get("clusterIP")) {
        let ip = first_of_list
            .filter(|ip| !unset(Some(ip)))
            .unwrap_or_else(|| json!(random_cluster_ip()));
        spec.insert("clusterIP".into(), ip);
    }
    if unset(spec.get("clusterIPs")) {
        let ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
        spec.insert("clusterIPs".into(), json!([ip]));
    }
}

/// The error kube's allocator gives a node port asked for that cannot be had.
fn node_port_error(index: usize, port: i64, why: &str) -> FieldError {
    FieldError {
        field: format!("spec.ports[{index}].nodePort"),
        reason: FieldErrorReason::Invalid,
        message: format!("Invalid value: {port}: {why}"),
    }
}

fn unavailable(port: i64, in_use: &BTreeSet<i64>) -> Option<String> {
    if !NODE_PORTS.contains(&port) {
        Some(format!(
            "provided port is not in the valid range. The range of valid ports is {}-{}",
            NODE_PORTS.start(),
            NODE_PORTS.end()
        ))
    } else if in_use.contains(&port) {
        Some("provided port is already allocated".into())
    } else {
        None
    }
}

/// kube's `initNodePorts`: ports of one number share a node port (one asked for on any
/// of them, else one drawn); a node port asked for must be in range and free, and the
/// first that is not is the error. A node port the stored Service had stays its own.
fn allocate_node_ports(
    spec: &mut Map<String, Value>,
    old_spec: Option<&Map<String, Value>>,
    in_use: &mut impl FnMut() -> BTreeSet<i64>,
    draw: &mut impl FnMut(&BTreeSet<i64>) -> Option<i64>,
) -> Result<(), FieldError> {
    let allocate_new = type_of(spec) != "LoadBalancer"
        || spec
            .get("allocateLoadBalancerNodePorts")
            .and_then(Value::as_bool)
            != Some(false);
    let kept: BTreeSet<i64> = old_spec
        .filter(|old| has_node_ports(old))
        .map(|old| node_ports(old).collect())
        .unwrap_or_default();
    let Some(Value::Array(service_ports)) = spec.get_mut("ports") else {
        return Ok(());
    };
    let node_port_at = |ports: &[Value], index: usize| {
        ports[index]
            .get("nodePort")
            .and_then(Value::as_i64)
            .filter(|n| *n != 0)
    };
    // Most writes (every status write, every update that keeps its ports) need neither
    // a check nor a draw, and so no read of the other Services.
    let needs_work =
        (0..service_ports.len()).any(|index| match node_port_at(service_ports, index) {
            Some(port) => !kept.contains(&port),
            None => allocate_new,
        });
    if !needs_work {
        return Ok(());
    }
    let mut taken = in_use();
    let mut by_number: Vec<(Value, i64)> = Vec::new();
    let take = |taken: &mut BTreeSet<i64>, index: usize, port: i64| {
        if !kept.contains(&port)
            && let Some(why) = unavailable(port, taken)
        {
            return Err(node_port_error(index, port, &why));
        }
        taken.insert(port);
        Ok(())
    };
    for index in 0..service_ports.len() {
        let asked = node_port_at(service_ports, index);
        if asked.is_none() && !allocate_new {
            continue;
        }
        let number = service_ports[index]
            .get("port")
            .cloned()
            .unwrap_or(Value::Null);
        let shared = by_number
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, p)| *p);
        let node_port = match (shared, asked) {
            (Some(shared), None) => shared,
            (Some(shared), Some(asked)) if asked == shared => shared,
            (Some(_), Some(asked)) => {
                take(&mut taken, index, asked)?;
                asked
            }
            (None, _) => {
                let requested = asked.or_else(|| {
                    (0..service_ports.len())
                        .filter(|&i| service_ports[i].get("port") == Some(&number))
                        .find_map(|i| node_port_at(service_ports, i))
                });
                let port = match requested {
                    Some(port) => {
                        take(&mut taken, index, port)?;
                        port
                    }
                    None => match draw(&taken) {
                        Some(port) => {
                            taken.insert(port);
                            port
                        }
                        None => continue,
                    },
                };
                by_number.push((number, port));
                port
            }
        };
        if let Some(port) = service_ports[index].as_object_mut() {
            port.insert("nodePort".into(), json!(node_port));
        }
    }
    Ok(())
}

fn node_ports(spec: &Map<String, Value>) -> impl Iterator<Item = i64> + '_ {
    ports(spec)
        .iter()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .filter(|n| *n != 0)
}

/// A `LoadBalancer` with `externalTrafficPolicy: Local` gets its health-check node port:
/// the one asked for, else one drawn. kube answers a failure with an internal error.
fn allocate_health_check(
    spec: &mut Map<String, Value>,
    old_spec: Option<&Map<String, Value>>,
    in_use: &mut impl FnMut() -> BTreeSet<i64>,
    draw: &mut impl FnMut(&BTreeSet<i64>) -> Option<i64>,
) -> Result<(), String> {
    let kept = old_spec.and_then(|old| old.get("healthCheckNodePort"));
    let asked = spec
        .get("healthCheckNodePort")
        .and_then(Value::as_i64)
        .filter(|n| *n != 0);
    if asked.is_some() && asked == kept.and_then(Value::as_i64) {
        return Ok(());
    }
    let mut taken = in_use();
    taken.extend(node_ports(spec));
    match asked {
        Some(port) => match unavailable(port, &taken) {
            Some(why) => Err(format!(
                "failed to allocate requested HealthCheck NodePort {port}: {why}"
            )),
            None => Ok(()),
        },
        None => {
            let port =
                draw(&taken).ok_or("failed to allocate a HealthCheck NodePort 0: range is full")?;
            spec.insert("healthCheckNodePort".into(), json!(port));
            Ok(())
        }
    }
}

/// kube's `dropTypeDependentFields`: what a change of type leaves the new type without,
/// where the update left it as stored.
fn drop_type_dependent_fields(old_spec: &Map<String, Value>, spec: &mut Map<String, Value>) {
    let same = |spec: &Map<String, Value>, field: &str| spec.get(field) == old_spec.get(field);
    if type_of(old_spec) != "ExternalName" && type_of(spec) == "ExternalName" {
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if same(spec, field) {
                spec.remove(field);
            }
        }
    }
    if has_node_ports(old_spec) && !has_node_ports(spec) {
        let new_ports: BTreeSet<i64> = node_ports(spec).collect();
        if new_ports.is_subset(&node_ports(old_spec).collect())
            && let Some(Value::Array(service_ports)) = spec.get_mut("ports")
        {
            for port in service_ports.iter_mut().filter_map(Value::as_object_mut) {
                port.remove("nodePort");
            }
        }
    }
    if needs_health_check(old_spec)
        && !needs_health_check(spec)
        && same(spec, "healthCheckNodePort")
    {
        spec.remove("healthCheckNodePort");
    }
    if type_of(old_spec) == "LoadBalancer" && type_of(spec) != "LoadBalancer" {
        for field in ["allocateLoadBalancerNodePorts", "loadBalancerClass"] {
            if same(spec, field) {
                spec.remove(field);
            }
        }
    }
    if externally_accessible(old_spec)
        && !externally_accessible(spec)
        && same(spec, "externalTrafficPolicy")
    {
        spec.remove("externalTrafficPolicy");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn the_cluster_ip_field_an_update_changed_wins() {
        let old = spec(json!({"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"]}));
        let mut to_none = spec(json!({"clusterIP": "None", "clusterIPs": ["10.96.0.10"]}));
        normalize_cluster_ips(&old, &mut to_none);
        assert_eq!(to_none["clusterIPs"], json!(["None"]));
        let mut listed = spec(json!({"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.20"]}));
        normalize_cluster_ips(&old, &mut listed);
        assert_eq!(listed["clusterIP"], json!("10.96.0.20"));
        let mut cleared = spec(json!({"clusterIP": "", "clusterIPs": ["10.96.0.10"]}));
        normalize_cluster_ips(&old, &mut cleared);
        assert!(!cleared.contains_key("clusterIPs"));
        let mut unchanged = old.clone();
        normalize_cluster_ips(&old, &mut unchanged);
        assert_eq!(unchanged, old);
    }
}
