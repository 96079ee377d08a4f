//! What a write to an object's `status` subresource takes from the request besides the
//! status, as kube-apiserver's status strategies (`PrepareForUpdate`) decide per kind.
//!
//! Everything outside `metadata` and `status` (the spec, above all) always stays as
//! stored. Metadata differs by kind: a custom resource, and the few built-in kinds whose
//! strategy calls `metav1.ResetObjectMetaForStatus` or copies the whole `ObjectMeta`,
//! keep all of it; most built-in kinds take labels, annotations, finalizers and owner
//! references from the request, so a PUT of `pods/status` without labels clears them, as
//! on a cluster; a few keep one or more of those four. The fields no update changes
//! (uid, name, creationTimestamp, generation, ...) are the update path's business.
//!
//! Only JSON: knows nothing of storage or HTTP.

use serde_json::Value;

/// The metadata a status write keeps as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoredMetadata {
    /// All of it: the request's metadata is ignored.
    All,
    /// These fields; the rest comes from the request.
    Fields(&'static [&'static str]),
}

const META_OWNED_BY_THE_SPEC_WRITER: &[&str] =
    &["labels", "annotations", "finalizers", "ownerReferences"];

/// What a status write of `group`/`plural` keeps of the stored metadata.
pub(crate) fn stored_metadata(group: &str, plural: &str, builtin: bool) -> StoredMetadata {
    if !builtin {
        // apiextensions' status strategy copies the whole stored custom resource.
        return StoredMetadata::All;
    }
    match (group, plural) {
        // Old kubelets corrupted owner references through pods/status.
        ("", "pods") => StoredMetadata::Fields(&["ownerReferences"]),
        ("apps", "deployments") => StoredMetadata::Fields(&["labels"]),
        ("apiregistration.k8s.io", "apiservices") => {
            StoredMetadata::Fields(META_OWNED_BY_THE_SPEC_WRITER)
        }
        ("flowcontrol.apiserver.k8s.io", "flowschemas" | "prioritylevelconfigurations")
        | ("storage.k8s.io", "volumeattachments")
        | ("admissionregistration.k8s.io", "validatingadmissionpolicies") => StoredMetadata::All,
        _ => StoredMetadata::Fields(&[]),
    }
}

/// Status fields the strategy fills in from the stored status when the request left them
/// out: a pod's `qosClass`, set once at creation (kube back-fills it because old kubelets
/// dropped it).
pub(crate) fn backfill_status(group: &str, plural: &str, old: &Value, new: &mut Value) {
    if (group, plural) != ("", "pods") {
        return;
    }
    let empty = |v: Option<&Value>| v.is_none_or(|v| v.as_str().is_some_and(str::is_empty));
    let Some(stored) = old.pointer("/status/qosClass").filter(|v| !empty(Some(v))) else {
        return;
    };
    if !empty(new.pointer("/status/qosClass")) {
        return;
    }
    let Some(object) = new.as_object_mut() else {
        return;
    };
    let status = object
        .entry("status")
        .or_insert_with(|| Value::Object(Default::default()));
    if !status.is_object() {
        *status = Value::Object(Default::default());
    }
    if let Some(status) = status.as_object_mut() {
        status.insert("qosClass".into(), stored.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_keep_the_metadata_their_strategies_reset() {
        use StoredMetadata::*;
        assert_eq!(stored_metadata("steady.dev", "caches", false), All);
        assert_eq!(
            stored_metadata("", "pods", true),
            Fields(&["ownerReferences"])
        );
        assert_eq!(
            stored_metadata("apps", "deployments", true),
            Fields(&["labels"])
        );
        assert_eq!(stored_metadata("apps", "replicasets", true), Fields(&[]));
        assert_eq!(
            stored_metadata("storage.k8s.io", "volumeattachments", true),
            All
        );
    }

    #[test]
    fn a_pods_qos_class_is_back_filled_only_when_left_out() {
        let old = json!({"status": {"qosClass": "Burstable"}});
        let mut without = json!({"status": {"phase": "Running"}});
        backfill_status("", "pods", &old, &mut without);
        assert_eq!(without["status"]["qosClass"], "Burstable");
        let mut emptied = json!({"status": {"qosClass": ""}});
        backfill_status("", "pods", &old, &mut emptied);
        assert_eq!(emptied["status"]["qosClass"], "Burstable");
        let mut other = json!({"status": {"qosClass": "BestEffort"}});
        backfill_status("", "pods", &old, &mut other);
        assert_eq!(other["status"]["qosClass"], "BestEffort");
        let mut service = json!({"status": {}});
        backfill_status("", "services", &old, &mut service);
        assert_eq!(service, json!({"status": {}}));
    }
}
