//! kube-scheduler's NodeResourcesFit filter for the simulated nodes: a pod fits a node
//! when each resource it requests (kube's `PodRequests`: its containers, the largest init
//! container with the sidecars started before it, its overhead) is at most the node's
//! allocatable less what the unfinished pods bound there (or being bound) request; else
//! the node is `Insufficient <resource>`, once per resource short, in kube's words.
//!
//! A pod that requests nothing fits anywhere and is not tracked. What the others hold is
//! kept as kube-scheduler's cache keeps it: updated as each pod's event passes
//! the node's controller and when the scheduler binds one, so a decision reads sums, not
//! the cluster's pods. A pod deleted leaves no event here, so the sums are rebuilt from
//! the pod cache when older than [`RETRY`] at a decision that needs them.
//!
//! Must not know: the other filters, or how a node is chosen.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use steady_quota::ResourceList;
use steady_runtime::ObjectCache;
use tokio::time::Instant;

use super::ByUid;

/// How a node short of a resource is reported (`Insufficient cpu`).
pub(super) const INSUFFICIENT: &str = "Insufficient ";

/// How often a pod no node has room for is tried again.
pub(super) const RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// What the pods hold of each node: by pod (its node and requests) and summed by node.
#[derive(Default)]
pub(super) struct Usage {
    placed: ByUid<(String, Arc<ResourceList>)>,
    by_node: BTreeMap<String, ResourceList>,
    rebuilt: Option<Instant>,
}

impl Usage {
    /// Record where `pod` holds room now: on its node while bound and not finished.
    pub(super) fn observe(&mut self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        let node = placement(pod);
        let held = self.placed.get(uid).map(|(on, _)| on.as_str());
        if node == held || (node.is_some() && held.is_none() && requested(pod).is_empty()) {
            return;
        }
        self.set(
            uid,
            node.map(|on| (on.to_string(), Arc::new(requested(pod)))),
        );
    }

    /// Record a pod the scheduler has just bound to `node`, before its event comes back.
    pub(super) fn bound(&mut self, pod: &Pod, node: &str) {
        let requests = requested(pod);
        if let (Some(uid), false) = (pod.metadata.uid.as_deref(), requests.is_empty()) {
            self.set(uid, Some((node.to_string(), Arc::new(requests))));
        }
    }

    /// What the pods on each node request, rebuilt from `pods` first when older than
    /// [`RETRY`].
    pub(super) fn by_node(&mut self, pods: &ObjectCache<Pod>) -> &BTreeMap<String, ResourceList> {
        if self.rebuilt.is_none_or(|at| at.elapsed() >= RETRY) {
            self.rebuild(pods);
        }
        &self.by_node
    }

    fn rebuild(&mut self, pods: &ObjectCache<Pod>) {
        let mut placed = ByUid::new();
        for pod in pods.list() {
            let Some(uid) = pod.metadata.uid.as_deref() else {
                continue;
            };
            let known = self.placed.remove(uid);
            let entry = match (placement(&pod), known) {
                (Some(node), Some((_, requests))) => Some((node.to_string(), requests)),
                (Some(node), None) => Some((node.to_string(), Arc::new(requested(&pod)))),
                // Bound by the scheduler, its binding not back in the cache yet.
                (None, Some(known)) if binding_in_flight(&pod) => Some(known),
                (None, _) => None,
            };
            if let Some(entry) = entry.filter(|(_, requests)| !requests.is_empty()) {
                placed.insert(uid.to_string(), entry);
            }
        }
        let mut by_node: BTreeMap<String, ResourceList> = BTreeMap::new();
        for (node, requests) in placed.values() {
            add_to(by_node.entry(node.clone()).or_default(), requests, 1);
        }
        (self.placed, self.by_node, self.rebuilt) = (placed, by_node, Some(Instant::now()));
    }

    fn set(&mut self, uid: &str, now: Option<(String, Arc<ResourceList>)>) {
        if let Some((node, requests)) = self.placed.remove(uid)
            && let Some(sum) = self.by_node.get_mut(&node)
        {
            add_to(sum, &requests, -1);
        }
        if let Some((node, requests)) = now {
            add_to(self.by_node.entry(node.clone()).or_default(), &requests, 1);
            self.placed.insert(uid.to_string(), (node, requests));
        }
    }
}

/// An unbound pod the scheduler may have bound a moment ago (not finished, not deleted).
fn binding_in_flight(pod: &Pod) -> bool {
    let unbound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    unbound && pod.metadata.deletion_timestamp.is_none() && !crate::pod_template::is_finished(pod)
}

/// The node a pod holds room on: its own, while it is not finished.
fn placement(pod: &Pod) -> Option<&str> {
    let node = pod.spec.as_ref()?.node_name.as_deref()?;
    (!node.is_empty() && !crate::pod_template::is_finished(pod)).then_some(node)
}

