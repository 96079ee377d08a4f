//! kube-scheduler's PodTopologySpread for the simulated nodes. A `DoNotSchedule`
//! constraint refuses a node when the pods its selector matches in the node's topology
//! domain, plus the pod itself, would exceed the least-populated domain's by more than
//! `maxSkew` (the least counts as 0 while there are fewer domains than `minDomains`); a
//! node without the constraint's topology label is refused outright. Domains are counted
//! over the nodes the constraint's inclusion policies admit (the pod's node affinity by
//! default, its tolerations when asked), pods of the pod's namespace only, terminating
//! ones left out. `ScheduleAnyway` constraints score the fitting nodes: fewer matching
//! pods in a node's domains, more score. `matchLabelKeys` add the pod's own values of
//! those labels to the selector, as 1.32's scheduler does.
//!
//! Not done: kube's system default constraints (for pods that state none, spread over
//! hosts and zones by their Service's or workload's selector); the simulated nodes' load
//! breaks ties instead.
//!
//! Must not know: the other filters, or how a node is chosen among the fitting.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, TopologySpreadConstraint};
use kube::core::{Expression, Selector};

use super::placed::{self, Placed};

pub(super) const SPREAD_REFUSED: &str = "node(s) didn't match pod topology spread constraints";
pub(super) const LABEL_MISSING: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

const HOSTNAME: &str = "kubernetes.io/hostname";

/// One constraint, read once.
struct Constraint {
    max_skew: i64,
    key: String,
    selects: Option<Selector>,
    min_domains: usize,
    honor_node_affinity: bool,
    honor_taints: bool,
}

impl Constraint {
    fn new(constraint: &TopologySpreadConstraint, pod: &Pod) -> Constraint {
        let mut selects = placed::selector(constraint.label_selector.as_ref());
        let labels = pod.metadata.labels.as_ref();
        if let Some(selector) = selects.as_mut() {
            let keys = constraint.match_label_keys.iter().flatten();
            let own = keys.filter_map(|key| {
                let value = labels?.get(key)?;
                Some(Expression::In(key.clone(), BTreeSet::from([value.clone()])))
            });
            selector.extend(own);
        }
        Constraint {
            max_skew: constraint.max_skew.into(),
            key: constraint.topology_key.clone(),
            selects,
            min_domains: constraint
                .min_domains
                .and_then(|d| usize::try_from(d).ok())
                .unwrap_or(1),
            honor_node_affinity: constraint.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_taints: constraint.node_taints_policy.as_deref() == Some("Honor"),
        }
    }

    /// kube's `matchNodeInclusionPolicies`: whether the node's pods count for the pod.
    fn includes(&self, pod: &Pod, node: &Node) -> bool {
        let Some(spec) = pod.spec.as_ref() else {
            return true;
        };
        (!self.honor_node_affinity || crate::node_affinity::required_match(spec, node))
            && (!self.honor_taints || super::scheduler::untolerated_taint(spec, node).is_none())
    }

    /// kube's `countPodsMatchSelector`: the pods among `pods` of the pod's namespace, not
    /// terminating, that the selector matches.
    fn count(&self, pod: &Pod, pods: &[Arc<Pod>]) -> i64 {
        let namespace = pod.metadata.namespace.as_deref();
        let counted = pods.iter().filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.metadata.namespace.as_deref() == namespace
                && placed::selects(self.selects.as_ref(), p.metadata.labels.as_ref())
        });
        counted.count() as i64
    }
}

/// A pod's spread constraints: those that filter and those that score.
#[derive(Default)]
pub(super) struct Constraints {
    hard: Vec<Constraint>,
    soft: Vec<Constraint>,
}

impl Constraints {
    pub(super) fn of(pod: &Pod) -> Constraints {
        let stated = pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_ref());
        let mut constraints = Constraints::default();
        for constraint in stated.into_iter().flatten() {
            let read = Constraint::new(constraint, pod);
            match constraint.when_unsatisfiable.as_str() {
                "DoNotSchedule" => constraints.hard.push(read),
                _ => constraints.soft.push(read),
            }
        }
        constraints
    }

    pub(super) fn is_empty(&self) -> bool {
        self.hard.is_empty() && self.soft.is_empty()
    }
}

/// Whether the node has every constraint's topology label.
fn labelled_for(node: &Node, constraints: &[Constraint]) -> bool {
    constraints
        .iter()
        .all(|c| placed::domain(node, &c.key).is_some())
}

