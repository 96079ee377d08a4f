//! kube-apiserver's `PersistentVolumeClaimResize` admission plugin (on by default): a
//! claim's storage request grows only once the claim is bound, and only when its
//! StorageClass, the same before and after, sets `allowVolumeExpansion: true` (kind's
//! `standard`, which `steady up` creates, does not). It runs after the update rules
//! (`update_rules/claims.rs`), as admission follows validation in kube.
//! Must not know: how volumes are provisioned or expanded.

use serde_json::{Value, json};
use steady_quota::Quantity;

use crate::ApiServer;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::registry::ResourceType;
use crate::update_rules::beta_storage_class;

impl ApiServer {
    /// Refuses (403) an update of claim `old` to `new` that grows its storage request
    /// where kube's plugin would.
    pub(crate) fn check_claim_resize(
        &self,
        rt: &ResourceType,
        name: &str,
        old: &Value,
        new: &Value,
    ) -> ApiResult<()> {
        if !(rt.group.is_empty() && rt.plural == "persistentvolumeclaims")
            || storage_request(new) <= storage_request(old)
        {
            return Ok(());
        }
        let refuse = |why: &str| {
            Err(ApiError::forbidden(format!(
                "{} \"{name}\" is forbidden: {why}",
                rt.qualified_name()
            ))
            .with_details(json!({"name": name, "kind": rt.plural})))
        };
        if meta::str_at(old, "/status/phase") != Some("Bound") {
            return refuse("Only bound persistent volume claims can be expanded");
        }
        let class = class_of(new);
        if class.is_empty() || class != class_of(old) || !self.class_allows_expansion(class) {
            return refuse(
                "only dynamically provisioned pvc can be resized and the storageclass that \
                 provisions the pvc must support resize",
            );
        }
        Ok(())
    }

    fn class_allows_expansion(&self, class: &str) -> bool {
        let Some(rt) = self.registry().builtin("storage.k8s.io", "storageclasses") else {
            return false;
        };
        let classes: Vec<Value> = self.current_builtin_objects(&rt, None).unwrap_or_default();
        classes
            .iter()
            .find(|c| meta::name(c) == Some(class))
            .and_then(|c| c.get("allowVolumeExpansion"))
            .and_then(Value::as_bool)
            == Some(true)
    }
}

fn storage_request(claim: &Value) -> Quantity {
    meta::str_at(claim, "/spec/resources/requests/storage")
        .and_then(|q| Quantity::parse(q).ok())
        .unwrap_or_default()
}

/// The claim's class as kube's `GetPersistentVolumeClaimClass` reads it: the field, else
/// the beta annotation.
fn class_of(claim: &Value) -> &str {
    match claim.pointer("/spec/storageClassName") {
        Some(Value::String(class)) => class,
        _ => beta_storage_class(claim).unwrap_or_default(),
    }
}
