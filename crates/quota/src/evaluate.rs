//! What an object charges to a quota, per kind, as kube's quota evaluators compute it
//! (`pkg/quota/v1/evaluator/core` and the generic object-count evaluator): which quota
//! resource names a kind answers for, its usage, whether a quota's scopes select it, and
//! the constraints a pod must meet under a cpu or memory quota.

use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaim, Pod, PodAffinityTerm, ResourceQuota, Service,
    WeightedPodAffinityTerm,
};

use crate::list::{self, ResourceList};
use crate::quantity::Quantity;

/// kube's `quota.ObjectCountQuotaResourceNameFor`: `count/<resource>[.<group>]`.
pub fn object_count_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }
}

/// The object a quota is charged for, decoded as far as its evaluator reads it.
#[derive(Debug, Clone, Copy)]
pub enum Charged<'a> {
    Pod(&'a Pod),
    Service(&'a Service),
    Claim(&'a PersistentVolumeClaim),
    /// Any other kind: only counted.
    Counted,
}

/// The evaluator for one group and resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evaluator {
    Pods,
    Services,
    Claims,
    /// Counts objects: `count/<resource>.<group>` and, for four core kinds, the legacy name
    /// (`configmaps`, `secrets`, `replicationcontrollers`, `resourcequotas`).
    Objects {
        count_name: String,
        legacy_name: Option<&'static str>,
    },
}

const POD_RESOURCES: &[&str] = &[
    "count/pods",
    "pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
];
const SERVICE_RESOURCES: &[&str] = &[
    "count/services",
    "services",
    "services.loadbalancers",
    "services.nodeports",
];
const CLAIM_RESOURCES: &[&str] = &[
    "count/persistentvolumeclaims",
    "persistentvolumeclaims",
    "requests.storage",
];
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";
/// The resources whose presence in a quota obliges every container to name them.
const CONTAINER_REQUIRED: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

impl Evaluator {
    pub fn for_resource(group: &str, resource: &str) -> Evaluator {
        match (group, resource) {
            ("", "pods") => Evaluator::Pods,
            ("", "services") => Evaluator::Services,
            ("", "persistentvolumeclaims") => Evaluator::Claims,
            _ => Evaluator::Objects {
                count_name: object_count_name(group, resource),
                legacy_name: match (group, resource) {
                    ("", "configmaps") => Some("configmaps"),
                    ("", "secrets") => Some("secrets"),
                    ("", "replicationcontrollers") => Some("replicationcontrollers"),
                    ("", "resourcequotas") => Some("resourcequotas"),
                    _ => None,
                },
            },
        }
    }

    /// Whether an update can change the usage (a Service's type, a claim's size); the
    /// others are charged on create only.
    pub fn charges_updates(&self) -> bool {
        matches!(self, Evaluator::Services | Evaluator::Claims)
    }

    /// Whether this evaluator computes the quota resource `name`.
    pub fn computes(&self, name: &str) -> bool {
        match self {
            Evaluator::Pods => {
                POD_RESOURCES.contains(&name)
                    || name.starts_with("hugepages-")
                    || name.starts_with("requests.hugepages-")
                    || name
                        .strip_prefix("requests.")
                        .is_some_and(is_extended_resource)
            }
            Evaluator::Services => SERVICE_RESOURCES.contains(&name),
            Evaluator::Claims => {
                CLAIM_RESOURCES.contains(&name)
                    || name.split_once(STORAGE_CLASS_SUFFIX).is_some_and(|(_, r)| {
                        r == "requests.storage" || r == "persistentvolumeclaims"
                    })
            }
            Evaluator::Objects {
                count_name,
                legacy_name,
            } => name == count_name || Some(name) == *legacy_name,
        }
    }

    /// The names of `hard` this evaluator computes.
    pub fn matching<'a>(&self, hard: &'a ResourceList) -> Vec<&'a String> {
        hard.keys().filter(|name| self.computes(name)).collect()
    }

    /// What `object` charges; `now_seconds` decides whether a pod stuck terminating past
    /// its grace period is still charged.
    pub fn usage(&self, object: Charged<'_>, now_seconds: i64) -> ResourceList {
        match (self, object) {
            (Evaluator::Pods, Charged::Pod(pod)) => pod_usage(pod, now_seconds),
            (Evaluator::Services, Charged::Service(service)) => service_usage(service),
            (Evaluator::Claims, Charged::Claim(claim)) => claim_usage(claim),
            (
                Evaluator::Objects {
                    count_name,
                    legacy_name,
                },
                _,
            ) => {
                let mut usage = ResourceList::from([(count_name.clone(), Quantity::from_units(1))]);
                if let Some(legacy) = legacy_name {
                    usage.insert(legacy.to_string(), Quantity::from_units(1));
                }
                usage
            }
            _ => ResourceList::new(),
        }
    }

    /// Whether every scope of the quota selects `object` (no scope selects everything).
    /// Only pods have scopes; kube's validation keeps scoped quotas to pod resources.
    pub fn in_scope(&self, scopes: &[ScopeRequirement], object: Charged<'_>) -> bool {
        match object {
            Charged::Pod(pod) => scopes.iter().all(|scope| scope.selects(pod)),
            _ => scopes.is_empty(),
        }
    }

    /// kube's backward-compatible rule: under a quota on cpu or memory, every container
    /// names that resource. The error is the text after `failed quota: <name>: `.
    pub fn constraints(&self, required: &[&String], object: Charged<'_>) -> Result<(), String> {
        let Charged::Pod(pod) = object else {
            return Ok(());
        };
        let required: Vec<&str> = required
            .iter()
            .map(|name| name.as_str())
            .filter(|name| CONTAINER_REQUIRED.contains(name))
            .collect();
        if required.is_empty() {
            return Ok(());
        }
        let spec = pod.spec.as_ref();
        let containers = spec.into_iter().flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        });
        let mut missing: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for container in containers {
            let usage = container_usage(container);
            for name in &required {
                if !usage.contains_key(*name) {
                    missing.entry(name).or_default().push(&container.name);
                }
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let parts: Vec<String> = missing
            .into_iter()
            .map(|(name, mut containers)| {
                containers.sort_unstable();
                containers.dedup();
                format!("{name} for: {}", containers.join(","))
            })
            .collect();
        Err(format!("must specify {}", parts.join("; ")))
    }
}

