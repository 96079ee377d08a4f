//! Where a pod may run, as kube's `ValidatePodSpec` checks it: the DNS policy is one kube
//! knows, the node selector is a valid label map, tolerations are well formed
//! (`ValidateTolerations`), and topology spread constraints are whole and distinct
//! (`validateTopologySpreadConstraints`). Operators write these for every workload they
//! place; one kube refuses is refused here too, with its messages.

use serde_json::Value;

use super::rbac::label_selector;
use super::{
    duplicate, error, go_pointer, invalid, list, not_supported, qualified_name, required, text,
};
use crate::schema::{FieldError, FieldErrorReason, Path};
use crate::validation::{label_value_problems, validate_labels_at};

const DNS_POLICIES: &[&str] = &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// The DNS policy and node selector of the pod spec at `at`.
pub(super) fn dns_and_node_selector(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    if let Some(policy) = spec.get("dnsPolicy").filter(|p| !p.is_null())
        && !policy.as_str().is_some_and(|p| DNS_POLICIES.contains(&p))
    {
        errors.push(not_supported(
            &Path::Field(at, "dnsPolicy"),
            policy,
            DNS_POLICIES,
        ));
    }
    if let Some(selector) = spec.get("nodeSelector").and_then(Value::as_object) {
        validate_labels_at(&Path::Field(at, "nodeSelector").render(), selector, errors);
    }
}

