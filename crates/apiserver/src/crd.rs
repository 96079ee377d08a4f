//! CustomResourceDefinitions: validating them, computing their status, and turning them
//! into served kinds in the registry as soon as they are written.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::ApiServer;
use crate::builtin::Generation;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::registry::{ResourceType, ScaleSubresource};
use crate::schema::{self, FieldError, FieldErrorReason};

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

fn validate(crd: &Value, old: Option<&Value>, name: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let text = |p: &str| crd.pointer(p).and_then(Value::as_str).unwrap_or("");
    let group = text("/spec/group");
    let plural = text("/spec/names/plural");
    let required = [
        ("/spec/group", "spec.group"),
        ("/spec/names/plural", "spec.names.plural"),
        ("/spec/names/kind", "spec.names.kind"),
    ];
    for (pointer, field) in required {
        if text(pointer).is_empty() {
            errors.push(error(field, FieldErrorReason::Required, "Required value"));
        }
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        errors.push(error(
            "metadata.name",
            FieldErrorReason::Invalid,
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if !group.is_empty() && !crate::validation::matches_dns1123_subdomain(group) {
        errors.push(error(
            "spec.group",
            FieldErrorReason::Invalid,
            format!(
                "Invalid value: {group:?}: {}",
                crate::validation::DNS1123_SUBDOMAIN_MSG
            ),
        ));
    } else if !group.is_empty() && !group.contains('.') {
        errors.push(error(
            "spec.group",
            FieldErrorReason::Invalid,
            format!("Invalid value: {group:?}: should be a domain with at least one dot"),
        ));
    }
    name_errors(crd, &mut errors);
    match text("/spec/scope") {
        "Namespaced" | "Cluster" => {}
        other => errors.push(error(
            "spec.scope",
            FieldErrorReason::NotSupported,
            format!("Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""),
        )),
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if versions.is_empty() {
        errors.push(error(
            "spec.versions",
            FieldErrorReason::Required,
            "Required value: must have exactly one version marked as storage version",
        ));
    } else if versions.iter().filter(|v| v["storage"] == true).count() != 1 {
        errors.push(error(
            "spec.versions",
            FieldErrorReason::Invalid,
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    // kube's internal form keeps what every version shares (its schema, subresources,
    // printer columns) once, at the top of the spec, and names its errors there.
    let shared = shared_by_all(versions, version_schema);
    let shared_subresources = shared_by_all(versions, |v| v.get("subresources"));
    let shared_columns = shared_by_all(versions, |v| {
        v.get("additionalPrinterColumns")
            .filter(|c| c.as_array().is_some_and(|c| !c.is_empty()))
    });
    // As kube, the rules' costs are not held again to a schema an update leaves as it
    // was (nor, unlike kube, to their total: a schema stored before its rules were
    // estimated must stay deletable).
    let changed = |version: &Value| {
        let before = old
            .and_then(|o| o.pointer("/spec/versions"))
            .and_then(Value::as_array)
            .and_then(|vs| vs.iter().find(|v| v["name"] == version["name"]));
        before.and_then(version_schema) != version_schema(version)
    };
    let has_status = |version: &Value| !version["subresources"]["status"].is_null();
    if let Some(schema) = shared {
        let at = "spec.validation.openAPIV3Schema";
        if versions.iter().any(has_status) {
            errors.extend(status_root_error(schema, at));
        }
        errors.extend(schema::check_structural(
            schema,
            at,
            versions.iter().any(changed),
        ));
    }
    if let Some(subresources) = shared_subresources {
        subresource_errors(subresources, "spec.subresources", &mut errors);
    }
    if let Some(columns) = shared_columns {
        column_errors(columns, "spec.additionalPrinterColumns", &mut errors);
    }
    let names: Vec<&str> = versions
        .iter()
        .map(|v| v["name"].as_str().unwrap_or(""))
        .collect();
    if names
        .iter()
        .enumerate()
        .any(|(i, n)| names[..i].contains(n))
    {
        errors.push(error(
            "spec.versions",
            FieldErrorReason::Invalid,
            "Invalid value: must contain unique version names",
        ));
    }
    for (i, version) in versions.iter().enumerate() {
        let at = format!("spec.versions[{i}]");
        match version["name"].as_str().unwrap_or("") {
            "" => errors.push(error(
                &format!("{at}.name"),
                FieldErrorReason::Required,
                "Required value",
            )),
            name => errors.extend(dns1035_error(&format!("{at}.name"), name, name, "")),
        }
        if version_schema(version).is_none() {
            errors.push(error(
                &format!("{at}.schema.openAPIV3Schema"),
                FieldErrorReason::Required,
                "Required value: schemas are required",
            ));
        }
        if let Some(schema) = version_schema(version)
            && shared.is_none()
        {
            let schema_at = format!("{at}.schema.openAPIV3Schema");
            if has_status(version) {
                errors.extend(status_root_error(schema, &schema_at));
            }
            errors.extend(schema::check_structural(
                schema,
                &schema_at,
                changed(version),
            ));
        }
        if let Some(subresources) = version.get("subresources")
            && shared_subresources.is_none()
        {
            subresource_errors(subresources, &format!("{at}.subresources"), &mut errors);
        }
        if let Some(columns) = version.get("additionalPrinterColumns")
            && shared_columns.is_none()
        {
            column_errors(
                columns,
                &format!("{at}.additionalPrinterColumns"),
                &mut errors,
            );
        }
        selectable_field_errors(version, &format!("{at}.selectableFields"), &mut errors);
    }
    errors
}

/// `value` at `field` if it (`checked`: as kube checks it, lower-cased for kinds) is no
/// DNS-1035 label; `prefix` before kube's reasons.
fn dns1035_error(field: &str, value: &str, checked: &str, prefix: &str) -> Option<FieldError> {
    let problems = crate::validation::dns1035_label_problems(checked);
    (!problems.is_empty()).then(|| {
        error(
            field,
            FieldErrorReason::Invalid,
            format!("Invalid value: {value:?}: {prefix}{}", problems.join(",")),
        )
    })
}

/// kube's `ValidateCustomResourceDefinitionNames`, over the names as kube defaults them
/// first (the singular is the kind in lower case, the list kind the kind and `List`).
fn name_errors(crd: &Value, errors: &mut Vec<FieldError>) {
    let names = &crd["spec"]["names"];
    let text = |key: &str| names[key].as_str().unwrap_or("");
    let kind = text("kind");
    let singular = match text("singular") {
        "" => kind.to_lowercase(),
        given => given.to_string(),
    };
    let list_kind = match text("listKind") {
        "" if kind.is_empty() => String::new(),
        "" => format!("{kind}List"),
        given => given.to_string(),
    };
    let mixed_case = "may have mixed case, but should otherwise match: ";
    let checks = [
        ("plural", text("plural"), text("plural").to_string(), ""),
        ("singular", singular.as_str(), singular.clone(), ""),
        ("kind", kind, kind.to_lowercase(), mixed_case),
        (
            "listKind",
            list_kind.as_str(),
            list_kind.to_lowercase(),
            mixed_case,
        ),
    ];
    for (key, value, checked, prefix) in checks {
        if !value.is_empty() {
            let field = format!("spec.names.{key}");
            errors.extend(dns1035_error(&field, value, &checked, prefix));
        }
    }
    for key in ["shortNames", "categories"] {
        for (i, short) in names[key].as_array().into_iter().flatten().enumerate() {
            let short = short.as_str().unwrap_or("");
            let field = format!("spec.names.{key}[{i}]");
            errors.extend(dns1035_error(&field, short, short, ""));
        }
    }
    if !kind.is_empty() && kind == list_kind {
        errors.push(error(
            "spec.names.listKind",
            FieldErrorReason::Invalid,
            format!("Invalid value: {list_kind:?}: kind and listKind may not be the same"),
        ));
    }
}

/// kube's `allowedFieldsAtRootSchema` (Go names) and their JSON keys, in the order of
/// `JSONSchemaProps`'s fields.
const STATUS_ROOT_FIELDS: [(&str, &str); 22] = [
    ("description", "Description"),
    ("type", "Type"),
    ("format", "Format"),
    ("title", "Title"),
    ("maximum", "Maximum"),
    ("exclusiveMaximum", "ExclusiveMaximum"),
    ("minimum", "Minimum"),
    ("exclusiveMinimum", "ExclusiveMinimum"),
    ("maxLength", "MaxLength"),
    ("minLength", "MinLength"),
    ("pattern", "Pattern"),
    ("maxItems", "MaxItems"),
    ("minItems", "MinItems"),
    ("uniqueItems", "UniqueItems"),
    ("multipleOf", "MultipleOf"),
    ("required", "Required"),
    ("items", "Items"),
    ("properties", "Properties"),
    ("externalDocs", "ExternalDocs"),
    ("example", "Example"),
    (
        "x-kubernetes-preserve-unknown-fields",
        "XPreserveUnknownFields",
    ),
    ("x-kubernetes-validations", "XValidations"),
];

/// With the status subresource, the root of a schema (at `at`) is an object with only
/// what kube allows there, so that the status's part of it can be taken apart. kube
/// prints the whole schema as the invalid value; it is left out here.
fn status_root_error(schema: &Value, at: &str) -> Option<FieldError> {
    let root = schema.as_object()?;
    let zero = |value: &Value| {
        matches!(value, Value::Null | Value::Bool(false)) || value.as_str() == Some("")
    };
    let set = |key: &str| root.get(key).is_some_and(|v| !zero(v));
    let ty = root.get("type").and_then(Value::as_str).unwrap_or("");
    if set("type") && ty != "object" {
        return Some(error(
            &format!("{at}.type"),
            FieldErrorReason::Invalid,
            format!(
                "Invalid value: {ty:?}: only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled"
            ),
        ));
    }
    let allowed = STATUS_ROOT_FIELDS.map(|(key, _)| key);
    root.iter()
        .any(|(key, value)| !zero(value) && !allowed.contains(&key.as_str()))
        .then(|| {
            let names = STATUS_ROOT_FIELDS.map(|(_, name)| name).join(" ");
            error(
                at,
                FieldErrorReason::Invalid,
                format!("Invalid value: only [{names}] fields are allowed at the root of the schema if the status subresource is enabled"),
            )
        })
}

/// What `part` gives of every version, when it gives the same of each.
fn shared_by_all<'v>(
    versions: &'v [Value],
    part: impl Fn(&'v Value) -> Option<&'v Value>,
) -> Option<&'v Value> {
    let (first, rest) = versions.split_first()?;
    let shared = part(first)?;
    rest.iter()
        .all(|v| part(v) == Some(shared))
        .then_some(shared)
}

/// kube's `validateSimpleJSONPath`: `.` and dotted names.
fn simple_json_path_error(path: &str, at: &str) -> Option<FieldError> {
    let detail = match path {
        "" => "must not be empty",
        p if !p.starts_with('.') => "must be a simple json path starting with .",
        _ => return None,
    };
    Some(error(
        at,
        FieldErrorReason::Invalid,
        format!("Invalid value: {path:?}: {detail}"),
    ))
}

/// kube's checks of a scale subresource's paths.
fn subresource_errors(subresources: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let Some(scale) = subresources.get("scale").filter(|s| !s.is_null()) else {
        return;
    };
    let checks: [(&str, &[&str], &str, bool); 3] = [
        (
            "specReplicasPath",
            &[".spec."],
            "should be a json path under .spec",
            true,
        ),
        (
            "statusReplicasPath",
            &[".status."],
            "should be a json path under .status",
            true,
        ),
        (
            "labelSelectorPath",
            &[".spec.", ".status."],
            "should be a json path under either .spec or .status",
            false,
        ),
    ];
    for (key, prefixes, detail, required) in checks {
        let field = format!("{at}.scale.{key}");
        match scale.get(key).and_then(Value::as_str).unwrap_or("") {
            "" if required => {
                errors.push(error(&field, FieldErrorReason::Required, "Required value"))
            }
            "" => {}
            path => match simple_json_path_error(path, &field) {
                Some(invalid) => errors.push(invalid),
                None if !prefixes.iter().any(|p| path.starts_with(p)) => errors.push(error(
                    &field,
                    FieldErrorReason::Invalid,
                    format!("Invalid value: {path:?}: {detail}"),
                )),
                None => {}
            },
        }
    }
}

/// kube's `printerColumnDatatypes` and `customResourceColumnDefinitionFormats`.
const COLUMN_TYPES: [&str; 5] = ["boolean", "date", "integer", "number", "string"];
const COLUMN_FORMATS: [&str; 8] = [
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];

/// kube's checks of `additionalPrinterColumns`: a name, a known type and format, and a
/// simple JSON path.
fn column_errors(columns: &Value, at: &str, errors: &mut Vec<FieldError>) {
    for (j, column) in columns.as_array().into_iter().flatten().enumerate() {
        let at = format!("{at}[{j}]");
        let text = |key: &str| column.get(key).and_then(Value::as_str).unwrap_or("");
        if text("name").is_empty() {
            errors.push(error(
                &format!("{at}.name"),
                FieldErrorReason::Required,
                "Required value",
            ));
        }
        let types = format!("must be one of {}", COLUMN_TYPES.join(","));
        match text("type") {
            "" => errors.push(error(
                &format!("{at}.type"),
                FieldErrorReason::Required,
                format!("Required value: {types}"),
            )),
            ty if !COLUMN_TYPES.contains(&ty) => errors.push(error(
                &format!("{at}.type"),
                FieldErrorReason::Invalid,
                format!("Invalid value: {ty:?}: {types}"),
            )),
            _ => {}
        }
        let format = text("format");
        if !format.is_empty() && !COLUMN_FORMATS.contains(&format) {
            errors.push(error(
                &format!("{at}.format"),
                FieldErrorReason::Invalid,
                format!(
                    "Invalid value: {format:?}: must be one of {}",
                    COLUMN_FORMATS.join(",")
                ),
            ));
        }
        // kube names the internal field, `JSONPath`.
        let path_at = format!("{at}.JSONPath");
        match text("jsonPath") {
            "" => errors.push(error(
                &path_at,
                FieldErrorReason::Required,
                "Required value",
            )),
            path => errors.extend(simple_json_path_error(path, &path_at)),
        }
    }
}

fn version_schema(version: &Value) -> Option<&Value> {
    version.pointer("/schema/openAPIV3Schema")
}

/// kube's `MaxSelectableFields`.
const MAX_SELECTABLE_FIELDS: usize = 8;

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

/// kube's checks of a version's `selectableFields`: each a path in its schema (no array
/// index, not into `metadata`) to a string, boolean or integer, each once, at most 8.
fn selectable_field_errors(version: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let Some(fields) = version["selectableFields"].as_array() else {
        return;
    };
    let schema = version.pointer("/schema/openAPIV3Schema");
    let mut unique = BTreeSet::new();
    for (i, field) in fields.iter().enumerate() {
        let json_path = field["jsonPath"].as_str().unwrap_or_default();
        let here = format!("{at}[{i}].jsonPath");
        if json_path.is_empty() {
            errors.push(error(&here, FieldErrorReason::Required, "Required value"));
            continue;
        }
        let invalid = |why: &str| {
            error(
                &here,
                FieldErrorReason::Invalid,
                format!("Invalid value: {}: {why}", crate::go_text::quote(json_path)),
            )
        };
        let path = json_path.strip_prefix('.').unwrap_or_default();
        if matches!(path, "metadata.name" | "metadata.generateName") {
            errors.push(invalid("must not point to fields in metadata"));
            continue;
        }
        let found = (!path.is_empty())
            .then(|| schema_at(schema, path))
            .flatten();
        let Some(found) = found else {
            let why = if json_path.starts_with('.') {
                "is an invalid path: does not refer to a valid field"
            } else {
                "is an invalid path: expected [ or . at 0"
            };
            errors.push(invalid(why));
            continue;
        };
        if !matches!(
            found["type"].as_str(),
            Some("string" | "boolean" | "integer")
        ) {
            errors.push(invalid(
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if !unique.insert(path) {
            errors.push(error(
                &here,
                FieldErrorReason::Duplicate,
                format!("Duplicate value: {}", crate::go_text::quote(json_path)),
            ));
        }
    }
    if unique.len() > MAX_SELECTABLE_FIELDS {
        errors.push(error(
            at,
            FieldErrorReason::TooMany,
            format!(
                "Too many: {}: must have at most {MAX_SELECTABLE_FIELDS} items",
                unique.len()
            ),
        ));
    }
}

/// The schema of the property at the dotted `path` (no array steps), if it declares one.
fn schema_at<'s>(schema: Option<&'s Value>, path: &str) -> Option<&'s Value> {
    path.split('.')
        .try_fold(schema?, |node, step| node.get("properties")?.get(step))
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