/// kube's `IsExtendedResourceName`: a domain-qualified name outside `kubernetes.io`
/// that is not itself a quota name.
fn is_extended_resource(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    !native && !name.starts_with("requests.")
}

/// One scope of a quota: `spec.scopes` entries are `Exists`, `spec.scopeSelector`'s
/// expressions as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeRequirement {
    pub scope_name: String,
    pub operator: String,
    pub values: Vec<String>,
}

impl ScopeRequirement {
    /// The scopes of `quota` (`getScopeSelectorsFromQuota`).
    pub fn of(quota: &ResourceQuota) -> Vec<ScopeRequirement> {
        let Some(spec) = quota.spec.as_ref() else {
            return Vec::new();
        };
        let plain = spec.scopes.iter().flatten().map(|scope| ScopeRequirement {
            scope_name: scope.clone(),
            operator: "Exists".into(),
            values: Vec::new(),
        });
        let selected = spec
            .scope_selector
            .iter()
            .flat_map(|s| s.match_expressions.iter().flatten())
            .map(|e| ScopeRequirement {
                scope_name: e.scope_name.clone(),
                operator: e.operator.clone(),
                values: e.values.clone().unwrap_or_default(),
            });
        plain.chain(selected).collect()
    }

    /// kube's `podMatchesScopeFunc`.
    fn selects(&self, pod: &Pod) -> bool {
        let spec = pod.spec.as_ref();
        match self.scope_name.as_str() {
            "Terminating" => is_terminating(pod),
            "NotTerminating" => !is_terminating(pod),
            "BestEffort" => qos_class(pod) == QosClass::BestEffort,
            "NotBestEffort" => qos_class(pod) != QosClass::BestEffort,
            "PriorityClass" => {
                let class = spec
                    .and_then(|s| s.priority_class_name.as_deref())
                    .unwrap_or("");
                // the class is matched as the value of a label every pod carries, so
                // `DoesNotExist` never matches (kube's `podMatchesSelector`)
                match self.operator.as_str() {
                    "Exists" => !class.is_empty(),
                    "In" => self.values.iter().any(|v| v == class),
                    "NotIn" => !self.values.iter().any(|v| v == class),
                    _ => false,
                }
            }
            "CrossNamespacePodAffinity" => uses_cross_namespace_affinity(pod),
            _ => false,
        }
    }
}

