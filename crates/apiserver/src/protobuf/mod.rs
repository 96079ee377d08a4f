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
//! the Go JSON tags field by field: `omitempty` value fields are dropped when
//! zero, pointer fields are kept whenever present, and the few fields without
//! `omitempty` are always written. Empty maps, lists and nested objects are
//! omitted, as is `status` when it carries nothing.
//!
//! k8s-pb's types carry no JSON names or serde, so the mapping is data: `schema.txt`
//! lists the decodable kinds and, per message, each field's number, JSON name, type and
//! Go presence (`schema`); one generic decoder (`decode`) reads any of them from the wire.
//! Workloads (Pod, Deployment, Job, CronJob) are mapped for the fields kubectl's
//! generators set and the common ones around them; their strict messages refuse a body
//! using any other field (415) rather than silently strip it. `status` of workloads and
//! reviews is server-owned and ignored.
//!
//! This module owns the envelope and the errors. It knows nothing of HTTP or of what the
//! server does with the object.

mod decode;
mod schema;

#[cfg(test)]
mod tests;

use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::Value;

use decode::Refusal;

/// The media type kubectl uses for protobuf request bodies.
pub const PROTOBUF_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Prefix of every Kubernetes protobuf-encoded body.
pub const PROTOBUF_MAGIC: &[u8; 4] = b"k8s\0";

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

    let mut object = object_json(&api_version, &kind, &raw)?;
    if let Value::Object(map) = &mut object {
        map.insert("apiVersion".into(), Value::String(api_version));
        map.insert("kind".into(), Value::String(kind));
    }
    Ok(object)
}

/// The object's JSON, decoded as the schema's message for its kind.
fn object_json(api_version: &str, kind: &str, raw: &[u8]) -> Result<Value, ProtobufError> {
    let unsupported = || ProtobufError::UnsupportedKind {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
    };
    // A schema that does not load (a unit test keeps it loading) decodes nothing.
    let schema = schema::schema().map_err(|_| unsupported())?;
    let message = schema.kind(api_version, kind).ok_or_else(unsupported)?;
    decode::message(schema, message, raw).map_err(|refusal| match refusal {
        Refusal::Malformed(why) => {
            ProtobufError::Malformed(format!("cannot decode {kind} object: {why}"))
        }
        Refusal::Unmapped => unsupported(),
    })
}
