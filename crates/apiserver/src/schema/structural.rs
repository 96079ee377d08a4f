//! The structural check of a CRD's schema itself: what kube-apiserver refuses in an
//! `openAPIV3Schema` before it serves the kind.

use regex::Regex;
use serde_json::Value;

use super::keywords;
use super::rule_cost::{Cardinality, SchemaCost};
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
/// validate against their schema, and (with `estimate_costs`) the rules' estimated costs
/// stay within kube's bounds, one by one and in all.
/// `path_prefix` is the location of the schema, e.g.
/// `spec.versions[0].schema.openAPIV3Schema`.
pub fn check_structural(
    schema: &Value,
    path_prefix: &str,
    estimate_costs: bool,
) -> Vec<FieldError> {
    let _sizes = super::rule_cost::SizeScope::open();
    let mut found = Found::default();
    let root = Within {
        level: Level::Root,
        cardinality: estimate_costs.then_some(Cardinality::ROOT),
        uncorrelatable: None,
        no_default: None,
        resource_meta: false,
    };
    check_node(schema, path_prefix, &root, &mut found);
    completeness_errors(
        schema,
        Some(schema),
        path_prefix,
        path_prefix,
        &mut found.schema,
    );
    if flag(schema, "nullable") {
        found.schema.push(FieldError::new(
            child(path_prefix, "nullable"),
            FieldErrorReason::Forbidden,
            "Forbidden: nullable cannot be true at the root",
        ));
    }
    // As kube lists them: the schema's errors, then its rules'.
    let mut out = found.schema;
    out.extend(found.rules);
    out.extend(found.costs.errors(path_prefix));
    out
}

/// What the walk has found so far.
#[derive(Default)]
struct Found {
    /// Errors of the schema itself.
    schema: Vec<FieldError>,
    /// Errors of its `x-kubernetes-validations` rules (compilation, cost, `oldSelf`).
    rules: Vec<FieldError>,
    /// The rules' costs so far.
    costs: SchemaCost,
}

/// Where a schema node is, as kube's checks of it depend on.
#[derive(Clone)]
struct Within {
    level: Level,
    /// How many times the node's rules can run for one object, where kube estimates
    /// their cost (not inside allOf, anyOf, oneOf or not).
    cardinality: Option<Cardinality>,
    /// The first ancestor below which an old value cannot be matched with its new one
    /// (an atomic list or map, a set): a rule below it may not read `oldSelf`.
    uncorrelatable: Option<String>,
    /// Why a `default` is refused here, where it is.
    no_default: Option<String>,
    /// Inside a resource's `metadata`, `kind` or `apiVersion`.
    resource_meta: bool,
}

impl Within {
    /// The place of a child of node `s` at `path`: one of its properties (`Some(name)`),
    /// its items or its map values (`None`), at `level`.
    fn below(&self, s: &Value, path: &str, property: Option<&str>, level: Level) -> Within {
        let level = if self.level == Level::ValueValidation {
            Level::ValueValidation
        } else {
            level
        };
        let mut within = Within {
            level,
            cardinality: self.cardinality.map(|c| c.below(s)),
            ..self.clone()
        };
        let correlates = match property {
            Some(_) => s.get("x-kubernetes-map-type").and_then(Value::as_str) != Some("atomic"),
            None if level == Level::Items => {
                s.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map")
            }
            None => true,
        };
        if !correlates && within.uncorrelatable.is_none() {
            within.uncorrelatable = Some(path.to_string());
        }
        let resource = self.level == Level::Root || flag(s, "x-kubernetes-embedded-resource");
        match property {
            Some(name @ ("metadata" | "kind" | "apiVersion")) if resource => {
                within.resource_meta = true;
                if self.level == Level::Root {
                    within.no_default = Some(format!("in top-level {name}"));
                }
            }
            None if level == Level::AdditionalProperties && self.resource_meta => {
                within.no_default =
                    Some("inside additionalProperties applying to object metadata".into());
            }
            _ => {}
        }
        within
    }