/// kube's PreFilter state: the matching pods of each domain (key, value) of the hard
/// constraints' keys.
pub(super) struct Filter<'a> {
    constraints: &'a [Constraint],
    matching: BTreeMap<(String, String), i64>,
    self_match: Vec<bool>,
}

impl<'a> Filter<'a> {
    /// `None` when the pod has no `DoNotSchedule` constraint (kube's Skip).
    pub(super) fn new(
        pod: &Pod,
        constraints: &'a Constraints,
        placed: &Placed,
        nodes: &[Arc<Node>],
    ) -> Option<Filter<'a>> {
        let hard = constraints.hard.as_slice();
        if hard.is_empty() {
            return None;
        }
        let mut matching: BTreeMap<(String, String), i64> = BTreeMap::new();
        for node in nodes.iter().filter(|n| labelled_for(n, hard)) {
            let pods = placed.on(node.metadata.name.as_deref().unwrap_or_default());
            for constraint in hard.iter().filter(|c| c.includes(pod, node)) {
                let value = placed::domain(node, &constraint.key).unwrap_or_default();
                *matching
                    .entry((constraint.key.clone(), value.to_string()))
                    .or_default() += constraint.count(pod, pods);
            }
        }
        let labels = pod.metadata.labels.as_ref();
        Some(Filter {
            constraints: hard,
            matching,
            self_match: hard
                .iter()
                .map(|c| placed::selects(c.selects.as_ref(), labels))
                .collect(),
        })
    }

    /// Why `node` cannot take the pod, and whether evicting pods could change that.
    pub(super) fn refuses(&self, node: &Node) -> Option<(&'static str, bool)> {
        for (constraint, self_match) in self.constraints.iter().zip(&self.self_match) {
            let Some(value) = placed::domain(node, &constraint.key) else {
                return Some((LABEL_MISSING, false));
            };
            let domains = self
                .matching
                .iter()
                .filter(|((key, _), _)| *key == constraint.key);
            let (count, least) = domains.fold((0_usize, i64::MAX), |(n, least), (_, c)| {
                (n + 1, least.min(*c))
            });
            if count == 0 {
                // No domain counted (kube's missing critical path): nothing to skew.
                continue;
            }
            let least = if count < constraint.min_domains {
                0
            } else {
                least
            };
            let here = self
                .matching
                .get(&(constraint.key.clone(), value.to_string()))
                .copied()
                .unwrap_or(0);
            if here + i64::from(*self_match) - least > constraint.max_skew {
                return Some((SPREAD_REFUSED, true));
            }
        }
        None
    }
}