fn is_terminating(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.active_deadline_seconds)
        .is_some_and(|seconds| seconds >= 0)
}

fn uses_cross_namespace_affinity(pod: &Pod) -> bool {
    let Some(affinity) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else {
        return false;
    };
    let affinity_terms = affinity.pod_affinity.iter().flat_map(|a| {
        terms(
            &a.required_during_scheduling_ignored_during_execution,
            &a.preferred_during_scheduling_ignored_during_execution,
        )
    });
    let anti_terms = affinity.pod_anti_affinity.iter().flat_map(|a| {
        terms(
            &a.required_during_scheduling_ignored_during_execution,
            &a.preferred_during_scheduling_ignored_during_execution,
        )
    });
    affinity_terms.chain(anti_terms).any(|term| {
        term.namespace_selector.is_some() || term.namespaces.as_ref().is_some_and(|n| !n.is_empty())
    })
}

/// The required and preferred terms of a pod (anti-)affinity, alike.
fn terms<'a>(
    required: &'a Option<Vec<PodAffinityTerm>>,
    preferred: &'a Option<Vec<WeightedPodAffinityTerm>>,
) -> impl Iterator<Item = &'a PodAffinityTerm> {
    let preferred = preferred.iter().flatten().map(|w| &w.pod_affinity_term);
    required.iter().flatten().chain(preferred)
}

/// A pod's quality-of-service class (`qos.GetPodQOS`), from its containers' cpu and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }

    /// The class of a pod whose containers (regular and init) have these cpu and memory
    /// requests and limits.
    pub fn of_containers(containers: impl IntoIterator<Item = ComputeResources>) -> QosClass {
        let (mut requests, mut limits) = ([None; 2], [None; 2]);
        let mut guaranteed = true;
        let add = |sum: &mut Option<Quantity>, q: Quantity| {
            *sum = Some(sum.map_or(q, |s| s + q));
        };
        for container in containers {
            for i in 0..QOS_RESOURCES.len() {
                let nonzero = |q: Option<Quantity>| q.filter(|q| !q.is_zero());
                if let Some(q) = nonzero(container.requests[i]) {
                    add(&mut requests[i], q);
                }
                match nonzero(container.limits[i]) {
                    Some(q) => add(&mut limits[i], q),
                    None => guaranteed = false,
                }
            }
        }
        if requests == [None; 2] && limits == [None; 2] {
            QosClass::BestEffort
        } else if guaranteed && requests == limits {
            QosClass::Guaranteed
        } else {
            QosClass::Burstable
        }
    }
}

/// The resources a QoS class is computed from, in [`ComputeResources`]' order.
pub const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// What the QoS class reads of one container: its cpu and memory requests and limits.
#[derive(Debug, Clone, Copy, Default)]
pub struct ComputeResources {
    pub requests: [Option<Quantity>; 2],
    pub limits: [Option<Quantity>; 2],
}

/// The QoS class of a decoded pod.
pub fn qos_class(pod: &Pod) -> QosClass {
    let containers = pod.spec.iter().flat_map(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
    });
    QosClass::of_containers(containers.map(|container| {
        let resources = container.resources.as_ref();
        let pick = |list: Option<
            &std::collections::BTreeMap<
                String,
                k8s_openapi::apimachinery::pkg::api::resource::Quantity,
            >,
        >| {
            QOS_RESOURCES.map(|name| {
                list.and_then(|l| l.get(name))
                    .and_then(|q| Quantity::parse(&q.0).ok())
            })
        };
        ComputeResources {
            requests: pick(resources.and_then(|r| r.requests.as_ref())),
            limits: pick(resources.and_then(|r| r.limits.as_ref())),
        }
    }))
}

