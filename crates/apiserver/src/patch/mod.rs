//! PATCH support for the Kubernetes-compatible API server.
//!
//! Implements the four patch flavours Kubernetes accepts on `PATCH` requests:
//!
//! * JSON patch (RFC 6902, `application/json-patch+json`), delegated to the
//!   `json-patch` crate;
//! * JSON merge patch (RFC 7386, `application/merge-patch+json`);
//! * strategic merge patch (`application/strategic-merge-patch+json`), with a
//!   built-in table of list merge keys for the core kinds (see
//!   [`strategic_merge_key`]);
//! * apply patch (`application/apply-patch+yaml`): decoded here; server-side apply with
//!   field ownership is [`crate::apply`]. Applied to a `Scale`, it is merged the
//!   strategic way (`DecodedPatch::apply`).
//!
//! Errors are split in two: [`PatchError::Malformed`] when the request body
//! cannot be decoded (HTTP 400) and [`PatchError::Invalid`] when it decoded but
//! cannot be applied to the current object (HTTP 422).
//!
//! Here: the patch types, decoding and applying a decoded patch, and the merge patch (the
//! `json-patch` crate's). Beside it: `json` (RFC 6902), `strategic` (the strategic
//! merge and its directives) and `merge_keys` (how each built-in kind's lists merge).

mod json;
mod merge_keys;
mod strategic;

use json_patch::PatchOperation;
use serde_json::Value;

use json::{apply_json_patch, decode_json_patch};
pub use merge_keys::{strategic_merge_key, strategic_set_list};
use strategic::strategic_merge;

/// The kind of patch, as selected by the request's `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902 JSON patch: `application/json-patch+json`.
    Json,
    /// RFC 7386 JSON merge patch: `application/merge-patch+json`.
    Merge,
    /// Kubernetes strategic merge patch:
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// Server-side apply: `application/apply-patch+yaml` (JSON bodies are
    /// accepted too, since JSON is YAML).
    Apply,
}

impl PatchType {
    /// Parses a `Content-Type` header value. Media type parameters such as
    /// `; charset=utf-8` are ignored and the comparison is case-insensitive.
    /// Returns `None` for any media type that is not a patch type.
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let essence = ct.split_once(';').map_or(ct, |(media, _)| media).trim();
        [
            PatchType::Json,
            PatchType::Merge,
            PatchType::StrategicMerge,
            PatchType::Apply,
        ]
        .into_iter()
        .find(|t| t.content_type().eq_ignore_ascii_case(essence))
    }

    /// The canonical media type of this patch type.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Why a patch could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch document itself cannot be decoded (HTTP 400 BadRequest). The
    /// message includes the decoder's line/column where available.
    #[error("{0}")]
    Malformed(String),
    /// The patch decoded but cannot be applied: a failed JSON patch `test`, a
    /// missing path, wrong value types, bad strategic-merge directives
    /// (HTTP 422 Invalid).
    #[error("{0}")]
    Invalid(String),
}

pub(super) fn invalid(msg: impl Into<String>) -> PatchError {
    PatchError::Invalid(msg.into())
}

/// Applies `patch` (the raw request body) of type `patch_type` to `current`,
/// an object of kind `kind`, and returns the patched object.
///
/// `current` is not modified. For [`PatchType::Apply`] it may be
/// [`Value::Null`], meaning the object does not exist yet.
///
/// # Apply
///
/// The body (YAML or JSON) is taken as the full intended configuration of the
/// fields the applier manages, and is merged into `current` the strategic way:
/// maps merge recursively, lists with a known merge key merge by key, other
/// lists are replaced. When `current` is `Null` the result is the applied
/// object itself.
///
/// This is not server-side apply: no ownership, no conflicts, no removal of
/// fields dropped from the configuration. Object writes go through
/// [`crate::apply`]; only the `scale` subresource still uses this merge.
/// Explicit `null`s in the applied configuration delete the field, as in a
/// strategic merge patch. Tests use it to apply a raw body in one call.
#[cfg(test)]
pub fn apply_patch(
    patch_type: PatchType,
    kind: &str,
    current: &Value,
    patch: &[u8],
) -> Result<Value, PatchError> {
    decode_patch(patch_type, patch)?.apply(kind, current)
}

