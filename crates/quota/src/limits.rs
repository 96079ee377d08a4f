//! LimitRanges, as kube's `LimitRanger` admission plugin applies them: the defaults a
//! container without requests or limits gets (with the `kubernetes.io/limit-ranger`
//! annotation saying what was set), and the min, max and limit/request ratio a
//! container, a pod or a claim must keep, with kube's messages.

use k8s_openapi::api::core::v1::{Container, LimitRange, PersistentVolumeClaim, Pod};

use crate::evaluate::{container_lists, pod_totals};
use crate::list::{self, ResourceList};
use crate::quantity::Quantity;

/// The annotation naming what the plugin set.
pub const LIMIT_RANGER_ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// One item of a LimitRange, its quantities parsed.
#[derive(Debug, Clone, Default)]
pub struct LimitItem {
    /// `Container`, `Pod` or `PersistentVolumeClaim`.
    pub kind: String,
    pub min: ResourceList,
    pub max: ResourceList,
    pub default_limits: ResourceList,
    pub default_requests: ResourceList,
    pub max_ratio: ResourceList,
}

impl LimitItem {
    /// The items of `range`, in order.
    pub fn of(range: &LimitRange) -> Vec<LimitItem> {
        let items = range
            .spec
            .as_ref()
            .map(|s| s.limits.as_slice())
            .unwrap_or_default();
        items
            .iter()
            .map(|item| LimitItem {
                kind: item.type_.clone(),
                min: list::parse(item.min.as_ref()),
                max: list::parse(item.max.as_ref()),
                default_limits: list::parse(item.default.as_ref()),
                default_requests: list::parse(item.default_request.as_ref()),
                max_ratio: list::parse(item.max_limit_request_ratio.as_ref()),
            })
            .collect()
    }
}

/// What one container is to get: the defaults it lacks, and the annotation's words for
/// them (`cpu, memory request for container web`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerDefaults {
    pub requests: ResourceList,
    pub limits: ResourceList,
    pub notes: Vec<String>,
}

/// kube's `mergeContainerResources` with one LimitRange's `Container` defaults
/// (`defaultContainerResourceRequirements`): the resources `container` names neither
/// limit nor request of. `word` names it in the notes (`container`, `init container`).
pub fn container_defaults(
    items: &[LimitItem],
    container: &Container,
    word: &str,
) -> ContainerDefaults {
    let (mut defaults_requests, mut defaults_limits) = (ResourceList::new(), ResourceList::new());
    for item in items.iter().filter(|i| i.kind == "Container") {
        defaults_requests.extend(item.default_requests.clone());
        defaults_limits.extend(item.default_limits.clone());
    }
    let (requests, limits) = container_lists(container);
    let missing = |defaults: ResourceList, present: &ResourceList| -> ResourceList {
        defaults
            .into_iter()
            .filter(|(name, _)| !present.contains_key(name))
            .collect()
    };
    let requests = missing(defaults_requests, &requests);
    let limits = missing(defaults_limits, &limits);
    let mut notes = Vec::new();
    for (set, what) in [(&requests, "request"), (&limits, "limit")] {
        if !set.is_empty() {
            let names: Vec<&str> = set.keys().map(String::as_str).collect();
            notes.push(format!(
                "{} {what} for {word} {}",
                names.join(", "),
                container.name
            ));
        }
    }
    ContainerDefaults {
        requests,
        limits,
        notes,
    }
}

/// The annotation's value for everything set in a pod.
pub fn annotation(notes: &[String]) -> Option<String> {
    (!notes.is_empty()).then(|| format!("LimitRanger plugin set: {}", notes.join("; ")))
}

/// kube's `PodValidateLimitFunc`: every container, and the pod as a whole, within each
/// item's bounds. The messages are joined as kube's aggregate error.
pub fn check_pod(items: &[LimitItem], pod: &Pod) -> Vec<String> {
    let mut errors = Vec::new();
    let containers: Vec<&Container> = pod
        .spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .collect();
    for item in items {
        match item.kind.as_str() {
            "Container" => {
                for container in &containers {
                    let (requests, limits) = container_lists(container);
                    bounds(item, "Container", &requests, &limits, &mut errors);
                }
            }
            "Pod" => {
                let (requests, limits) = pod_totals(pod, false);
                bounds(item, "Pod", &requests, &limits, &mut errors);
            }
            _ => {}
        }
    }
    errors
}

/// kube's `PersistentVolumeClaimValidateLimitFunc`: the requested storage within bounds.
pub fn check_claim(items: &[LimitItem], claim: &PersistentVolumeClaim) -> Vec<String> {
    let requests = claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .map(|r| list::parse(r.requests.as_ref()))
        .unwrap_or_default();
    let kind = "PersistentVolumeClaim";
    let mut errors = Vec::new();
    for item in items.iter().filter(|i| i.kind == kind) {
        for (name, min) in &item.min {
            errors.extend(min_violation(
                kind,
                name,
                *min,
                &requests,
                &ResourceList::new(),
            ));
        }
        for (name, max) in &item.max {
            let message = match requests.get(name) {
                None => Some(format!(
                    "maximum {name} usage per {kind} is {max}.  No request is specified"
                )),
                Some(request) if request > max => Some(format!(
                    "maximum {name} usage per {kind} is {max}, but request is {request}"
                )),
                Some(_) => None,
            };
            errors.extend(message);
        }
    }
    errors
}