    /// Inside allOf, anyOf, oneOf or not: value validations, whose rules kube does not
    /// estimate.
    fn value_validation(&self) -> Within {
        Within {
            level: Level::ValueValidation,
            cardinality: None,
            ..self.clone()
        }
    }
}

/// Check schema node `s` at `path`.
fn check_node(s: &Value, path: &str, within: &Within, found: &mut Found) {
    let level = within.level;
    let schema_errors_before = found.schema.len();
    let out = &mut found.schema;
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
    out.extend(keywords::keyword_errors(
        s,
        path,
        &keywords::Placement {
            no_default: within.no_default.as_deref(),
            resource_meta: within.resource_meta,
        },
    ));
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
                out.push(super::unsupported(child(path, "type"), t, &VALID_TYPES));
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
        None if level != Level::ValueValidation
            && !int_or_string
            && !preserve
            && !flag(s, "x-kubernetes-embedded-resource") =>
        {
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
    out.extend(resource_errors(s, path, level));
    if level == Level::ValueValidation {
        out.extend(nested_errors(s, path));
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
    // `additionalProperties: true` beside properties only restates what they allow.
    if has_props
        && m.get("additionalProperties")
            .is_some_and(|a| a != &Value::Bool(true) && !a.is_null())
    {
        out.push(FieldError::new(
            child(path, "additionalProperties"),
            FieldErrorReason::Forbidden,
            "Forbidden: additionalProperties and properties are mutual exclusive",
        ));
    }

    if let Some(other @ Value::Bool(_)) = m.get("items") {
        out.push(FieldError::new(
            child(path, "items"),
            FieldErrorReason::Invalid,
            format!(
                "Invalid value: {}: items must be a schema object",
                fmt_value_short(other)
            ),
        ));
    }

    if let Some(Value::Object(ps)) = m.get("properties") {
        for (k, ps) in ps {
            let at = format!("{path}.properties[{k}]");
            check_node(
                ps,
                &at,
                &within.below(s, path, Some(k), Level::Property),
                found,
            );
        }
    }
    if let Some(items @ Value::Object(_)) = m.get("items") {
        let at = child(path, "items");
        check_node(
            items,
            &at,
            &within.below(s, path, None, Level::Items),
            found,
        );
    }
    if let Some(values @ Value::Object(_)) = m.get("additionalProperties") {
        let at = child(path, "additionalProperties");
        let values_within = within.below(s, path, None, Level::AdditionalProperties);
        check_node(values, &at, &values_within, found);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(subs)) = m.get(key) {
            // kube's int-or-string pattern is structural as it is.
            if key == "anyOf" && is_int_or_string_pattern(&m[key]) {
                continue;
            }
            for (i, sub) in subs.iter().enumerate() {
                let at = index(&child(path, key), i);
                let pattern_first = key == "allOf"
                    && i == 0
                    && sub.get("anyOf").is_some_and(is_int_or_string_pattern);
                if pattern_first {
                    let mut rest = sub.clone();
                    if let Some(rest) = rest.as_object_mut() {
                        rest.remove("anyOf");
                    }
                    check_node(&rest, &at, &within.value_validation(), found);
                    continue;
                }
                check_node(sub, &at, &within.value_validation(), found);
            }
        }
    }
    if let Some(not) = m.get("not") {
        check_node(not, &child(path, "not"), &within.value_validation(), found);
    }

    found.schema.extend(keywords::extension_errors(s, path));
    found.schema.extend(super::rules::entry_errors(s, path));
    // As kube, rules are compiled only where the schema below them holds together.
    if found.schema.len() == schema_errors_before {
        let rule_costs = within.cardinality.map(|c| (c, &mut found.costs));
        found.rules.extend(super::rules::compile_errors(
            s,
            path,
            level == Level::Root,
            rule_costs,
            within.uncorrelatable.as_deref(),
        ));
    }

    // Defaults must validate against their own schema.
    if let Some(d) = m.get("default")
        && level != Level::ValueValidation
        && !d.is_null()
    {
        validate_at(d, s, &child(path, "default"), &mut found.schema);
    }
}

/// kube's invariants of a resource's root (the schema's, or an embedded resource): an
/// embedded one is an object without `additionalProperties` that declares its fields or
/// preserves unknown ones; `kind` and `apiVersion` are strings, `metadata` an object of
/// which the schema's root may only restrict `name` and `generateName`; and no
/// `additionalProperties` at the schema's root. Also an int-or-string is neither of the
/// others.
fn resource_errors(s: &Value, path: &str, level: Level) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let embedded = flag(s, "x-kubernetes-embedded-resource");
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    let field = |key: &str| child(path, key);
    let has_additional = s.get("additionalProperties").is_some_and(|a| !a.is_null());
    if embedded && ty != "object" {
        errors.push(match ty {
            "" => FieldError::new(
                field("type"),
                FieldErrorReason::Required,
                "Required value: must be object if x-kubernetes-embedded-resource is true",
            ),
            ty => FieldError::new(
                field("type"),
                FieldErrorReason::Invalid,
                format!(
                    "Invalid value: {}: must be object if x-kubernetes-embedded-resource is true",
                    quote(ty)
                ),
            ),
        });
    }
    if level == Level::Root && has_additional {
        errors.push(FieldError::new(
            field("additionalProperties"),
            FieldErrorReason::Forbidden,
            "Forbidden: must not be used at the root",
        ));
    }
    if embedded && has_additional {
        errors.push(FieldError::new(
            field("additionalProperties"),
            FieldErrorReason::Forbidden,
            "Forbidden: must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if flag(s, "x-kubernetes-int-or-string") {
        for key in [
            "x-kubernetes-preserve-unknown-fields",
            "x-kubernetes-embedded-resource",
        ] {
            if flag(s, key) {
                errors.push(FieldError::new(
                    field(key),
                    FieldErrorReason::Invalid,
                    "Invalid value: true: must be false if x-kubernetes-int-or-string is true",
                ));
            }
        }
    }
    let properties = s.get("properties").and_then(Value::as_object);
    let resource = level == Level::Root || embedded;
    for key in ["kind", "apiVersion"] {
        let Some(declared) = properties.and_then(|p| p.get(key)).filter(|_| resource) else {
            continue;
        };
        let declared_type = declared.get("type").and_then(Value::as_str).unwrap_or("");
        if declared_type != "string" {
            errors.push(FieldError::new(
                format!("{path}.properties[{key}].type"),
                FieldErrorReason::Invalid,
                format!("Invalid value: {}: must be string", quote(declared_type)),
            ));
        }
    }
    if let Some(metadata) = properties.and_then(|p| p.get("metadata")) {
        let at = format!("{path}.properties[metadata]");
        let metadata_type = metadata.get("type").and_then(Value::as_str).unwrap_or("");
        if resource && metadata_type != "object" {
            errors.push(FieldError::new(
                child(&at, "type"),
                FieldErrorReason::Invalid,
                format!("Invalid value: {}: must be object", quote(metadata_type)),
            ));
        }
        if level == Level::Root && !only_names(metadata) {
            errors.push(FieldError::new(
                at,
                FieldErrorReason::Forbidden,
                "Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if embedded
        && !flag(s, "x-kubernetes-preserve-unknown-fields")
        && properties.is_none_or(|p| p.is_empty())
    {
        errors.push(FieldError::new(
            field("properties"),
            FieldErrorReason::Required,
            "Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
    errors
}

/// Whether a root's `metadata` schema restricts nothing but `name` and `generateName`:
/// besides them it may carry only its `type` and `default`.
fn only_names(metadata: &Value) -> bool {
    let Some(keys) = metadata.as_object() else {
        return false;
    };
    keys.iter().all(|(key, value)| match key.as_str() {
        "type" | "default" => true,
        "properties" => value
            .as_object()
            .is_some_and(|p| p.keys().all(|k| k == "name" || k == "generateName")),
        _ => false,
    })
}

/// What a schema inside `allOf`, `anyOf`, `oneOf` or `not` may not carry to be structural
/// (it only validates values the structure outside declares). kube's int-or-string
/// pattern, `anyOf: [{type: integer}, {type: string}]`, is exempt (the caller skips it).
fn nested_errors(s: &Value, path: &str) -> Vec<FieldError> {
    let forbidden = |key: &str, detail: &str| {
        FieldError::new(
            child(path, key),
            FieldErrorReason::Forbidden,
            format!("Forbidden: {detail}"),
        )
    };
    let present = |key: &str| match s.get(key) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(text)) => !text.is_empty(),
        Some(Value::Array(items)) => !items.is_empty(),
        Some(_) => true,
    };
    let mut errors = Vec::new();
    let rules: [(&str, &str); 13] = [
        ("type", "must be empty to be structural"),
        ("additionalProperties", "must be undefined to be structural"),
        ("default", "must be undefined to be structural"),
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        ("nullable", "must be false to be structural"),
        (
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        ),
        (
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        ),
        (
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        ),
        ("x-kubernetes-validations", "must be empty to be structural"),
    ];
    for (key, detail) in rules {
        if present(key) {
            errors.push(forbidden(key, detail));
        }
    }
    if s.get("properties")
        .and_then(|p| p.get("metadata"))
        .is_some()
    {
        errors.push(FieldError::new(
            format!("{path}.properties[metadata]"),
            FieldErrorReason::Forbidden,
            "Forbidden: must not be specified in a nested context",
        ));
    }
    errors
}

/// kube's completeness check of the root's value validations: every property or items
/// an `allOf`, `anyOf`, `oneOf` or `not` of the root names (at any depth within them)
/// must be declared by the structure they validate (`s`, at `s_path`) — the value
/// validation at `v_path` only restricts what the structure declares.
fn completeness_errors(
    v: &Value,
    s: Option<&Value>,
    s_path: &str,
    v_path: &str,
    out: &mut Vec<FieldError>,
) {
    let Some(s) = s else {
        out.push(FieldError::new(
            s_path,
            FieldErrorReason::Required,
            format!("Required value: because it is defined in {v_path}"),
        ));
        return;
    };
    let mut nested = |nested: &Value, at: String| nested_completeness(nested, s, s_path, &at, out);
    if let Some(not) = v.get("not").filter(|n| n.is_object()) {
        nested(not, child(v_path, "not"));
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, sub) in v
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            nested(sub, index(&child(v_path, key), i));
        }
    }
}

/// One value validation `v` (at `v_path`) of structure `s` (at `s_path`), and what it
/// names below.
fn nested_completeness(
    v: &Value,
    s: &Value,
    s_path: &str,
    v_path: &str,
    out: &mut Vec<FieldError>,
) {
    completeness_errors(v, Some(s), s_path, v_path, out);
    if let Some(items) = v.get("items").filter(|i| i.is_object()) {
        let structural = s.get("items").filter(|i| i.is_object());
        let (s_items, v_items) = (child(s_path, "items"), child(v_path, "items"));
        match structural {
            Some(structural) => nested_completeness(items, structural, &s_items, &v_items, out),
            None => completeness_errors(items, None, &s_items, &v_items, out),
        }
    }
    for (key, property) in v
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let s_at = format!("{s_path}.properties[{key}]");
        let v_at = format!("{v_path}.properties[{key}]");
        match s.get("properties").and_then(|p| p.get(key)) {
            Some(declared) => nested_completeness(property, declared, &s_at, &v_at, out),
            None => completeness_errors(property, None, &s_at, &v_at, out),
        }
    }
}

/// kube's int-or-string pattern: `anyOf: [{type: integer}, {type: string}]`, exactly.
fn is_int_or_string_pattern(any_of: &Value) -> bool {
    any_of.as_array().is_some_and(|alternatives| {
        alternatives.len() == 2
            && alternatives[0] == serde_json::json!({"type": "integer"})
            && alternatives[1] == serde_json::json!({"type": "string"})
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::tests::{fields, schema};

    #[test]
    fn structural_check() {
        let prefix = "spec.versions[0].schema.openAPIV3Schema";
        assert!(check_structural(&schema(), prefix, true).is_empty());

        let bad = json!({"type": "object", "properties": {
            "spec": {"properties": {"a": {"type": "string", "pattern": "(", "default": 5}}},
            "list": {"type": "array"},
            "items": {"type": "array", "items": {}},
            "odd": {"type": "strin"},
            "any": {"type": "object", "anyOf": [{"required": ["x"]}]},
            "p": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}
        }});
        let errs = check_structural(&bad, prefix, true);
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

        let errs = check_structural(&json!({"type": "string"}), "s", true);
        assert_eq!(
            fields(&errs),
            vec!["s.type: Invalid value: \"string\": must be object at the root"]
        );
        let errs = check_structural(&json!({}), "s", true);
        assert_eq!(errs[0].reason, FieldErrorReason::Required);
        let errs = check_structural(
            &json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": true},
                    "b": {"x-kubernetes-preserve-unknown-fields": true}}}),
            "s",
            true,
        );
        assert!(errs.is_empty(), "{errs:?}");
    }

    /// kubernetes#124234: a messageExpression of unknown size, as kube reports it.
    #[test]
    fn rules_that_cost_too_much_are_refused_with_kube_messages() {
        let prefix = "spec.validation.openAPIV3Schema";
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"config": {"type": "object",
                "x-kubernetes-validations": [{
                    "rule": "self.attempts >= 0",
                    "messageExpression": "'invalid attempts: ' + string(self.attempts)"}],
                "properties": {"attempts": {"type": "integer"}}}}}}});
        let budget = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
        let at = format!(
            "{prefix}.properties[spec].properties[config].x-kubernetes-validations[0].messageExpression"
        );
        assert_eq!(
            fields(&check_structural(&schema, prefix, true)),
            vec![
                format!(
                    "{at}: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x {budget}"
                ),
                format!(
                    "{at}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
                ),
                format!(
                    "{prefix}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {budget}"
                ),
            ]
        );
        assert!(check_structural(&schema, prefix, false).is_empty());

        // openshift/api#1826: a duplicate check over 10 strings of any length.
        let eips = json!({"type": "object", "properties": {"eipAllocations": {
            "type": "array", "maxItems": 10, "items": {"type": "string"},
            "x-kubernetes-validations": [{"rule": "self.all(x, self.exists_one(y, x == y))"}]}}});
        assert_eq!(
            fields(&check_structural(&eips, prefix, true)),
            vec![format!(
                "{prefix}.properties[eipAllocations].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of 3.1x {budget}"
            )]
        );
        // Bounded strings bring it within budget.
        let mut bounded = eips;
        bounded["properties"]["eipAllocations"]["items"]["maxLength"] = json!(63);
        assert!(check_structural(&bounded, prefix, true).is_empty());

        // Under a list without maxItems a rule runs for as many items as a request holds.
        let nested = json!({"type": "object", "properties": {"routes": {"type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "self.name.startsWith('a')"}]}}}});
        let errors = fields(&check_structural(&nested, prefix, true));
        assert!(errors.is_empty(), "{errors:?}");
        let mut costly = nested;
        costly["properties"]["routes"]["items"]["x-kubernetes-validations"][0]["rule"] =
            json!("self.name.matches('^[a-z]+$')");
        let errors = fields(&check_structural(&costly, prefix, true));
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].contains("more than 100x"), "{errors:?}");
    }

    /// Where a node is decides what kube allows there: `oldSelf` only where old values
    /// correlate with new ones, defaults not in the root's metadata.
    #[test]
    fn what_a_node_allows_depends_on_where_it_is() {
        let immutable = json!([{"rule": "self == oldSelf", "message": "immutable"}]);
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object", "default": {}},
            "spec": {"type": "object", "properties": {
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 8,
                    "x-kubernetes-validations": immutable.clone()}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string", "maxLength": 8,
                            "x-kubernetes-validations": immutable.clone()}}}},
                "settings": {"type": "object", "x-kubernetes-map-type": "atomic",
                    "properties": {"mode": {"type": "string", "maxLength": 8,
                        "x-kubernetes-validations": immutable}}}}}}});
        let p = "spec.validation.openAPIV3Schema";
        let spec = format!("{p}.properties[spec]");
        let old_self = |node: &str, within: &str| {
            format!(
                "{spec}.{node}.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within {spec}.properties[{within}]"
            )
        };
        assert_eq!(
            fields(&check_structural(&schema, p, true)),
            [
                format!(
                    "{p}.properties[metadata].default: Forbidden: must not be set in top-level metadata"
                ),
                old_self("properties[settings].properties[mode]", "settings"),
                old_self("properties[tags].items", "tags"),
            ]
        );
    }

    #[test]
    fn rules_are_not_compiled_over_a_schema_that_does_not_hold_together() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.missing > 0"}],
            "properties": {"tags": {"type": "array", "uniqueItems": true,
                "items": {"type": "string"}}}}}});
        let errors = fields(&check_structural(&schema, "s", true));
        assert_eq!(
            errors,
            [
                "s.properties[spec].properties[tags].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
            ]
        );
    }

    /// kube's structural invariants of resources and of value validations, with its
    /// messages; kubebuilder's int-or-string pattern stays allowed.
    #[test]
    fn structural_invariants_hold_as_kube_holds_them() {
        let schema = json!({"type": "object", "additionalProperties": {"type": "string"},
            "properties": {
                "metadata": {"type": "object", "properties": {
                    "name": {"type": "string", "maxLength": 20},
                    "labels": {"type": "object"}}},
                "kind": {"type": "integer"},
                "spec": {"type": "object", "properties": {
                    "port": {"x-kubernetes-int-or-string": true,
                        "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "mode": {"type": "string",
                        "oneOf": [{"type": "string", "description": "a"}, {"enum": ["b"]}]},
                    "template": {"x-kubernetes-embedded-resource": true}}}}});
        let p = "s";
        assert_eq!(
            fields(&check_structural(&schema, p, true)),
            [
                "s.additionalProperties: Forbidden: must not be used at the root",
                "s.properties[kind].type: Invalid value: \"integer\": must be string",
                "s.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
                "s.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
                "s.properties[spec].properties[mode].oneOf[0].type: Forbidden: must be empty to be structural",
                "s.properties[spec].properties[mode].oneOf[0].description: Forbidden: must be empty to be structural",
                "s.properties[spec].properties[template].type: Required value: must be object if x-kubernetes-embedded-resource is true",
                "s.properties[spec].properties[template].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
            ]
        );
        let fine = json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}},
            "spec": {"type": "object", "properties": {
                "quantity": {"x-kubernetes-int-or-string": true, "pattern": "^[0-9]+$",
                    "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "limit": {"x-kubernetes-int-or-string": true,
                    "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^[0-9]+$"}]},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-preserve-unknown-fields": true}}}}});
        assert_eq!(
            fields(&check_structural(&fine, p, true)),
            Vec::<String>::new()
        );
    }

    /// kube's own case: a property the root's `not` names must be declared outside it.
    #[test]
    fn value_validations_only_restrict_what_the_structure_declares() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}},
            "not": {"properties": {"b": {}, "a": {"items": {}}}},
            "anyOf": [{"required": ["a"]}, {"properties": {"a": {"maxLength": 3}}}]});
        assert_eq!(
            fields(&check_structural(&schema, "s", true)),
            [
                "s.properties[a].items: Required value: because it is defined in s.not.properties[a].items",
                "s.properties[b]: Required value: because it is defined in s.not.properties[b]",
            ]
        );
    }
}
