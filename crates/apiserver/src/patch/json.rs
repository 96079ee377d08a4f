//! JSON patch (RFC 6902): decoded with positions in its errors, applied by the
//! `json-patch` crate, every failure answered as kube-apiserver does.

use json_patch::PatchOperation;
use serde_json::Value;

use super::{PatchError, decode_json, invalid, type_name};

pub(super) fn decode_json_patch(body: &[u8]) -> Result<json_patch::Patch, PatchError> {
    let raw = decode_json(body, "JSON patch")?;
    if !raw.is_array() {
        return Err(PatchError::Malformed(format!(
            "error decoding JSON patch: expected an array of operations, got {}",
            type_name(&raw)
        )));
    }
    // Decode from the bytes again (not from `raw`) so errors carry positions.
    serde_json::from_slice(body)
        .map_err(|e| PatchError::Malformed(format!("error decoding JSON patch: {e}")))
}

/// kube-apiserver answers every failed JSON patch operation (a `test` that does not hold,
/// a missing path, a bad `from`) with this generic 422 Invalid message and no details
/// (`NewGenericServerResponse(422, …)`); clients compare it verbatim to tell a lost
/// `test` precondition from other errors, so the specific failure is only logged.
pub const JSON_PATCH_NOT_APPLIED: &str =
    "the server rejected our request due to an error in our request";

pub(super) fn apply_json_patch(
    current: &Value,
    ops: &json_patch::Patch,
) -> Result<Value, PatchError> {
    let mut doc = current.clone();
    // `doc` is a private copy, so there's no need for the crate's undo log.
    json_patch::patch_unsafe(&mut doc, ops).map_err(|e| {
        tracing::debug!(
            operation = ops.get(e.operation).map_or("patch", op_name),
            path = %e.path,
            error = %e.kind,
            "JSON patch not applied"
        );
        invalid(JSON_PATCH_NOT_APPLIED)
    })?;
    Ok(doc)
}

fn op_name(op: &PatchOperation) -> &'static str {
    match op {
        PatchOperation::Add(_) => "add",
        PatchOperation::Remove(_) => "remove",
        PatchOperation::Replace(_) => "replace",
        PatchOperation::Move(_) => "move",
        PatchOperation::Copy(_) => "copy",
        PatchOperation::Test(_) => "test",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::patch::tests::pod;
    use crate::patch::{PatchType, apply_patch};

    // ---- JSON patch -------------------------------------------------------

    #[test]
    fn json_patch_operations() {
        let patch = br#"[
            {"op":"test","path":"/metadata/resourceVersion","value":"7"},
            {"op":"add","path":"/metadata/labels/new","value":"x"},
            {"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.26"},
            {"op":"remove","path":"/spec/tolerations"},
            {"op":"add","path":"/metadata/finalizers/-","value":"b"},
            {"op":"copy","from":"/metadata/name","path":"/metadata/labels/name"},
            {"op":"move","from":"/metadata/labels/tier","path":"/metadata/labels/layer"}
        ]"#;
        let out = apply_patch(PatchType::Json, "Pod", &pod(), patch).unwrap();
        assert_eq!(
            out["metadata"]["labels"],
            json!({"app": "web", "new": "x", "name": "web", "layer": "frontend"})
        );
        assert_eq!(out["spec"]["containers"][0]["image"], "nginx:1.26");
        assert!(out["spec"].get("tolerations").is_none());
        assert_eq!(
            out["metadata"]["finalizers"],
            json!(["a.example.com/f", "b"])
        );
    }

    #[test]
    fn json_patch_failed_test_is_invalid() {
        let current = pod();
        let patch = br#"[
            {"op":"replace","path":"/metadata/labels/app","value":"changed"},
            {"op":"test","path":"/metadata/resourceVersion","value":"6"}
        ]"#;
        let err = apply_patch(PatchType::Json, "Pod", &current, patch).unwrap_err();
        assert_not_applied(err);
        assert_eq!(current, pod(), "current must not be modified");
    }

    /// kube-apiserver's exact wording, whatever the operation that failed.
    fn assert_not_applied(err: PatchError) {
        match err {
            PatchError::Invalid(msg) => assert_eq!(
                msg,
                "the server rejected our request due to an error in our request"
            ),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn json_patch_missing_path_is_invalid() {
        let patch = br#"[{"op":"remove","path":"/spec/nope"}]"#;
        assert_not_applied(apply_patch(PatchType::Json, "Pod", &pod(), patch).unwrap_err());
        let patch = br#"[{"op":"move","from":"/nope","path":"/x"}]"#;
        assert_not_applied(apply_patch(PatchType::Json, "Pod", &pod(), patch).unwrap_err());
    }

    #[test]
    fn json_patch_malformed() {
        for body in [
            &b"[{\"op\":\"add\""[..],
            b"{\"op\":\"add\",\"path\":\"/a\",\"value\":1}",
            b"[{\"op\":\"frobnicate\",\"path\":\"/a\"}]",
            b"[{\"op\":\"add\",\"value\":1}]",
            b"",
        ] {
            let err = apply_patch(PatchType::Json, "Pod", &pod(), body).unwrap_err();
            assert!(matches!(err, PatchError::Malformed(_)), "{err:?}");
        }
        let err = apply_patch(PatchType::Json, "Pod", &pod(), b"[{]").unwrap_err();
        assert!(err.to_string().contains("column"), "{err}");
    }
}