/// kube's aggregate error text: one message alone, several in brackets.
pub fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

fn bounds(
    item: &LimitItem,
    kind: &str,
    requests: &ResourceList,
    limits: &ResourceList,
    errors: &mut Vec<String>,
) {
    for (name, min) in &item.min {
        errors.extend(min_violation(kind, name, *min, requests, limits));
    }
    for (name, max) in &item.max {
        let message = match (requests.get(name), limits.get(name)) {
            (_, None) => Some(format!(
                "maximum {name} usage per {kind} is {max}.  No limit is specified"
            )),
            (_, Some(limit)) if limit > max => Some(format!(
                "maximum {name} usage per {kind} is {max}, but limit is {limit}"
            )),
            (Some(request), _) if request > max => Some(format!(
                "maximum {name} usage per {kind} is {max}, but request is {request}"
            )),
            _ => None,
        };
        errors.extend(message);
    }
    for (name, ratio) in &item.max_ratio {
        errors.extend(ratio_violation(kind, name, *ratio, requests, limits));
    }
}

fn min_violation(
    kind: &str,
    name: &str,
    min: Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    match (requests.get(name), limits.get(name)) {
        (None, _) => Some(format!(
            "minimum {name} usage per {kind} is {min}.  No request is specified"
        )),
        (Some(request), _) if *request < min => Some(format!(
            "minimum {name} usage per {kind} is {min}, but request is {request}"
        )),
        (_, Some(limit)) if *limit < min => Some(format!(
            "minimum {name} usage per {kind} is {min}, but limit is {limit}"
        )),
        _ => None,
    }
}

fn ratio_violation(
    kind: &str,
    name: &str,
    ratio: Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    let nonzero = |list: &ResourceList| list.get(name).filter(|q| !q.is_zero()).copied();
    let Some(request) = nonzero(requests) else {
        return Some(format!(
            "{name} max limit to request ratio per {kind} is {ratio}, but no request is specified or request is 0"
        ));
    };
    let Some(limit) = nonzero(limits) else {
        return Some(format!(
            "{name} max limit to request ratio per {kind} is {ratio}, but no limit is specified or limit is 0"
        ));
    };
    let observed = limit.as_f64() / request.as_f64();
    (observed > ratio.as_f64()).then(|| {
        format!("{name} max limit to request ratio per {kind} is {ratio}, but provided ratio is {observed:.6}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantities(entries: &[(&str, &str)]) -> ResourceList {
        entries
            .iter()
            .map(|(n, q)| (n.to_string(), Quantity::parse(q).expect("quantity")))
            .collect()
    }

    fn container(name: &str, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        let wire = |entries: &[(&str, &str)]| {
            (!entries.is_empty()).then(|| list::to_wire(&quantities(entries)))
        };
        Container {
            name: name.into(),
            resources: Some(k8s_openapi::api::core::v1::ResourceRequirements {
                requests: wire(requests),
                limits: wire(limits),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn item(kind: &str) -> LimitItem {
        LimitItem {
            kind: kind.into(),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_fill_only_what_a_container_lacks_and_say_so() {
        let items = [LimitItem {
            default_requests: quantities(&[("cpu", "100m"), ("memory", "64Mi")]),
            default_limits: quantities(&[("cpu", "1"), ("memory", "256Mi")]),
            ..item("Container")
        }];
        let given = container("web", &[("cpu", "200m")], &[]);
        let defaults = container_defaults(&items, &given, "container");
        assert_eq!(list::pretty(&defaults.requests), "memory=64Mi");
        assert_eq!(list::pretty(&defaults.limits), "cpu=1,memory=256Mi");
        assert_eq!(
            annotation(&defaults.notes).as_deref(),
            Some(
                "LimitRanger plugin set: memory request for container web; cpu, memory limit for container web"
            )
        );
    }

    #[test]
    fn bounds_and_ratios_are_refused_with_kubes_messages() {
        let items = [LimitItem {
            min: quantities(&[("cpu", "100m")]),
            max: quantities(&[("cpu", "1")]),
            max_ratio: quantities(&[("memory", "2")]),
            ..item("Container")
        }];
        let pod = |c: Container| Pod {
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                containers: vec![c],
                ..Default::default()
            }),
            ..Default::default()
        };
        let over = container(
            "c",
            &[("cpu", "50m"), ("memory", "100Mi")],
            &[("cpu", "2"), ("memory", "300Mi")],
        );
        assert_eq!(
            check_pod(&items, &pod(over)),
            [
                "minimum cpu usage per Container is 100m, but request is 50m",
                "maximum cpu usage per Container is 1, but limit is 2",
                "memory max limit to request ratio per Container is 2, but provided ratio is 3.000000",
            ]
        );
        let bare = container("c", &[], &[]);
        assert_eq!(
            aggregate(&check_pod(&items, &pod(bare))),
            "[minimum cpu usage per Container is 100m.  No request is specified, maximum cpu usage per Container is 1.  No limit is specified, memory max limit to request ratio per Container is 2, but no request is specified or request is 0]"
        );
        let fine = container(
            "c",
            &[("cpu", "500m"), ("memory", "100Mi")],
            &[("cpu", "1"), ("memory", "200Mi")],
        );
        assert!(check_pod(&items, &pod(fine)).is_empty());
    }
}
