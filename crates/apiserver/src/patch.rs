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
//!   strategic way (see [`apply_patch`]).
//!
//! Errors are split in two: [`PatchError::Malformed`] when the request body
//! cannot be decoded (HTTP 400) and [`PatchError::Invalid`] when it decoded but
//! cannot be applied to the current object (HTTP 422).

use json_patch::PatchOperation;
use serde_json::{Map, Value};

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

fn invalid(msg: impl Into<String>) -> PatchError {
    PatchError::Invalid(msg.into())
}

/// How a list field merges in a strategic merge patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListStrategy {
    /// The list is replaced atomically by the patch's list.
    Replace,
    /// A list of objects merged element-by-element on this key.
    MergeKey(&'static str),
    /// A list of primitives merged as a set union (`patchStrategy:"merge"`
    /// without a merge key, e.g. `metadata.finalizers`).
    Set,
}

/// Kinds whose `status.conditions` list merges on `type`.
const CONDITION_KINDS: &[&str] = &[
    "Pod",
    "Node",
    "Namespace",
    "PersistentVolumeClaim",
    "Service",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "ReplicationController",
    "Job",
];

/// Kinds that embed a pod template at `spec.template`.
const POD_TEMPLATE_KINDS: &[&str] = &[
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "ReplicationController",
    "Job",
];

fn list_strategy(kind: &str, path: &[&str]) -> ListStrategy {
    use ListStrategy::{MergeKey, Replace};
    match path {
        ["metadata", rest @ ..] => return object_meta_strategy(rest),
        ["status", "conditions"] if CONDITION_KINDS.contains(&kind) => return MergeKey("type"),
        _ => {}
    }
    match kind {
        "Pod" => pod_strategy(path),
        "PodTemplate" => match path {
            ["template", rest @ ..] => pod_strategy(rest),
            _ => Replace,
        },
        "CronJob" => match path {
            ["spec", "jobTemplate", "spec", "template", rest @ ..] => pod_strategy(rest),
            _ => Replace,
        },
        k if POD_TEMPLATE_KINDS.contains(&k) => match path {
            ["spec", "template", rest @ ..] => pod_strategy(rest),
            _ => Replace,
        },
        "Service" => match path {
            ["spec", "ports"] => MergeKey("port"),
            _ => Replace,
        },
        "Node" => match path {
            ["status", "addresses"] => MergeKey("type"),
            ["spec", "podCIDRs"] => ListStrategy::Set,
            _ => Replace,
        },
        _ => Replace,
    }
}

/// List strategies inside an `ObjectMeta` (path relative to `metadata`).
fn object_meta_strategy(path: &[&str]) -> ListStrategy {
    match path {
        ["ownerReferences"] => ListStrategy::MergeKey("uid"),
        ["finalizers"] => ListStrategy::Set,
        _ => ListStrategy::Replace,
    }
}

/// List strategies of a pod (or pod template) object, path relative to it.
fn pod_strategy(path: &[&str]) -> ListStrategy {
    use ListStrategy::{MergeKey, Replace};
    match path {
        ["metadata", rest @ ..] => object_meta_strategy(rest),
        [
            "spec",
            "containers" | "initContainers" | "ephemeralContainers",
            rest @ ..,
        ] => match rest {
            [] => MergeKey("name"),
            ["ports"] => MergeKey("containerPort"),
            ["env"] => MergeKey("name"),
            ["volumeMounts"] => MergeKey("mountPath"),
            ["volumeDevices"] => MergeKey("devicePath"),
            _ => Replace,
        },
        [
            "spec",
            "volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims",
        ] => MergeKey("name"),
        ["spec", "hostAliases"] => MergeKey("ip"),
        ["spec", "topologySpreadConstraints"] => MergeKey("topologyKey"),
        ["status", "conditions"] => MergeKey("type"),
        ["status", "podIPs" | "hostIPs"] => MergeKey("ip"),
        ["status", "resourceClaimStatuses"] => MergeKey("name"),
        _ => Replace,
    }
}

