//! ConfigMap, Secret, Namespace and ServiceAccount bodies built as Go encodes them.

use k8s_pb::api::core::v1 as core;
use prost::Message;
use serde_json::json;

use crate::protobuf::tests::{assert_decodes, body, config_map_body, decode_ok, go_meta, s};

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
    assert_decodes(
        &secret,
        json!({"metadata": {"name": "tls", "namespace": "default"},
            "immutable": true,
            "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"},
            "stringData": {"extra": "plain"},
            "type": "kubernetes.io/tls",
        }),
    );
}

#[test]
fn secret_with_empty_type_omits_it() {
    let secret = core::Secret {
        metadata: Some(go_meta("generic", "")),
        r#type: s(""),
        ..Default::default()
    };
    assert_decodes(&secret, json!({"metadata": {"name": "generic"}}));
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
    assert_decodes(
        &ns,
        json!({"metadata": {"name": "team-a"},
            "spec": {"finalizers": ["kubernetes"]},
        }),
    );
}

#[test]
fn empty_namespace_spec_is_omitted() {
    let ns = core::Namespace {
        metadata: Some(go_meta("bare", "")),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus::default()),
    };
    assert_decodes(&ns, json!({"metadata": {"name": "bare"}}));
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
    assert_decodes(
        &sa,
        json!({"metadata": {"name": "bot", "namespace": "default"},
            "secrets": [{"name": "bot-token"}],
            "imagePullSecrets": [{"name": "regcred"}],
            "automountServiceAccountToken": false,
        }),
    );
}
