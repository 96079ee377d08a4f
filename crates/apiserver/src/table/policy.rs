//! The cells kube's printers compute for autoscalers, RBAC bindings, quotas,
//! ControllerRevisions and admission policies: an HPA's reference and targets
//! (`formatHPAMetrics`), a binding's role and subjects, a quota's used/hard pairs, a
//! revision's controller, a policy's param kind and a policy binding's param. Each is a
//! `columns::Compute`, named in `kinds.txt`.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::format::{NONE, UNKNOWN, arr_at, at, int_at, str_at, value_text};

/// REFERENCE: the scale target as `Kind/name`.
pub(super) fn hpa_reference(hpa: &Value, _: DateTime<Utc>) -> Value {
    let kind = str_at(hpa, &["spec", "scaleTargetRef", "kind"]).unwrap_or("");
    let name = str_at(hpa, &["spec", "scaleTargetRef", "name"]).unwrap_or("");
    json!(format!("{kind}/{name}"))
}

/// MINPODS: `minReplicas`, `<unset>` without one.
pub(super) fn hpa_min_pods(hpa: &Value, _: DateTime<Utc>) -> Value {
    json!(match int_at(hpa, &["spec", "minReplicas"]) {
        Some(min) => min.to_string(),
        None => "<unset>".to_string(),
    })
}

/// TARGETS: each metric as `current/target` (the first two, then `+ N more...`), as
/// kube's `formatHPAMetrics` prints them; an autoscaling/v1 object by its CPU target.
pub(super) fn hpa_targets(hpa: &Value, _: DateTime<Utc>) -> Value {
    const SHOWN: usize = 2;
    let specs = arr_at(hpa, &["spec", "metrics"]);
    if specs.is_empty() {
        return json!(
            match int_at(hpa, &["spec", "targetCPUUtilizationPercentage"]) {
                Some(target) => {
                    let current = int_at(hpa, &["status", "currentCPUUtilizationPercentage"])
                        .map_or_else(|| UNKNOWN.to_string(), |c| format!("{c}%"));
                    format!("cpu: {current}/{target}%")
                }
                None => NONE.to_string(),
            }
        );
    }
    let statuses = arr_at(hpa, &["status", "currentMetrics"]);
    let listed: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| metric_target(spec, statuses.get(i)))
        .collect();
    let mut text = listed
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if listed.len() > SHOWN {
        text.push_str(&format!(" + {} more...", listed.len() - SHOWN));
    }
    json!(text)
}

/// One metric of `formatHPAMetrics`, with its status (at the same index) if any.
fn metric_target(spec: &Value, status: Option<&Value>) -> String {
    let kind = spec["type"].as_str().unwrap_or("");
    let source = match kind {
        "External" => "external",
        "Pods" => "pods",
        "Object" => "object",
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        _ => return "<unknown type>".to_string(),
    };
    let target = &spec[source]["target"];
    let current = status.map(|s| &s[source]["current"]);
    let current_of = |field: &str| {
        current
            .and_then(|c| c.get(field))
            .filter(|v| !v.is_null())
            .map_or_else(|| UNKNOWN.to_string(), value_text)
    };
    let average = target.get("averageValue").filter(|v| !v.is_null());
    match kind {
        "External" | "Object" => match average {
            Some(average) => format!(
                "{}/{} (avg)",
                current_of("averageValue"),
                value_text(average)
            ),
            None => format!("{}/{}", current_of("value"), value_text(&target["value"])),
        },
        "Pods" => format!(
            "{}/{}",
            current_of("averageValue"),
            value_text(&target["averageValue"])
        ),
        _ => {
            let name = spec[source]["name"].as_str().unwrap_or("");
            match average {
                Some(average) => {
                    format!(
                        "{name}: {}/{}",
                        current_of("averageValue"),
                        value_text(average)
                    )
                }
                None => {
                    let percent = |v: Option<i64>, missing: &str| {
                        v.map_or_else(|| missing.to_string(), |n| format!("{n}%"))
                    };
                    let utilization = current
                        .and_then(|c| c.get("averageUtilization"))
                        .and_then(Value::as_i64);
                    let wanted = target.get("averageUtilization").and_then(Value::as_i64);
                    format!(
                        "{name}: {}/{}",
                        percent(utilization, UNKNOWN),
                        percent(wanted, "<auto>")
                    )
                }
            }
        }
    }
}

