//! Decoding of `application/vnd.kubernetes.protobuf` request bodies.
//!
//! kubectl's typed commands (`kubectl create configmap`, `create deployment`, `create
//! role`, `create token`, `auth can-i`, ...) send their objects as Kubernetes protobuf:
//! the 4-byte magic `k8s\0` followed by a `k8s.io.apimachinery.pkg.runtime.Unknown`
//! envelope whose `raw` field holds the protobuf-encoded object. [`decode`] turns such a
//! body into the JSON object the client would have sent had it used `application/json`.
//!
//! Go's generated protobuf code writes every non-pointer field, even when it
//! holds its zero value, so an unset `metadata.generateName` arrives as `""`
//! and an unset `hostNetwork` as `false`. The mapping therefore follows
//! the Go JSON tags field by field (`Obj`): `omitempty` value fields are dropped when
//! zero, pointer fields are kept whenever present, and the few fields without
//! `omitempty` are always written. Empty maps, lists and nested objects are
//! omitted, as is `status` when it carries nothing.
//!
//! Workloads (Pod, Deployment, Job, CronJob) are mapped for the fields kubectl's
//! generators set and the common ones around them; a body using any other field is
//! refused (415) rather than silently stripped. `status` of workloads and reviews is
//! server-owned and ignored. k8s-pb's types carry no JSON names or serde, so the mapping
//! is by hand.
//!
//! This module owns the envelope, the table of decodable kinds and the shapes of
//! apimachinery (object metadata, label selectors, IntOrString); one submodule per family
//! of kinds maps their fields. It knows nothing of HTTP or of what the server does with
//! the object.

mod config;
mod reviews;
mod roles;
mod services;
mod workloads;

#[cfg(test)]
mod captures;

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Map, Value};

/// The media type kubectl uses for protobuf request bodies.
pub const PROTOBUF_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Prefix of every Kubernetes protobuf-encoded body.
pub const PROTOBUF_MAGIC: &[u8; 4] = b"k8s\0";

const RBAC_V1: &str = "rbac.authorization.k8s.io/v1";
const AUTHORIZATION_V1: &str = "authorization.k8s.io/v1";
const AUTHENTICATION_V1: &str = "authentication.k8s.io/v1";

/// Why a protobuf body could not be turned into JSON.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    /// Bad magic, an undecodable envelope or object, or an envelope we cannot
    /// interpret (HTTP 400).
    #[error("malformed protobuf body: {0}")]
    Malformed(String),
    /// A kind (or, for Pods, a use of fields) this server cannot decode from
    /// protobuf (HTTP 415); the client should send JSON instead.
    #[error(
        "decoding {kind} ({api_version}) from {PROTOBUF_CONTENT_TYPE} is not supported; send application/json instead"
    )]
    UnsupportedKind { api_version: String, kind: String },
}

/// Decode a kubectl protobuf body into the JSON object Kubernetes would have
/// received as JSON (with "apiVersion" and "kind" from the envelope).
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body
        .strip_prefix(PROTOBUF_MAGIC.as_slice())
        .ok_or_else(|| {
            ProtobufError::Malformed(
                "body does not start with the Kubernetes protobuf magic".into(),
            )
        })?;
    let unknown = Unknown::decode(envelope).map_err(|err| {
        ProtobufError::Malformed(format!("cannot decode runtime.Unknown envelope: {err}"))
    })?;

    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    if kind.is_empty() {
        return Err(ProtobufError::Malformed(
            "runtime.Unknown envelope carries no kind".into(),
        ));
    }
    if let Some(encoding) = unknown.content_encoding.filter(|e| !e.is_empty()) {
        return Err(ProtobufError::Malformed(format!(
            "unsupported contentEncoding {encoding:?} in runtime.Unknown envelope"
        )));
    }
    if let Some(content_type) = unknown
        .content_type
        .filter(|t| !t.is_empty() && t != PROTOBUF_CONTENT_TYPE)
    {
        return Err(ProtobufError::Malformed(format!(
            "unsupported contentType {content_type:?} in runtime.Unknown envelope"
        )));
    }
    let raw = unknown.raw.unwrap_or_default();

    let mapped = map_kind(&api_version, &kind, &raw)?;
    let mut object = mapped.ok_or_else(|| ProtobufError::UnsupportedKind {
        api_version: api_version.clone(),
        kind: kind.clone(),
    })?;
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    Ok(Value::Object(object))
}

/// What a mapping yields: the object's JSON, or `None` when the kind, or the fields it
/// uses, are not mapped (415).
type Mapped = Result<Option<Map<String, Value>>, ProtobufError>;

