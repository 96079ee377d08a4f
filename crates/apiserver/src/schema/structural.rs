//! The structural check of a CRD's schema itself: what kube-apiserver refuses in an
//! `openAPIV3Schema` before it serves the kind.

use regex::Regex;
use serde_json::Value;

use super::validate::validate_at;
use super::{
    FieldError, FieldErrorReason, child, flag, fmt_value, fmt_value_short, index, quote, type_name,
};

const VALID_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Property,
    Items,
    AdditionalProperties,
    /// Inside allOf/anyOf/oneOf/not: value validations, no type required.
    ValueValidation,
}

/// Check that a CRD schema is usable: every node (outside allOf/anyOf/oneOf/not)
/// has a valid `type` unless it is `x-kubernetes-int-or-string` or
/// `x-kubernetes-preserve-unknown-fields`, the root is an object, arrays have
/// `items`, `pattern`s and `x-kubernetes-validations` rules compile, and `default`s
/// validate against their schema.
/// `path_prefix` is the location of the schema, e.g.
/// `spec.versions[0].schema.openAPIV3Schema`.
pub fn check_structural(schema: &Value, path_prefix: &str) -> Vec<FieldError> {
    let mut out = Vec::new();
    check_node(schema, path_prefix, Level::Root, &mut out);
    out
}

