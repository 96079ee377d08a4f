//! kube-scheduler's InterPodAffinity for the simulated nodes. A pod's required affinity
//! terms admit only nodes in a topology domain (the value of the node's `topologyKey`
//! label) where a pod matching all of them runs, unless no pod anywhere does and the pod
//! matches them itself (the first of a group); its required anti-affinity terms refuse
//! the domains where a matching pod runs; and a running pod's required anti-affinity
//! refuses the incoming pod the domain it runs in. Preferred terms (and the running pods'
//! terms that match the incoming pod) score the nodes. kube's messages, its
//! `Unschedulable`/`UnschedulableAndUnresolvable` split and its defaults: a term without
//! namespaces or a namespace selector looks in its pod's namespace, a missing label
//! selector selects nothing.
//!
//! Must not know: the other filters, or how a node is chosen among the fitting.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodAffinityTerm, WeightedPodAffinityTerm};
use kube::ResourceExt;
use kube::core::Selector;
use steady_runtime::{ObjectCache, ObjectKey};

use super::ByUid;
use super::placed::{self, Placed};

/// Namespace name to its labels: what a term's namespace selector reads.
pub(super) type NamespaceLabels = BTreeMap<String, BTreeMap<String, String>>;

pub(super) const AFFINITY_REFUSED: &str = "node(s) didn't match pod affinity rules";
pub(super) const ANTI_AFFINITY_REFUSED: &str = "node(s) didn't match pod anti-affinity rules";
pub(super) const EXISTING_REFUSED: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

/// kube's `hardPodAffinityWeight`: what a running pod's required affinity term that
/// matches the incoming pod adds to its domain's score.
const HARD_AFFINITY_WEIGHT: i64 = 1;

/// One pod affinity term, read once (kube's `framework.AffinityTerm`).
struct Term {
    selects: Option<Selector>,
    namespaces: BTreeSet<String>,
    namespace_selector: Option<Selector>,
    topology_key: String,
    weight: i64,
}

impl Term {
    fn new(term: &PodAffinityTerm, own_namespace: &str, weight: i32) -> Term {
        let mut namespaces: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
        if namespaces.is_empty() && term.namespace_selector.is_none() {
            namespaces.insert(own_namespace.to_string());
        }
        Term {
            selects: placed::selector(term.label_selector.as_ref()),
            namespaces,
            namespace_selector: placed::selector(term.namespace_selector.as_ref()),
            topology_key: term.topology_key.clone(),
            weight: weight.into(),
        }
    }

    /// kube's `AffinityTerm.Matches`: the pod is in one of the term's namespaces (listed
    /// or selected by their labels) and the term's selector selects its labels.
    fn matches(&self, pod: &Pod, namespaces: &NamespaceLabels) -> bool {
        let listed = || {
            self.namespaces
                .contains(pod.metadata.namespace.as_deref().unwrap_or_default())
        };
        let selected = || {
            let labels = placed::namespace_labels(pod, namespaces);
            placed::selects(self.namespace_selector.as_ref(), labels)
        };
        (listed() || selected())
            && placed::selects(self.selects.as_ref(), pod.metadata.labels.as_ref())
    }

    /// Whether matching needs namespaces' labels (a selector that is not `{}`).
    fn reads_namespace_labels(&self) -> bool {
        self.namespace_selector
            .as_ref()
            .is_some_and(|s| !s.selects_all())
    }
}

/// A pod's inter-pod affinity terms.
#[derive(Default)]
pub(super) struct Terms {
    required: Vec<Term>,
    required_anti: Vec<Term>,
    preferred: Vec<Term>,
    preferred_anti: Vec<Term>,
}

impl Terms {
    pub(super) fn of(pod: &Pod) -> Terms {
        let Some(affinity) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else {
            return Terms::default();
        };
        let namespace = pod.namespace().unwrap_or_default();
        // PodAffinity and PodAntiAffinity are two types with the same two lists.
        type Lists<'a> = (
            &'a Option<Vec<PodAffinityTerm>>,
            &'a Option<Vec<WeightedPodAffinityTerm>>,
        );
        let read = |lists: Option<Lists>| -> (Vec<Term>, Vec<Term>) {
            let Some((required, preferred)) = lists else {
                return (Vec::new(), Vec::new());
            };
            let required = required.iter().flatten();
            let preferred = preferred.iter().flatten();
            (
                required.map(|t| Term::new(t, &namespace, 0)).collect(),
                preferred
                    .map(|t| Term::new(&t.pod_affinity_term, &namespace, t.weight))
                    .collect(),
            )
        };
        let (required, preferred) = read(affinity.pod_affinity.as_ref().map(|a| {
            (
                &a.required_during_scheduling_ignored_during_execution,
                &a.preferred_during_scheduling_ignored_during_execution,
            )
        }));
        let (required_anti, preferred_anti) = read(affinity.pod_anti_affinity.as_ref().map(|a| {
            (
                &a.required_during_scheduling_ignored_during_execution,
                &a.preferred_during_scheduling_ignored_during_execution,
            )
        }));
        Terms {
            required,
            required_anti,
            preferred,
            preferred_anti,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.required.is_empty()
            && self.required_anti.is_empty()
            && self.preferred.is_empty()
            && self.preferred_anti.is_empty()
    }

