//! Validation of an object against a schema: types, formats, numeric, string, array and
//! object keywords, composition (allOf, anyOf, oneOf, not), with kube-apiserver's messages.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use regex::Regex;
use serde_json::{Map, Value};

use super::{
    FieldError, FieldErrorReason, META_FIELDS, child, flag, fmt_value, fmt_value_short, index,
    props, quote, type_name,
};

/// Validate `obj` against the schema, returning every error found (in
/// traversal order: node checks first, then children in key/index order).
/// Top-level `apiVersion`, `kind` and `metadata` are not checked.
pub fn validate(obj: &Value, schema: &Value) -> Vec<FieldError> {
    let v = Validator;
    let mut out = Vec::new();
    v.node(Node::root(obj, schema), &mut out);
    out
}

/// One step of the walk: a value, the schema it must satisfy, and where it is.
#[derive(Clone, Copy)]
pub(super) struct Node<'a> {
    value: &'a Value,
    schema: &'a Value,
    /// The field path (`spec.items[0]`), as errors report it.
    path: &'a str,
    /// The object's top level, whose `apiVersion`, `kind` and `metadata` are not checked.
    root: bool,
}

impl<'a> Node<'a> {
    fn root(value: &'a Value, schema: &'a Value) -> Self {
        Node {
            value,
            schema,
            path: "",
            root: true,
        }
    }

    /// `value` at `path` below the top level, against `schema`.
    pub(super) fn below(value: &'a Value, schema: &'a Value, path: &'a str) -> Self {
        Node {
            value,
            schema,
            path,
            root: false,
        }
    }

    /// The same value at the same place, against another schema (`allOf`, `anyOf`…).
    fn against(self, schema: &'a Value) -> Self {
        Node { schema, ..self }
    }
}

/// The walk over an object and its schema. It holds nothing: compiled patterns are
/// shared by every validation ([`compiled`]).
pub(super) struct Validator;

/// Every schema `pattern` compiled so far (`None`: not a valid regex), shared by all
/// validations: a CRD's patterns are compiled once, not at every write of its objects.
/// Patterns come from CRDs, so few are distinct; the map is still emptied when it holds
/// [`COMPILED_PATTERNS`], so that no sequence of CRDs grows it without bound.
static PATTERNS: LazyLock<Mutex<HashMap<String, Option<Arc<Regex>>>>> =
    LazyLock::new(Mutex::default);

const COMPILED_PATTERNS: usize = 4096;

fn compiled(pattern: &str) -> Option<Arc<Regex>> {
    let lock = || PATTERNS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = lock().get(pattern) {
        return known.clone();
    }
    // Compiled outside the lock: another validation need not wait for it.
    let regex = Regex::new(pattern).ok().map(Arc::new);
    let mut patterns = lock();
    if patterns.len() >= COMPILED_PATTERNS {
        patterns.clear();
    }
    patterns.insert(pattern.to_owned(), regex.clone());
    regex
}

impl Validator {
    pub(super) fn node(&self, node: Node<'_>, out: &mut Vec<FieldError>) {
        let Node {
            value: v,
            schema: s,
            path,
            root,
        } = node;
        if !s.is_object() {
            return;
        }
        let name = subject(path);
        let int_or_string = flag(s, "x-kubernetes-int-or-string");
        let ty = s
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty());

        // nullable / type
        if v.is_null() {
            if flag(s, "nullable") {
                return;
            }
            let expected = if int_or_string {
                Some("integer,string")
            } else {
                ty
            };
            if let Some(expected) = expected {
                out.push(type_error(path, name, expected, v));
                return;
            }
        } else if int_or_string {
            if !(is_integer(v) || v.is_string()) {
                out.push(type_error(path, name, "integer,string", v));
                return;
            }
        } else if let Some(t) = ty {
            let ok = match t {
                "object" => v.is_object(),
                "array" => v.is_array(),
                "string" => v.is_string(),
                "integer" => is_integer(v),
                "number" => v.is_number(),
                "boolean" => v.is_boolean(),
                _ => true,
            };
            if !ok {
                out.push(type_error(path, name, t, v));
                return;
            }
        }

        // format (only integer ranges are checked)
        if let (Some(fmt), Value::Number(n)) = (s.get("format").and_then(Value::as_str), v) {
            let ok = match fmt {
                "int32" => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                "int64" => n.is_i64(),
                _ => true,
            };
            if !ok {
                out.push(FieldError::new(
                    path,
                    FieldErrorReason::TypeInvalid,
                    format!("Invalid value: {v}: {name} in body must be of type {fmt}"),
                ));
            }
        }

