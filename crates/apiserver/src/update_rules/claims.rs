//! What an update may change in a PersistentVolumeClaim, as kube-apiserver 1.32's
//! `ValidatePersistentVolumeClaimUpdate` decides: the spec is fixed once the claim exists
//! but for the volume it binds to (set once) and, once bound, its storage request, which
//! may grow, or shrink back to no less than the capacity the claim has
//! (`RecoverVolumeExpansionFailure`, on by default in 1.32). The beta storage-class
//! annotation is fixed too, but for moving the class from it to `storageClassName`.

use serde_json::{Map, Value};
use steady_quota::Quantity;

use super::{at, field_is_immutable, forbidden, spec_forbidden};
use crate::go_text::quote;
use crate::meta;
use crate::schema::FieldError;

/// kube-apiserver's message, before the difference it appends.
const SPEC_FORBIDDEN: &str = "Forbidden: spec is immutable after creation except \
resources.requests and volumeAttributesClassName for bound claims";

const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// The class a claim names in the beta annotation that preceded `storageClassName`.
pub(crate) fn beta_storage_class(claim: &Value) -> Option<&str> {
    at(claim, "/metadata/annotations")
        .and_then(|a| a.get(BETA_STORAGE_CLASS))
        .and_then(Value::as_str)
}

/// The errors of updating the claim `old` to `new`: none when only what may change did.
pub(super) fn validate(old: &Value, new: &Value) -> Vec<FieldError> {
    let empty = Map::new();
    let spec = |claim: &Value| claim.get("spec").and_then(Value::as_object).cloned();
    let (old_spec, new_spec) = (
        spec(old).unwrap_or_else(|| empty.clone()),
        spec(new).unwrap_or(empty),
    );
    let mut errors = Vec::new();
    let mut expected = old_spec.clone();
    let mut munged = new_spec.clone();
    if text(&old_spec, "volumeName").is_empty() {
        meta::copy_fields(Some(&new_spec), &mut expected, &["volumeName"]);
    }
    if moves_class_out_of_annotation(old, new, &old_spec, &new_spec) {
        munged.remove("storageClassName");
    } else {
        let annotation = |claim| beta_storage_class(claim).unwrap_or_default();
        let (before, after) = (annotation(old), annotation(new));
        if before != after {
            errors.push(field_is_immutable(
                &format!("metadata.annotations.{BETA_STORAGE_CLASS}"),
                quote(after),
            ));
        }
    }
    let bound = at(new, "/status/phase").and_then(Value::as_str) == Some("Bound");
    if bound
        && let Some(Value::Object(requests)) = munged
            .get_mut("resources")
            .and_then(|r| r.get_mut("requests"))
    {
        match storage_request(&old_spec) {
            Some(storage) => requests.insert("storage".into(), storage.clone()),
            None => requests.remove("storage"),
        };
    }
    if munged != expected {
        errors.push(spec_forbidden(SPEC_FORBIDDEN, &expected, munged));
    }
    let size = |value: Option<&Value>| {
        value
            .and_then(Value::as_str)
            .and_then(|q| Quantity::parse(q).ok())
            .unwrap_or_default()
    };
    let (old_size, new_size) = (
        size(storage_request(&old_spec)),
        size(storage_request(&new_spec)),
    );
    let capacity = size(at(old, "/status/capacity/storage"));
    if new_size < old_size && new_size <= capacity {
        errors.push(forbidden(
            "spec.resources.requests.storage",
            "field can not be less than status.capacity",
        ));
    }
    if old_spec.get("volumeMode") != new_spec.get("volumeMode") {
        let shown = new_spec
            .get("volumeMode")
            .and_then(Value::as_str)
            .map_or("null".into(), quote);
        // kube names the field without its `spec.`.
        errors.push(field_is_immutable("volumeMode", shown));
    }
    errors
}

fn text<'a>(spec: &'a Map<String, Value>, field: &str) -> &'a str {
    spec.get(field).and_then(Value::as_str).unwrap_or_default()
}

fn storage_request(spec: &Map<String, Value>) -> Option<&Value> {
    spec.get("resources")?.get("requests")?.get("storage")
}

