//! kube's node affinity (component-helpers' `nodeaffinity`): which nodes a pod's
//! `nodeSelector` and required node affinity allow, and how much its preferred node
//! affinity likes a node. The scheduler (`node`) and the DaemonSet controller read it.
//!
//! Must not know: who asks, or what else makes a node fit.

use k8s_openapi::api::core::v1::{
    Node, NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
};

/// kube's `GetRequiredNodeAffinity(pod).Match(node)`: the pod's `nodeSelector` matches
/// the node's labels and, when it has required node affinity, one of its terms matches.
pub fn required_match(spec: &PodSpec, node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref();
    let selected = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(key, value)| labels.and_then(|l| l.get(key)) == Some(value));
    let required = node_affinity(spec).and_then(|a| {
        a.required_during_scheduling_ignored_during_execution
            .as_ref()
    });
    selected
        && required.is_none_or(|required| {
            let terms = &required.node_selector_terms;
            terms.iter().any(|term| term_matches(term, node))
        })
}

/// kube's NodeAffinity score before it is normalised: the summed weights of the pod's
/// preferred terms that the node matches.
pub fn preferred_score(spec: &PodSpec, node: &Node) -> i64 {
    let preferred = node_affinity(spec).and_then(|a| {
        a.preferred_during_scheduling_ignored_during_execution
            .as_ref()
    });
    preferred
        .into_iter()
        .flatten()
        .filter(|p| term_matches(&p.preference, node))
        .map(|p| i64::from(p.weight))
        .sum()
}

fn node_affinity(spec: &PodSpec) -> Option<&NodeAffinity> {
    spec.affinity.as_ref()?.node_affinity.as_ref()
}

/// Every expression matches the node's labels and every field its name; a term with
/// neither matches no node.
fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.as_ref();
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    expressions
        .iter()
        .all(|r| requirement_matches(r, label(&r.key)))
        && fields.iter().all(|r| {
            // `metadata.name` is the one field validation allows.
            r.key == "metadata.name" && requirement_matches(r, node.metadata.name.as_deref())
        })
}

/// One requirement against the value it names (`None`: the node has no such label).
fn requirement_matches(requirement: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let listed = |v: &str| values.iter().any(|x| x == v);
    // `Gt` and `Lt` compare integers; a value that is not one matches neither.
    let compared = |value: Option<&str>| -> Option<std::cmp::Ordering> {
        let value: i64 = value?.parse().ok()?;
        let bound: i64 = values.first()?.parse().ok()?;
        Some(value.cmp(&bound))
    };
    match requirement.operator.as_str() {
        "In" => value.is_some_and(listed),
        "NotIn" => value.is_none_or(|v| !listed(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => compared(value) == Some(std::cmp::Ordering::Greater),
        "Lt" => compared(value) == Some(std::cmp::Ordering::Less),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))
            .expect("a node")
    }

    fn spec(affinity: serde_json::Value, selector: serde_json::Value) -> PodSpec {
        serde_json::from_value(json!({
            "containers": [],
            "nodeSelector": selector,
            "affinity": {"nodeAffinity": affinity},
        }))
        .expect("a pod spec")
    }

    fn required(terms: serde_json::Value) -> PodSpec {
        spec(
            json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}),
            json!(null),
        )
    }

    #[test]
    fn terms_are_ored_and_their_requirements_anded() {
        let ssd = node("a", json!({"disk": "ssd", "zone": "z1"}));
        let hdd = node("b", json!({"disk": "hdd", "zone": "z1"}));
        let pod = required(json!([
            {"matchExpressions": [
                {"key": "disk", "operator": "In", "values": ["ssd"]},
                {"key": "zone", "operator": "Exists"},
            ]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]},
        ]));
        assert!(required_match(&pod, &ssd));
        assert!(!required_match(&pod, &hdd));
        assert!(
            required_match(&pod, &node("c", json!({}))),
            "the second term"
        );
    }

    #[test]
    fn each_operator_as_kube_reads_it() {
        let gpu = node("n", json!({"gpus": "4", "tier": "gold"}));
        let matches = |operator: &str, key: &str, values: serde_json::Value| {
            let pod = required(json!([{"matchExpressions": [
                {"key": key, "operator": operator, "values": values},
            ]}]));
            required_match(&pod, &gpu)
        };
        assert!(matches("Gt", "gpus", json!(["2"])));
        assert!(!matches("Gt", "gpus", json!(["4"])));
        assert!(matches("Lt", "gpus", json!(["5"])));
        assert!(!matches("Gt", "tier", json!(["1"])), "not a number");
        assert!(!matches("Gt", "absent", json!(["1"])));
        assert!(matches("NotIn", "tier", json!(["silver"])));
        assert!(matches("NotIn", "absent", json!(["x"])), "absent is not in");
        assert!(!matches("NotIn", "tier", json!(["gold"])));
        assert!(matches("DoesNotExist", "absent", json!(null)));
        assert!(!matches("DoesNotExist", "tier", json!(null)));
    }

    #[test]
    fn an_empty_term_matches_no_node_and_the_node_selector_must_match_too() {
        let gold = node("n", json!({"tier": "gold"}));
        assert!(!required_match(&required(json!([{}])), &gold));
        let both = spec(json!(null), json!({"tier": "silver"}));
        assert!(!required_match(&both, &gold));
        assert!(required_match(&spec(json!(null), json!(null)), &gold));
    }

    #[test]
    fn preferred_terms_add_their_weights() {
        let pod = spec(
            json!({"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [
                    {"key": "disk", "operator": "In", "values": ["ssd"]}]}},
                {"weight": 3, "preference": {"matchExpressions": [
                    {"key": "zone", "operator": "Exists"}]}},
            ]}),
            json!(null),
        );
        assert_eq!(
            preferred_score(&pod, &node("a", json!({"disk": "ssd", "zone": "z"}))),
            13
        );
        assert_eq!(preferred_score(&pod, &node("b", json!({"zone": "z"}))), 3);
        assert_eq!(preferred_score(&pod, &node("c", json!({}))), 0);
    }
}