fn check_node(s: &Value, path: &str, level: Level, out: &mut Vec<FieldError>) {
    let Value::Object(m) = s else {
        out.push(FieldError::new(
            path,
            FieldErrorReason::TypeInvalid,
            format!(
                "Invalid value: {}: {path} in body must be of type object: {}",
                quote(type_name(s)),
                quote(type_name(s))
            ),
        ));
        return;
    };
    out.extend(super::rules::compile_errors(s, path, level == Level::Root));
    let int_or_string = flag(s, "x-kubernetes-int-or-string");
    let preserve = m.get("x-kubernetes-preserve-unknown-fields");
    if let Some(p) = preserve
        && p != &Value::Bool(true)
    {
        out.push(FieldError::new(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            FieldErrorReason::Invalid,
            format!("Invalid value: {}: must be true or undefined", fmt_value(p)),
        ));
    }
    let preserve = preserve == Some(&Value::Bool(true));

    let ty = match m.get("type") {
        None => None,
        Some(Value::String(t)) if t.is_empty() => None,
        Some(Value::String(t)) => {
            if !VALID_TYPES.contains(&t.as_str()) {
                let supported: Vec<String> = VALID_TYPES.iter().map(|t| quote(t)).collect();
                out.push(FieldError::new(
                    child(path, "type"),
                    FieldErrorReason::NotSupported,
                    format!(
                        "Unsupported value: {}: supported values: {}",
                        quote(t),
                        supported.join(", ")
                    ),
                ));
            }
            Some(t.as_str())
        }
        Some(other) => {
            out.push(FieldError::new(
                child(path, "type"),
                FieldErrorReason::TypeInvalid,
                format!(
                    "Invalid value: {}: type must be a string",
                    fmt_value_short(other)
                ),
            ));
            Some("")
        }
    };

    match ty {
        None if level != Level::ValueValidation && !int_or_string && !preserve => {
            let detail = match level {
                Level::Root => "must not be empty at the root",
                Level::Items => "must not be empty for specified array items",
                _ => "must not be empty for specified object fields",
            };
            out.push(FieldError::new(
                child(path, "type"),
                FieldErrorReason::Required,
                format!("Required value: {detail}"),
            ));
        }
        Some(t) if level == Level::Root && t != "object" && !t.is_empty() => {
            out.push(FieldError::new(
                child(path, "type"),
                FieldErrorReason::Invalid,
                format!("Invalid value: {}: must be object at the root", quote(t)),
            ));
        }
        _ => {}
    }
    if int_or_string
        && level != Level::ValueValidation
        && let Some(t) = ty.filter(|t| !t.is_empty())
    {
        out.push(FieldError::new(
            child(path, "type"),
            FieldErrorReason::Invalid,
            format!(
                "Invalid value: {}: must be empty if x-kubernetes-int-or-string is true",
                quote(t)
            ),
        ));
    }
    if flag(s, "x-kubernetes-embedded-resource") && ty.is_some_and(|t| t != "object") {
        out.push(FieldError::new(
            child(path, "type"),
            FieldErrorReason::Invalid,
            "Invalid value: \"object\": must be object if x-kubernetes-embedded-resource is true",
        ));
    }
    if ty == Some("array") && level != Level::ValueValidation && !m.contains_key("items") {
        out.push(FieldError::new(
            child(path, "items"),
            FieldErrorReason::Required,
            "Required value: must be specified",
        ));
    }

    if let Some(p) = m.get("pattern") {
        match p {
            Value::String(pat) => {
                if let Err(e) = Regex::new(pat) {
                    let e = e.to_string().replace('\n', " ");
                    out.push(FieldError::new(
                        child(path, "pattern"),
                        FieldErrorReason::Invalid,
                        format!(
                            "Invalid value: {}: must be a valid regular expression, but isn't: {}",
                            quote(pat),
                            e.split_whitespace().collect::<Vec<_>>().join(" ")
                        ),
                    ));
                }
            }
            other => out.push(FieldError::new(
                child(path, "pattern"),
                FieldErrorReason::TypeInvalid,
                format!(
                    "Invalid value: {}: pattern must be a string",
                    fmt_value_short(other)
                ),
            )),
        }
    }

    let has_props = m
        .get("properties")
        .is_some_and(|p| p.as_object().is_some_and(|o| !o.is_empty()));
    if has_props
        && m.get("additionalProperties")
            .is_some_and(|a| a != &Value::Bool(false))
    {
        out.push(FieldError::new(
            child(path, "additionalProperties"),
            FieldErrorReason::Invalid,
            "Invalid value: \"object\": additionalProperties and properties are mutual exclusive",
        ));
    }

    // Children.
    let sub_level = |l: Level| {
        if level == Level::ValueValidation {
            Level::ValueValidation
        } else {
            l
        }
    };
    if let Some(Value::Object(ps)) = m.get("properties") {
        for (k, ps) in ps {
            check_node(
                ps,
                &format!("{path}.properties[{k}]"),
                sub_level(Level::Property),
                out,
            );
        }
    }
    match m.get("items") {
        Some(is @ Value::Object(_)) => {
            check_node(is, &child(path, "items"), sub_level(Level::Items), out)
        }
        Some(other @ Value::Array(_)) | Some(other @ Value::Bool(_)) => out.push(FieldError::new(
            child(path, "items"),
            FieldErrorReason::Invalid,
            format!(
                "Invalid value: {}: items must be a schema object",
                fmt_value_short(other)
            ),
        )),
        _ => {}
    }
    if let Some(a @ Value::Object(_)) = m.get("additionalProperties") {
        check_node(
            a,
            &child(path, "additionalProperties"),
            sub_level(Level::AdditionalProperties),
            out,
        );
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(subs)) = m.get(key) {
            for (i, sub) in subs.iter().enumerate() {
                check_node(
                    sub,
                    &index(&child(path, key), i),
                    Level::ValueValidation,
                    out,
                );
            }
        }
    }
    if let Some(not) = m.get("not") {
        check_node(not, &child(path, "not"), Level::ValueValidation, out);
    }

    // Defaults must validate against their own schema.
    if let Some(d) = m.get("default")
        && level != Level::ValueValidation
        && !d.is_null()
    {
        validate_at(d, s, &child(path, "default"), out);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::tests::{fields, schema};

    #[test]
    fn structural_check() {
        let prefix = "spec.versions[0].schema.openAPIV3Schema";
        assert!(check_structural(&schema(), prefix).is_empty());

        let bad = json!({"type": "object", "properties": {
            "spec": {"properties": {"a": {"type": "string", "pattern": "(", "default": 5}}},
            "list": {"type": "array"},
            "items": {"type": "array", "items": {}},
            "odd": {"type": "strin"},
            "any": {"type": "object", "anyOf": [{"required": ["x"]}]},
            "p": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}
        }});
        let errs = check_structural(&bad, prefix);
        let got: Vec<(String, FieldErrorReason)> =
            errs.iter().map(|e| (e.field.clone(), e.reason)).collect();
        let p = |s: &str| format!("{prefix}{s}");
        assert_eq!(
            got,
            vec![
                (
                    p(".properties[items].items.type"),
                    FieldErrorReason::Required
                ),
                (p(".properties[list].items"), FieldErrorReason::Required),
                (p(".properties[odd].type"), FieldErrorReason::NotSupported),
                (
                    p(".properties[p].x-kubernetes-preserve-unknown-fields"),
                    FieldErrorReason::Invalid
                ),
                (p(".properties[spec].type"), FieldErrorReason::Required),
                (
                    p(".properties[spec].properties[a].pattern"),
                    FieldErrorReason::Invalid
                ),
                (
                    p(".properties[spec].properties[a].default"),
                    FieldErrorReason::TypeInvalid
                ),
            ]
        );
        assert_eq!(
            errs[4].to_string(),
            format!(
                "{prefix}.properties[spec].type: Required value: must not be empty for specified object fields"
            )
        );
        assert!(
            errs[5].message.starts_with(
                "Invalid value: \"(\": must be a valid regular expression, but isn't: "
            )
        );

        assert_eq!(
            errs[6].message,
            format!(
                "Invalid value: \"integer\": {prefix}.properties[spec].properties[a].default in body must be of type string: \"integer\""
            )
        );

        let errs = check_structural(&json!({"type": "string"}), "s");
        assert_eq!(
            fields(&errs),
            vec!["s.type: Invalid value: \"string\": must be object at the root"]
        );
        let errs = check_structural(&json!({}), "s");
        assert_eq!(errs[0].reason, FieldErrorReason::Required);
        let errs = check_structural(
            &json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": true},
                    "b": {"x-kubernetes-preserve-unknown-fields": true}}}),
            "s",
        );
        assert!(errs.is_empty(), "{errs:?}");
    }
}