/// ROLE: the binding's `roleRef` as `Kind/name`.
pub(super) fn binding_role(binding: &Value, _: DateTime<Utc>) -> Value {
    let kind = str_at(binding, &["roleRef", "kind"]).unwrap_or("");
    let name = str_at(binding, &["roleRef", "name"]).unwrap_or("");
    json!(format!("{kind}/{name}"))
}

fn subjects(binding: &Value, kind: &str, qualified: bool) -> Value {
    let names: Vec<String> = arr_at(binding, &["subjects"])
        .iter()
        .filter(|s| s["kind"] == kind)
        .map(|s| {
            let name = s["name"].as_str().unwrap_or("");
            match (qualified, s["namespace"].as_str()) {
                (true, Some(ns)) => format!("{ns}/{name}"),
                _ => name.to_string(),
            }
        })
        .collect();
    json!(names.join(", "))
}

/// USERS of a binding (`-o wide`).
pub(super) fn binding_users(binding: &Value, _: DateTime<Utc>) -> Value {
    subjects(binding, "User", false)
}

/// GROUPS of a binding (`-o wide`).
pub(super) fn binding_groups(binding: &Value, _: DateTime<Utc>) -> Value {
    subjects(binding, "Group", false)
}

/// SERVICEACCOUNTS of a binding as `namespace/name` (`-o wide`).
pub(super) fn binding_service_accounts(binding: &Value, _: DateTime<Utc>) -> Value {
    subjects(binding, "ServiceAccount", true)
}

/// REQUEST and LIMIT of a quota: `resource: used/hard` for each resource of
/// `spec.hard`, by name; those named `limits.*` under LIMIT, the rest under REQUEST.
fn quota_pairs(quota: &Value, limits: bool) -> Value {
    let Some(hard) = at(quota, &["spec", "hard"]).and_then(Value::as_object) else {
        return json!("");
    };
    let quantity = |field: &str, name: &str| {
        at(quota, &["status", field, name]).map_or_else(|| "0".to_string(), value_text)
    };
    let mut names: Vec<&String> = hard.keys().collect();
    names.sort();
    let pairs: Vec<String> = names
        .into_iter()
        .filter(|name| name.starts_with("limits.") == limits)
        .map(|name| {
            format!(
                "{name}: {}/{}",
                quantity("used", name),
                quantity("hard", name)
            )
        })
        .collect();
    json!(pairs.join(", "))
}

pub(super) fn quota_request(quota: &Value, _: DateTime<Utc>) -> Value {
    quota_pairs(quota, false)
}

pub(super) fn quota_limit(quota: &Value, _: DateTime<Utc>) -> Value {
    quota_pairs(quota, true)
}

/// CONTROLLER of a ControllerRevision: its controller owner as `Kind.group/name`
/// (`kind/name` in the core group), `<none>` without one.
pub(super) fn revision_controller(revision: &Value, _: DateTime<Utc>) -> Value {
    let controller = arr_at(revision, &["metadata", "ownerReferences"])
        .iter()
        .find(|r| r["controller"] == true);
    json!(match controller {
        Some(owner) => {
            let kind = owner["kind"].as_str().unwrap_or("");
            let name = owner["name"].as_str().unwrap_or("");
            let api_version = owner["apiVersion"].as_str().unwrap_or("");
            match api_version.split_once('/') {
                Some((group, _)) => format!("{}.{group}/{name}", kind.to_lowercase()),
                None => format!("{}/{name}", kind.to_lowercase()),
            }
        }
        None => NONE.to_string(),
    })
}

/// PARAMKIND of a ValidatingAdmissionPolicy: `apiVersion/kind`, `<unset>` without one.
pub(super) fn policy_param_kind(policy: &Value, _: DateTime<Utc>) -> Value {
    let kind = at(policy, &["spec", "paramKind"]).filter(|k| k.is_object());
    json!(match kind {
        Some(kind) => format!(
            "{}/{}",
            kind["apiVersion"].as_str().unwrap_or(""),
            kind["kind"].as_str().unwrap_or("")
        ),
        None => "<unset>".to_string(),
    })
}