/// The table of decodable kinds.
fn map_kind(api_version: &str, kind: &str, raw: &[u8]) -> Mapped {
    match (api_version, kind) {
        ("v1", "ConfigMap") => via(raw, kind, config::config_map),
        ("v1", "Secret") => via(raw, kind, config::secret),
        ("v1", "Namespace") => via(raw, kind, config::namespace),
        ("v1", "ServiceAccount") => via(raw, kind, config::service_account),
        ("v1", "ResourceQuota") => via(raw, kind, config::resource_quota),
        ("v1", "Service") => via(raw, kind, services::service),
        ("networking.k8s.io/v1", "Ingress") => via(raw, kind, services::ingress),
        ("v1", "Pod") => via(raw, kind, workloads::pod),
        ("apps/v1", "Deployment") => via(raw, kind, workloads::deployment),
        ("batch/v1", "Job") => via(raw, kind, workloads::job),
        ("batch/v1", "CronJob") => via(raw, kind, workloads::cron_job),
        ("scheduling.k8s.io/v1", "PriorityClass") => via(raw, kind, workloads::priority_class),
        ("policy/v1", "PodDisruptionBudget") => via(raw, kind, workloads::pod_disruption_budget),
        (RBAC_V1, "Role") => via(raw, kind, roles::role),
        (RBAC_V1, "ClusterRole") => via(raw, kind, roles::cluster_role),
        (RBAC_V1, "RoleBinding") => via(raw, kind, roles::role_binding),
        (RBAC_V1, "ClusterRoleBinding") => via(raw, kind, roles::cluster_role_binding),
        (AUTHORIZATION_V1, "SelfSubjectAccessReview") => {
            via(raw, kind, reviews::self_subject_access_review)
        }
        (AUTHORIZATION_V1, "SubjectAccessReview") => via(raw, kind, reviews::subject_access_review),
        (AUTHORIZATION_V1, "LocalSubjectAccessReview") => {
            via(raw, kind, reviews::local_subject_access_review)
        }
        (AUTHORIZATION_V1, "SelfSubjectRulesReview") => {
            via(raw, kind, reviews::self_subject_rules_review)
        }
        (AUTHENTICATION_V1, "TokenReview") => via(raw, kind, reviews::token_review),
        (AUTHENTICATION_V1, "SelfSubjectReview") => via(raw, kind, reviews::self_subject_review),
        (AUTHENTICATION_V1, "TokenRequest") => via(raw, kind, reviews::token_request),
        _ => Ok(None),
    }
}

/// Decode `raw` as a `T` and map it with `mapping`.
fn via<T: Message + Default, R: IntoMapped>(raw: &[u8], kind: &str, mapping: fn(T) -> R) -> Mapped {
    mapping(decode_object(raw, kind)?).into_mapped()
}

/// The return types of the mappings: plain (every field mapped), `Option` (`None`: fields
/// not mapped) and `Result` (a malformed value inside).
trait IntoMapped {
    fn into_mapped(self) -> Mapped;
}

impl IntoMapped for Map<String, Value> {
    fn into_mapped(self) -> Mapped {
        Ok(Some(self))
    }
}

impl IntoMapped for Option<Map<String, Value>> {
    fn into_mapped(self) -> Mapped {
        Ok(self)
    }
}

impl IntoMapped for Result<Map<String, Value>, ProtobufError> {
    fn into_mapped(self) -> Mapped {
        self.map(Some)
    }
}

fn decode_object<T: Message + Default>(raw: &[u8], kind: &str) -> Result<T, ProtobufError> {
    T::decode(raw)
        .map_err(|err| ProtobufError::Malformed(format!("cannot decode {kind} object: {err}")))
}

/// A JSON object under construction, with helpers mirroring Go's JSON tags.
#[derive(Default)]
struct Obj(Map<String, Value>);

impl Obj {
    /// A Go value field tagged `omitempty`: dropped when absent or zero.
    fn omit_empty<T: Default + PartialEq + Into<Value>>(&mut self, key: &str, value: Option<T>) {
        if let Some(value) = value.filter(|v| *v != T::default()) {
            self.0.insert(key.into(), value.into());
        }
    }

    /// A Go pointer field: kept whenever present, even when zero.
    fn pointer<T: Into<Value>>(&mut self, key: &str, value: Option<T>) {
        if let Some(value) = value {
            self.0.insert(key.into(), value.into());
        }
    }

    /// A Go value field without `omitempty`: always written.
    fn always<T: Default + Into<Value>>(&mut self, key: &str, value: Option<T>) {
        self.0.insert(key.into(), value.unwrap_or_default().into());
    }

    fn strings(&mut self, key: &str, values: Vec<String>) {
        if !values.is_empty() {
            self.0.insert(key.into(), values.into());
        }
    }

    fn string_map(&mut self, key: &str, values: BTreeMap<String, String>) {
        if !values.is_empty() {
            let map = values
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect();
            self.0.insert(key.into(), Value::Object(map));
        }
    }

    fn bytes_map(&mut self, key: &str, values: BTreeMap<String, Vec<u8>>) {
        let map = values
            .into_iter()
            .map(|(k, v)| (k, Value::String(BASE64.encode(v))))
            .collect();
        self.object(key, map);
    }