        // enum
        if let Some(Value::Array(allowed)) = s.get("enum")
            && !allowed.iter().any(|a| json_eq(a, v))
        {
            let supported: Vec<String> = allowed
                .iter()
                .map(|a| match a {
                    Value::String(s) => quote(s),
                    other => quote(&other.to_string()),
                })
                .collect();
            out.push(FieldError::new(
                path,
                FieldErrorReason::NotSupported,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    fmt_value(v),
                    supported.join(", ")
                ),
            ));
        }

        match v {
            Value::Number(n) => self.number(n, v, s, path, out),
            Value::String(st) => self.string(st, v, s, path, out),
            Value::Array(items) => self.array(items, v, s, path, out),
            Value::Object(map) => self.object(map, s, path, root, out),
            _ => {}
        }

        self.composite(node, out);
    }

    fn number(
        &self,
        n: &serde_json::Number,
        v: &Value,
        s: &Value,
        path: &str,
        out: &mut Vec<FieldError>,
    ) {
        let name = subject(path);
        let Some(x) = n.as_f64() else { return };
        let invalid = |detail: String| {
            FieldError::new(
                path,
                FieldErrorReason::Invalid,
                format!("Invalid value: {v}: {name} in body {detail}"),
            )
        };
        // v3.0 boolean exclusive flags, or v3.1 numeric bounds.
        let (max, max_excl) = match (
            s.get("maximum").and_then(Value::as_f64),
            s.get("exclusiveMaximum"),
        ) {
            (_, Some(Value::Number(e))) => (e.as_f64(), true),
            (m, e) => (m, e.and_then(Value::as_bool).unwrap_or(false)),
        };
        let (min, min_excl) = match (
            s.get("minimum").and_then(Value::as_f64),
            s.get("exclusiveMinimum"),
        ) {
            (_, Some(Value::Number(e))) => (e.as_f64(), true),
            (m, e) => (m, e.and_then(Value::as_bool).unwrap_or(false)),
        };
        if let Some(max) = max {
            if max_excl && x >= max {
                out.push(invalid(format!("should be less than {}", fmt_num(max))));
            } else if !max_excl && x > max {
                out.push(invalid(format!(
                    "should be less than or equal to {}",
                    fmt_num(max)
                )));
            }
        }
        if let Some(min) = min {
            if min_excl && x <= min {
                out.push(invalid(format!("should be greater than {}", fmt_num(min))));
            } else if !min_excl && x < min {
                out.push(invalid(format!(
                    "should be greater than or equal to {}",
                    fmt_num(min)
                )));
            }
        }
        if let Some(Value::Number(m)) = s.get("multipleOf") {
            let ok = match (n.as_i64(), m.as_i64()) {
                (Some(a), Some(b)) if b != 0 => a % b == 0,
                _ => match m.as_f64() {
                    Some(mf) if mf > 0.0 => {
                        let q = x / mf;
                        (q - q.round()).abs() <= 1e-9 * q.abs().max(1.0)
                    }
                    _ => true,
                },
            };
            if !ok {
                let mf = m.as_f64().unwrap_or(0.0);
                out.push(invalid(format!("should be a multiple of {}", fmt_num(mf))));
            }
        }
    }

    fn string(&self, st: &str, v: &Value, s: &Value, path: &str, out: &mut Vec<FieldError>) {
        let name = subject(path);
        let len = st.chars().count() as u64;
        if let Some(max) = as_count(s.get("maxLength"))
            && len > max
        {
            out.push(FieldError::new(
                path,
                FieldErrorReason::TooLong,
                format!("Too long: may not be longer than {max}"),
            ));
        }
        if let Some(min) = as_count(s.get("minLength"))
            && len < min
        {
            out.push(FieldError::new(
                path,
                FieldErrorReason::Invalid,
                format!(
                    "Invalid value: {}: {name} in body should be at least {min} chars long",
                    fmt_value(v)
                ),
            ));
        }
        if let Some(pattern) = s.get("pattern").and_then(Value::as_str)
            && let Some(re) = compiled(pattern)
            && !re.is_match(st)
        {
            out.push(FieldError::new(
                path,
                FieldErrorReason::Invalid,
                format!(
                    "Invalid value: {}: {name} in body should match '{pattern}'",
                    fmt_value(v)
                ),
            ));
        }
    }

    fn array(&self, items: &[Value], v: &Value, s: &Value, path: &str, out: &mut Vec<FieldError>) {
        let name = subject(path);
        check_count(s, path, items.len(), &ITEM_COUNT, out);
        if flag(s, "uniqueItems") {
            let mut seen = HashSet::new();
            let dup = items.iter().any(|x| {
                let mut c = String::new();
                canonical(x, &mut c);
                !seen.insert(c)
            });
            if dup {
                out.push(FieldError::new(
                    path,
                    FieldErrorReason::Invalid,
                    format!(
                        "Invalid value: {}: {name} in body shouldn't contain duplicates",
                        fmt_value(v)
                    ),
                ));
            }
        }
        if let Some(is) = s.get("items").filter(|i| i.is_object()) {
            for (i, x) in items.iter().enumerate() {
                self.node(Node::below(x, is, &index(path, i)), out);
            }
        }
    }

    fn object(
        &self,
        map: &Map<String, Value>,
        s: &Value,
        path: &str,
        root: bool,
        out: &mut Vec<FieldError>,
    ) {
        let skip_meta = root || flag(s, "x-kubernetes-embedded-resource");
        check_count(s, path, map.len(), &PROPERTY_COUNT, out);
        if let Some(Value::Array(required)) = s.get("required") {
            for r in required.iter().filter_map(Value::as_str) {
                if root && META_FIELDS.contains(&r) {
                    continue;
                }
                if !map.contains_key(r) {
                    out.push(FieldError::new(
                        child(path, r),
                        FieldErrorReason::Required,
                        "Required value",
                    ));
                }
            }
        }
        let properties = props(s);
        let additional = s.get("additionalProperties");
        // Sorted keys so the error order does not depend on map ordering.
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        for (k, val) in entries {
            if skip_meta && META_FIELDS.contains(&k.as_str()) {
                continue;
            }
            let p = child(path, k);
            if let Some(ps) = properties.and_then(|ps| ps.get(k)) {
                self.node(Node::below(val, ps, &p), out);
            } else {
                match additional {
                    Some(Value::Bool(false)) => out.push(FieldError::new(
                        &p,
                        FieldErrorReason::Invalid,
                        format!(
                            "Invalid value: {}: {p} in body is a forbidden property",
                            quote(k)
                        ),
                    )),
                    Some(a @ Value::Object(_)) => self.node(Node::below(val, a, &p), out),
                    _ => {}
                }
            }
        }
    }

    fn composite(&self, node: Node<'_>, out: &mut Vec<FieldError>) {
        let Node {
            value: v,
            schema: s,
            path,
            ..
        } = node;
        let name = subject(path);
        let composite_err = |what: &str| {
            FieldError::new(
                path,
                FieldErrorReason::Invalid,
                format!(
                    "Invalid value: {}: {name} in body {what}",
                    fmt_value_short(v)
                ),
            )
        };
        if let Some(Value::Array(all)) = s.get("allOf") {
            for sub in all {
                self.node(node.against(sub), out);
            }
        }
        if let Some(Value::Array(any)) = s.get("anyOf")
            && !any.is_empty()
            && !any.iter().any(|sub| self.passes(node.against(sub)))
        {
            out.push(composite_err("must validate at least one schema (anyOf)"));
        }
        if let Some(Value::Array(one)) = s.get("oneOf")
            && !one.is_empty()
        {
            let passing = one
                .iter()
                .filter(|sub| self.passes(node.against(sub)))
                .count();
            if passing != 1 {
                out.push(composite_err(
                    "must validate one and only one schema (oneOf)",
                ));
            }
        }
        if let Some(not) = s.get("not").filter(|n| n.is_object())
            && self.passes(node.against(not))
        {
            out.push(composite_err("must not validate the schema (not)"));
        }
    }

    fn passes(&self, node: Node<'_>) -> bool {
        let mut tmp = Vec::new();
        self.node(node, &mut tmp);
        tmp.is_empty()
    }
}