/// kube's `ValidateTolerations` of the pod spec at `at`.
pub(super) fn tolerations(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let all = &Path::Field(at, "tolerations");
    for (i, toleration) in list(spec, "tolerations").iter().enumerate() {
        let at = Path::Item(all, i);
        let key = text(toleration, "key");
        let operator = text(toleration, "operator");
        let effect = text(toleration, "effect");
        let value = text(toleration, "value");
        if !key.is_empty() {
            qualified_name(key, &Path::Field(&at, "key"), errors);
        }
        let operator_at = Path::Field(&at, "operator");
        if key.is_empty() && operator != "Exists" {
            errors.push(invalid(
                &operator_at,
                &Value::from(operator),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        let seconds = toleration.get("tolerationSeconds").filter(|s| !s.is_null());
        if seconds.is_some() && effect != "NoExecute" {
            errors.push(invalid(
                &Path::Field(&at, "effect"),
                &Value::from(effect),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            "Equal" | "" => {
                let problems = label_value_problems(value);
                if !problems.is_empty() {
                    errors.push(invalid(
                        &operator_at,
                        &Value::from(value),
                        &problems.join(";"),
                    ));
                }
            }
            "Exists" if !value.is_empty() => {
                // kube prints the whole toleration as a Go value here
                let seconds = go_pointer("*int64", seconds);
                let shown = format!(
                    "core.Toleration{{Key:{key:?}, Operator:\"Exists\", Value:{value:?}, Effect:{effect:?}, TolerationSeconds:{seconds}}}"
                );
                errors.push(error(
                    &operator_at,
                    FieldErrorReason::Invalid,
                    format!(
                        "Invalid value: {shown}: value must be empty when `operator` is 'Exists'"
                    ),
                ));
            }
            "Exists" => {}
            other => errors.push(not_supported(
                &operator_at,
                &Value::from(other),
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
            errors.push(not_supported(
                &Path::Field(&at, "effect"),
                &Value::from(effect),
                TAINT_EFFECTS,
            ));
        }
    }
}

/// kube's `validateTopologySpreadConstraints` of the pod spec at `at`.
pub(super) fn topology_spread(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let all = &Path::Field(at, "topologySpreadConstraints");
    let constraints = list(spec, "topologySpreadConstraints");
    for (i, constraint) in constraints.iter().enumerate() {
        let at = Path::Item(all, i);
        let skew = constraint
            .get("maxSkew")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if skew <= 0 {
            errors.push(invalid(
                &Path::Field(&at, "maxSkew"),
                &skew.into(),
                "must be greater than zero",
            ));
        }
        let key = text(constraint, "topologyKey");
        if key.is_empty() {
            errors.push(error(
                &Path::Field(&at, "topologyKey"),
                FieldErrorReason::Required,
                "Required value: can not be empty".into(),
            ));
        }
        let action = text(constraint, "whenUnsatisfiable");
        if !matches!(action, "DoNotSchedule" | "ScheduleAnyway") {
            errors.push(not_supported(
                &Path::Field(&at, "whenUnsatisfiable"),
                &Value::from(action),
                &["DoNotSchedule", "ScheduleAnyway"],
            ));
        }
        let repeated = constraints[i + 1..].iter().any(|later| {
            text(later, "topologyKey") == key && text(later, "whenUnsatisfiable") == action
        });
        if repeated {
            errors.push(duplicate(
                &Path::Field(&at, "{topologyKey, whenUnsatisfiable}"),
                &format!("{{{key}, {action}}}"),
            ));
        }
        min_domains(constraint, action, &Path::Field(&at, "minDomains"), errors);
        for policy in ["nodeAffinityPolicy", "nodeTaintsPolicy"] {
            if let Some(value) = constraint.get(policy).filter(|p| !p.is_null())
                && !matches!(value.as_str(), Some("Honor" | "Ignore"))
            {
                errors.push(not_supported(
                    &Path::Field(&at, policy),
                    value,
                    &["Honor", "Ignore"],
                ));
            }
        }
        let selector = constraint.get("labelSelector").filter(|s| !s.is_null());
        match_label_keys(
            constraint,
            selector,
            &Path::Field(&at, "matchLabelKeys"),
            errors,
        );
        if let Some(selector) = selector {
            label_selector(selector, &Path::Field(&at, "labelSelector"), errors);
        }
    }
}

fn min_domains(constraint: &Value, action: &str, at: &Path, errors: &mut Vec<FieldError>) {
    let Some(domains) = constraint.get("minDomains").filter(|d| !d.is_null()) else {
        return;
    };
    if domains.as_i64().is_none_or(|d| d <= 0) {
        errors.push(invalid(at, domains, "must be greater than zero"));
    }
    if action != "DoNotSchedule" {
        let why =
            format!("can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}");
        errors.push(invalid(at, domains, &why));
    }
}

/// Keys that take their value from the pod's own labels: label names, not already in the
/// selector, and only beside one.
fn match_label_keys(
    constraint: &Value,
    selector: Option<&Value>,
    at: &Path,
    errors: &mut Vec<FieldError>,
) {
    let keys = list(constraint, "matchLabelKeys");
    if keys.is_empty() {
        return;
    }
    let Some(selector) = selector else {
        errors.push(error(
            at,
            FieldErrorReason::Forbidden,
            "Forbidden: must not be specified when labelSelector is not set".into(),
        ));
        return;
    };
    let in_selector = |key: &str| {
        selector
            .get("matchLabels")
            .is_some_and(|labels| labels.get(key).is_some())
            || list(selector, "matchExpressions")
                .iter()
                .any(|e| text(e, "key") == key)
    };
    for (i, key) in keys.iter().enumerate() {
        let item = Path::Item(at, i);
        let key = key.as_str().unwrap_or_default();
        if key.is_empty() {
            errors.push(required(&item));
        } else {
            qualified_name(key, &item, errors);
        }
        if in_selector(key) {
            errors.push(invalid(
                &item,
                &Value::from(key),
                "exists in both matchLabelKeys and labelSelector",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::pod_spec_errors as spec_errors;
    use serde_json::json;

    #[test]
    fn what_operators_write_to_place_pods_passes() {
        let extra = json!({"dnsPolicy": "ClusterFirst", "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"},
                {"operator": "Exists"},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule", "minDomains": 2,
                "labelSelector": {"matchLabels": {"app": "db"}}, "matchLabelKeys": ["pod-template-hash"]}]});
        assert_eq!(spec_errors(extra), Vec::<String>::new());
    }

    #[test]
    fn placement_kube_refuses_is_refused_with_its_messages() {
        let extra = json!({"dnsPolicy": "ClusterFirstWithHost", "nodeSelector": {"zone": "eu west"},
            "tolerations": [{"key": "dedicated", "operator": "Exists", "value": "db"},
                {"operator": "Equal", "value": "x"},
                {"key": "k", "effect": "NoSchedule", "tolerationSeconds": 10},
                {"key": "k", "operator": "In", "effect": "Never"}],
            "topologySpreadConstraints": [
                {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2},
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
                    "matchLabelKeys": ["app"]},
                {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "Maybe"}]});
        let t = "spec.tolerations";
        let c = "spec.topologySpreadConstraints";
        assert_eq!(
            spec_errors(extra),
            [
                "spec.dnsPolicy: Unsupported value: \"ClusterFirstWithHost\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"".to_string(),
                "spec.nodeSelector: Invalid value: \"eu west\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string(),
                format!("{c}[0].maxSkew: Invalid value: 0: must be greater than zero"),
                format!("{c}[0].{{topologyKey, whenUnsatisfiable}}: Duplicate value: \"{{zone, ScheduleAnyway}}\""),
                format!("{c}[0].minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"),
                format!("{c}[1].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"),
                format!("{c}[2].topologyKey: Required value: can not be empty"),
                format!("{c}[2].whenUnsatisfiable: Unsupported value: \"Maybe\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\""),
                format!("{t}[0].operator: Invalid value: core.Toleration{{Key:\"dedicated\", Operator:\"Exists\", Value:\"db\", Effect:\"\", TolerationSeconds:(*int64)(nil)}}: value must be empty when `operator` is 'Exists'"),
                format!("{t}[1].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\""),
                format!("{t}[2].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set"),
                format!("{t}[3].operator: Unsupported value: \"In\": supported values: \"Equal\", \"Exists\""),
                format!("{t}[3].effect: Unsupported value: \"Never\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""),
            ]
        );
    }
}
