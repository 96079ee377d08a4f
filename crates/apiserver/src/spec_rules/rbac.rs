//! kube's validation of RBAC objects (`ValidateRole`, `ValidateClusterRole`,
//! `ValidateRoleBinding`, `ValidateClusterRoleBinding`): every rule names its verbs, and
//! either resources with their API groups or non-resource URLs (cluster roles only), never
//! both; an aggregation rule has selectors, each one valid; a binding's `roleRef` names an
//! RBAC role of a kind it may bind, and each subject is a ServiceAccount (in a namespace,
//! for a ClusterRoleBinding), User or Group, named and grouped as kube requires.

use serde_json::Value;

use super::{error, invalid, list, not_supported, required, required_because, text};
use crate::go_text::go_string_slice;
use crate::rbac::RBAC_GROUP;
use crate::schema::{FieldError, FieldErrorReason, Path};
use crate::validation::{
    DNS1123_SUBDOMAIN_MSG, label_value_problems, matches_dns1123_subdomain, path_segment_problems,
    qualified_name_problems,
};

/// The rules (and, for a ClusterRole, the aggregation rule) of a Role or ClusterRole.
pub(super) fn role(role: &Value, namespaced: bool, errors: &mut Vec<FieldError>) {
    let at = Path::At("rules");
    for (i, rule) in list(role, "rules").iter().enumerate() {
        policy_rule(rule, namespaced, &Path::Item(&at, i), errors);
    }
    if let Some(aggregation) = role.get("aggregationRule").filter(|a| !a.is_null()) {
        aggregation_rule(aggregation, errors);
    }
}

