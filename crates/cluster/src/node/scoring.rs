//! kube-scheduler's scoring for the simulated nodes: of the nodes that fit, the one the
//! plugins that tell equal simulated nodes apart rank highest (NodeAffinity,
//! InterPodAffinity, PodTopologySpread, TaintToleration, weighted as kube's defaults),
//! then the one with the fewest pods.
//!
//! Must not know: why the other nodes did not fit (the scheduler's filters).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodSpec};
use kube::ResourceExt;
use steady_runtime::ObjectCache;

use crate::daemonset::tolerates;
use crate::node_affinity;

use super::Nodes;
use super::placed::Placed;
use super::scheduler::{Cycle, node_of};
use super::{pod_affinity, topology_spread};

/// What kube's scoring reads to rank the fitting nodes.
pub(super) struct Scoring<'a> {
    pub(super) cycle: &'a Cycle<'a>,
    pub(super) placed: &'a Placed,
    pub(super) pods: &'a ObjectCache<Pod>,
    pub(super) nodes: &'a Nodes,
}

impl Scoring<'_> {
    /// The fitting node kube's scores rank highest, of the plugins that tell simulated
    /// nodes apart: NodeAffinity (weight 2), InterPodAffinity (2), PodTopologySpread (2)
    /// and TaintToleration (3), each normalised to 0–100. The resource scores kube adds
    /// barely differ between equal simulated nodes with small pods, so the load (the
    /// fewest pods) breaks ties instead, then the order.
    pub(super) fn best(&self, fitting: &[Arc<Node>]) -> Option<String> {
        if fitting.len() <= 1 {
            return fitting.first().map(|n| n.name_any());
        }
        let cycle = self.cycle;
        let pod = cycle.pod.as_ref();
        let no_spec = PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&no_spec);
        let node_affinity = normalised(
            fitting
                .iter()
                .map(|n| node_affinity::preferred_score(spec, n)),
            false,
        );
        let taints = normalised(
            fitting.iter().map(|n| intolerable_preferences(spec, n)),
            true,
        );
        let placed = self.placed;
        let node_named = |name: &str| cycle.node_named(name);
        let affinity = pod_affinity::scores(
            pod,
            &cycle.terms,
            placed,
            &node_named,
            &cycle.namespaces,
            fitting,
        );
        let spread = topology_spread::scores(pod, &cycle.spread, placed, &cycle.all_nodes, fitting);
        let totals: Vec<i64> = (0..fitting.len())
            .map(|i| 2 * node_affinity[i] + 2 * affinity[i] + 2 * spread[i] + 3 * taints[i])
            .collect();
        let top = totals.iter().copied().max().unwrap_or(0);
        let best: Vec<String> = fitting
            .iter()
            .zip(&totals)
            .filter(|(_, t)| **t == top)
            .map(|(node, _)| node.name_any())
            .collect();
        self.least_loaded(best)
    }

    /// Of `names`, the node with the fewest unfinished pods, bound or assumed; the first
    /// on a tie. Counted from the pod cache: the decision's placed pods may be only those
    /// with affinity terms.
    fn least_loaded(&self, names: Vec<String>) -> Option<String> {
        if names.len() <= 1 {
            return names.into_iter().next();
        }
        let mut load: BTreeMap<&str, usize> = names.iter().map(|n| (n.as_str(), 0)).collect();
        // The assumed ones the cache does not show bound yet, then every pod it shows.
        let assumed = super::lock(&self.nodes.scheduler).pending(self.pods);
        let pods = self.pods.list();
        let bound = pods
            .iter()
            .filter(|p| !crate::pod_template::is_finished(p))
            .map(|p| node_of(p));
        for node in bound.chain(assumed.iter().map(|(node, _)| node.as_str())) {
            if let Some(count) = load.get_mut(node) {
                *count += 1;
            }
        }
        names
            .iter()
            .min_by_key(|n| load.get(n.as_str()).copied().unwrap_or(0))
            .cloned()
    }
}

/// kube's `DefaultNormalizeScore`: scores scaled to 0–100 by the highest (all 0 stay
/// so), reversed when fewer is better (then all 0 are all 100).
fn normalised(scores: impl Iterator<Item = i64>, reverse: bool) -> Vec<i64> {
    let scores: Vec<i64> = scores.collect();
    let max = scores.iter().copied().max().unwrap_or(0);
    scores
        .into_iter()
        .map(|s| {
            let scaled = if max == 0 { 0 } else { 100 * s / max };
            if reverse { 100 - scaled } else { scaled }
        })
        .collect()
}

/// kube's TaintToleration score before it is normalised: the node's `PreferNoSchedule`
/// taints the pod's tolerations of that effect (or of any) do not tolerate.
fn intolerable_preferences(spec: &PodSpec, node: &Node) -> i64 {
    let tolerations: Vec<_> = spec
        .tolerations
        .iter()
        .flatten()
        .filter(|t| {
            matches!(
                t.effect.as_deref(),
                None | Some("") | Some("PreferNoSchedule")
            )
        })
        .collect();
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
    let intolerable = taints.into_iter().flatten().filter(|taint| {
        taint.effect == "PreferNoSchedule" && !tolerations.iter().any(|t| tolerates(t, taint))
    });
    intolerable.count() as i64
}
