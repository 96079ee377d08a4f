//! The scale subresource: an `autoscaling/v1 Scale` view of an object with replicas,
//! through which only the replica count can be written.

use serde_json::{Map, Value, json};
use steady_store::Object;

use super::ownership::Ownership;
use super::write::{Update, Written, patch_error};
use super::{Target, attempts_until_applied, parse_revision, to_bytes};
use crate::ApiServer;
use crate::defaults;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::patch::DecodedPatch;
use crate::registry::{ResourceType, ScaleSubresource};
use crate::request::WriteOptions;
use crate::selector::LabelSelector;

impl ApiServer {
    /// GET of the scale subresource.
    pub fn get_scale(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> ApiResult<Value> {
        let scale = rt.scale.as_ref().ok_or_else(ApiError::path_not_found)?;
        let (obj, _) = self.get_value(rt, ns, name)?;
        Ok(scale_of(&obj, scale))
    }

    /// PUT of the scale subresource: only `spec.replicas` is taken from the Scale.
    pub async fn update_scale(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let scale = rt.scale.as_ref().ok_or_else(ApiError::path_not_found)?;
        let stored = self.get_stored(rt, ns, name)?;
        if let Some(rv) = body
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            && parse_revision(rv)? != stored.revision
        {
            return Err(ApiError::modified(&rt.qualified_name(), name));
        }
        let old = self.decoded_for_write(rt, &stored)?;
        let written = self
            .write_replicas(rt, ns, name, scale, &old, &stored, &body, opts)
            .await?;
        let obj: Value = serde_json::from_slice(&written.object)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(scale_of(&obj, scale))
    }

    pub(super) async fn patch_scale(
        &self,
        target: Target<'_>,
        patch: &DecodedPatch,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let Target { rt, ns, name, .. } = target;
        let scale = rt.scale.as_ref().ok_or_else(ApiError::path_not_found)?;
        for () in attempts_until_applied() {
            let stored = self.get_stored(rt, ns, name)?;
            let old = self.decoded_for_write(rt, &stored)?;
            let current = scale_of(&old, scale);
            let patched = patch.apply("Scale", &current).map_err(patch_error)?;
            match self
                .write_replicas(rt, ns, name, scale, &old, &stored, &patched, opts)
                .await
            {
                Err(e) if e.reason == "Conflict" => continue,
                Err(e) => return Err(e),
                Ok(written) => {
                    let obj: Value = serde_json::from_slice(&written.object)
                        .map_err(|e| ApiError::internal(e.to_string()))?;
                    return Ok(Written::updated(
                        to_bytes(&scale_of(&obj, scale))?,
                        written.warnings,
                    ));
                }
            }
        }
        Err(ApiError::modified(&rt.qualified_name(), name))
    }

    #[allow(clippy::too_many_arguments)]
    async fn write_replicas(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        scale: &ScaleSubresource,
        old: &Value,
        stored: &Object,
        scale_body: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let replicas = scale_body
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .ok_or_else(|| {
                ApiError::unprocessable(
                    "Scale.spec.replicas: Required value: an integer is required",
                )
            })?;
        if replicas < 0 {
            return Err(ApiError::unprocessable(format!(
                "Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
            )));
        }
        let mut new = old.clone();
        set_path(&mut new, &scale.spec_replicas_path, json!(replicas));
        let update = Update {
            old,
            old_bytes: stored.value.clone(),
            rev: stored.revision,
            new,
            ownership: Ownership::Update {
                subresource: "scale",
            },
        };
        let target = Target::object(rt, ns, name).subresource(Some("scale"));
        self.commit_update(target, update, opts).await
    }
}

/// The `autoscaling/v1 Scale` view of an object with replicas.
pub(crate) fn scale_of(obj: &Value, scale: &ScaleSubresource) -> Value {
    let spec_replicas = get_path(obj, &scale.spec_replicas_path)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let status_replicas = get_path(obj, &scale.status_replicas_path)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let mut status = json!({"replicas": status_replicas});
    if let Some(selector) = scale
        .label_selector_path
        .as_deref()
        .and_then(|p| get_path(obj, p))
        .and_then(selector_string)
    {
        status["selector"] = Value::String(selector);
    }
    let m = meta::metadata(obj).cloned().unwrap_or_default();
    let metadata: Map<String, Value> = [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ]
    .iter()
    .filter_map(|f| m.get(*f).map(|v| (f.to_string(), v.clone())))
    .collect();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": spec_replicas},
        "status": status,
    })
}

/// `object` with the replicas of `written`, a Scale of it (patched by a webhook).
pub(crate) fn with_replicas_of(object: &Value, written: &Value, scale: &ScaleSubresource) -> Value {
    let mut object = object.clone();
    if let Some(replicas) = written.pointer("/spec/replicas").filter(|r| r.is_i64()) {
        set_path(&mut object, &scale.spec_replicas_path, replicas.clone());
    }
    object
}

/// A Scale's `status.selector`: a CRD's string as is; a built-in kind's `spec.selector`
/// (a LabelSelector, or a ReplicationController's plain label map) in selector syntax.
fn selector_string(selector: &Value) -> Option<String> {
    let object = match selector {
        Value::String(s) => return Some(s.clone()),
        Value::Object(o) => o,
        _ => return None,
    };
    let label_selector =
        if object.contains_key("matchLabels") || object.contains_key("matchExpressions") {
            selector.clone()
        } else {
            json!({"matchLabels": object})
        };
    LabelSelector::from_label_selector_json(&label_selector)
        .ok()
        .map(|s| s.to_string())
}

/// Read a `.spec.replicas`-style JSON path.
fn get_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.')
        .split('.')
        .try_fold(obj, |v, seg| v.get(seg))
}

/// Write a `.spec.replicas`-style path, creating objects on the way.
fn set_path(obj: &mut Value, path: &str, value: Value) {
    let pointer: String = path
        .trim_start_matches('.')
        .split('.')
        .map(|segment| format!("/{}", segment.replace('~', "~0").replace('/', "~1")))
        .collect();
    defaults::set_pointer(obj, &pointer, value);
}
