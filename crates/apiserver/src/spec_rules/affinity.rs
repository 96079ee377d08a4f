//! A pod spec's affinity, as kube's `validateAffinity` checks it: a required node affinity
//! has terms, each requirement has a known operator with the values it needs and a label
//! name for a key (a field requirement names `metadata.name` with one valid node name),
//! weights lie in 1–100, and a pod (anti-)affinity term has valid selectors and
//! namespaces, label keys beside its selector, and a topology key. Operators spreading
//! replicas with anti-affinity write these on every workload.

use serde_json::Value;

use super::rbac::label_selector;
use super::{
    dns_label, dns_subdomain, error, invalid, list, present, qualified_name, required_because, text,
};
use crate::schema::{FieldError, FieldErrorReason, Path};

const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// The affinity of the pod spec `spec` at `at`.
pub(super) fn affinity(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let Some(affinity) = present(spec, "affinity") else {
        return;
    };
    let at = Path::Field(at, "affinity");
    if let Some(node) = present(affinity, "nodeAffinity") {
        node_affinity(node, &Path::Field(&at, "nodeAffinity"), errors);
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        if let Some(pods) = present(affinity, kind) {
            pod_affinity(pods, &Path::Field(&at, kind), errors);
        }
    }
}

fn node_affinity(node: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    if let Some(selector) = present(node, REQUIRED) {
        let terms_at = Path::Field(&Path::Field(at, REQUIRED), "nodeSelectorTerms");
        let terms = list(selector, "nodeSelectorTerms");
        if terms.is_empty() {
            errors.push(error(
                &terms_at,
                FieldErrorReason::Required,
                "Required value: must have at least one node selector term".into(),
            ));
        }
        for (i, term) in terms.iter().enumerate() {
            node_selector_term(term, &Path::Item(&terms_at, i), errors);
        }
    }
    let preferred_at = Path::Field(at, PREFERRED);
    for (i, term) in list(node, PREFERRED).iter().enumerate() {
        let item = Path::Item(&preferred_at, i);
        weight(term, &item, errors);
        let preference = term.get("preference").unwrap_or(&Value::Null);
        node_selector_term(preference, &Path::Field(&item, "preference"), errors);
    }
}

/// kube's `ValidateNodeSelectorTerm`: its label requirements and field requirements.
fn node_selector_term(term: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let expressions = Path::Field(at, "matchExpressions");
    for (j, requirement) in list(term, "matchExpressions").iter().enumerate() {
        label_requirement(requirement, &Path::Item(&expressions, j), errors);
    }
    let fields = Path::Field(at, "matchFields");
    for (j, requirement) in list(term, "matchFields").iter().enumerate() {
        field_requirement(requirement, &Path::Item(&fields, j), errors);
    }
}

