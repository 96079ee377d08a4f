//! The envelope and object metadata; the helpers that encode bodies as Go does, for
//! every test module of `protobuf`.

mod captures;
mod config;
mod reviews;
mod roles;
mod services;
mod workloads;

use k8s_pb::Resource;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;
use serde_json::{Value, json};

use super::{PROTOBUF_MAGIC, ProtobufError, decode};

pub(super) const RBAC_V1: &str = "rbac.authorization.k8s.io/v1";

pub(super) fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

/// Wrap an encoded object the way client-go's protobuf serializer does,
/// including the always-written empty contentEncoding/contentType.
pub(super) fn body(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s(api_version),
            kind: s(kind),
        }),
        raw: Some(raw),
        content_encoding: s(""),
        content_type: s(""),
    };
    let mut out = PROTOBUF_MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

/// ObjectMeta as Go's generated code emits it: every value field written.
pub(super) fn go_meta(name: &str, namespace: &str) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: s(name),
        generate_name: s(""),
        namespace: s(namespace),
        self_link: s(""),
        uid: s(""),
        resource_version: s(""),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        ..Default::default()
    }
}

/// Encodes `object` as kubectl would send it and checks the JSON it decodes to;
/// `expected` leaves out the apiVersion and kind, which the envelope carries.
pub(super) fn assert_decodes<T: Message + Resource>(object: &T, mut expected: Value) {
    expected["apiVersion"] = json!(T::API_VERSION);
    expected["kind"] = json!(T::KIND);
    assert_eq!(decoded(object), expected);
}

/// `object` encoded as kubectl would send it, decoded.
pub(super) fn decoded<T: Message + Resource>(object: &T) -> Value {
    decode_ok(&body(T::API_VERSION, T::KIND, object.encode_to_vec()))
}

pub(super) fn decode_ok(body: &[u8]) -> Value {
    match decode(body) {
        Ok(v) => v,
        Err(err) => panic!("decode failed: {err}"),
    }
}

pub(super) fn config_map_body() -> Vec<u8> {
    let cm = core::ConfigMap {
        metadata: Some(go_meta("cm", "default")),
        immutable: None,
        data: [("a".to_string(), "1".to_string())].into(),
        binary_data: [("bin".to_string(), vec![0u8, 1, 2, 255])].into(),
    };
    body("v1", "ConfigMap", cm.encode_to_vec())
}

#[test]
fn full_object_meta_decodes() {
    let m = meta::ObjectMeta {
        generate_name: s("gen-"),
        uid: s("1234"),
        resource_version: s("42"),
        labels: [("app".to_string(), "web".to_string())].into(),
        annotations: [("note".to_string(), String::new())].into(),
        owner_references: vec![meta::OwnerReference {
            api_version: s("apps/v1"),
            kind: s("ReplicaSet"),
            name: s("rs"),
            uid: s("abcd"),
            controller: Some(true),
            block_owner_deletion: None,
        }],
        finalizers: vec!["example.com/f".to_string()],
        ..go_meta("", "ns")
    };
    let cm = core::ConfigMap {
        metadata: Some(m),
        ..Default::default()
    };
    let v = decode_ok(&body("v1", "ConfigMap", cm.encode_to_vec()));
    assert_eq!(
        v["metadata"],
        json!({
            "generateName": "gen-",
            "namespace": "ns",
            "uid": "1234",
            "resourceVersion": "42",
            "labels": {"app": "web"},
            "annotations": {"note": ""},
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "rs",
                "uid": "abcd",
                "controller": true,
            }],
            "finalizers": ["example.com/f"],
        })
    );
}

#[test]
fn bad_magic_is_malformed() {
    let mut b = config_map_body();
    if let Some(first) = b.first_mut() {
        *first = b'x';
    }
    assert!(matches!(decode(&b), Err(ProtobufError::Malformed(_))));
    assert!(matches!(decode(b""), Err(ProtobufError::Malformed(_))));
    assert!(matches!(
        decode(br#"{"kind":"ConfigMap"}"#),
        Err(ProtobufError::Malformed(_))
    ));
}

#[test]
fn truncated_body_is_malformed() {
    let b = config_map_body();
    for len in [4, 6, b.len() / 2, b.len() - 1] {
        assert!(
            matches!(decode(&b[..len]), Err(ProtobufError::Malformed(_))),
            "truncated to {len} bytes"
        );
    }
}

#[test]
fn truncated_object_inside_envelope_is_malformed() {
    let mut raw = core::ConfigMap {
        metadata: Some(go_meta("cm", "default")),
        ..Default::default()
    }
    .encode_to_vec();
    raw.pop();
    assert!(matches!(
        decode(&body("v1", "ConfigMap", raw)),
        Err(ProtobufError::Malformed(_))
    ));
}

#[test]
fn unsupported_kind_is_reported() {
    let raw = go_meta("d", "default").encode_to_vec();
    match decode(&body("apps/v1", "StatefulSet", raw.clone())) {
        Err(ProtobufError::UnsupportedKind { api_version, kind }) => {
            assert_eq!(api_version, "apps/v1");
            assert_eq!(kind, "StatefulSet");
        }
        other => panic!("expected UnsupportedKind, got {other:?}"),
    }
    // A core kind name under another group is not the core kind.
    assert!(matches!(
        decode(&body("example.com/v1", "ConfigMap", raw)),
        Err(ProtobufError::UnsupportedKind { .. })
    ));
}

#[test]
fn envelope_without_kind_or_with_encoding_is_malformed() {
    let mut no_kind = PROTOBUF_MAGIC.to_vec();
    no_kind.extend(Unknown::default().encode_to_vec());
    assert!(matches!(decode(&no_kind), Err(ProtobufError::Malformed(_))));

    let gzipped = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s("v1"),
            kind: s("ConfigMap"),
        }),
        raw: Some(vec![]),
        content_encoding: s("gzip"),
        content_type: s(""),
    };
    let mut b = PROTOBUF_MAGIC.to_vec();
    b.extend(gzipped.encode_to_vec());
    assert!(matches!(decode(&b), Err(ProtobufError::Malformed(_))));
}

#[test]
fn errors_display() {
    let err = ProtobufError::UnsupportedKind {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
    };
    assert!(err.to_string().contains("Deployment (apps/v1)"));
    assert!(
        ProtobufError::Malformed("x".into())
            .to_string()
            .contains('x')
    );
}
