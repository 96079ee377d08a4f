//! What kube-apiserver refuses of the keywords a CRD schema node carries, beyond its
//! structure: OpenAPI keywords a structural schema has no use for (`$ref`, `uniqueItems`,
//! `patternProperties`...), defaults where pruning could not tell them from a value, and
//! the list and map extensions (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
//! `x-kubernetes-map-type`) — the refusal kubebuilder users meet when a `+listMapKey`
//! names an optional field. The messages are kube's (`ValidateCustomResourceDefinitionOpenAPISchema`).

use serde_json::Value;

use super::{FieldError, FieldErrorReason, child, flag, quote, string_items, unsupported};

/// Where a node is, as far as its keywords' checks care.
pub(super) struct Placement<'r> {
    /// Why a `default` is refused here (`in top-level metadata`), where it is.
    pub(super) no_default: Option<&'r str>,
    /// Inside a resource's `metadata`, `kind` or `apiVersion` (the root's or an
    /// embedded resource's).
    pub(super) resource_meta: bool,
}

/// The OpenAPI keywords of node `s` at `path` that kube refuses (its
/// `specStandardValidatorV3` and `uniqueItems`).
pub(super) fn keyword_errors(s: &Value, path: &str, at: &Placement<'_>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut forbid = |key: &str, detail: &str| {
        errors.push(FieldError::new(
            child(path, key),
            FieldErrorReason::Forbidden,
            format!("Forbidden: {detail}"),
        ));
    };
    if let Some(reason) = at.no_default
        && s.get("default").is_some_and(|d| !d.is_null())
    {
        forbid("default", &format!("must not be set {reason}"));
    }
    if s.get("id")
        .and_then(Value::as_str)
        .is_some_and(|id| !id.is_empty())
    {
        forbid("id", "id is not supported");
    }
    if s.get("additionalItems").is_some_and(|v| !v.is_null()) {
        forbid("additionalItems", "additionalItems is not supported");
    }
    for key in ["patternProperties", "definitions"] {
        if s.get(key)
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
        {
            forbid(key, &format!("{key} is not supported"));
        }
    }
    if s.get("dependencies").is_some_and(|v| !v.is_null()) {
        forbid("dependencies", "dependencies is not supported");
    }
    if s.get("$ref").is_some_and(|v| !v.is_null()) {
        forbid("$ref", "$ref is not supported");
    }
    if s.get("type").and_then(Value::as_str) == Some("null") {
        forbid(
            "type",
            "type cannot be set to null, use nullable as an alternative",
        );
    }
    if s.get("items").is_some_and(Value::is_array) {
        forbid("items", "items must be a schema object and not an array");
    }
    if at.resource_meta && flag(s, "x-kubernetes-embedded-resource") {
        forbid(
            "x-kubernetes-embedded-resource",
            "must not be used inside of resource meta",
        );
    }
    if flag(s, "uniqueItems") {
        forbid(
            "uniqueItems",
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        );
    }
    errors
}

/// What kube refuses of node `s`'s list and map extensions.
pub(super) fn extension_errors(s: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    let list_type = s.get("x-kubernetes-list-type").and_then(Value::as_str);
    let map_type = s.get("x-kubernetes-map-type").and_then(Value::as_str);
    let items = s.get("items").filter(|i| i.is_object());
    if let Some(map_type) = map_type {
        if ty != "object" {
            errors.push(wrong_type(path, ty, "object", "x-kubernetes-map-type"));
        }
        if !matches!(map_type, "atomic" | "granular") {
            errors.push(unsupported(
                child(path, "x-kubernetes-map-type"),
                map_type,
                &["atomic", "granular"],
            ));
        }
    }
    match (list_type, items) {
        (Some(_), _) if ty != "array" => {
            errors.push(wrong_type(path, ty, "array", "x-kubernetes-list-type"))
        }
        (Some("set"), Some(items)) => errors.extend(set_item_errors(items, path)),
        _ => {}
    }
    if let Some(list_type) = list_type
        && !matches!(list_type, "atomic" | "set" | "map")
    {
        errors.push(unsupported(
            child(path, "x-kubernetes-list-type"),
            list_type,
            &["atomic", "set", "map"],
        ));
    }
    let keys: Vec<&str> = string_items(s, "x-kubernetes-list-map-keys").collect();
    let at_list_type = child(path, "x-kubernetes-list-type");
    match list_type {
        None if !keys.is_empty() => errors.push(FieldError::new(
            at_list_type,
            FieldErrorReason::Required,
            "Required value: must be map if x-kubernetes-list-map-keys is non-empty",
        )),
        Some(other) if other != "map" && !keys.is_empty() => errors.push(FieldError::new(
            at_list_type,
            FieldErrorReason::Invalid,
            format!(
                "Invalid value: {}: must be map if x-kubernetes-list-map-keys is non-empty",
                quote(other)
            ),
        )),
        Some("map") => errors.extend(map_list_errors(s, path, &keys)),
        _ => {}
    }
    if let (Some("set" | "map"), Some(items)) = (list_type, items) {
        errors.extend(keyed_item_errors(items, path, list_type, &keys));
    }
    errors
}