/// A patch body decoded once (off the async workers when it is large) and applied to
/// each current object a conflicting write makes the server re-read.
#[derive(Debug, Clone)]
pub enum DecodedPatch {
    Json(json_patch::Patch),
    Merge(Value),
    StrategicMerge(Value),
    Apply(Value),
}

/// Decode a patch body of `patch_type`, within the request nesting limit.
pub fn decode_patch(patch_type: PatchType, patch: &[u8]) -> Result<DecodedPatch, PatchError> {
    if patch.iter().all(u8::is_ascii_whitespace) {
        return Err(PatchError::Malformed("the patch body is empty".to_owned()));
    }
    match patch_type {
        PatchType::Json => decode_json_patch(patch).map(DecodedPatch::Json),
        PatchType::Merge => {
            let patch = decode_json(patch, "merge patch")?;
            if !patch.is_object() {
                return Err(invalid(format!(
                    "a merge patch must be a JSON object, got {}",
                    type_name(&patch)
                )));
            }
            Ok(DecodedPatch::Merge(patch))
        }
        PatchType::StrategicMerge => {
            decode_json(patch, "strategic merge patch").map(DecodedPatch::StrategicMerge)
        }
        PatchType::Apply => decode_apply(patch).map(DecodedPatch::Apply),
    }
}

impl DecodedPatch {
    /// Whether the patch itself sets `metadata.resourceVersion`, which makes it conditional:
    /// it applies only to that version and a lost race is the client's 409. A patch that
    /// does not name one is retried by the server until it applies.
    pub fn names_resource_version(&self) -> bool {
        const POINTER: &str = "/metadata/resourceVersion";
        match self {
            DecodedPatch::Merge(v) | DecodedPatch::StrategicMerge(v) | DecodedPatch::Apply(v) => {
                v.pointer(POINTER).is_some_and(|rv| !rv.is_null())
            }
            DecodedPatch::Json(ops) => ops.0.iter().any(|op| {
                !matches!(op, PatchOperation::Remove(_)) && op.path().as_str() == POINTER
            }),
        }
    }

    pub fn patch_type(&self) -> PatchType {
        match self {
            DecodedPatch::Json(_) => PatchType::Json,
            DecodedPatch::Merge(_) => PatchType::Merge,
            DecodedPatch::StrategicMerge(_) => PatchType::StrategicMerge,
            DecodedPatch::Apply(_) => PatchType::Apply,
        }
    }

    /// The patched object: `current` is `Null` when an apply creates the object.
    pub fn apply(&self, kind: &str, current: &Value) -> Result<Value, PatchError> {
        match self {
            DecodedPatch::Json(ops) => apply_json_patch(current, ops),
            DecodedPatch::Merge(patch) => {
                let mut doc = current.clone();
                json_patch::merge(&mut doc, patch);
                Ok(doc)
            }
            DecodedPatch::StrategicMerge(patch) => {
                strategic_merge(kind, current, patch, "a strategic merge patch")
            }
            DecodedPatch::Apply(applied) => {
                strategic_merge(kind, current, applied, "an apply configuration")
            }
        }
    }
}

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn decode_json(body: &[u8], what: &str) -> Result<Value, PatchError> {
    crate::request::decode_json_value(body, what).map_err(PatchError::Malformed)
}