fn type_error(path: &str, name: &str, expected: &str, v: &Value) -> FieldError {
    let actual = type_name(v);
    FieldError::new(
        path,
        FieldErrorReason::TypeInvalid,
        format!(
            "Invalid value: {}: {name} in body must be of type {expected}: {}",
            quote(actual),
            quote(actual)
        ),
    )
}

/// The schema keywords that bound how many entries a value has, and what an entry is called.
struct CountBounds {
    max: &'static str,
    min: &'static str,
    entries: &'static str,
}

const ITEM_COUNT: CountBounds = CountBounds {
    max: "maxItems",
    min: "minItems",
    entries: "items",
};

const PROPERTY_COUNT: CountBounds = CountBounds {
    max: "maxProperties",
    min: "minProperties",
    entries: "properties",
};

/// Errors for a value of `len` entries outside the bounds schema `s` sets.
fn check_count(s: &Value, path: &str, len: usize, bounds: &CountBounds, out: &mut Vec<FieldError>) {
    let len = len as u64;
    if let Some(max) = as_count(s.get(bounds.max))
        && len > max
    {
        out.push(too_many(path, len, max));
    }
    if let Some(min) = as_count(s.get(bounds.min))
        && len < min
    {
        let (name, entries) = (subject(path), bounds.entries);
        out.push(FieldError::new(
            path,
            FieldErrorReason::Invalid,
            format!("Invalid value: {len}: {name} in body should have at least {min} {entries}"),
        ));
    }
}

