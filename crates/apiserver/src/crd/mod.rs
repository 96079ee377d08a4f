//! CustomResourceDefinitions: validating them, computing their status, and turning them
//! into served kinds in the registry as soon as they are written.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::ApiServer;
use crate::builtin::Generation;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::registry::{ResourceType, ScaleSubresource};
use crate::schema::{self, FieldError, FieldErrorReason};

mod validation;

use validation::validate;

/// Held by every CRD until its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

fn error(field: &str, reason: FieldErrorReason, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        reason,
        message: message.into(),
    }
}

/// Validate a CRD being written and set the status the server owns.
pub fn prepare(_server: &ApiServer, crd: &mut Value, old: Option<&Value>) -> ApiResult<()> {
    let name = meta::name(crd).unwrap_or("").to_string();
    let errors = validate(crd, old, &name);
    if !errors.is_empty() {
        return Err(ApiError::invalid(
            "CustomResourceDefinition",
            &name,
            &errors,
        ));
    }
    if let Some(old) = old {
        for field in ["/spec/group", "/spec/names/plural", "/spec/scope"] {
            if old.pointer(field) != crd.pointer(field) {
                let path = field.trim_start_matches('/').replace('/', ".");
                return Err(ApiError::invalid(
                    "CustomResourceDefinition",
                    &name,
                    &[error(
                        &path,
                        FieldErrorReason::Invalid,
                        "Invalid value: field is immutable",
                    )],
                ));
            }
        }
    }
    let kind = meta::str_at(crd, "/spec/names/kind")
        .unwrap_or("")
        .to_string();
    let names = crd["spec"]["names"].as_object_mut();
    if let Some(names) = names {
        names
            .entry("singular")
            .or_insert_with(|| json!(kind.to_lowercase()));
        names
            .entry("listKind")
            .or_insert_with(|| json!(format!("{kind}List")));
    }
    let storage = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v["storage"] == true)
                .and_then(|v| v["name"].as_str())
                .map(str::to_string)
        });
    let mut stored_versions: Vec<Value> = old
        .and_then(|o| o.pointer("/status/storedVersions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(storage) = storage
        && !stored_versions.iter().any(|v| v == storage.as_str())
    {
        stored_versions.push(json!(storage));
    }
    let transition = old
        .and_then(|o| o.pointer("/status/conditions/0/lastTransitionTime"))
        .cloned()
        .unwrap_or_else(|| json!(_server.timestamp()));
    crd["status"] = json!({
        "acceptedNames": crd["spec"]["names"].clone(),
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": transition},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": transition},
        ],
        "storedVersions": stored_versions,
    });
    if old.is_none() {
        let mut finalizers = meta::finalizers(crd);
        if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.push(CLEANUP_FINALIZER.to_string());
        }
        meta::set_finalizers(crd, &finalizers);
    }
    Ok(())
}

/// A version's `selectableFields`, as field selectors name them (`spec.color`).
fn selectable_fields(version: &Value) -> Vec<String> {
    version["selectableFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|field| field["jsonPath"].as_str())
        .map(|path| path.trim_start_matches('.').to_string())
        .collect()
}

/// The kinds a CRD serves: one per served version.
pub fn types_of(crd: &Value) -> Vec<ResourceType> {
    let Some(crd_name) = meta::name(crd) else {
        return Vec::new();
    };
    let text = |p: &str| {
        crd.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let strings = |p: &str| meta::string_list(crd.pointer(p));
    let kind = text("/spec/names/kind");
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    versions
        .iter()
        .filter(|v| v["served"] != false)
        .filter_map(|v| {
            let version = v["name"].as_str()?.to_string();
            let scale = v.pointer("/subresources/scale").map(|s| ScaleSubresource {
                spec_replicas_path: s["specReplicasPath"]
                    .as_str()
                    .unwrap_or(".spec.replicas")
                    .to_string(),
                status_replicas_path: s["statusReplicasPath"]
                    .as_str()
                    .unwrap_or(".status.replicas")
                    .to_string(),
                label_selector_path: s["labelSelectorPath"].as_str().map(str::to_string),
            });
            Some(ResourceType {
                group: text("/spec/group"),
                version,
                kind: kind.clone(),
                plural: text("/spec/names/plural"),
                singular: Some(text("/spec/names/singular"))
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| kind.to_lowercase()),
                namespaced: text("/spec/scope") != "Cluster",
                short_names: strings("/spec/names/shortNames"),
                categories: strings("/spec/names/categories"),
                status_subresource: v.pointer("/subresources/status").is_some(),
                scale,
                extra_field_selectors: selectable_fields(v).into_iter().map(Cow::Owned).collect(),
                builtin: false,
                typed: None,
                validation: v
                    .pointer("/schema/openAPIV3Schema")
                    .map(|s| Arc::new(schema::ValueSchema::new(s))),
                schema: v.pointer("/schema/openAPIV3Schema").cloned(),
                printer_columns: v["additionalPrinterColumns"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
                crd_name: Some(crd_name.to_string()),
                generation: Generation::OnSpecChange,
            })
        })
        .collect()
}

/// Serve (or re-serve, after an update) the kinds of a stored CRD.
pub fn register(server: &ApiServer, crd: &Value) {
    if let Some(name) = meta::name(crd) {
        server.registry().replace_crd(name, types_of(crd));
    }
}

pub fn unregister(server: &ApiServer, crd_name: &str) {
    server.registry().replace_crd(crd_name, Vec::new());
}

/// At start-up: serve every CRD already in the store.
pub fn register_stored(server: &ApiServer) -> ApiResult<()> {
    let prefix = "/apiextensions.k8s.io/customresourcedefinitions/";
    let page = server
        .store()
        .list(prefix, &steady_store::ListOptions::default(), &|_| true)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    for object in page.items {
        let crd: Value =
            serde_json::from_slice(&object.value).map_err(|e| ApiError::internal(e.to_string()))?;
        register(server, &crd);
    }
    Ok(())
}