/// `must be <wanted> if <extension> is specified`, at the node's `type`.
fn wrong_type(path: &str, ty: &str, wanted: &str, extension: &str) -> FieldError {
    let detail = format!("must be {wanted} if {extension} is specified");
    match ty {
        "" => FieldError::new(
            child(path, "type"),
            FieldErrorReason::Required,
            format!("Required value: {detail}"),
        ),
        ty => FieldError::new(
            child(path, "type"),
            FieldErrorReason::Invalid,
            format!("Invalid value: {}: {detail}", quote(ty)),
        ),
    }
}

/// The items of a `set` list must be atomic: lists atomic, objects `atomic` maps.
fn set_item_errors(items: &Value, path: &str) -> Option<FieldError> {
    let item_list_type = items.get("x-kubernetes-list-type").and_then(Value::as_str);
    let detail = "must be atomic as item of a list with x-kubernetes-list-type=set";
    let (at, value) = match items.get("type").and_then(Value::as_str) {
        Some("array") if item_list_type.is_some_and(|t| t != "atomic") => {
            ("x-kubernetes-list-type", item_list_type)
        }
        // kube names the item's list type here, which an object rarely has.
        Some("object")
            if items.get("x-kubernetes-map-type").and_then(Value::as_str) != Some("atomic") =>
        {
            ("x-kubernetes-map-type", item_list_type)
        }
        _ => return None,
    };
    Some(FieldError::new(
        child(&child(path, "items"), at),
        FieldErrorReason::Invalid,
        format!(
            "Invalid value: {}: {detail}",
            value.map_or_else(|| "\"null\"".to_string(), quote)
        ),
    ))
}