fn policy_rule(rule: &Value, namespaced: bool, at: &Path, errors: &mut Vec<FieldError>) {
    if list(rule, "verbs").is_empty() {
        errors.push(required_because(
            &Path::Field(at, "verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = crate::meta::string_list(rule.get("nonResourceURLs"));
    if !urls.is_empty() {
        let field = Path::Field(at, "nonResourceURLs");
        let shown = Value::String(go_string_slice(&urls));
        let invalid_urls = |why: &str| {
            let message = format!("Invalid value: {}: {why}", shown.as_str().unwrap_or(""));
            error(&field, FieldErrorReason::Invalid, message)
        };
        if namespaced {
            errors.push(invalid_urls(
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        let names_resources = ["apiGroups", "resources", "resourceNames"]
            .iter()
            .any(|field| !list(rule, field).is_empty());
        if names_resources {
            errors.push(invalid_urls(
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return;
    }
    if list(rule, "apiGroups").is_empty() {
        errors.push(required_because(
            &Path::Field(at, "apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if list(rule, "resources").is_empty() {
        errors.push(required_because(
            &Path::Field(at, "resources"),
            "resource rules must supply at least one resource",
        ));
    }
}

fn aggregation_rule(aggregation: &Value, errors: &mut Vec<FieldError>) {
    let at = Path::At("aggregationRule.clusterRoleSelectors");
    let selectors = list(aggregation, "clusterRoleSelectors");
    if selectors.is_empty() {
        errors.push(required_because(
            &at,
            "at least one clusterRoleSelector required if aggregationRule is non-nil",
        ));
    }
    for (i, selector) in selectors.iter().enumerate() {
        let at = Path::Item(&at, i);
        let before = errors.len();
        label_selector(selector, &at, errors);
        if errors.len() > before {
            // kube then fails to convert the selector, and says so of the whole of it.
            errors.push(invalid(
                &at,
                &Value::from("null"),
                "invalid label selector.",
            ));
        }
    }
}

/// `ValidateLabelSelector`, strict: qualified keys, label values, known operators.
pub(super) fn label_selector(selector: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let labels = Path::Field(at, "matchLabels");
    for (key, value) in selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        for problem in qualified_name_problems(key) {
            errors.push(invalid(&labels, &Value::from(key.as_str()), &problem));
        }
        let value = value.as_str().unwrap_or_default();
        for problem in label_value_problems(value) {
            errors.push(invalid(&labels, &Value::from(value), &problem));
        }
    }
    let expressions = Path::Field(at, "matchExpressions");
    for (j, expression) in list(selector, "matchExpressions").iter().enumerate() {
        let at = Path::Item(&expressions, j);
        let values = list(expression, "values");
        match text(expression, "operator") {
            "In" | "NotIn" if values.is_empty() => errors.push(required_because(
                &Path::Field(&at, "values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(error(
                &Path::Field(&at, "values"),
                FieldErrorReason::Forbidden,
                "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                    .into(),
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.push(invalid(
                &Path::Field(&at, "operator"),
                &Value::from(other),
                "not a valid selector operator",
            )),
        }
        let key = text(expression, "key");
        for problem in qualified_name_problems(key) {
            errors.push(invalid(
                &Path::Field(&at, "key"),
                &Value::from(key),
                &problem,
            ));
        }
        let values_at = Path::Field(&at, "values");
        for (k, value) in values.iter().enumerate() {
            let value = value.as_str().unwrap_or_default();
            for problem in label_value_problems(value) {
                errors.push(invalid(
                    &Path::Item(&values_at, k),
                    &Value::from(value),
                    &problem,
                ));
            }
        }
    }
}

/// The `roleRef` and subjects of a RoleBinding or (`cluster`) ClusterRoleBinding.
pub(super) fn binding(binding: &Value, cluster: bool, errors: &mut Vec<FieldError>) {
    let role_ref = binding.get("roleRef").unwrap_or(&Value::Null);
    let group = text(role_ref, "apiGroup");
    if group != RBAC_GROUP {
        errors.push(not_supported(
            &Path::At("roleRef.apiGroup"),
            &Value::from(group),
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if cluster {
        &["ClusterRole"]
    } else {
        &["Role", "ClusterRole"]
    };
    let kind = text(role_ref, "kind");
    if !kinds.contains(&kind) {
        errors.push(not_supported(
            &Path::At("roleRef.kind"),
            &Value::from(kind),
            kinds,
        ));
    }
    let name = text(role_ref, "name");
    let name_at = Path::At("roleRef.name");
    match path_segment_problems(name) {
        _ if name.is_empty() => errors.push(required(&name_at)),
        problems => errors.extend(
            problems
                .iter()
                .map(|problem| invalid(&name_at, &Value::from(name), problem)),
        ),
    }
    let at = Path::At("subjects");
    for (i, subject) in list(binding, "subjects").iter().enumerate() {
        binding_subject(subject, cluster, &Path::Item(&at, i), errors);
    }
}

fn binding_subject(subject: &Value, cluster: bool, at: &Path, errors: &mut Vec<FieldError>) {
    let name = text(subject, "name");
    let name_at = Path::Field(at, "name");
    if name.is_empty() {
        errors.push(required(&name_at));
    }
    let group = text(subject, "apiGroup");
    let group_at = Path::Field(at, "apiGroup");
    match text(subject, "kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                if name.len() > 253 {
                    errors.push(invalid(
                        &name_at,
                        &Value::from(name),
                        "must be no more than 253 characters",
                    ));
                }
                if !matches_dns1123_subdomain(name) {
                    errors.push(invalid(&name_at, &Value::from(name), DNS1123_SUBDOMAIN_MSG));
                }
            }
            if !group.is_empty() {
                errors.push(not_supported(&group_at, &Value::from(group), &[""]));
            }
            if cluster && text(subject, "namespace").is_empty() {
                errors.push(required(&Path::Field(at, "namespace")));
            }
        }
        "User" | "Group" => {
            if group != RBAC_GROUP {
                errors.push(not_supported(&group_at, &Value::from(group), &[RBAC_GROUP]));
            }
        }
        other => errors.push(not_supported(
            &Path::Field(at, "kind"),
            &Value::from(other),
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(check: impl Fn(&mut Vec<FieldError>)) -> Vec<String> {
        let mut errors = Vec::new();
        check(&mut errors);
        errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    #[test]
    fn rules_are_checked_as_kube_checks_them() {
        let role = json!({"rules": [
            {"verbs": [], "nonResourceURLs": ["/x"], "resources": ["pods"]},
            {"verbs": ["get"]},
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
        ]});
        assert_eq!(
            messages(|errors| super::role(&role, true, errors)),
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[0].nonResourceURLs: Invalid value: []string{\"/x\"}: namespaced rules cannot apply to non-resource URLs",
                "rules[0].nonResourceURLs: Invalid value: []string{\"/x\"}: rules cannot apply to both regular resources and non-resource URLs",
                "rules[1].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[1].resources: Required value: resource rules must supply at least one resource",
            ]
        );
        let urls = json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]});
        assert!(messages(|errors| super::role(&urls, false, errors)).is_empty());
    }

    #[test]
    fn aggregation_rules_need_valid_selectors() {
        let none = json!({"aggregationRule": {}});
        assert_eq!(
            messages(|errors| role(&none, false, errors)),
            [
                "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"
            ]
        );
        let bad = json!({"aggregationRule": {"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "a", "operator": "Foo"}]}]}});
        assert_eq!(
            messages(|errors| role(&bad, false, errors)),
            [
                "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].operator: Invalid value: \"Foo\": not a valid selector operator",
                "aggregationRule.clusterRoleSelectors[0]: Invalid value: \"null\": invalid label selector.",
            ]
        );
    }

    #[test]
    fn bindings_are_checked_as_kube_checks_them() {
        let bad = json!({
        "roleRef": {"apiGroup": "example.com", "kind": "Role", "name": "a/b"},
        "subjects": [
            {"kind": "ServiceAccount", "name": "My_SA"},
            {"kind": "User", "name": "bob", "apiGroup": ""},
            {"kind": "", "name": ""},
        ]});
        assert_eq!(
            messages(|errors| binding(&bad, true, errors)),
            [
                "roleRef.apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\"",
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "roleRef.name: Invalid value: \"a/b\": may not contain '/'",
                format!("subjects[0].name: Invalid value: \"My_SA\": {DNS1123_SUBDOMAIN_MSG}")
                    .as_str(),
                "subjects[0].namespace: Required value",
                "subjects[1].apiGroup: Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\"",
                "subjects[2].name: Required value",
                "subjects[2].kind: Unsupported value: \"\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
            ]
        );
        let good = json!({
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "op"},
                         {"kind": "Group", "name": "system:authenticated", "apiGroup": RBAC_GROUP}]});
        assert!(messages(|errors| binding(&good, false, errors)).is_empty());
    }
}