/// kube's upgrade path from the beta annotation: the old claim named its class only
/// there, and the new one names the same class in `storageClassName` (and keeps the
/// annotation, or drops it).
fn moves_class_out_of_annotation(
    old: &Value,
    new: &Value,
    old_spec: &Map<String, Value>,
    new_spec: &Map<String, Value>,
) -> bool {
    let Some(old_class) = beta_storage_class(old) else {
        return false;
    };
    old_spec.get("storageClassName").is_none_or(Value::is_null)
        && new_spec.get("storageClassName").and_then(Value::as_str) == Some(old_class)
        && beta_storage_class(new).is_none_or(|class| class == old_class)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(phase: &str, storage: &str, capacity: Option<&str>) -> Value {
        let mut claim = json!({
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                "volumeMode": "Filesystem", "resources": {"requests": {"storage": storage}}},
            "status": {"phase": phase},
        });
        if let Some(capacity) = capacity {
            claim["status"]["capacity"] = json!({"storage": capacity});
        }
        claim
    }

    fn messages(errors: &[FieldError]) -> Vec<String> {
        errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    #[test]
    fn a_pending_claims_spec_is_fixed_but_for_binding_it_once() {
        let old = claim("Pending", "1Gi", None);
        let mut bound = old.clone();
        bound["spec"]["volumeName"] = json!("pv-1");
        assert!(validate(&old, &bound).is_empty());

        let mut rebound = bound.clone();
        rebound["spec"]["volumeName"] = json!("pv-2");
        let errors = messages(&validate(&bound, &rebound));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with(&format!("spec: {SPEC_FORBIDDEN}\n  spec.volumeName")));

        let mut grown = old.clone();
        grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert_eq!(validate(&old, &grown).len(), 1, "not bound: no resize");

        let mut other_modes = old.clone();
        other_modes["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        let errors = messages(&validate(&old, &other_modes));
        assert!(errors[0].contains("spec.accessModes[0]: \"ReadWriteOnce\" → \"ReadWriteMany\""));
    }

    #[test]
    fn a_bound_claim_grows_and_shrinks_no_lower_than_its_capacity() {
        let old = claim("Bound", "2Gi", Some("1Gi"));
        let resized = |storage: &str| {
            let mut new = old.clone();
            new["spec"]["resources"]["requests"]["storage"] = json!(storage);
            messages(&validate(&old, &new))
        };
        assert!(resized("5Gi").is_empty());
        assert!(resized("1500Mi").is_empty(), "back towards the capacity");
        assert_eq!(
            resized("1Gi"),
            [
                "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"
            ]
        );
        let mut limited = old.clone();
        limited["spec"]["resources"]["limits"] = json!({"storage": "3Gi"});
        assert_eq!(
            validate(&old, &limited).len(),
            1,
            "only requests may change"
        );
    }

    #[test]
    fn the_volume_mode_is_named_twice_as_kube_does() {
        let old = claim("Bound", "1Gi", Some("1Gi"));
        let mut block = old.clone();
        block["spec"]["volumeMode"] = json!("Block");
        let errors = messages(&validate(&old, &block));
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert_eq!(
            errors[1],
            "volumeMode: Invalid value: \"Block\": field is immutable"
        );
    }

    #[test]
    fn the_beta_class_annotation_is_fixed_but_may_move_to_the_spec() {
        let mut old = claim("Pending", "1Gi", None);
        old["spec"]
            .as_object_mut()
            .unwrap()
            .remove("storageClassName");
        old["metadata"]["annotations"] = json!({BETA_STORAGE_CLASS: "fast"});
        let mut moved = old.clone();
        moved["spec"]["storageClassName"] = json!("fast");
        assert!(validate(&old, &moved).is_empty());

        let mut changed = old.clone();
        changed["metadata"]["annotations"][BETA_STORAGE_CLASS] = json!("slow");
        assert_eq!(
            messages(&validate(&old, &changed)),
            [format!(
                "metadata.annotations.{BETA_STORAGE_CLASS}: Invalid value: \"slow\": field is immutable"
            )]
        );
    }
}