/// A container's (requests, limits).
pub fn container_lists(container: &Container) -> (ResourceList, ResourceList) {
    let resources = container.resources.as_ref();
    (
        list::parse(resources.and_then(|r| r.requests.as_ref())),
        list::parse(resources.and_then(|r| r.limits.as_ref())),
    )
}

/// kube's `QuotaV1Pod`: terminal pods, and pods still terminating past their grace
/// period (a lost node's), are not charged compute resources.
pub fn pod_charged(pod: &Pod, now_seconds: i64) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    match (
        &pod.metadata.deletion_timestamp,
        pod.metadata.deletion_grace_period_seconds,
    ) {
        (Some(deleted), Some(grace)) => now_seconds <= deleted.0.as_second().saturating_add(grace),
        _ => true,
    }
}

/// `count/pods` always; the compute resources while the pod is charged.
fn pod_usage(pod: &Pod, now_seconds: i64) -> ResourceList {
    let mut usage = ResourceList::from([("count/pods".to_string(), Quantity::from_units(1))]);
    if !pod_charged(pod, now_seconds) {
        return usage;
    }
    let (requests, limits) = pod_requests_and_limits(pod);
    usage.extend(compute_usage(&requests, &limits));
    usage
}

/// kube's `resourcehelper.PodRequests` and `PodLimits`: the containers' sum, at least
/// each init container's (plus the sidecars started before it), plus the overhead.
fn pod_requests_and_limits(pod: &Pod) -> (ResourceList, ResourceList) {
    pod_totals(pod, true)
}

/// [`pod_requests_and_limits`], the overhead left out when `with_overhead` is false (as
/// the LimitRanger's `podRequests` and `podLimits` leave it out).
pub fn pod_totals(pod: &Pod, with_overhead: bool) -> (ResourceList, ResourceList) {
    let Some(spec) = pod.spec.as_ref() else {
        return Default::default();
    };
    let overhead = match with_overhead {
        true => list::parse(spec.overhead.as_ref()),
        false => ResourceList::new(),
    };
    let mut totals = [ResourceList::new(), ResourceList::new()];
    for (which, total) in totals.iter_mut().enumerate() {
        let of = |c: &Container| {
            let (requests, limits) = container_lists(c);
            if which == 0 { requests } else { limits }
        };
        for container in &spec.containers {
            *total = list::add(total, &of(container));
        }
        let mut sidecars = ResourceList::new();
        let mut init_peak = ResourceList::new();
        for container in spec.init_containers.iter().flatten() {
            let own = of(container);
            let during = if container.restart_policy.as_deref() == Some("Always") {
                *total = list::add(total, &own);
                sidecars = list::add(&sidecars, &own);
                sidecars.clone()
            } else {
                list::add(&own, &sidecars)
            };
            raise_to(&mut init_peak, &during);
        }
        raise_to(total, &init_peak);
        let overhead = if which == 0 {
            overhead.clone()
        } else {
            // kube adds overhead only to the limits a pod sets
            list::mask(&overhead, total.keys().collect::<Vec<_>>())
        };
        *total = list::add(total, &overhead);
    }
    let [requests, limits] = totals;
    (requests, limits)
}

/// `maxResourceList`: each of `list`'s quantities at least `other`'s.
fn raise_to(list: &mut ResourceList, other: &ResourceList) {
    for (name, q) in other {
        match list.get(name) {
            Some(current) if current >= q => {}
            _ => {
                list.insert(name.clone(), *q);
            }
        }
    }
}

/// kube's `podComputeUsageHelper`.
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut usage = ResourceList::from([("pods".to_string(), Quantity::from_units(1))]);
    for resource in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(request) = requests.get(resource) {
            usage.insert(resource.to_string(), *request);
            usage.insert(format!("requests.{resource}"), *request);
        }
        if let Some(limit) = limits.get(resource) {
            usage.insert(format!("limits.{resource}"), *limit);
        }
    }
    for (resource, request) in requests {
        if resource.starts_with("hugepages-") {
            usage.insert(resource.clone(), *request);
            usage.insert(format!("requests.{resource}"), *request);
        } else if is_extended_resource(resource) {
            usage.insert(format!("requests.{resource}"), *request);
        }
    }
    usage
}

