//! kube-scheduler's NodeResourcesFit filter for the simulated nodes: a pod fits a node
//! when each resource it requests (kube's `PodRequests`: its containers, the largest init
//! container with the sidecars started before it, its overhead) is at most the node's
//! allocatable less what the unfinished pods bound there (or being bound) request; else
//! the node is `Insufficient <resource>`, once per resource short, in kube's words.
//!
//! A pod that requests nothing fits anywhere and costs nothing. For one that requests
//! something, the pods of the cluster are summed by node; each pod's requests are
//! computed once (they do not change) and kept by uid while it exists.
//!
//! Must not know: the other filters, or how a node is chosen.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use steady_quota::ResourceList;

use super::ByUid;

/// How a node short of a resource is reported (`Insufficient cpu`).
pub(super) const INSUFFICIENT: &str = "Insufficient ";

/// How often a pod no node has room for is tried again.
pub(super) const RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// What each pod requests, by uid: computed once, forgotten with the pod.
#[derive(Default)]
pub(super) struct Requests {
    by_uid: ByUid<Arc<ResourceList>>,
}

impl Requests {
    /// What `pod` requests (cached by its uid).
    fn of(&mut self, pod: &Pod) -> Arc<ResourceList> {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return Arc::new(requested(pod));
        };
        if let Some(known) = self.by_uid.get(uid) {
            return known.clone();
        }
        let computed = Arc::new(requested(pod));
        self.by_uid.insert(uid.to_string(), computed.clone());
        computed
    }

    /// What the `placed` pods request, summed by node; the requests of pods not among
    /// them are forgotten.
    pub(super) fn by_node<'p>(
        &mut self,
        placed: impl IntoIterator<Item = (&'p Pod, &'p str)>,
    ) -> BTreeMap<String, ResourceList> {
        let mut seen = ByUid::new();
        let mut sums: BTreeMap<String, ResourceList> = BTreeMap::new();
        for (pod, node) in placed {
            let requests = self.of(pod);
            if let Some(uid) = pod.metadata.uid.as_deref() {
                seen.insert(uid.to_string(), requests.clone());
            }
            let sum = sums.entry(node.to_string()).or_default();
            for (name, amount) in requests.iter() {
                sum.entry(name.clone())
                    .and_modify(|total| *total = *total + *amount)
                    .or_insert(*amount);
            }
        }
        self.by_uid = seen;
        sums
    }
}

/// kube's `computePodResourceRequest`: what the pod requests, resources it requests none
/// of left out.
pub(super) fn requested(pod: &Pod) -> ResourceList {
    let (requests, _) = steady_quota::evaluate::pod_totals(pod, true);
    requests.into_iter().filter(|(_, q)| !q.is_zero()).collect()
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

    #[test]
    fn a_node_short_of_each_requested_resource_says_so_once_per_resource() {
        let small = node(json!({"cpu": "2", "memory": "1Gi", "pods": "110"}));
        let placed = [pod("a", asking("1500m", "512Mi"))];
        let mut requests = Requests::default();
        let in_use = requests.by_node(placed.iter().map(|p| (p, "n")));
        let wanted = requested(&pod("b", asking("1", "600Mi")));
        assert_eq!(
            insufficient(&wanted, &small, in_use.get("n")),
            ["Insufficient cpu", "Insufficient memory"]
        );
        let fits = requested(&pod("c", asking("500m", "512Mi")));
        assert!(insufficient(&fits, &small, in_use.get("n")).is_empty());
        let gpu = requested(&pod(
            "d",
            json!([{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]),
        ));
        assert_eq!(
            insufficient(&gpu, &small, None),
            ["Insufficient example.com/gpu"]
        );
    }

    #[test]
    fn requests_are_kept_only_while_their_pod_is_placed() {
        let mut requests = Requests::default();
        let (a, b) = (pod("a", asking("1", "1Gi")), pod("b", asking("2", "1Gi")));
        let sums = requests.by_node([(&a, "n"), (&b, "n")]);
        assert_eq!(sums["n"]["cpu"].to_string(), "3");
        requests.by_node([(&b, "n")]);
        assert_eq!(requests.by_uid.len(), 1);
    }

    #[test]
    fn a_pod_that_requests_nothing_requests_no_resource() {
        let bare = pod("e", json!([{"name": "c"}]));
        assert!(requested(&bare).is_empty());
    }
}
