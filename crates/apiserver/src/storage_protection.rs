//! kube-apiserver's `StorageObjectInUseProtection` admission plugin (on by default): a new
//! PersistentVolumeClaim gets the finalizer `kubernetes.io/pvc-protection` and a new
//! PersistentVolume `kubernetes.io/pv-protection`, so that neither is removed while in
//! use: a claim while a scheduled pod names it, a volume while it is Bound. The in-server
//! controllers (`controllers/storage_protection.rs`) remove the finalizers once that is
//! over, and put them back on live objects that lost them, as kube-controller-manager's
//! pvc-protection and pv-protection controllers do.
//! Must not know: how claims are bound or pods scheduled (crates/cluster).

use serde_json::Value;

use crate::meta;

/// Holds a claim while a scheduled pod uses it.
pub(crate) const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// Holds a volume while it is Bound to a claim.
pub(crate) const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

/// The finalizer protecting objects of the core resource `plural`, if it is protected.
pub(crate) fn finalizer_for(plural: &str) -> Option<&'static str> {
    match plural {
        "persistentvolumeclaims" => Some(PVC_PROTECTION),
        "persistentvolumes" => Some(PV_PROTECTION),
        _ => None,
    }
}

/// Admit a new object of the core resource `plural`: a claim or volume gets its
/// protection finalizer (after any it already has, as kube appends it).
pub(crate) fn protect_new(plural: &str, obj: &mut Value) {
    if let Some(finalizer) = finalizer_for(plural) {
        add_finalizer(obj, finalizer);
    }
}

/// `finalizer` appended to `obj`'s finalizers unless they hold it already.
pub(crate) fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let mut finalizers = meta::finalizers(obj);
    if !finalizers.iter().any(|f| f == finalizer) {
        finalizers.push(finalizer.to_string());
        meta::set_finalizers(obj, &finalizers);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn claims_and_volumes_are_protected_after_their_own_finalizers() {
        let mut claim = json!({"metadata": {"name": "data", "finalizers": ["example.com/keep"]}});
        protect_new("persistentvolumeclaims", &mut claim);
        assert_eq!(
            claim["metadata"]["finalizers"],
            json!(["example.com/keep", PVC_PROTECTION])
        );
        let mut volume = json!({"metadata": {"name": "pv1"}});
        protect_new("persistentvolumes", &mut volume);
        assert_eq!(volume["metadata"]["finalizers"], json!([PV_PROTECTION]));
    }

    #[test]
    fn a_finalizer_already_there_is_not_added_twice_and_other_kinds_are_left_alone() {
        let mut claim = json!({"metadata": {"finalizers": [PVC_PROTECTION]}});
        protect_new("persistentvolumeclaims", &mut claim);
        assert_eq!(claim["metadata"]["finalizers"], json!([PVC_PROTECTION]));
        let mut pod = json!({"metadata": {"name": "p"}});
        protect_new("pods", &mut pod);
        assert!(pod["metadata"].get("finalizers").is_none());
    }
}