    fn quantity_map(&mut self, key: &str, values: BTreeMap<String, Quantity>) {
        let map = values
            .into_iter()
            .map(|(k, v)| (k, Value::String(v.string.unwrap_or_default())))
            .collect();
        self.object(key, map);
    }

    fn list(&mut self, key: &str, values: Vec<Value>) {
        if !values.is_empty() {
            self.0.insert(key.into(), Value::Array(values));
        }
    }

    fn object(&mut self, key: &str, value: Map<String, Value>) {
        if !value.is_empty() {
            self.0.insert(key.into(), Value::Object(value));
        }
    }

    fn value(&mut self, key: &str, value: Option<Value>) {
        if let Some(value) = value {
            self.0.insert(key.into(), value);
        }
    }
}

fn object_meta(meta: Option<meta::ObjectMeta>) -> Map<String, Value> {
    let meta = meta.unwrap_or_default();
    let mut o = Obj::default();
    o.omit_empty("name", meta.name);
    o.omit_empty("generateName", meta.generate_name);
    o.omit_empty("namespace", meta.namespace);
    o.omit_empty("uid", meta.uid);
    o.omit_empty("resourceVersion", meta.resource_version);
    o.string_map("labels", meta.labels);
    o.string_map("annotations", meta.annotations);
    o.list(
        "ownerReferences",
        meta.owner_references
            .into_iter()
            .map(owner_reference)
            .collect(),
    );
    o.strings("finalizers", meta.finalizers);
    o.0
}

fn owner_reference(r: meta::OwnerReference) -> Value {
    let mut o = Obj::default();
    o.always("apiVersion", r.api_version);
    o.always("kind", r.kind);
    o.always("name", r.name);
    o.always("uid", r.uid);
    o.pointer("controller", r.controller);
    o.pointer("blockOwnerDeletion", r.block_owner_deletion);
    Value::Object(o.0)
}

/// Every top-level object carries metadata, as kubectl's JSON does.
fn with_meta(meta: Option<meta::ObjectMeta>) -> Obj {
    let mut o = Obj::default();
    o.0.insert("metadata".into(), Value::Object(object_meta(meta)));
    o
}

/// An `IntOrString`, or `None` for its zero value (which the API server
/// defaults exactly like an absent one).
fn int_or_string(v: IntOrString) -> Result<Option<Value>, ProtobufError> {
    match v.r#type.unwrap_or(0) {
        0 => Ok(v.int_val.filter(|i| *i != 0).map(Value::from)),
        1 => Ok(v.str_val.filter(|s| !s.is_empty()).map(Value::from)),
        other => Err(ProtobufError::Malformed(format!(
            "invalid IntOrString type {other}"
        ))),
    }
}

/// A `*IntOrString` field: unlike [`int_or_string`], an explicit zero is kept
/// (`maxUnavailable: 0` means something).
fn int_or_string_pointer(v: Option<IntOrString>) -> Option<Value> {
    let v = v?;
    match v.r#type.unwrap_or(0) {
        1 => Some(Value::from(v.str_val.unwrap_or_default())),
        _ => Some(Value::from(v.int_val.unwrap_or_default())),
    }
}

fn label_selector(selector: meta::LabelSelector) -> Value {
    let mut o = Obj::default();
    o.string_map("matchLabels", selector.match_labels);
    let expressions = selector
        .match_expressions
        .into_iter()
        .map(label_requirement)
        .collect();
    o.list("matchExpressions", expressions);
    Value::Object(o.0)
}

fn label_requirement(e: meta::LabelSelectorRequirement) -> Value {
    requirement("key", e.key, e.operator, e.values)
}

/// One requirement of a selector: label, field and quota scope selectors alike, which name
/// their key field differently.
fn requirement(
    key_field: &str,
    key: Option<String>,
    operator: Option<String>,
    values: Vec<String>,
) -> Value {
    let mut o = Obj::default();
    o.always(key_field, key);
    o.always("operator", operator);
    o.strings("values", values);
    Value::Object(o.0)
}

/// An object of metadata and spec: a workload, or a template inside one. `None` when the
/// spec uses fields that are not mapped.
fn with_spec<S>(
    mut o: Obj,
    spec: Option<S>,
    map_spec: impl FnOnce(S) -> Option<Map<String, Value>>,
) -> Option<Map<String, Value>> {
    if let Some(spec) = spec {
        o.object("spec", map_spec(spec)?);
    }
    Some(o.0)
}

/// A template's metadata, omitted when empty (unlike a top-level object's, see [`with_meta`]).
fn template_meta(meta: Option<meta::ObjectMeta>) -> Obj {
    let mut o = Obj::default();
    o.object("metadata", object_meta(meta));
    o
}

#[cfg(test)]
mod tests {
    //! The envelope and object metadata; the helpers that encode bodies as Go does, for
    //! every test module of `protobuf`.

    use super::*;
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;
    use serde_json::json;

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
}