    fn all(&self) -> impl Iterator<Item = &Term> {
        self.required
            .iter()
            .chain(&self.required_anti)
            .chain(&self.preferred)
            .chain(&self.preferred_anti)
    }

    /// Whether these terms, or those of the pods placed, need namespaces' labels.
    pub(super) fn read_namespace_labels(&self, placed: &Placed) -> bool {
        let reads = |terms: &Terms| terms.all().any(Term::reads_namespace_labels);
        reads(self) || placed.iter().any(|(_, pod)| reads(&Terms::of(pod)))
    }
}

/// Whether the pod states any inter-pod affinity term (without reading them).
pub(super) fn has_terms(pod: &Pod) -> bool {
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    affinity.is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some())
}

/// Counts of matching pods by topology domain (key, value).
type Counts = BTreeMap<(String, String), i64>;

fn count_in(counts: &mut Counts, node: &Node, key: &str, by: i64) {
    if let Some(value) = placed::domain(node, key) {
        *counts
            .entry((key.to_string(), value.to_string()))
            .or_default() += by;
    }
}

/// kube's PreFilter state: where the pods that match the incoming pod's required terms
/// run, and where the running pods whose required anti-affinity refuses it run.
pub(super) struct Filter<'a> {
    terms: &'a Terms,
    affinity: Counts,
    anti_affinity: Counts,
    existing_anti_affinity: Counts,
    matches_itself: bool,
}

impl<'a> Filter<'a> {
    /// `None` when neither the pod's terms nor any running pod's constrain it (kube's
    /// Skip).
    pub(super) fn new(
        pod: &Pod,
        terms: &'a Terms,
        placed: &Placed,
        node_named: &impl Fn(&str) -> Option<Arc<Node>>,
        namespaces: &NamespaceLabels,
    ) -> Option<Filter<'a>> {
        let required = &terms.required;
        let mut filter = Filter {
            terms,
            affinity: Counts::new(),
            anti_affinity: Counts::new(),
            existing_anti_affinity: Counts::new(),
            matches_itself: !required.is_empty()
                && required.iter().all(|t| t.matches(pod, namespaces)),
        };
        for (name, running) in placed.iter() {
            let Some(node) = node_named(name) else {
                continue;
            };
            for term in Terms::of(running).required_anti {
                if term.matches(pod, namespaces) {
                    count_in(
                        &mut filter.existing_anti_affinity,
                        &node,
                        &term.topology_key,
                        1,
                    );
                }
            }
            if !required.is_empty() && required.iter().all(|t| t.matches(running, namespaces)) {
                for term in required {
                    count_in(&mut filter.affinity, &node, &term.topology_key, 1);
                }
            }
            for term in &terms.required_anti {
                if term.matches(running, namespaces) {
                    count_in(&mut filter.anti_affinity, &node, &term.topology_key, 1);
                }
            }
        }
        let constrained = !filter.existing_anti_affinity.is_empty()
            || !required.is_empty()
            || !terms.required_anti.is_empty();
        constrained.then_some(filter)
    }

    /// Why `node` cannot take the pod, and whether evicting pods could change that
    /// (kube's `Unschedulable`; `UnschedulableAndUnresolvable` otherwise).
    pub(super) fn refuses(&self, node: &Node) -> Option<(&'static str, bool)> {
        if !self.terms.required.is_empty() {
            let mut pods_exist = true;
            for term in &self.terms.required {
                let Some(value) = placed::domain(node, &term.topology_key) else {
                    return Some((AFFINITY_REFUSED, false));
                };
                let key = (term.topology_key.clone(), value.to_string());
                if self.affinity.get(&key).copied().unwrap_or(0) <= 0 {
                    pods_exist = false;
                }
            }
            // The first pod of a group with affinity to itself goes anywhere it could.
            let first_of_its_group = self.affinity.is_empty() && self.matches_itself;
            if !(pods_exist || first_of_its_group) {
                return Some((AFFINITY_REFUSED, false));
            }
        }
        let refused_by_own = self.terms.required_anti.iter().any(|term| {
            placed::domain(node, &term.topology_key).is_some_and(|value| {
                let key = (term.topology_key.clone(), value.to_string());
                self.anti_affinity.get(&key).copied().unwrap_or(0) > 0
            })
        });
        if refused_by_own {
            return Some((ANTI_AFFINITY_REFUSED, true));
        }
        let labels = node.metadata.labels.iter().flatten();
        let refused_by_running = labels.into_iter().any(|(key, value)| {
            let key = (key.clone(), value.clone());
            self.existing_anti_affinity.get(&key).copied().unwrap_or(0) > 0
        });
        refused_by_running.then_some((EXISTING_REFUSED, true))
    }
}

