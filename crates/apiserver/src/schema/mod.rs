//! CRD structural-schema handling for `apiextensions.k8s.io/v1`
//! `openAPIV3Schema` (the JSON form of `JSONSchemaProps`): pruning of unknown
//! fields, defaulting, validation and a structural sanity check of the schema
//! itself. Error messages follow kube-apiserver's wording.
//!
//! One file per concern: `prune`, `defaults`, `validate` (an object against a
//! schema) and `structural` (the schema itself); what is here is their shared vocabulary:
//! field errors, paths and how values are named in messages.

mod cel_library;
mod cel_names;
mod defaults;
mod formats;
mod keywords;
mod prune;
mod rule_cost;
mod rule_fields;
mod rules;
mod structural;
mod validate;

use std::fmt;

use serde_json::{Map, Value};

pub(crate) use cel_library::{declared, no_such_overload, opaque};
pub use defaults::apply_defaults;
pub use prune::prune;
#[cfg(test)]
pub(crate) use rules::new_context;
pub(crate) use rules::{Expression, library_root, plain_value, value_nodes};
pub use structural::check_structural;
pub use validate::{ValueSchema, validate};

/// `obj` against its schema, then (on an update, with `old`) its validation rules, as
/// kube-apiserver does: the rules do not run over a value of the wrong type or an
/// unsupported one, which is said instead.
pub fn validate_with_rules(
    obj: &Value,
    old: Option<&Value>,
    schema: &ValueSchema,
) -> Vec<FieldError> {
    let mut errors = validate(obj, schema);
    if let Some(old) = old
        && !errors.is_empty()
    {
        // kube's validation ratcheting: an update is not refused for a value it leaves as
        // it was (the same error at the same place in the old object), so an object
        // stored before a check existed can still be changed, its finalizers removed.
        // A missing required field is not a value, and still refused.
        let before = validate(old, schema);
        errors.retain(|e| e.reason == FieldErrorReason::Required || !before.contains(e));
    }
    if !schema.has_rules() {
        return errors;
    }
    let blocking = errors.iter().any(|e| {
        matches!(
            e.reason,
            FieldErrorReason::TypeInvalid | FieldErrorReason::NotSupported
        )
    });
    if blocking {
        errors.push(FieldError::new(
            rules::NIL_PATH,
            FieldErrorReason::Invalid,
            "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ));
    } else {
        errors.extend(rules::check(obj, old, schema));
    }
    errors
}

/// One validation problem, shaped like a Kubernetes `StatusCause`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// JSON-path style location, e.g. `spec.replicas` or `spec.ports[0].port`.
    pub field: String,
    pub reason: FieldErrorReason,
    /// The error body without the field prefix, e.g. `Required value`.
    pub message: String,
}

impl FieldError {
    pub(crate) fn new(
        field: impl Into<String>,
        reason: FieldErrorReason,
        message: impl Into<String>,
    ) -> Self {
        FieldError {
            field: field.into(),
            reason,
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    /// `field: message`, like `field.Error.Error()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorReason {
    Required,
    Invalid,
    NotSupported,
    TypeInvalid,
    TooLong,
    TooMany,
    Forbidden,
    NotFound,
    Duplicate,
}

impl FieldErrorReason {
    /// The `reason` string of a Kubernetes `StatusCause`.
    pub fn as_str(&self) -> &'static str {
        match self {
            FieldErrorReason::Required => "FieldValueRequired",
            FieldErrorReason::Invalid => "FieldValueInvalid",
            FieldErrorReason::NotSupported => "FieldValueNotSupported",
            FieldErrorReason::TypeInvalid => "FieldValueTypeInvalid",
            FieldErrorReason::TooLong => "FieldValueTooLong",
            FieldErrorReason::TooMany => "FieldValueTooMany",
            FieldErrorReason::Forbidden => "FieldValueForbidden",
            FieldErrorReason::NotFound => "FieldValueNotFound",
            FieldErrorReason::Duplicate => "FieldValueDuplicate",
        }
    }
}

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Where a value is: the field path errors report (`spec.items[0]`), spelled out only when
/// one does.
#[derive(Clone, Copy)]
pub(crate) enum Path<'a> {
    /// Where the walk started, as text (empty: the object's top level).
    At(&'a str),
    Field(&'a Path<'a>, &'a str),
    Item(&'a Path<'a>, usize),
}

impl Path<'_> {
    pub(crate) fn render(&self) -> String {
        match self {
            Path::At(path) => (*path).to_owned(),
            Path::Field(parent, key) => child(&parent.render(), key),
            Path::Item(parent, i) => index(&parent.render(), *i),
        }
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// Render a bad value the way `field.Error` does: strings quoted, scalars bare,
/// containers as compact JSON.
fn fmt_value(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        other => other.to_string(),
    }
}

/// Like [`fmt_value`] but containers are summarised by their type name.
fn fmt_value_short(v: &Value) -> String {
    match v {
        Value::Object(_) | Value::Array(_) => quote(type_name(v)),
        other => fmt_value(other),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// kube's `NotSupported` error at `at` for `value`, naming the values it supports.
fn unsupported(at: String, value: &str, supported: &[&str]) -> FieldError {
    let supported: Vec<String> = supported.iter().map(|s| quote(s)).collect();
    FieldError::new(
        at,
        FieldErrorReason::NotSupported,
        format!(
            "Unsupported value: {}: supported values: {}",
            quote(value),
            supported.join(", ")
        ),
    )
}

/// The schema of a map's values (`additionalProperties` of an object), when it has one.
fn map_values(s: &Value) -> Option<&Value> {
    s.get("additionalProperties").filter(|v| v.is_object())
}

/// The strings of list `key` of schema node `s` (`required`, `x-kubernetes-list-map-keys`).
fn string_items<'s>(s: &'s Value, key: &str) -> impl Iterator<Item = &'s str> {
    s.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn flag(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn props(s: &Value) -> Option<&Map<String, Value>> {
    s.get("properties").and_then(Value::as_object)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    pub(super) fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    pub(super) fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["replicas"],
                    "properties": {
                        "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                        "ports": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "port": {"type": "integer", "format": "int32"},
                                    "protocol": {"type": "string", "default": "TCP"}
                                }
                            }
                        },
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                 "properties": {"known": {"type": "object", "properties": {"x": {"type": "string"}}}}},
                        "port": {"x-kubernetes-int-or-string": true},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                     "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}
                    }
                },
                "status": {"type": "object", "properties": {"ok": {"type": "boolean"}}}
            }
        })
    }

    #[test]
    fn reasons() {
        assert_eq!(FieldErrorReason::Required.as_str(), "FieldValueRequired");
        assert_eq!(FieldErrorReason::Invalid.as_str(), "FieldValueInvalid");
        assert_eq!(
            FieldErrorReason::NotSupported.as_str(),
            "FieldValueNotSupported"
        );
        assert_eq!(
            FieldErrorReason::TypeInvalid.as_str(),
            "FieldValueTypeInvalid"
        );
        assert_eq!(FieldErrorReason::TooLong.as_str(), "FieldValueTooLong");
        assert_eq!(FieldErrorReason::TooMany.as_str(), "FieldValueTooMany");
    }
}