/// How lists of a kind merge in a strategic merge patch: returns the merge key
/// for the list at `path` (field names from the object root, array levels
/// skipped, e.g. `["spec", "containers"]` -> `Some("name")` for `Pod`).
/// `None` means the list is not merged by key: it is either replaced
/// atomically or, for primitive lists such as `metadata.finalizers`, merged as
/// a set union.
///
/// Kinds that are not known built-ins have no merge keys (all lists replace).
pub fn strategic_merge_key(kind: &str, path: &[&str]) -> Option<&'static str> {
    match list_strategy(kind, path) {
        ListStrategy::MergeKey(key) => Some(key),
        ListStrategy::Replace | ListStrategy::Set => None,
    }
}

/// Whether the list at `path` merges as a set of scalars (`metadata.finalizers`).
pub fn strategic_set_list(kind: &str, path: &[&str]) -> bool {
    list_strategy(kind, path) == ListStrategy::Set
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
/// strategic merge patch.
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

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn decode_json(body: &[u8], what: &str) -> Result<Value, PatchError> {
    crate::request::decode_json_value(body, what).map_err(PatchError::Malformed)
}

/// An apply configuration: JSON, or else YAML (both within the one nesting limit).
fn decode_apply(body: &[u8]) -> Result<Value, PatchError> {
    const WHAT: &str = "the apply configuration";
    crate::request::decode_json_value(body, WHAT)
        .or_else(|_| crate::request::decode_yaml_value(body, WHAT))
        .map_err(PatchError::Malformed)
}

fn decode_json_patch(body: &[u8]) -> Result<json_patch::Patch, PatchError> {
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

fn apply_json_patch(current: &Value, ops: &json_patch::Patch) -> Result<Value, PatchError> {
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

// ---------------------------------------------------------------------------
// Strategic merge patch
// ---------------------------------------------------------------------------

const PATCH_DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

fn is_directive(key: &str) -> bool {
    key == PATCH_DIRECTIVE
        || key == RETAIN_KEYS
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
        || key.starts_with(SET_ELEMENT_ORDER)
}

fn strategic_merge(
    kind: &str,
    current: &Value,
    patch: &Value,
    what: &str,
) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(invalid(format!(
            "{what} must be a JSON object, got {}",
            type_name(patch)
        )));
    };
    let mut doc = match current {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        other => {
            return Err(invalid(format!(
                "cannot patch {}: the current object is not a JSON object",
                type_name(other)
            )));
        }
    };
    match (Strategic { kind }).merge_map(&mut doc, patch, &mut Vec::new())? {
        Outcome::Keep => Ok(Value::Object(doc)),
        Outcome::Delete => Err(invalid(
            "the $patch: delete directive cannot delete the whole object",
        )),
    }
}

/// What to do with a map after merging a patch into it.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Keep,
    /// The patch carried `$patch: delete`: remove the map from its parent.
    Delete,
}

fn fmt_path(path: &[&str]) -> String {
    if path.is_empty() {
        "<root>".to_owned()
    } else {
        path.join(".")
    }
}

struct Strategic<'k> {
    kind: &'k str,
}

