//! Who may do what: Role, ClusterRole and their bindings (rbac.authorization.k8s.io/v1).

use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::{Map, Value};

use super::{Obj, label_selector, with_meta};

/// A role's metadata and rules (Role and ClusterRole alike).
fn with_rules(metadata: Option<meta::ObjectMeta>, rules: Vec<rbac::PolicyRule>) -> Obj {
    let mut o = with_meta(metadata);
    o.list("rules", policy_rules(rules));
    o
}

fn policy_rules(rules: Vec<rbac::PolicyRule>) -> Vec<Value> {
    rules
        .into_iter()
        .map(|rule| {
            let mut o = Obj::default();
            o.0.insert("verbs".into(), rule.verbs.into());
            o.strings("apiGroups", rule.api_groups);
            o.strings("resources", rule.resources);
            o.strings("resourceNames", rule.resource_names);
            o.strings("nonResourceURLs", rule.non_resource_ur_ls);
            Value::Object(o.0)
        })
        .collect()
}

pub(super) fn role(r: rbac::Role) -> Map<String, Value> {
    with_rules(r.metadata, r.rules).0
}

pub(super) fn cluster_role(r: rbac::ClusterRole) -> Map<String, Value> {
    let mut o = with_rules(r.metadata, r.rules);
    if let Some(aggregation) = r.aggregation_rule {
        let mut a = Obj::default();
        a.list(
            "clusterRoleSelectors",
            aggregation
                .cluster_role_selectors
                .into_iter()
                .map(label_selector)
                .collect(),
        );
        o.0.insert("aggregationRule".into(), Value::Object(a.0));
    }
    o.0
}

/// A binding's subjects and role reference (RoleBinding and ClusterRoleBinding alike).
fn binding(
    metadata: Option<meta::ObjectMeta>,
    subjects: Vec<rbac::Subject>,
    role_ref: Option<rbac::RoleRef>,
) -> Map<String, Value> {
    let mut o = with_meta(metadata);
    let subjects = subjects
        .into_iter()
        .map(|subject| {
            let mut s = Obj::default();
            s.always("kind", subject.kind);
            s.omit_empty("apiGroup", subject.api_group);
            s.always("name", subject.name);
            s.omit_empty("namespace", subject.namespace);
            Value::Object(s.0)
        })
        .collect();
    o.list("subjects", subjects);
    let role_ref = role_ref.unwrap_or_default();
    let mut r = Obj::default();
    r.always("apiGroup", role_ref.api_group);
    r.always("kind", role_ref.kind);
    r.always("name", role_ref.name);
    o.0.insert("roleRef".into(), Value::Object(r.0));
    o.0
}

pub(super) fn role_binding(b: rbac::RoleBinding) -> Map<String, Value> {
    binding(b.metadata, b.subjects, b.role_ref)
}

pub(super) fn cluster_role_binding(b: rbac::ClusterRoleBinding) -> Map<String, Value> {
    binding(b.metadata, b.subjects, b.role_ref)
}

#[cfg(test)]
mod tests {
    use prost::Message;
    use serde_json::json;

    use super::*;
    use crate::protobuf::RBAC_V1;
    use crate::protobuf::tests::{body, decode_ok, go_meta, s};

    #[test]
    fn rbac_kinds_decode() {
        let rule = rbac::PolicyRule {
            verbs: vec!["get".to_string(), "list".to_string()],
            api_groups: vec![String::new()],
            resources: vec!["pods".to_string()],
            ..Default::default()
        };
        let rule_json = json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]});
        let role = rbac::Role {
            metadata: Some(go_meta("reader", "default")),
            rules: vec![rule.clone()],
        };
        assert_eq!(
            decode_ok(&body(RBAC_V1, "Role", role.encode_to_vec())),
            json!({
                "apiVersion": RBAC_V1,
                "kind": "Role",
                "metadata": {"name": "reader", "namespace": "default"},
                "rules": [rule_json],
            })
        );
        let cluster_role = rbac::ClusterRole {
            metadata: Some(go_meta("nodes", "")),
            rules: vec![rule],
            aggregation_rule: None,
        };
        assert_eq!(
            decode_ok(&body(RBAC_V1, "ClusterRole", cluster_role.encode_to_vec()))["rules"],
            json!([rule_json])
        );
        let subject = rbac::Subject {
            kind: s("ServiceAccount"),
            api_group: s(""),
            name: s("bot"),
            namespace: s("default"),
        };
        let role_ref = rbac::RoleRef {
            api_group: s("rbac.authorization.k8s.io"),
            kind: s("Role"),
            name: s("reader"),
        };
        let binding = rbac::RoleBinding {
            metadata: Some(go_meta("read", "default")),
            subjects: vec![subject.clone()],
            role_ref: Some(role_ref.clone()),
        };
        let expected = json!({
            "apiVersion": RBAC_V1,
            "kind": "RoleBinding",
            "metadata": {"name": "read", "namespace": "default"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        });
        assert_eq!(
            decode_ok(&body(RBAC_V1, "RoleBinding", binding.encode_to_vec())),
            expected
        );
        let cluster_binding = rbac::ClusterRoleBinding {
            metadata: Some(go_meta("read", "")),
            subjects: vec![subject],
            role_ref: Some(role_ref),
        };
        let v = decode_ok(&body(
            RBAC_V1,
            "ClusterRoleBinding",
            cluster_binding.encode_to_vec(),
        ));
        assert_eq!(
            (&v["subjects"], &v["roleRef"]),
            (&expected["subjects"], &expected["roleRef"])
        );
    }
}