/// `sum += sign × requests`, by resource.
pub(super) fn add_to(sum: &mut ResourceList, requests: &ResourceList, sign: i8) {
    for (name, amount) in requests {
        let total = sum.entry(name.clone()).or_default();
        *total = if sign < 0 {
            *total - *amount
        } else {
            *total + *amount
        };
    }
}

/// kube's `computePodResourceRequest`: what the pod requests, resources it requests none
/// of left out.
pub(super) fn requested(pod: &Pod) -> ResourceList {
    if !may_request(pod) {
        return ResourceList::new();
    }
    let (requests, _) = steady_quota::evaluate::pod_totals(pod, true);
    requests.into_iter().filter(|(_, q)| !q.is_zero()).collect()
}

/// Whether any container states requests, or the pod an overhead: most pods do not, and
/// for them nothing need be parsed as their events pass.
fn may_request(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let states = |c: &k8s_openapi::api::core::v1::Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .is_some_and(|r| !r.is_empty())
    };
    spec.overhead.as_ref().is_some_and(|o| !o.is_empty())
        || spec.containers.iter().any(states)
        || spec.init_containers.iter().flatten().any(states)
}

/// Why `node` cannot take a pod requesting `wanted` beside pods already requesting
/// `in_use` there: one `Insufficient <resource>` per resource short (kube's order: cpu,
/// memory, ephemeral-storage, then the others by name).
pub(super) fn insufficient(
    wanted: &ResourceList,
    node: &Node,
    in_use: Option<&ResourceList>,
) -> Vec<String> {
    let allocatable =
        steady_quota::list::parse(node.status.as_ref().and_then(|s| s.allocatable.as_ref()));
    let rank = |name: &str| match name {
        "cpu" => 0,
        "memory" => 1,
        "ephemeral-storage" => 2,
        _ => 3,
    };
    let mut short: Vec<&String> = wanted
        .iter()
        .filter(|(name, amount)| {
            let free = allocatable.get(*name).copied().unwrap_or_default();
            let used = in_use
                .and_then(|u| u.get(*name))
                .copied()
                .unwrap_or_default();
            **amount + used > free
        })
        .map(|(name, _)| name)
        .collect();
    short.sort_by_key(|name| (rank(name), name.as_str()));
    short
        .into_iter()
        .map(|name| format!("{INSUFFICIENT}{name}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, containers: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": uid, "uid": uid},
            "spec": {"containers": containers},
        }))
        .expect("a pod")
    }

    fn asking(cpu: &str, memory: &str) -> serde_json::Value {
        json!([{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}])
    }

    fn node(allocatable: serde_json::Value) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": "n"}, "status": {"allocatable": allocatable}}),
        )
        .expect("a node")
    }

    fn on(mut pod: Pod, node: &str) -> Pod {
        pod.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
        pod
    }

    #[test]
    fn a_node_short_of_each_requested_resource_says_so_once_per_resource() {
        let small = node(json!({"cpu": "2", "memory": "1Gi", "pods": "110"}));
        let mut usage = Usage::default();
        usage.observe(&on(pod("a", asking("1500m", "512Mi")), "n"));
        let in_use = usage.by_node.get("n");
        let wanted = requested(&pod("b", asking("1", "600Mi")));
        assert_eq!(
            insufficient(&wanted, &small, in_use),
            ["Insufficient cpu", "Insufficient memory"]
        );
        let fits = requested(&pod("c", asking("500m", "512Mi")));
        assert!(insufficient(&fits, &small, in_use).is_empty());
        let gpu = requested(&pod(
            "d",
            json!([{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]),
        ));
        assert_eq!(
            insufficient(&gpu, &small, None),
            ["Insufficient example.com/gpu"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn usage_follows_pods_as_they_are_bound_finish_and_go() {
        let mut usage = Usage::default();
        let (a, b) = (pod("a", asking("1", "1Gi")), pod("b", asking("2", "1Gi")));
        usage.bound(&a, "n");
        usage.observe(&on(b.clone(), "n"));
        let cpu = |usage: &Usage| usage.by_node.get("n").map(|s| s["cpu"].to_string());
        assert_eq!(cpu(&usage), Some("3".into()));
        // Finished: it holds nothing.
        let mut done = on(b.clone(), "n");
        done.status = serde_json::from_value(json!({"phase": "Succeeded"})).ok();
        usage.observe(&done);
        assert_eq!(cpu(&usage), Some("1".into()));
        // A rebuild keeps what the cache shows bound, and a binding still in flight.
        let cache: ObjectCache<Pod> = ObjectCache::default();
        assert!(
            usage
                .by_node(&cache)
                .get("n")
                .is_none_or(|s| s["cpu"].is_zero())
        );
        assert_eq!(
            usage.placed.len(),
            0,
            "pods gone from the cache are forgotten"
        );
    }

    #[test]
    fn a_pod_that_requests_nothing_requests_no_resource() {
        let bare = pod("e", json!([{"name": "c"}]));
        assert!(requested(&bare).is_empty());
    }
}