impl Strategic<'_> {
    fn strategy(&self, path: &[&str]) -> ListStrategy {
        list_strategy(self.kind, path)
    }

    /// Merges `patch` into `orig` (the map found at `path`).
    fn merge_map<'p>(
        &self,
        orig: &mut Map<String, Value>,
        patch: &'p Map<String, Value>,
        path: &mut Vec<&'p str>,
    ) -> Result<Outcome, PatchError> {
        if let Some(directive) = patch.get(PATCH_DIRECTIVE) {
            match directive.as_str() {
                Some("replace") => orig.clear(),
                Some("delete") => return Ok(Outcome::Delete),
                Some("merge") => {}
                _ => {
                    return Err(invalid(format!(
                        "unknown $patch directive {directive} in map at {}",
                        fmt_path(path)
                    )));
                }
            }
        }

        if let Some(retain) = patch.get(RETAIN_KEYS) {
            let keys = retain
                .as_array()
                .and_then(|keys| keys.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
                .ok_or_else(|| {
                    invalid(format!(
                        "$retainKeys at {} must be a list of strings",
                        fmt_path(path)
                    ))
                })?;
            if let Some((k, _)) = patch
                .iter()
                .find(|(k, v)| !v.is_null() && !is_directive(k) && !keys.contains(&k.as_str()))
            {
                return Err(invalid(format!(
                    "field {k:?} at {} is not listed in $retainKeys",
                    fmt_path(path)
                )));
            }
            orig.retain(|k, _| keys.contains(&k.as_str()));
        }

        for (k, v) in patch {
            let Some(field) = k.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) else {
                continue;
            };
            let Value::Array(values) = v else {
                return Err(invalid(format!("{k} at {} must be a list", fmt_path(path))));
            };
            if let Some(Value::Array(list)) = orig.get_mut(field) {
                list.retain(|e| !values.contains(e));
            }
        }

        for (k, v) in patch {
            if is_directive(k) {
                continue;
            }
            path.push(k);
            let res = self.merge_field(orig, k, v, path);
            path.pop();
            res?;
        }

        for (k, v) in patch {
            let Some(field) = k.strip_prefix(SET_ELEMENT_ORDER) else {
                continue;
            };
            let Value::Array(order) = v else {
                return Err(invalid(format!("{k} at {} must be a list", fmt_path(path))));
            };
            path.push(field);
            let strategy = self.strategy(path);
            path.pop();
            if let Some(Value::Array(list)) = orig.get_mut(field) {
                reorder(list, order, strategy);
            }
        }

        Ok(Outcome::Keep)
    }

    /// Merges the patch value `pv` of field `key` into `orig`; `path` ends
    /// with `key`.
    fn merge_field<'p>(
        &self,
        orig: &mut Map<String, Value>,
        key: &str,
        pv: &'p Value,
        path: &mut Vec<&'p str>,
    ) -> Result<(), PatchError> {
        match (orig.get_mut(key), pv) {
            (_, Value::Null) => {
                orig.remove(key);
            }
            (Some(Value::Object(om)), Value::Object(pm)) => {
                if self.merge_map(om, pm, path)? == Outcome::Delete {
                    orig.remove(key);
                }
            }
            (Some(Value::Array(ol)), Value::Array(pl)) => self.merge_list(ol, pl, path)?,
            _ => match self.clean(pv, path)? {
                Some(v) => {
                    orig.insert(key.to_owned(), v);
                }
                None => {
                    orig.remove(key);
                }
            },
        }
        Ok(())
    }

    /// The value a patch value produces when there is nothing to merge it
    /// into: directives are processed (and stripped), nulls dropped. `None`
    /// when the value is a map carrying `$patch: delete`.
    fn clean<'p>(
        &self,
        pv: &'p Value,
        path: &mut Vec<&'p str>,
    ) -> Result<Option<Value>, PatchError> {
        match pv {
            Value::Object(pm) => {
                let mut m = Map::new();
                Ok(match self.merge_map(&mut m, pm, path)? {
                    Outcome::Keep => Some(Value::Object(m)),
                    Outcome::Delete => None,
                })
            }
            Value::Array(pl) => {
                let mut l = Vec::new();
                self.merge_list(&mut l, pl, path)?;
                Ok(Some(Value::Array(l)))
            }
            other => Ok(Some(other.clone())),
        }
    }

    /// Merges the patch list `pl` into `ol` (the list at `path`).
    fn merge_list<'p>(
        &self,
        ol: &mut Vec<Value>,
        pl: &'p [Value],
        path: &mut Vec<&'p str>,
    ) -> Result<(), PatchError> {
        match self.strategy(path) {
            ListStrategy::MergeKey(key) => self.merge_keyed_list(ol, pl, key, path),
            ListStrategy::Set => {
                let mut items = Vec::with_capacity(pl.len());
                for e in pl {
                    match directive_of(e) {
                        Some(Some("replace")) => ol.clear(),
                        Some(d) => {
                            return Err(invalid(format!(
                                "unsupported $patch directive {} in list at {}",
                                d.unwrap_or("<non-string>"),
                                fmt_path(path)
                            )));
                        }
                        None => items.extend(self.clean(e, path)?),
                    }
                }
                for v in items {
                    if !ol.contains(&v) {
                        ol.push(v);
                    }
                }
                Ok(())
            }
            ListStrategy::Replace => {
                let mut out = Vec::with_capacity(pl.len());
                for e in pl {
                    if directive_of(e).is_some() && e.as_object().is_some_and(|m| m.len() == 1) {
                        // A bare `{"$patch": ...}` marker has no meaning in an
                        // atomic list (it is replaced anyway).
                        continue;
                    }
                    out.extend(self.clean(e, path)?);
                }
                *ol = out;
                Ok(())
            }
        }
    }

    fn merge_keyed_list<'p>(
        &self,
        ol: &mut Vec<Value>,
        pl: &'p [Value],
        key: &str,
        path: &mut Vec<&'p str>,
    ) -> Result<(), PatchError> {
        let mut replace = false;
        let mut items = Vec::with_capacity(pl.len());
        for e in pl {
            let Value::Object(pm) = e else {
                return Err(invalid(format!(
                    "list at {} merges on key {key:?}: its elements must be objects, got {}",
                    fmt_path(path),
                    type_name(e)
                )));
            };
            match pm.get(PATCH_DIRECTIVE).map(Value::as_str) {
                None | Some(Some("merge")) => items.push(pm),
                Some(Some("delete")) => {
                    let kv = merge_key_value(pm, key, path)?;
                    ol.retain(|o| o.get(key) != Some(kv));
                }
                Some(Some("replace")) => replace = true,
                Some(_) => {
                    return Err(invalid(format!(
                        "unknown $patch directive {} in list at {}",
                        pm.get(PATCH_DIRECTIVE).unwrap_or(&Value::Null),
                        fmt_path(path)
                    )));
                }
            }
        }
        if replace {
            ol.clear();
        }
        for pm in items {
            let kv = merge_key_value(pm, key, path)?;
            match ol.iter().position(|o| o.get(key) == Some(kv)) {
                Some(pos) => {
                    let delete = match ol.get_mut(pos) {
                        Some(Value::Object(om)) => self.merge_map(om, pm, path)? == Outcome::Delete,
                        Some(slot) => match self.clean_map(pm, path)? {
                            Some(v) => {
                                *slot = v;
                                false
                            }
                            None => true,
                        },
                        None => false,
                    };
                    if delete {
                        ol.remove(pos);
                    }
                }
                None => ol.extend(self.clean_map(pm, path)?),
            }
        }
        Ok(())
    }

    fn clean_map<'p>(
        &self,
        pm: &'p Map<String, Value>,
        path: &mut Vec<&'p str>,
    ) -> Result<Option<Value>, PatchError> {
        let mut m = Map::new();
        Ok(match self.merge_map(&mut m, pm, path)? {
            Outcome::Keep => Some(Value::Object(m)),
            Outcome::Delete => None,
        })
    }
}