/// PARAMREF of a policy binding: `namespace/name` (`*/name` without a namespace), else
/// its selector as Go prints a `*LabelSelector`, `<unset>` without one.
pub(super) fn binding_param_ref(binding: &Value, _: DateTime<Utc>) -> Value {
    let Some(param_ref) = at(binding, &["spec", "paramRef"]).filter(|r| r.is_object()) else {
        return json!("<unset>");
    };
    let name = param_ref["name"].as_str().unwrap_or("");
    let namespace = param_ref["namespace"].as_str().unwrap_or("");
    json!(match (name, namespace, param_ref.get("selector")) {
        ("", _, Some(selector)) if selector.is_object() => go_label_selector(selector),
        ("", _, _) => "<unset>".to_string(),
        (name, "", _) => format!("*/{name}"),
        (name, namespace, _) => format!("{namespace}/{name}"),
    })
}

/// Go's `(*metav1.LabelSelector).String()`.
fn go_label_selector(selector: &Value) -> String {
    let labels: std::collections::BTreeMap<&str, &str> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
        .collect();
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let expressions: String = arr_at(selector, &["matchExpressions"])
        .iter()
        .map(|e| {
            let values: Vec<&str> = arr_at(e, &["values"])
                .iter()
                .filter_map(Value::as_str)
                .collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                e["key"].as_str().unwrap_or(""),
                e["operator"].as_str().unwrap_or(""),
                values.join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::UNIX_EPOCH
    }

    #[test]
    fn targets_read_as_kubectl_prints_them() {
        let hpa = json!({"spec": {"metrics": [
            {"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}},
            {"type": "Resource", "resource": {"name": "memory",
                "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
            {"type": "Pods", "pods": {"metric": {"name": "qps"},
                "target": {"type": "AverageValue", "averageValue": "10"}}},
        ]}, "status": {"currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}},
        ]}});
        assert_eq!(
            hpa_targets(&hpa, now()),
            "cpu: 12%/80%, memory: <unknown>/500Mi + 1 more..."
        );
        let v1 = json!({"spec": {"targetCPUUtilizationPercentage": 80}});
        assert_eq!(hpa_targets(&v1, now()), "cpu: <unknown>/80%");
        assert_eq!(hpa_targets(&json!({"spec": {}}), now()), "<none>");
        assert_eq!(hpa_min_pods(&json!({"spec": {}}), now()), "<unset>");
    }

    #[test]
    fn admission_policies_and_their_bindings() {
        let policy = json!({"spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}});
        assert_eq!(policy_param_kind(&policy, now()), "v1/ConfigMap");
        assert_eq!(policy_param_kind(&json!({"spec": {}}), now()), "<unset>");
        let param =
            |param_ref: Value| binding_param_ref(&json!({"spec": {"paramRef": param_ref}}), now());
        assert_eq!(
            param(json!({"name": "limits", "namespace": "ops"})),
            "ops/limits"
        );
        assert_eq!(param(json!({"name": "limits"})), "*/limits");
        assert_eq!(
            param(json!({"selector": {"matchLabels": {"b": "2", "a": "1"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x", "y"]}]}})),
            "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:tier,Operator:In,Values:[x y],},},}"
        );
        assert_eq!(binding_param_ref(&json!({"spec": {}}), now()), "<unset>");
    }

    #[test]
    fn bindings_quotas_and_revisions() {
        let binding = json!({"roleRef": {"kind": "Role", "name": "r1"}, "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "ServiceAccount", "name": "bot", "namespace": "ops"},
        ]});
        assert_eq!(binding_role(&binding, now()), "Role/r1");
        assert_eq!(binding_users(&binding, now()), "alice");
        assert_eq!(binding_groups(&binding, now()), "");
        assert_eq!(binding_service_accounts(&binding, now()), "ops/bot");
        let quota = json!({"spec": {"hard": {"pods": "10", "limits.cpu": "2"}},
                           "status": {"hard": {"pods": "10", "limits.cpu": "2"},
                                      "used": {"pods": "3"}}});
        assert_eq!(quota_request(&quota, now()), "pods: 3/10");
        assert_eq!(quota_limit(&quota, now()), "limits.cpu: 0/2");
        let revision = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": true}]}});
        assert_eq!(
            revision_controller(&revision, now()),
            "statefulset.apps/web"
        );
    }
}
