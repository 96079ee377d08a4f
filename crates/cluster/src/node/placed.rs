//! What runs where, as one scheduling decision sees it (kube-scheduler's snapshot of its
//! cache): the pods bound to a node and not finished (its informer never sees terminal
//! pods), and the pods the scheduler has bound whose binding the pod cache does not show
//! yet (kube's assumed pods), by node. The filters and scores that look at other pods
//! (inter-pod affinity, topology spread, the load) read it, and the label selectors they
//! share are read here as kube reads them.
//!
//! Must not know: what the filters decide.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};

/// The pods on each node, by node name.
#[derive(Default)]
pub(super) struct Placed {
    by_node: BTreeMap<String, Vec<Arc<Pod>>>,
}

impl Placed {
    /// `bound` pods on the node their spec names (those on none or finished left out),
    /// `assumed` ones on the node given.
    pub(super) fn new(
        bound: impl IntoIterator<Item = Arc<Pod>>,
        assumed: impl IntoIterator<Item = (String, Arc<Pod>)>,
    ) -> Self {
        let mut placed = Placed::default();
        for pod in bound {
            let node = super::scheduler::node_of(&pod);
            if node.is_empty() || crate::pod_template::is_finished(&pod) {
                continue;
            }
            // Most pods join a node already listed: no name is copied for them.
            match placed.by_node.get_mut(node) {
                Some(pods) => pods.push(pod),
                None => {
                    placed.by_node.insert(node.to_string(), vec![pod]);
                }
            }
        }
        for (node, pod) in assumed {
            placed.by_node.entry(node).or_default().push(pod);
        }
        placed
    }

    /// Every placed pod with its node's name.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &Arc<Pod>)> {
        self.by_node
            .iter()
            .flat_map(|(node, pods)| pods.iter().map(move |pod| (node.as_str(), pod)))
    }

    /// These without `removed` (preemption's victims).
    pub(super) fn without(&self, removed: &[Arc<Pod>]) -> Placed {
        let by_node = self.by_node.iter().map(|(node, pods)| {
            let kept = pods
                .iter()
                .filter(|p| !removed.iter().any(|r| Arc::ptr_eq(p, r)));
            (node.clone(), kept.cloned().collect())
        });
        Placed {
            by_node: by_node.collect(),
        }
    }

    /// The pods on `node`.
    pub(super) fn on(&self, node: &str) -> &[Arc<Pod>] {
        self.by_node.get(node).map_or(&[], Vec::as_slice)
    }
}

/// kube's `metav1.LabelSelectorAsSelector`: no selector selects nothing (`None`), an
/// empty one everything; an unreadable one (validation refuses them) nothing.
pub(super) fn selector(selector: Option<&LabelSelector>) -> Option<Selector> {
    Selector::try_from(selector?.clone()).ok()
}

/// Whether `selector` (as [`selector`] reads one) selects `labels`.
pub(super) fn selects(
    selector: Option<&Selector>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let none = BTreeMap::new();
    selector.is_some_and(|s| s.matches(labels.unwrap_or(&none)))
}

/// The value of the node's topology label `key` (the domain it is in), if it has one.
pub(super) fn domain<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The labels of the pod's namespace, from `namespaces` (namespace name to labels).
pub(super) fn namespace_labels<'a>(
    pod: &Pod,
    namespaces: &'a BTreeMap<String, BTreeMap<String, String>>,
) -> Option<&'a BTreeMap<String, String>> {
    namespaces.get(pod.namespace().as_deref().unwrap_or_default())
}