/// A `map` list: keys named, items objects, and each key a scalar property of them.
fn map_list_errors(s: &Value, path: &str, keys: &[&str]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let at_keys = child(path, "x-kubernetes-list-map-keys");
    if keys.is_empty() {
        errors.push(FieldError::new(
            at_keys.clone(),
            FieldErrorReason::Required,
            "Required value: must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let Some(items) = s.get("items").filter(|i| i.is_object()) else {
        errors.push(FieldError::new(
            child(path, "items"),
            FieldErrorReason::Required,
            "Required value: must have a schema if x-kubernetes-list-type is map",
        ));
        return errors;
    };
    let item_type = items.get("type").and_then(Value::as_str).unwrap_or("");
    if item_type != "object" {
        errors.push(FieldError::new(
            child(&child(path, "items"), "type"),
            FieldErrorReason::Invalid,
            format!(
                "Invalid value: {}: must be object if parent array's x-kubernetes-list-type is map",
                quote(item_type)
            ),
        ));
        return errors;
    }
    let go_keys = format!(
        "[]string{{{}}}",
        keys.iter().map(|k| quote(k)).collect::<Vec<_>>().join(", ")
    );
    let keys_invalid = |detail: &str| {
        FieldError::new(
            at_keys.clone(),
            FieldErrorReason::Invalid,
            format!("Invalid value: {go_keys}: {detail}"),
        )
    };
    for (i, key) in keys.iter().enumerate() {
        match items.get("properties").and_then(|p| p.get(*key)) {
            Some(property) => {
                if matches!(
                    property.get("type").and_then(Value::as_str),
                    Some("array" | "object")
                ) {
                    // kube names the items' type here.
                    errors.push(FieldError::new(
                        format!("{path}.items.properties[{key}].type"),
                        FieldErrorReason::Invalid,
                        "Invalid value: \"object\": must be a scalar type if parent array's x-kubernetes-list-type is map",
                    ));
                }
            }
            None => errors.push(keys_invalid("entries must all be names of item properties")),
        }
        if keys[..i].contains(key) {
            errors.push(keys_invalid("must not contain duplicate entries"));
        }
    }
    errors
}

/// The items of a `set` or `map` list may not be null, nor may a map list's keys, which
/// must also be present in every item: required, or defaulted.
fn keyed_item_errors(
    items: &Value,
    path: &str,
    list_type: Option<&str>,
    keys: &[&str],
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let at_items = child(path, "items");
    if flag(items, "nullable") {
        errors.push(FieldError::new(
            child(&at_items, "nullable"),
            FieldErrorReason::Forbidden,
            format!(
                "Forbidden: cannot be nullable when x-kubernetes-list-type is {}",
                list_type.unwrap_or("")
            ),
        ));
    }
    if list_type != Some("map") {
        return errors;
    }
    let required: Vec<&str> = string_items(items, "required").collect();
    for key in keys {
        let Some(property) = items.get("properties").and_then(|p| p.get(*key)) else {
            continue;
        };
        let at_key = format!("{at_items}.properties[{key}]");
        if !required.contains(key) && property.get("default").is_none_or(Value::is_null) {
            errors.push(FieldError::new(
                child(&at_key, "default"),
                FieldErrorReason::Required,
                "Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ));
        }
        if flag(property, "nullable") {
            errors.push(FieldError::new(
                child(&at_key, "nullable"),
                FieldErrorReason::Forbidden,
                "Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::tests::fields;

    /// kubebuilder's `+listType=map` with a `+listMapKey` on an optional field: the
    /// refusal users meet first.
    #[test]
    fn a_map_list_key_must_be_required_or_defaulted() {
        let ports = json!({"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "port": {"type": "integer"}}}});
        assert_eq!(
            fields(&extension_errors(&ports, "p")),
            vec![
                "p.items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
            ]
        );
        let mut required = ports.clone();
        required["items"]["required"] = json!(["name"]);
        assert!(extension_errors(&required, "p").is_empty());
        let mut defaulted = ports;
        defaulted["items"]["properties"]["name"]["default"] = json!("http");
        assert!(extension_errors(&defaulted, "p").is_empty());
    }

    #[test]
    fn list_and_map_extensions_are_checked_as_kube_checks_them() {
        let cases = [
            (
                json!({"type": "object", "x-kubernetes-list-type": "set"}),
                vec![
                    "p.type: Invalid value: \"object\": must be array if x-kubernetes-list-type is specified",
                ],
            ),
            (
                json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"}),
                vec![
                    "p.x-kubernetes-list-type: Unsupported value: \"bag\": supported values: \"atomic\", \"set\", \"map\"",
                ],
            ),
            (
                json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-map-keys": ["a"]}),
                vec![
                    "p.x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty",
                ],
            ),
            (
                json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a", "b", "a"],
                    "items": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}}),
                vec![
                    "p.x-kubernetes-list-map-keys: Invalid value: []string{\"a\", \"b\", \"a\"}: entries must all be names of item properties",
                    "p.x-kubernetes-list-map-keys: Invalid value: []string{\"a\", \"b\", \"a\"}: must not contain duplicate entries",
                ],
            ),
            (
                json!({"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"type": "object", "properties": {"a": {"type": "string"}}}}),
                vec![
                    "p.items.x-kubernetes-map-type: Invalid value: \"null\": must be atomic as item of a list with x-kubernetes-list-type=set",
                ],
            ),
            (
                json!({"type": "string", "x-kubernetes-map-type": "granular"}),
                vec![
                    "p.type: Invalid value: \"string\": must be object if x-kubernetes-map-type is specified",
                ],
            ),
            (
                json!({"type": "object", "x-kubernetes-map-type": "loose"}),
                vec![
                    "p.x-kubernetes-map-type: Unsupported value: \"loose\": supported values: \"atomic\", \"granular\"",
                ],
            ),
        ];
        for (schema, expected) in cases {
            assert_eq!(
                fields(&extension_errors(&schema, "p")),
                expected,
                "{schema}"
            );
        }
    }

    #[test]
    fn keywords_a_structural_schema_has_no_use_for_are_refused() {
        let schema = json!({"type": "array", "uniqueItems": true, "$ref": "#/x",
            "items": [{"type": "string"}], "patternProperties": {"^a": {}}});
        let top = Placement {
            no_default: None,
            resource_meta: false,
        };
        assert_eq!(
            fields(&keyword_errors(&schema, "p", &top)),
            vec![
                "p.patternProperties: Forbidden: patternProperties is not supported",
                "p.$ref: Forbidden: $ref is not supported",
                "p.items: Forbidden: items must be a schema object and not an array",
                "p.uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            ]
        );
        let metadata = Placement {
            no_default: Some("in top-level metadata"),
            resource_meta: true,
        };
        let defaulted = json!({"type": "object", "default": {"name": "x"}});
        assert_eq!(
            fields(&keyword_errors(&defaulted, "m", &metadata)),
            vec!["m.default: Forbidden: must not be set in top-level metadata"]
        );
    }
}