/// `Some(directive)` when `v` is a map with a `$patch` key (`Some(None)` if
/// the directive is not a string).
fn directive_of(v: &Value) -> Option<Option<&str>> {
    v.as_object()?.get(PATCH_DIRECTIVE).map(Value::as_str)
}

fn merge_key_value<'m>(
    pm: &'m Map<String, Value>,
    key: &str,
    path: &[&str],
) -> Result<&'m Value, PatchError> {
    match pm.get(key) {
        Some(v) if !v.is_null() => Ok(v),
        _ => Err(invalid(format!(
            "list element at {} does not contain the merge key {key:?}",
            fmt_path(path)
        ))),
    }
}

/// Implements `$setElementOrder`: the elements named in `order` are put in
/// that order, in the slots such elements occupy; other elements stay where
/// they are. Atomic lists are left alone (the patch already fixed the order).
fn reorder(list: &mut [Value], order: &[Value], strategy: ListStrategy) {
    let rank = |e: &Value| -> Option<usize> {
        match strategy {
            ListStrategy::MergeKey(key) => {
                let kv = e.get(key)?;
                order.iter().position(|o| o.get(key) == Some(kv))
            }
            ListStrategy::Set => order.iter().position(|o| o == e),
            ListStrategy::Replace => None,
        }
    };
    let mut ranked: Vec<(usize, usize)> = list
        .iter()
        .enumerate()
        .filter_map(|(i, e)| rank(e).map(|r| (i, r)))
        .collect();
    let slots: Vec<usize> = ranked.iter().map(|&(i, _)| i).collect();
    ranked.sort_by_key(|&(_, r)| r);
    let mut values: Vec<Value> = ranked
        .iter()
        .map(|&(i, _)| list.get(i).cloned().unwrap_or(Value::Null))
        .collect();
    for (slot, v) in slots.into_iter().zip(values.drain(..)) {
        if let Some(s) = list.get_mut(slot) {
            *s = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
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

    fn smp(current: &Value, patch: Value) -> Result<Value, PatchError> {
        apply_patch(
            PatchType::StrategicMerge,
            "Pod",
            current,
            patch.to_string().as_bytes(),
        )
    }

    fn assert_no_directives(v: &Value) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    assert!(!is_directive(k), "directive {k} left in result");
                    assert_no_directives(v);
                }
            }
            Value::Array(l) => l.iter().for_each(assert_no_directives),
            _ => {}
        }
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

    #[test]
    fn merge_patch_errors() {
        let err = apply_patch(PatchType::Merge, "Pod", &pod(), b"{\"a\":").unwrap_err();
        match err {
            PatchError::Malformed(msg) => assert!(msg.contains("line 1"), "{msg}"),
            other => panic!("unexpected {other:?}"),
        }
        let err = apply_patch(PatchType::Merge, "Pod", &pod(), b"[1,2]").unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
        let err = apply_patch(PatchType::Merge, "Pod", &pod(), b"  ").unwrap_err();
        assert!(matches!(err, PatchError::Malformed(_)), "{err:?}");
    }

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

    // ---- strategic merge patch --------------------------------------------

    #[test]
    fn merge_key_table() {
        assert_eq!(
            strategic_merge_key("Pod", &["spec", "containers"]),
            Some("name")
        );
        assert_eq!(
            strategic_merge_key("Pod", &["spec", "initContainers", "ports"]),
            Some("containerPort")
        );
        assert_eq!(
            strategic_merge_key("Pod", &["spec", "ephemeralContainers", "volumeMounts"]),
            Some("mountPath")
        );
        assert_eq!(
            strategic_merge_key("Pod", &["spec", "containers", "volumeDevices"]),
            Some("devicePath")
        );
        assert_eq!(
            strategic_merge_key("Pod", &["spec", "hostAliases"]),
            Some("ip")
        );
        assert_eq!(strategic_merge_key("Pod", &["spec", "tolerations"]), None);
        assert_eq!(
            strategic_merge_key("Pod", &["status", "containerStatuses"]),
            None
        );
        assert_eq!(
            strategic_merge_key("Pod", &["status", "conditions"]),
            Some("type")
        );
        assert_eq!(
            strategic_merge_key("Service", &["spec", "ports"]),
            Some("port")
        );
        assert_eq!(
            strategic_merge_key("Node", &["status", "addresses"]),
            Some("type")
        );
        assert_eq!(
            strategic_merge_key("Node", &["status", "conditions"]),
            Some("type")
        );
        assert_eq!(
            strategic_merge_key("Widget", &["metadata", "ownerReferences"]),
            Some("uid")
        );
        assert_eq!(
            strategic_merge_key("Widget", &["metadata", "managedFields"]),
            None
        );
        assert_eq!(strategic_merge_key("Widget", &["spec", "containers"]), None);
        assert_eq!(
            strategic_merge_key("Service", &["spec", "containers"]),
            None
        );
        assert_eq!(
            strategic_merge_key("Deployment", &["spec", "template", "spec", "containers"]),
            Some("name")
        );
    }

    #[test]
    fn smp_containers_merge_by_name() {
        let out = smp(
            &pod(),
            json!({"spec": {"containers": [{"name": "app", "image": "nginx:1.26"}]}}),
        )
        .unwrap();
        let containers = &out["spec"]["containers"];
        assert_eq!(containers.as_array().unwrap().len(), 2);
        assert_eq!(containers[0]["image"], "nginx:1.26");
        assert_eq!(
            containers[0]["ports"],
            pod()["spec"]["containers"][0]["ports"]
        );
        assert_eq!(containers[1], pod()["spec"]["containers"][1]);

        // New keys are appended in patch order.
        let out = smp(
            &pod(),
            json!({"spec": {"containers": [
                {"name": "z", "image": "z"}, {"name": "y", "image": "y"}
            ]}}),
        )
        .unwrap();
        let names: Vec<_> = out["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["app", "sidecar", "z", "y"]);
    }

    #[test]
    fn smp_env_and_ports() {
        let out = smp(
            &pod(),
            json!({"spec": {"containers": [{
                "name": "app",
                "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}, {"name": "A", "$patch": "delete"}],
                "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]
            }]}}),
        )
        .unwrap();
        let app = &out["spec"]["containers"][0];
        assert_eq!(
            app["env"],
            json!([{"name": "B", "value": "20"}, {"name": "C", "value": "3"}])
        );
        assert_eq!(
            app["ports"],
            json!([
                {"containerPort": 80, "protocol": "TCP", "name": "http"},
                {"containerPort": 443}
            ])
        );
    }

    #[test]
    fn smp_delete_container() {
        let out = smp(
            &pod(),
            json!({"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}),
        )
        .unwrap();
        let containers = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1);
        assert_eq!(containers[0]["name"], "app");
        // Deleting an element that does not exist is a no-op.
        let out = smp(
            &pod(),
            json!({"spec": {"containers": [{"name": "ghost", "$patch": "delete"}]}}),
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"], pod()["spec"]["containers"]);
        // A delete element without the merge key is invalid.
        let err = smp(
            &pod(),
            json!({"spec": {"containers": [{"$patch": "delete"}]}}),
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
    }

    #[test]
    fn smp_replace_directives() {
        // On a map.
        let out = smp(
            &pod(),
            json!({"spec": {"nodeSelector": {"$patch": "replace", "gpu": "yes"}}}),
        )
        .unwrap();
        assert_eq!(out["spec"]["nodeSelector"], json!({"gpu": "yes"}));
        // On a list element: the list is replaced by the other elements.
        let out = smp(
            &pod(),
            json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "solo", "image": "x"}]}}),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "solo", "image": "x"}])
        );
        assert_no_directives(&out);
        // `$patch: delete` on a map removes it.
        let out = smp(
            &pod(),
            json!({"spec": {"nodeSelector": {"$patch": "delete"}}}),
        )
        .unwrap();
        assert!(out["spec"].get("nodeSelector").is_none());
        // Unknown directive values are invalid.
        let err = smp(
            &pod(),
            json!({"spec": {"nodeSelector": {"$patch": "explode"}}}),
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
    }

    #[test]
    fn smp_retain_keys() {
        let current = json!({"kind": "Pod", "spec": {"volumes": [
            {"name": "data", "emptyDir": {}}
        ]}});
        let out = smp(
            &current,
            json!({"spec": {"volumes": [{
                "name": "data",
                "$retainKeys": ["name", "hostPath"],
                "hostPath": {"path": "/data"}
            }]}}),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["volumes"],
            json!([{"name": "data", "hostPath": {"path": "/data"}}])
        );
        // A patched field missing from $retainKeys is invalid.
        let err = smp(
            &current,
            json!({"spec": {"volumes": [{"name": "data", "$retainKeys": ["name"], "nfs": {}}]}}),
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
    }

    #[test]
    fn smp_finalizers() {
        let out = smp(
            &pod(),
            json!({"metadata": {"finalizers": ["b.example.com/f", "a.example.com/f"]}}),
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["finalizers"],
            json!(["a.example.com/f", "b.example.com/f"])
        );
        let out = smp(
            &out,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/f", "zzz"]}}),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b.example.com/f"]));
        assert_no_directives(&out);
    }

    #[test]
    fn smp_labels_null_deletion() {
        let out = smp(
            &pod(),
            json!({"metadata": {"labels": {"tier": null, "absent": null, "v": "2"}}}),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"app": "web", "v": "2"}));
        let out = smp(
            &pod(),
            json!({"metadata": {"labels": null}, "nothing": null}),
        )
        .unwrap();
        assert!(out["metadata"].get("labels").is_none());
        assert!(out.get("nothing").is_none());
    }

    #[test]
    fn smp_owner_references_by_uid() {
        let out = smp(
            &pod(),
            json!({"metadata": {"ownerReferences": [
                {"uid": "u2", "controller": true},
                {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u3"}
            ]}}),
        )
        .unwrap();
        let refs = &out["metadata"]["ownerReferences"];
        assert_eq!(refs.as_array().unwrap().len(), 3);
        assert_eq!(refs[0]["name"], "rs1");
        assert_eq!(refs[1]["name"], "rs2");
        assert_eq!(refs[1]["controller"], true);
        assert_eq!(refs[2]["uid"], "u3");
    }

    #[test]
    fn smp_list_without_merge_key_is_replaced() {
        let out = smp(
            &pod(),
            json!({"spec": {
                "tolerations": [{"key": "k2", "operator": "Exists"}],
                "containers": [{"name": "sidecar", "command": ["true"]}]
            }}),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["tolerations"],
            json!([{"key": "k2", "operator": "Exists"}])
        );
        assert_eq!(out["spec"]["containers"][1]["command"], json!(["true"]));
        // Unknown kinds replace every list.
        let current =
            json!({"kind": "Widget", "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let out = apply_patch(
            PatchType::StrategicMerge,
            "Widget",
            &current,
            br#"{"spec":{"containers":[{"name":"b","x":1}]}}"#,
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"], json!([{"name": "b", "x": 1}]));
    }

    #[test]
    fn smp_set_element_order() {
        let out = smp(
            &pod(),
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
                "containers": [{"name": "app", "image": "nginx:1.26"}]
            }}),
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"][0]["name"], "sidecar");
        assert_eq!(out["spec"]["containers"][1]["image"], "nginx:1.26");
        assert_no_directives(&out);
        // Order lists naming unknown elements, or for fields that don't exist,
        // are not errors.
        smp(
            &pod(),
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "ghost"}],
                "$setElementOrder/volumes": [{"name": "v"}]
            }}),
        )
        .unwrap();
    }

    #[test]
    fn smp_new_fields_are_cleaned() {
        let current = json!({"kind": "Pod", "metadata": {"name": "p"}});
        let out = smp(
            &current,
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "a"}],
                "containers": [{"name": "a", "env": [{"name": "X", "$patch": "delete"}, {"name": "Y"}], "gone": null}],
                "nodeSelector": {"$patch": "delete"},
                "affinity": {"$patch": "replace", "nodeAffinity": {}}
            }}),
        )
        .unwrap();
        assert_eq!(
            out["spec"],
            json!({
                "containers": [{"name": "a", "env": [{"name": "Y"}]}],
                "affinity": {"nodeAffinity": {}}
            })
        );
    }

    #[test]
    fn smp_errors() {
        let err = apply_patch(
            PatchType::StrategicMerge,
            "Pod",
            &pod(),
            b"{\n  \"spec\": }",
        )
        .unwrap_err();
        match err {
            PatchError::Malformed(msg) => assert!(msg.contains("line 2"), "{msg}"),
            other => panic!("unexpected {other:?}"),
        }
        for patch in [
            json!([1]),
            json!("x"),
            json!({"spec": {"containers": ["app"]}}),
            json!({"spec": {"containers": [{"image": "no-name"}]}}),
            json!({"$patch": "delete"}),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}),
            json!({"spec": {"$setElementOrder/containers": {}}}),
            json!({"spec": {"$retainKeys": "containers"}}),
        ] {
            let err = smp(&pod(), patch.clone()).unwrap_err();
            assert!(matches!(err, PatchError::Invalid(_)), "{patch}: {err:?}");
        }
    }

    #[test]
    fn smp_kubectl_apply_update() {
        // What `kubectl apply` (client-side) sends after the image of one
        // container and an env var changed.
        let last_applied = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"annotations": {}, "name": "web", "namespace": "default"},
            "spec": {"containers": [
                {"name": "app", "image": "nginx:1.26", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]},
                {"name": "sidecar", "image": "busybox:1.36", "command": ["sleep", "inf"]}
            ]}
        })
        .to_string()
            + "\n";
        let body = format!(
            r#"{{"metadata":{{"annotations":{{"kubectl.kubernetes.io/last-applied-configuration":{}}}}},"spec":{{"$setElementOrder/containers":[{{"name":"app"}},{{"name":"sidecar"}}],"containers":[{{"$setElementOrder/env":[{{"name":"A"}},{{"name":"B"}}],"env":[{{"name":"B","value":"3"}}],"image":"nginx:1.26","name":"app"}}]}}}}"#,
            serde_json::to_string(&last_applied).unwrap()
        );
        let out = apply_patch(PatchType::StrategicMerge, "Pod", &pod(), body.as_bytes()).unwrap();
        assert_no_directives(&out);
        assert_eq!(
            out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            Value::String(last_applied)
        );
        assert_eq!(out["metadata"]["labels"], pod()["metadata"]["labels"]);
        let containers = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 2);
        assert_eq!(containers[0]["name"], "app");
        assert_eq!(containers[0]["image"], "nginx:1.26");
        assert_eq!(
            containers[0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "3"}])
        );
        assert_eq!(
            containers[0]["ports"],
            pod()["spec"]["containers"][0]["ports"]
        );
        assert_eq!(containers[1], pod()["spec"]["containers"][1]);
    }

    #[test]
    fn smp_service_and_node() {
        let svc = json!({"kind": "Service", "spec": {"ports": [
            {"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}
        ]}});
        let out = apply_patch(
            PatchType::StrategicMerge,
            "Service",
            &svc,
            br#"{"spec":{"ports":[{"port":443,"targetPort":9443}]}}"#,
        )
        .unwrap();
        assert_eq!(
            out["spec"]["ports"],
            json!([{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 9443}])
        );
        let node = json!({"kind": "Node", "status": {"conditions": [
            {"type": "Ready", "status": "False"}, {"type": "MemoryPressure", "status": "False"}
        ]}});
        let out = apply_patch(
            PatchType::StrategicMerge,
            "Node",
            &node,
            br#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#,
        )
        .unwrap();
        assert_eq!(out["status"]["conditions"][0]["status"], "True");
        assert_eq!(out["status"]["conditions"][1]["type"], "MemoryPressure");
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
    fn apply_errors() {
        let err = apply_patch(PatchType::Apply, "Pod", &pod(), b"a: [1\nb: {").unwrap_err();
        match err {
            PatchError::Malformed(msg) => assert!(msg.contains("line"), "{msg}"),
            other => panic!("unexpected {other:?}"),
        }
        let err = apply_patch(PatchType::Apply, "Pod", &pod(), b"- a\n- b\n").unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
        let err = apply_patch(PatchType::Apply, "Pod", &pod(), b"a: 1\n---\nb: 2\n").unwrap_err();
        assert!(matches!(err, PatchError::Malformed(_)), "{err:?}");
    }
}