/// kube's PodTopologySpread score of each of `candidates` (the fitting nodes), normalised
/// to 0–100: each `ScheduleAnyway` constraint adds the matching pods in the node's
/// domain, weighted by the log of how many domains there are, plus `maxSkew - 1`; fewer
/// is better. A candidate without every constraint's label scores 0.
pub(super) fn scores(
    pod: &Pod,
    constraints: &Constraints,
    placed: &Placed,
    nodes: &[Arc<Node>],
    candidates: &[Arc<Node>],
) -> Vec<i64> {
    let soft = constraints.soft.as_slice();
    if soft.is_empty() {
        return vec![0; candidates.len()];
    }
    let eligible: Vec<bool> = candidates.iter().map(|n| labelled_for(n, soft)).collect();
    let scored = || {
        candidates
            .iter()
            .zip(&eligible)
            .filter(|(_, e)| **e)
            .map(|(n, _)| n)
    };
    // Each constraint's domains among the candidates, with their matching pods.
    let mut domains: Vec<BTreeMap<String, i64>> = soft
        .iter()
        .map(|c| {
            let values = scored().filter_map(|n| placed::domain(n, &c.key));
            values.map(|v| (v.to_string(), 0)).collect()
        })
        .collect();
    let weights: Vec<f64> = soft
        .iter()
        .zip(&domains)
        .map(|(c, d)| {
            let size = match c.key.as_str() {
                HOSTNAME => scored().count(),
                _ => d.len(),
            };
            ((size + 2) as f64).ln()
        })
        .collect();
    for node in nodes.iter().filter(|n| labelled_for(n, soft)) {
        let pods = placed.on(node.metadata.name.as_deref().unwrap_or_default());
        for (constraint, counts) in soft.iter().zip(domains.iter_mut()) {
            if constraint.key == HOSTNAME || !constraint.includes(pod, node) {
                continue;
            }
            let value = placed::domain(node, &constraint.key).unwrap_or_default();
            if let Some(count) = counts.get_mut(value) {
                *count += constraint.count(pod, pods);
            }
        }
    }
    let raw: Vec<Option<i64>> = candidates
        .iter()
        .zip(&eligible)
        .map(|(node, eligible)| {
            eligible.then(|| {
                let mut score = 0.0;
                for ((constraint, counts), weight) in soft.iter().zip(&domains).zip(&weights) {
                    let Some(value) = placed::domain(node, &constraint.key) else {
                        continue;
                    };
                    let count = match constraint.key.as_str() {
                        HOSTNAME => {
                            let on = node.metadata.name.as_deref().unwrap_or_default();
                            constraint.count(pod, placed.on(on))
                        }
                        _ => counts.get(value).copied().unwrap_or(0),
                    };
                    score += count as f64 * weight + (constraint.max_skew - 1) as f64;
                }
                score.round() as i64
            })
        })
        .collect();
    let scored_raw = raw.iter().flatten().copied();
    let (min, max) = scored_raw.fold((i64::MAX, 0), |(lo, hi), s| (lo.min(s), hi.max(s)));
    raw.iter()
        .map(|score| match (score, max) {
            (None, _) => 0,
            (Some(_), 0) => 100,
            (Some(score), max) => 100 * (max + min - score) / max,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn node(name: &str, zone: &str) -> Arc<Node> {
        let labels = json!({"kubernetes.io/hostname": name, "zone": zone});
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))
                .expect("node"),
        )
    }

    fn pod(labels: Value, constraints: Value) -> Arc<Pod> {
        let body = json!({
            "metadata": {"name": "p", "namespace": "default", "labels": labels},
            "spec": {"containers": [], "topologySpreadConstraints": constraints},
        });
        Arc::new(serde_json::from_value(body).expect("pod"))
    }

    fn by_zone(extra: Value) -> Value {
        let mut constraint = json!({"maxSkew": 1, "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "a"}}});
        if let (Some(c), Some(extra)) = (constraint.as_object_mut(), extra.as_object()) {
            c.extend(extra.clone());
        }
        json!([constraint])
    }

    /// Two pods of `app: a`, version 1, in zone `z1`; none in `z2`.
    fn two_in_z1(nodes: &[Arc<Node>]) -> Placed {
        let on = nodes[0].metadata.name.clone().unwrap_or_default();
        let mut running = pod(json!({"app": "a", "version": "1"}), json!([]));
        if let Some(spec) = Arc::make_mut(&mut running).spec.as_mut() {
            spec.node_name = Some(on);
        }
        Placed::new([running.clone(), running], [])
    }

    fn refusal(
        incoming: &Pod,
        nodes: &[Arc<Node>],
        placed: &Placed,
        target: usize,
    ) -> Option<&'static str> {
        let constraints = Constraints::of(incoming);
        let filter = Filter::new(incoming, &constraints, placed, nodes)?;
        filter.refuses(&nodes[target]).map(|(reason, _)| reason)
    }

    #[test]
    fn skew_is_judged_against_the_least_populated_domain() {
        let nodes = [node("n1", "z1"), node("n2", "z2")];
        let placed = two_in_z1(&nodes);
        let incoming = pod(json!({"app": "a", "version": "2"}), by_zone(json!({})));
        assert_eq!(refusal(&incoming, &nodes, &placed, 0), Some(SPREAD_REFUSED));
        assert_eq!(refusal(&incoming, &nodes, &placed, 1), None);
        // matchLabelKeys narrows the count to pods of the same version: none run.
        let versioned = pod(
            json!({"app": "a", "version": "2"}),
            by_zone(json!({"matchLabelKeys": ["version"]})),
        );
        assert_eq!(refusal(&versioned, &nodes, &placed, 0), None);
    }

    #[test]
    fn fewer_domains_than_min_domains_count_the_least_as_zero() {
        let nodes = [node("n1", "z1")];
        let placed = two_in_z1(&nodes);
        let one_domain = pod(json!({"app": "a"}), by_zone(json!({"maxSkew": 3})));
        assert_eq!(refusal(&one_domain, &nodes, &placed, 0), None);
        let wants_two = pod(
            json!({"app": "a"}),
            by_zone(json!({"maxSkew": 2, "minDomains": 2})),
        );
        assert_eq!(
            refusal(&wants_two, &nodes, &placed, 0),
            Some(SPREAD_REFUSED)
        );
    }
}
