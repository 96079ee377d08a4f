//! What configures a namespace: ConfigMap, Secret, the Namespace itself, ServiceAccount
//! and ResourceQuota (core/v1).

use k8s_pb::api::core::v1 as core;
use serde_json::{Map, Value};

use super::{Obj, requirement, with_meta};

pub(super) fn config_map(cm: core::ConfigMap) -> Map<String, Value> {
    let mut o = with_meta(cm.metadata);
    o.pointer("immutable", cm.immutable);
    o.string_map("data", cm.data);
    o.bytes_map("binaryData", cm.binary_data);
    o.0
}

pub(super) fn secret(s: core::Secret) -> Map<String, Value> {
    let mut o = with_meta(s.metadata);
    o.pointer("immutable", s.immutable);
    o.bytes_map("data", s.data);
    o.string_map("stringData", s.string_data);
    o.omit_empty("type", s.r#type);
    o.0
}

pub(super) fn namespace(ns: core::Namespace) -> Map<String, Value> {
    let mut o = with_meta(ns.metadata);
    if let Some(spec) = ns.spec {
        let mut s = Obj::default();
        s.strings("finalizers", spec.finalizers);
        o.object("spec", s.0);
    }
    if let Some(status) = ns.status {
        // Conditions are controller-owned and never set by clients.
        let mut s = Obj::default();
        s.omit_empty("phase", status.phase);
        o.object("status", s.0);
    }
    o.0
}

pub(super) fn service_account(sa: core::ServiceAccount) -> Map<String, Value> {
    let mut o = with_meta(sa.metadata);
    o.list(
        "secrets",
        sa.secrets.into_iter().map(object_reference).collect(),
    );
    o.list(
        "imagePullSecrets",
        sa.image_pull_secrets
            .into_iter()
            .map(local_object_reference)
            .collect(),
    );
    o.pointer(
        "automountServiceAccountToken",
        sa.automount_service_account_token,
    );
    o.0
}

fn object_reference(r: core::ObjectReference) -> Value {
    let mut o = Obj::default();
    o.omit_empty("kind", r.kind);
    o.omit_empty("namespace", r.namespace);
    o.omit_empty("name", r.name);
    o.omit_empty("uid", r.uid);
    o.omit_empty("apiVersion", r.api_version);
    o.omit_empty("resourceVersion", r.resource_version);
    o.omit_empty("fieldPath", r.field_path);
    Value::Object(o.0)
}

pub(super) fn local_object_reference(r: core::LocalObjectReference) -> Value {
    let mut o = Obj::default();
    o.omit_empty("name", r.name);
    Value::Object(o.0)
}

/// Status is server-owned and ignored.
pub(super) fn resource_quota(q: core::ResourceQuota) -> Map<String, Value> {
    let mut o = with_meta(q.metadata);
    if let Some(spec) = q.spec {
        let mut s = Obj::default();
        s.quantity_map("hard", spec.hard);
        s.strings("scopes", spec.scopes);
        if let Some(selector) = spec.scope_selector {
            let expressions = selector
                .match_expressions
                .into_iter()
                .map(|e| requirement("scopeName", e.scope_name, e.operator, e.values))
                .collect();
            let mut sel = Obj::default();
            sel.list("matchExpressions", expressions);
            s.0.insert("scopeSelector".into(), Value::Object(sel.0));
        }
        o.object("spec", s.0);
    }
    o.0
}

#[cfg(test)]
mod tests {
    use prost::Message;
    use serde_json::json;

    use super::*;
    use crate::protobuf::tests::{body, config_map_body, decode_ok, go_meta, s};

    #[test]
    fn config_map_decodes() {
        assert_eq!(
            decode_ok(&config_map_body()),
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cm", "namespace": "default"},
                "data": {"a": "1"},
                "binaryData": {"bin": "AAEC/w=="},
            })
        );
    }

    #[test]
    fn config_map_immutable_false_is_kept() {
        let cm = core::ConfigMap {
            metadata: Some(go_meta("cm", "")),
            immutable: Some(false),
            ..Default::default()
        };
        let v = decode_ok(&body("v1", "ConfigMap", cm.encode_to_vec()));
        assert_eq!(
            v,
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cm"},
                "immutable": false,
            })
        );
    }

    #[test]
    fn secret_decodes() {
        let secret = core::Secret {
            metadata: Some(go_meta("tls", "default")),
            immutable: Some(true),
            data: [
                ("tls.crt".to_string(), b"cert".to_vec()),
                ("tls.key".to_string(), b"key".to_vec()),
            ]
            .into(),
            string_data: [("extra".to_string(), "plain".to_string())].into(),
            r#type: s("kubernetes.io/tls"),
        };
        assert_eq!(
            decode_ok(&body("v1", "Secret", secret.encode_to_vec())),
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "tls", "namespace": "default"},
                "immutable": true,
                "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"},
                "stringData": {"extra": "plain"},
                "type": "kubernetes.io/tls",
            })
        );
    }

    #[test]
    fn secret_with_empty_type_omits_it() {
        let secret = core::Secret {
            metadata: Some(go_meta("generic", "")),
            r#type: s(""),
            ..Default::default()
        };
        assert_eq!(
            decode_ok(&body("v1", "Secret", secret.encode_to_vec())),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "generic"}})
        );
    }

    #[test]
    fn namespace_decodes() {
        let ns = core::Namespace {
            metadata: Some(go_meta("team-a", "")),
            spec: Some(core::NamespaceSpec {
                finalizers: vec!["kubernetes".to_string()],
            }),
            status: Some(core::NamespaceStatus {
                phase: s(""),
                conditions: vec![],
            }),
        };
        assert_eq!(
            decode_ok(&body("v1", "Namespace", ns.encode_to_vec())),
            json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "team-a"},
                "spec": {"finalizers": ["kubernetes"]},
            })
        );
    }

    #[test]
    fn empty_namespace_spec_is_omitted() {
        let ns = core::Namespace {
            metadata: Some(go_meta("bare", "")),
            spec: Some(core::NamespaceSpec::default()),
            status: Some(core::NamespaceStatus::default()),
        };
        assert_eq!(
            decode_ok(&body("v1", "Namespace", ns.encode_to_vec())),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bare"}})
        );
    }

    #[test]
    fn service_account_decodes() {
        let sa = core::ServiceAccount {
            metadata: Some(go_meta("bot", "default")),
            secrets: vec![core::ObjectReference {
                name: s("bot-token"),
                kind: s(""),
                namespace: s(""),
                ..Default::default()
            }],
            image_pull_secrets: vec![core::LocalObjectReference { name: s("regcred") }],
            automount_service_account_token: Some(false),
        };
        assert_eq!(
            decode_ok(&body("v1", "ServiceAccount", sa.encode_to_vec())),
            json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "bot", "namespace": "default"},
                "secrets": [{"name": "bot-token"}],
                "imagePullSecrets": [{"name": "regcred"}],
                "automountServiceAccountToken": false,
            })
        );
    }
}