/// One container's compute usage, for [`Evaluator::constraints`].
fn container_usage(container: &Container) -> ResourceList {
    let (requests, limits) = container_lists(container);
    compute_usage(&requests, &limits)
}

fn service_usage(service: &Service) -> ResourceList {
    let spec = service.spec.as_ref();
    let ports = spec.and_then(|s| s.ports.as_ref()).map_or(0, Vec::len);
    let ports = Quantity::from_units(i64::try_from(ports).unwrap_or(i64::MAX));
    let (balancers, node_ports) = match spec.and_then(|s| s.type_.as_deref()) {
        Some("NodePort") => (Quantity::from_units(0), ports),
        Some("LoadBalancer") => (Quantity::from_units(1), ports),
        _ => (Quantity::from_units(0), Quantity::from_units(0)),
    };
    ResourceList::from([
        ("count/services".to_string(), Quantity::from_units(1)),
        ("services".to_string(), Quantity::from_units(1)),
        ("services.loadbalancers".to_string(), balancers),
        ("services.nodeports".to_string(), node_ports),
    ])
}

fn claim_usage(claim: &PersistentVolumeClaim) -> ResourceList {
    let mut usage = ResourceList::from([
        (
            "count/persistentvolumeclaims".to_string(),
            Quantity::from_units(1),
        ),
        (
            "persistentvolumeclaims".to_string(),
            Quantity::from_units(1),
        ),
    ]);
    let class = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("volume.beta.kubernetes.io/storage-class"))
        .or(claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_ref()))
        .filter(|class| !class.is_empty());
    if let Some(class) = class {
        usage.insert(
            format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
            Quantity::from_units(1),
        );
    }
    let requested = claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .map(|r| list::parse(r.requests.as_ref()))
        .and_then(|r| r.get("storage").copied());
    let allocated = claim
        .status
        .as_ref()
        .map(|s| list::parse(s.allocated_resources.as_ref()))
        .and_then(|r| r.get("storage").copied());
    // whole bytes; a resize that was allocated larger than asked is charged as allocated
    let storage = requested.map(|r| match allocated {
        Some(a) if a > r => a.round_up_to_units(),
        _ => r.round_up_to_units(),
    });
    if let Some(storage) = storage {
        usage.insert("requests.storage".to_string(), storage);
        if let Some(class) = class {
            usage.insert(
                format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"),
                storage,
            );
        }
    }
    usage
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("pod")
    }

    fn container(name: &str, requests: serde_json::Value) -> serde_json::Value {
        json!({"name": name, "resources": {"requests": requests}})
    }

    #[test]
    fn a_pod_charges_the_larger_of_its_containers_and_each_init_step_plus_overhead() {
        let spec = json!({
            "containers": [container("a", json!({"cpu": "100m"})), container("b", json!({"cpu": "200m"}))],
            "initContainers": [
                container("sidecar", json!({"cpu": "50m"})),
                container("setup", json!({"cpu": "500m", "memory": "1Gi"})),
            ],
            "overhead": {"cpu": "10m"},
        });
        let mut with_sidecar = pod(spec);
        if let Some(init) = with_sidecar
            .spec
            .as_mut()
            .and_then(|s| s.init_containers.as_mut())
        {
            init[0].restart_policy = Some("Always".into());
        }
        let usage = Evaluator::Pods.usage(Charged::Pod(&with_sidecar), 0);
        // containers 300m + sidecar 50m = 350m; the setup step needs 500m + 50m = 550m
        assert_eq!(
            list::pretty(&usage),
            "count/pods=1,cpu=560m,memory=1Gi,pods=1,requests.cpu=560m,requests.memory=1Gi"
        );
    }

    #[test]
    fn finished_pods_and_pods_terminating_past_their_grace_are_counted_only() {
        let mut finished = pod(json!({"containers": [container("a", json!({"cpu": "1"}))]}));
        finished.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        let usage = Evaluator::Pods.usage(Charged::Pod(&finished), 0);
        assert_eq!(list::pretty(&usage), "count/pods=1");

        let mut stuck = pod(json!({"containers": [container("a", json!({"cpu": "1"}))]}));
        stuck.metadata.deletion_timestamp =
            serde_json::from_value(json!("2026-12-05T00:00:00Z")).ok();
        stuck.metadata.deletion_grace_period_seconds = Some(30);
        let deleted_at = 1_796_428_800;
        assert!(pod_charged(&stuck, deleted_at + 30));
        assert!(!pod_charged(&stuck, deleted_at + 31));
    }

    #[test]
    fn scopes_select_pods_as_kube_does() {
        let best_effort = pod(json!({"containers": [{"name": "a"}]}));
        let burstable = pod(json!({
            "containers": [container("a", json!({"cpu": "1"}))],
            "priorityClassName": "high",
            "activeDeadlineSeconds": 60,
        }));
        let scope = |name: &str, operator: &str, values: &[&str]| ScopeRequirement {
            scope_name: name.into(),
            operator: operator.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        let selects = |scopes: &[ScopeRequirement], p: &Pod| {
            Evaluator::Pods.in_scope(scopes, Charged::Pod(p))
        };
        assert!(selects(&[scope("BestEffort", "Exists", &[])], &best_effort));
        assert!(!selects(&[scope("BestEffort", "Exists", &[])], &burstable));
        assert!(selects(&[scope("Terminating", "Exists", &[])], &burstable));
        assert!(selects(
            &[scope("PriorityClass", "In", &["high"])],
            &burstable
        ));
        assert!(selects(
            &[scope("PriorityClass", "NotIn", &["high"])],
            &best_effort
        ));
        assert!(!selects(
            &[scope("PriorityClass", "DoesNotExist", &[])],
            &best_effort
        ));
        assert!(
            !Evaluator::Services.in_scope(&[scope("BestEffort", "Exists", &[])], Charged::Counted)
        );
    }

    #[test]
    fn cross_namespace_affinity_is_read_from_required_and_preferred_terms() {
        let scope = [ScopeRequirement {
            scope_name: "CrossNamespacePodAffinity".into(),
            operator: "Exists".into(),
            values: Vec::new(),
        }];
        let term = json!({"topologyKey": "zone", "namespaces": ["other"]});
        let preferred = pod(
            json!({"containers": [{"name": "a"}], "affinity": {"podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]
            }}}),
        );
        let local = pod(
            json!({"containers": [{"name": "a"}], "affinity": {"podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]
            }}}),
        );
        assert!(Evaluator::Pods.in_scope(&scope, Charged::Pod(&preferred)));
        assert!(!Evaluator::Pods.in_scope(&scope, Charged::Pod(&local)));
    }

    #[test]
    fn services_claims_and_other_kinds_charge_as_kube_counts_them() {
        let service: Service = serde_json::from_value(json!({
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}, {"port": 443}]}
        }))
        .expect("service");
        assert_eq!(
            list::pretty(&Evaluator::Services.usage(Charged::Service(&service), 0)),
            "count/services=1,services=1,services.loadbalancers=1,services.nodeports=2"
        );
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "1.5Gi"}}}
        }))
        .expect("claim");
        assert_eq!(
            list::pretty(&Evaluator::Claims.usage(Charged::Claim(&claim), 0)),
            "count/persistentvolumeclaims=1,fast.storageclass.storage.k8s.io/persistentvolumeclaims=1,\
             fast.storageclass.storage.k8s.io/requests.storage=1536Mi,persistentvolumeclaims=1,requests.storage=1536Mi"
        );
        let secrets = Evaluator::for_resource("", "secrets");
        assert_eq!(
            list::pretty(&secrets.usage(Charged::Counted, 0)),
            "count/secrets=1,secrets=1"
        );
        let widgets = Evaluator::for_resource("example.com", "widgets");
        assert!(widgets.computes("count/widgets.example.com"));
        assert!(!widgets.computes("widgets"));
    }
}