/// An apply configuration: JSON, or else YAML (both within the one nesting limit).
fn decode_apply(body: &[u8]) -> Result<Value, PatchError> {
    const WHAT: &str = "the apply configuration";
    crate::request::decode_json_value(body, WHAT)
        .or_else(|_| crate::request::decode_yaml_value(body, WHAT))
        .map_err(PatchError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(super) fn pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web",
                "namespace": "default",
                "resourceVersion": "7",
                "labels": {"app": "web", "tier": "frontend"},
                "finalizers": ["a.example.com/f"],
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs1", "uid": "u1"},
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs2", "uid": "u2"}
                ]
            },
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "nginx:1.25",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
                    },
                    {"name": "sidecar", "image": "busybox:1.36", "command": ["sleep", "inf"]}
                ],
                "tolerations": [{"key": "k1", "operator": "Exists"}],
                "nodeSelector": {"disk": "ssd", "zone": "a"}
            }
        })
    }

    // ---- content types ----------------------------------------------------

    #[test]
    fn content_types() {
        use PatchType::*;
        let cases = [
            ("application/json-patch+json", Some(Json)),
            ("application/merge-patch+json", Some(Merge)),
            (
                "application/strategic-merge-patch+json",
                Some(StrategicMerge),
            ),
            ("application/apply-patch+yaml", Some(Apply)),
            ("application/merge-patch+json; charset=utf-8", Some(Merge)),
            ("Application/Apply-Patch+YAML ;charset=UTF-8", Some(Apply)),
            ("  application/json-patch+json  ", Some(Json)),
            ("application/json", None),
            ("application/apply-patch+json", None),
            ("application/yaml", None),
            ("", None),
        ];
        for (ct, want) in cases {
            assert_eq!(PatchType::from_content_type(ct), want, "{ct:?}");
        }
        for t in [Json, Merge, StrategicMerge, Apply] {
            assert_eq!(PatchType::from_content_type(t.content_type()), Some(t));
        }
    }

    // ---- merge patch ------------------------------------------------------

    #[test]
    fn merge_patch_null_deletes_and_nested_merge() {
        let patch = br#"{"metadata":{"labels":{"tier":null,"new":"x","missing":null}},
            "spec":{"nodeSelector":{"zone":"b"},"tolerations":[]}}"#;
        let out = apply_patch(PatchType::Merge, "Pod", &pod(), patch).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"app": "web", "new": "x"}));
        assert_eq!(
            out["spec"]["nodeSelector"],
            json!({"disk": "ssd", "zone": "b"})
        );
        assert_eq!(out["spec"]["tolerations"], json!([]));
        // Lists are replaced wholesale by a merge patch.
        let patch = br#"{"spec":{"containers":[{"name":"only"}]}}"#;
        let out = apply_patch(PatchType::Merge, "Pod", &pod(), patch).unwrap();
        assert_eq!(out["spec"]["containers"], json!([{"name": "only"}]));
    }

    /// How a patch body is expected to fail.
    #[derive(Debug)]
    enum Fails {
        /// Does not decode; the message names the given fragment (a position, say).
        Malformed(&'static str),
        /// Decodes, but cannot apply.
        Invalid,
    }

    /// Checks that each body, as a patch of `patch_type` on a pod, fails as expected.
    fn check_failures(patch_type: PatchType, cases: &[(&[u8], Fails)]) {
        for (body, expected) in cases {
            let err = apply_patch(patch_type, "Pod", &pod(), body).unwrap_err();
            match (expected, &err) {
                (Fails::Malformed(fragment), PatchError::Malformed(msg)) => {
                    assert!(msg.contains(fragment), "{msg}")
                }
                (Fails::Invalid, PatchError::Invalid(_)) => {}
                _ => panic!(
                    "{:?}: expected {expected:?}, got {err:?}",
                    String::from_utf8_lossy(body)
                ),
            }
        }
    }

    // ---- apply ------------------------------------------------------------

    #[test]
    fn apply_creates_from_null() {
        let body =
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}"#;
        let out = apply_patch(PatchType::Apply, "ConfigMap", &Value::Null, body).unwrap();
        assert_eq!(out, serde_json::from_slice::<Value>(body).unwrap());
    }

    #[test]
    fn apply_merges_into_existing_from_yaml() {
        let body = b"apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
    version: \"2\"
spec:
  containers:
  - name: app
    image: nginx:1.27
    ports:
    - containerPort: 8080
";
        let out = apply_patch(PatchType::Apply, "Pod", &pod(), body).unwrap();
        assert_eq!(
            out["metadata"]["labels"],
            json!({"app": "web", "tier": "frontend", "version": "2"})
        );
        let containers = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 2, "fields not in the config are kept");
        assert_eq!(containers[0]["image"], "nginx:1.27");
        assert_eq!(
            containers[0]["ports"],
            json!([{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 8080}])
        );
        assert_eq!(out["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn merge_and_apply_errors() {
        check_failures(
            PatchType::Merge,
            &[
                (b"{\"a\":", Fails::Malformed("line 1")),
                (b"[1,2]", Fails::Invalid),
                (b"  ", Fails::Malformed("")),
            ],
        );
        check_failures(
            PatchType::Apply,
            &[
                (b"a: [1\nb: {", Fails::Malformed("line")),
                (b"- a\n- b\n", Fails::Invalid),
                (b"a: 1\n---\nb: 2\n", Fails::Malformed("")),
            ],
        );
    }
}