fn too_many(path: &str, actual: u64, max: u64) -> FieldError {
    let unit = if max == 1 { "item" } else { "items" };
    FieldError::new(
        path,
        FieldErrorReason::TooMany,
        format!("Too many: {actual}: must have at most {max} {unit}"),
    )
}

/// The subject of a go-openapi style message (`<path> in body ...`).
fn subject(path: &str) -> &str {
    if path.is_empty() { "<root>" } else { path }
}

/// Go's `%v` of a float64 is close to Rust's `Display` for f64.
fn fmt_num(f: f64) -> String {
    format!("{f}")
}

fn as_count(v: Option<&Value>) -> Option<u64> {
    v.and_then(|v| {
        v.as_u64()
            .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
    })
}

fn is_integer(v: &Value) -> bool {
    matches!(v, Value::Number(n) if n.is_i64() || n.is_u64())
}

/// JSON equality with numbers compared by value (so `1 == 1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                x == y
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A canonical string for uniqueness checks (sorted keys, normalised numbers).
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (None, Some(u), _) => out.push_str(&u.to_string()),
            (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                out.push_str(&(f as i64).to_string())
            }
            _ => out.push_str(&n.to_string()),
        },
        Value::Array(a) => {
            out.push('[');
            for x in a {
                canonical(x, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                out.push_str(&quote(k));
                out.push(':');
                if let Some(x) = m.get(k) {
                    canonical(x, out);
                }
                out.push(',');
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::tests::{fields, schema};

    #[test]
    fn a_pattern_is_compiled_once_for_every_validation() {
        let pattern = "^compiled-once-[0-9]+$";
        let first = compiled(pattern).expect("a valid pattern");
        let again = compiled(pattern).expect("a valid pattern");
        assert!(
            Arc::ptr_eq(&first, &again),
            "the second validation reuses it"
        );
        assert!(
            compiled("(").is_none(),
            "an invalid pattern is remembered as such"
        );
        let s = json!({"type": "string", "pattern": pattern});
        assert!(validate(&json!("compiled-once-7"), &s).is_empty());
        assert_eq!(validate(&json!("other"), &s).len(), 1);
    }

    #[test]
    fn validate_ok() {
        let obj = json!({"apiVersion": 5, "metadata": "ignored",
            "spec": {"replicas": 3, "mode": "b", "ports": [{"port": 80}], "labels": {"a": "b"}, "port": "http",
                     "template": {"apiVersion": 1, "spec": {"a": "b"}}}});
        assert_eq!(validate(&obj, &schema()), vec![]);
        let obj = json!({"spec": {"replicas": 0, "port": 8080}});
        assert_eq!(validate(&obj, &schema()), vec![]);
    }

    #[test]
    fn validate_messages_and_multiple_errors() {
        let obj = json!({"spec": {"mode": "x", "ports": [{"port": "80"}, {"port": 3000000000u64}], "labels": {"a": 1},
                                  "port": true}, "status": {"ok": "yes"}});
        let errs = validate(&obj, &schema());
        assert_eq!(
            fields(&errs),
            vec![
                "spec.replicas: Required value",
                "spec.labels.a: Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\"",
                "spec.mode: Unsupported value: \"x\": supported values: \"a\", \"b\"",
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                "spec.ports[0].port: Invalid value: \"string\": spec.ports[0].port in body must be of type integer: \"string\"",
                "spec.ports[1].port: Invalid value: 3000000000: spec.ports[1].port in body must be of type int32",
                "status.ok: Invalid value: \"string\": status.ok in body must be of type boolean: \"string\"",
            ]
        );
        assert_eq!(errs[0].reason, FieldErrorReason::Required);
        assert_eq!(errs[0].message, "Required value");
        assert_eq!(errs[2].reason, FieldErrorReason::NotSupported);
        assert_eq!(errs[3].reason, FieldErrorReason::TypeInvalid);

        let errs = validate(&json!({"spec": {"replicas": -1}}), &schema());
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.replicas");
        assert_eq!(
            errs[0].message,
            "Invalid value: -1: spec.replicas in body should be greater than or equal to 0"
        );
        let errs = validate(&json!({"spec": {"replicas": "string"}}), &schema());
        assert_eq!(
            errs[0].message,
            "Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
        );
        let errs = validate(&json!({"spec": {"replicas": 11}}), &schema());
        assert_eq!(
            errs[0].message,
            "Invalid value: 11: spec.replicas in body should be less than or equal to 10"
        );
        // integer accepts JSON integers only
        let errs = validate(&json!({"spec": {"replicas": 1.5}}), &schema());
        assert_eq!(errs[0].reason, FieldErrorReason::TypeInvalid);
        let errs = validate(&json!({"spec": {"replicas": 1.0}}), &schema());
        assert_eq!(errs.len(), 1);
        // root type
        let errs = validate(&json!([]), &schema());
        assert_eq!(errs[0].reason, FieldErrorReason::TypeInvalid);
    }

    fn one(v: Value, s: Value) -> Vec<String> {
        validate(
            &json!({"f": v}),
            &json!({"type": "object", "properties": {"f": s}}),
        )
        .iter()
        .map(|e| e.message.clone())
        .collect()
    }

    #[test]
    fn numeric_keywords() {
        assert_eq!(
            one(
                json!(5),
                json!({"type": "number", "maximum": 5, "exclusiveMaximum": true})
            ),
            vec!["Invalid value: 5: f in body should be less than 5"]
        );
        assert_eq!(
            one(
                json!(0),
                json!({"type": "number", "minimum": 0, "exclusiveMinimum": true})
            ),
            vec!["Invalid value: 0: f in body should be greater than 0"]
        );
        assert_eq!(
            one(json!(0.5), json!({"type": "number", "minimum": 1.5})),
            vec!["Invalid value: 0.5: f in body should be greater than or equal to 1.5"]
        );
        assert!(one(json!(6), json!({"type": "integer", "multipleOf": 3})).is_empty());
        assert_eq!(
            one(json!(7), json!({"type": "integer", "multipleOf": 3})),
            vec!["Invalid value: 7: f in body should be a multiple of 3"]
        );
        assert!(one(json!(0.3), json!({"type": "number", "multipleOf": 0.1})).is_empty());
        assert!(
            one(
                json!(-2147483648i64),
                json!({"type": "integer", "format": "int32"})
            )
            .is_empty()
        );
        assert_eq!(
            one(
                json!(2147483648i64),
                json!({"type": "integer", "format": "int32"})
            )
            .len(),
            1
        );
        assert_eq!(
            one(
                json!(u64::MAX),
                json!({"type": "integer", "format": "int64"})
            )
            .len(),
            1
        );
    }

    #[test]
    fn string_keywords() {
        let s = json!({"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[a-zé]+$"});
        assert!(one(json!("ééé"), s.clone()).is_empty()); // chars, not bytes
        assert_eq!(
            one(json!("abcd"), s.clone()),
            vec!["Too long: may not be longer than 3"]
        );
        assert_eq!(
            one(json!("a"), s.clone()),
            vec!["Invalid value: \"a\": f in body should be at least 2 chars long"]
        );
        assert_eq!(
            one(json!("A1"), s.clone()),
            vec!["Invalid value: \"A1\": f in body should match '^[a-zé]+$'"]
        );
        let errs = validate(&json!({"f": "abcd"}), &json!({"properties": {"f": s}}));
        assert_eq!(errs[0].reason, FieldErrorReason::TooLong);
        // an invalid pattern is ignored by validate (check_structural reports it)
        assert!(one(json!("x"), json!({"type": "string", "pattern": "("})).is_empty());
    }

    #[test]
    fn array_and_object_keywords() {
        let s = json!({"type": "array", "minItems": 2, "maxItems": 3, "uniqueItems": true, "items": {"type": "integer"}});
        assert!(one(json!([1, 2]), s.clone()).is_empty());
        assert_eq!(
            one(json!([1]), s.clone()),
            vec!["Invalid value: 1: f in body should have at least 2 items"]
        );
        assert_eq!(
            one(json!([1, 2, 3, 4]), s.clone()),
            vec!["Too many: 4: must have at most 3 items"]
        );
        assert_eq!(
            one(json!([1, 1]), s.clone()),
            vec!["Invalid value: [1,1]: f in body shouldn't contain duplicates"]
        );
        assert_eq!(
            one(json!([1, "x"]), s.clone()),
            vec!["Invalid value: \"string\": f[1] in body must be of type integer: \"string\""]
        );
        let objs = json!({"type": "array", "uniqueItems": true, "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
        assert_eq!(
            one(json!([{"a": 1, "b": 2}, {"b": 2, "a": 1.0}]), objs).len(),
            1
        );

        let s = json!({"type": "object", "minProperties": 1, "maxProperties": 2, "additionalProperties": {"type": "string"}});
        assert_eq!(
            one(json!({}), s.clone()),
            vec!["Invalid value: 0: f in body should have at least 1 properties"]
        );
        assert_eq!(
            one(json!({"a": "", "b": "", "c": ""}), s.clone()),
            vec!["Too many: 3: must have at most 2 items"]
        );
        let closed = json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false});
        assert_eq!(
            one(json!({"a": "x", "b": 1}), closed),
            vec!["Invalid value: \"b\": f.b in body is a forbidden property"]
        );
    }

    #[test]
    fn nullable_and_int_or_string() {
        assert!(one(json!(null), json!({"type": "string", "nullable": true})).is_empty());
        assert_eq!(
            one(json!(null), json!({"type": "string"})),
            vec!["Invalid value: \"null\": f in body must be of type string: \"null\""]
        );
        let ios = json!({"x-kubernetes-int-or-string": true, "pattern": "^[0-9]+%$"});
        assert!(one(json!(80), ios.clone()).is_empty());
        assert!(one(json!("50%"), ios.clone()).is_empty());
        assert_eq!(one(json!("50"), ios.clone()).len(), 1);
        assert_eq!(one(json!(1.5), ios.clone()).len(), 1);
        assert_eq!(one(json!({}), ios).len(), 1);
    }

    #[test]
    fn composition_keywords() {
        let any = json!({"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]});
        assert!(one(json!({"a": 1}), any.clone()).is_empty());
        assert_eq!(
            one(json!({}), any),
            vec!["Invalid value: \"object\": f in body must validate at least one schema (anyOf)"]
        );
        let one_of = json!({"type": "integer", "oneOf": [{"minimum": 5}, {"maximum": 10}]});
        assert!(one(json!(1), one_of.clone()).is_empty());
        assert_eq!(
            one(json!(7), one_of),
            vec!["Invalid value: 7: f in body must validate one and only one schema (oneOf)"]
        );
        let all = json!({"type": "integer", "allOf": [{"minimum": 5}, {"maximum": 10}]});
        assert_eq!(
            one(json!(11), all),
            vec!["Invalid value: 11: f in body should be less than or equal to 10"]
        );
        let not = json!({"type": "string", "not": {"enum": ["x"]}});
        assert!(one(json!("y"), not.clone()).is_empty());
        assert_eq!(
            one(json!("x"), not),
            vec!["Invalid value: \"x\": f in body must not validate the schema (not)"]
        );
    }

    #[test]
    fn enum_non_string_values() {
        assert_eq!(
            one(json!(3), json!({"type": "integer", "enum": [1, 2]})),
            vec!["Unsupported value: 3: supported values: \"1\", \"2\""]
        );
        assert!(one(json!(2.0), json!({"type": "number", "enum": [1, 2]})).is_empty());
    }

    #[test]
    fn embedded_resource_skips_meta() {
        let s = json!({"type": "object", "properties": {"t": {"type": "object", "x-kubernetes-embedded-resource": true,
            "additionalProperties": false, "properties": {"spec": {"type": "object"}}}}});
        assert!(
            validate(
                &json!({"t": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {}}}),
                &s
            )
            .is_empty()
        );
        assert_eq!(validate(&json!({"t": {"other": 1}}), &s).len(), 1);
    }
}