/// kube's InterPodAffinity score of each of `candidates` for the pod, normalised to
/// 0–100 between the lowest and the highest: the weights of the pod's preferred terms
/// that running pods in the node's domains match (anti-affinity's subtracted), plus those
/// of the running pods' terms that match the pod.
pub(super) fn scores(
    pod: &Pod,
    terms: &Terms,
    placed: &Placed,
    node_named: &impl Fn(&str) -> Option<Arc<Node>>,
    namespaces: &NamespaceLabels,
    candidates: &[Arc<Node>],
) -> Vec<i64> {
    let mut by_domain = Counts::new();
    for (name, running) in placed.iter() {
        let Some(node) = node_named(name) else {
            continue;
        };
        let mut add = |term: &Term, target: &Pod, weight: i64| {
            if term.matches(target, namespaces) {
                count_in(&mut by_domain, &node, &term.topology_key, weight);
            }
        };
        for term in &terms.preferred {
            add(term, running, term.weight);
        }
        for term in &terms.preferred_anti {
            add(term, running, -term.weight);
        }
        let theirs = Terms::of(running);
        for term in &theirs.required {
            add(term, pod, HARD_AFFINITY_WEIGHT);
        }
        for term in &theirs.preferred {
            add(term, pod, term.weight);
        }
        for term in &theirs.preferred_anti {
            add(term, pod, -term.weight);
        }
    }
    let raw: Vec<i64> = candidates
        .iter()
        .map(|node| {
            let labels = node.metadata.labels.iter().flatten();
            labels
                .map(|(k, v)| by_domain.get(&(k.clone(), v.clone())).copied().unwrap_or(0))
                .sum()
        })
        .collect();
    let (min, max) = (
        raw.iter().copied().min().unwrap_or(0),
        raw.iter().copied().max().unwrap_or(0),
    );
    raw.iter()
        .map(|score| match max - min {
            0 => 0,
            spread => (100.0 * (score - min) as f64 / spread as f64) as i64,
        })
        .collect()
}

/// The pods seen with inter-pod affinity terms, by uid: those whose terms every decision
/// weighs, however unconstrained the pod it places. It may still name pods gone since
/// (a deleted pod leaves no event here); reading it forgets them.
#[derive(Default)]
pub(super) struct WithTerms(ByUid<ObjectKey>);

impl WithTerms {
    pub(super) fn observe(&mut self, pod: &Pod) {
        let keep = has_terms(pod) && !crate::pod_template::is_finished(pod);
        super::track(&mut self.0, pod, keep);
    }

    /// Those of them still in the cache, unfinished.
    pub(super) fn placed(&mut self, pods: &ObjectCache<Pod>) -> Vec<Arc<Pod>> {
        let mut found = Vec::new();
        self.0.retain(|uid, key| {
            let Some(pod) = pods.get(key) else {
                return false;
            };
            if pod.metadata.uid.as_deref() != Some(uid) || crate::pod_template::is_finished(&pod) {
                return false;
            }
            found.push(pod);
            true
        });
        found
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(namespace: &str, labels: Value, affinity: Value) -> Pod {
        let body = json!({
            "metadata": {"name": "p", "namespace": namespace, "labels": labels},
            "spec": {"containers": [], "affinity": affinity},
        });
        serde_json::from_value(body).expect("pod")
    }

    fn anti(term: Value) -> Value {
        json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
    }

    fn matches(term: Value, target: &Pod, namespaces: &NamespaceLabels) -> bool {
        let owner = pod("home", json!({}), anti(term));
        Terms::of(&owner).required_anti[0].matches(target, namespaces)
    }

    #[test]
    fn a_term_looks_in_its_own_namespace_unless_it_names_or_selects_others() {
        let selector = json!({"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "k"});
        let here = pod("home", json!({"app": "a"}), json!({}));
        let there = pod("away", json!({"app": "a"}), json!({}));
        let labels: NamespaceLabels = [(
            "away".to_string(),
            [("team".to_string(), "x".to_string())].into(),
        )]
        .into();
        assert!(matches(selector.clone(), &here, &labels));
        assert!(!matches(selector.clone(), &there, &labels));
        let mut named = selector.clone();
        named["namespaces"] = json!(["away"]);
        assert!(matches(named.clone(), &there, &labels));
        assert!(
            !matches(named, &here, &labels),
            "naming namespaces replaces its own"
        );
        let mut selected = selector.clone();
        selected["namespaceSelector"] = json!({"matchLabels": {"team": "x"}});
        assert!(matches(selected, &there, &labels));
        let mut everywhere = selector.clone();
        everywhere["namespaceSelector"] = json!({});
        assert!(matches(everywhere, &there, &NamespaceLabels::new()));
        let no_selector = json!({"topologyKey": "k"});
        assert!(
            !matches(no_selector, &here, &labels),
            "no label selector selects nothing"
        );
    }
}
