//! Role, ClusterRole and their bindings, built as Go encodes them.

use k8s_pb::api::rbac::v1 as rbac;
use prost::Message;
use serde_json::json;

use super::RBAC_V1;
use crate::protobuf::tests::{assert_decodes, body, decode_ok, go_meta, s};

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
    assert_decodes(
        &role,
        json!({"metadata": {"name": "reader", "namespace": "default"},
            "rules": [rule_json],
        }),
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
