//! What kube-apiserver refuses in a CustomResourceDefinition before it serves the kind:
//! its names, versions, subresources, printer columns and selectable fields here, its
//! schemas in `crate::schema` (structure, keywords, rules and their cost).

use std::collections::BTreeSet;

use serde_json::Value;

use super::error;
use crate::schema::{self, FieldError, FieldErrorReason};

/// kube's `MaxSelectableFields`.
const MAX_SELECTABLE_FIELDS: usize = 8;

/// kube's errors for CRD `crd` (named `name`), an update of `old` where there is one.
pub(super) fn validate(crd: &Value, old: Option<&Value>, name: &str) -> Vec<FieldError> {
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