/// kube's `ValidateNodeSelectorRequirement`.
fn label_requirement(requirement: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let values = list(requirement, "values");
    let values_at = Path::Field(at, "values");
    let operator = text(requirement, "operator");
    match operator {
        "In" | "NotIn" if values.is_empty() => errors.push(required_because(
            &values_at,
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(error(
            &values_at,
            FieldErrorReason::Forbidden,
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'".into(),
        )),
        "Gt" | "Lt" if values.len() != 1 => errors.push(required_because(
            &values_at,
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        other => errors.push(invalid(
            &Path::Field(at, "operator"),
            &Value::from(other),
            "not a valid selector operator",
        )),
    }
    qualified_name(text(requirement, "key"), &Path::Field(at, "key"), errors);
}

/// kube's `ValidateNodeFieldSelectorRequirement`: only `metadata.name`, `In` or `NotIn`
/// one node name.
fn field_requirement(requirement: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let values = list(requirement, "values");
    match text(requirement, "operator") {
        "In" | "NotIn" if values.len() != 1 => errors.push(required_because(
            &Path::Field(at, "values"),
            "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
        )),
        "In" | "NotIn" => {}
        other => errors.push(invalid(
            &Path::Field(at, "operator"),
            &Value::from(other),
            "not a valid selector operator",
        )),
    }
    let key = text(requirement, "key");
    if key != "metadata.name" {
        errors.push(invalid(
            &Path::Field(at, "key"),
            &Value::from(key),
            "not a valid field selector key",
        ));
        return;
    }
    let values_at = Path::Field(at, "values");
    for (i, value) in values.iter().enumerate() {
        let name = value.as_str().unwrap_or_default();
        dns_subdomain(name, &Path::Item(&values_at, i), errors);
    }
}

fn pod_affinity(pods: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let required_at = Path::Field(at, REQUIRED);
    for (i, term) in list(pods, REQUIRED).iter().enumerate() {
        pod_affinity_term(term, &Path::Item(&required_at, i), errors);
    }
    let preferred_at = Path::Field(at, PREFERRED);
    for (i, weighted) in list(pods, PREFERRED).iter().enumerate() {
        let item = Path::Item(&preferred_at, i);
        weight(weighted, &item, errors);
        let term = weighted.get("podAffinityTerm").unwrap_or(&Value::Null);
        pod_affinity_term(term, &Path::Field(&item, "podAffinityTerm"), errors);
    }
}

/// kube's `validatePodAffinityTerm`.
fn pod_affinity_term(term: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let selector = present(term, "labelSelector");
    if let Some(selector) = selector {
        label_selector(selector, &Path::Field(at, "labelSelector"), errors);
    }
    if let Some(selector) = present(term, "namespaceSelector") {
        label_selector(selector, &Path::Field(at, "namespaceSelector"), errors);
    }
    for name in list(term, "namespaces") {
        dns_label(
            name.as_str().unwrap_or_default(),
            &Path::Field(at, "namespace"),
            errors,
        );
    }
    label_keys(term, selector, at, errors);
    let key = text(term, "topologyKey");
    let key_at = Path::Field(at, "topologyKey");
    if key.is_empty() {
        errors.push(required_because(&key_at, "can not be empty"));
    }
    qualified_name(key, &key_at, errors);
}

/// kube's `validateMatchLabelKeysAndMismatchLabelKeys`: label names beside a selector, a
/// matched key not also in the selector's expressions or among the mismatched ones.
fn label_keys(term: &Value, selector: Option<&Value>, at: &Path, errors: &mut Vec<FieldError>) {
    let keys = |field: &str| -> Vec<&str> {
        list(term, field)
            .iter()
            .map(|k| k.as_str().unwrap_or_default())
            .collect()
    };
    let matched = keys("matchLabelKeys");
    let mismatched = keys("mismatchLabelKeys");
    for (field, keys) in [
        ("matchLabelKeys", &matched),
        ("mismatchLabelKeys", &mismatched),
    ] {
        if keys.is_empty() {
            continue;
        }
        let keys_at = Path::Field(at, field);
        if selector.is_none() {
            errors.push(error(
                &keys_at,
                FieldErrorReason::Forbidden,
                "Forbidden: must not be specified when labelSelector is not set".into(),
            ));
            continue;
        }
        for (i, key) in keys.iter().enumerate() {
            qualified_name(key, &Path::Item(&keys_at, i), errors);
        }
    }
    if let Some(selector) = selector {
        let in_labels = |key: &str| {
            selector
                .get("matchLabels")
                .is_some_and(|labels| labels.get(key).is_some())
        };
        let mut seen: Vec<&str> = Vec::new();
        for expression in list(selector, "matchExpressions") {
            let key = text(expression, "key");
            // kube indexes the term itself here, not its matchLabelKeys
            if let Some(i) = matched.iter().rposition(|k| *k == key)
                && (in_labels(key) || seen.contains(&key))
            {
                errors.push(invalid(
                    &Path::Item(at, i),
                    &Value::from(key),
                    "exists in both matchLabelKeys and labelSelector",
                ));
            }
            seen.push(key);
        }
    }
    let matched_at = Path::Field(at, "matchLabelKeys");
    for (i, key) in matched.iter().enumerate() {
        if mismatched.contains(key) {
            errors.push(invalid(
                &Path::Item(&matched_at, i),
                &Value::from(*key),
                "exists in both matchLabelKeys and mismatchLabelKeys",
            ));
        }
    }
}

/// A preferred term's weight, 1 to 100.
fn weight(term: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let weight = term.get("weight").and_then(Value::as_i64).unwrap_or(0);
    if !(1..=100).contains(&weight) {
        errors.push(invalid(
            &Path::Field(at, "weight"),
            &weight.into(),
            "must be in the range 1-100",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::messages;
    use super::super::validate;
    use serde_json::{Value, json};

    fn affinity_errors(affinity: Value) -> Vec<String> {
        let pod = json!({"spec": {"containers": [{"name": "c", "image": "app:1"}], "affinity": affinity}});
        messages(&validate("", "pods", &pod))
    }

    #[test]
    fn affinity_operators_write_passes() {
        let affinity = json!({
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                     "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-1"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50,
                    "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}]},
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "db"}}, "matchLabelKeys": ["pod-template-hash"]}],
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
                    "topologyKey": "topology.kubernetes.io/zone", "namespaces": ["prod"],
                    "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}}}]}
        });
        assert_eq!(affinity_errors(affinity), Vec::<String>::new());
    }

    #[test]
    fn affinity_kube_refuses_is_refused_with_its_messages() {
        let affinity = json!({
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In"},
                        {"key": "size", "operator": "Gt", "values": ["1", "2"]},
                        {"key": "bad key", "operator": "Like", "values": ["x"]}],
                     "matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["u"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]},
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "", "matchLabelKeys": ["app"]}],
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 101, "podAffinityTerm": {
                    "topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}},
                    "matchLabelKeys": ["version"], "mismatchLabelKeys": ["version"]}}]}
        });
        let n = "spec.affinity.nodeAffinity";
        let p = "spec.affinity.podAffinity";
        let term =
            format!("{n}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]");
        assert_eq!(
            affinity_errors(affinity),
            [
                format!(
                    "{term}.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
                ),
                format!(
                    "{term}.matchExpressions[1].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
                ),
                format!(
                    "{term}.matchExpressions[2].operator: Invalid value: \"Like\": not a valid selector operator"
                ),
                format!(
                    "{term}.matchExpressions[2].key: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
                ),
                format!(
                    "{term}.matchFields[0].key: Invalid value: \"metadata.uid\": not a valid field selector key"
                ),
                format!(
                    "{n}.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100"
                ),
                format!(
                    "{p}.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"
                ),
                format!(
                    "{p}.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty"
                ),
                format!(
                    "{p}.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Invalid value: \"\": name part must be non-empty"
                ),
                format!(
                    "{p}.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 101: must be in the range 1-100"
                ),
                format!(
                    "{p}.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.matchLabelKeys[0]: Invalid value: \"version\": exists in both matchLabelKeys and mismatchLabelKeys"
                ),
            ]
        );
    }
}
