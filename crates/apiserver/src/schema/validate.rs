//! Validation of an object against a schema: types, formats, numeric, string, array and
//! object keywords, composition (allOf, anyOf, oneOf, not), with kube-apiserver's messages.
//!
//! A schema is read once into a [`ValueSchema`] (when its CRD is registered), not looked up
//! keyword by keyword in its JSON at every node of every write; and a node's field path is
//! spelled out only when an error names it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use regex::Regex;
use serde_json::{Map, Number, Value};

use super::rules::{self, Rule};
use super::{
    FieldError, FieldErrorReason, META_FIELDS, Path, child, flag, fmt_value, fmt_value_short,
    props, quote, type_name,
};

/// Validate `obj` against the schema, returning every error found (in
/// traversal order: node checks first, then children in key/index order).
/// Top-level `apiVersion`, `kind` and `metadata` are not checked.
pub fn validate(obj: &Value, schema: &ValueSchema) -> Vec<FieldError> {
    let mut out = Vec::new();
    Validator.node(Node::root(obj, schema), &mut out);
    out
}

/// Validate `value`, found at `path`, against the schema JSON `schema` (a CRD's `default`
/// against the schema it is the default of).
pub(super) fn validate_at(value: &Value, schema: &Value, path: &str, out: &mut Vec<FieldError>) {
    let schema = ValueSchema::new(schema);
    Validator.node(
        Node {
            value,
            schema: &schema,
            path: Path::At(path),
            root: false,
        },
        out,
    );
}

/// What a schema node asks of a value, read from its JSON once.
#[derive(Debug, Clone, Default)]
pub struct ValueSchema {
    /// Whether the node is a JSON object: anything else is no schema, and any value passes.
    active: bool,
    /// `type`, unless empty.
    ty: Option<String>,
    nullable: bool,
    int_or_string: bool,
    embedded_resource: bool,
    format: Option<String>,
    allowed: Option<Vec<Value>>,
    maximum: Option<Bound>,
    minimum: Option<Bound>,
    multiple_of: Option<Number>,
    max_length: Option<u64>,
    min_length: Option<u64>,
    /// `pattern`, and the regex it compiles to (`None`: it does not compile, and is not checked).
    pattern: Option<(String, Option<Arc<Regex>>)>,
    item_count: Counts,
    unique_items: bool,
    items: Option<Box<ValueSchema>>,
    property_count: Counts,
    required: Vec<String>,
    properties: Option<BTreeMap<String, ValueSchema>>,
    additional: Additional,
    all_of: Vec<ValueSchema>,
    any_of: Vec<ValueSchema>,
    one_of: Vec<ValueSchema>,
    not: Option<Box<ValueSchema>>,
    /// `x-kubernetes-validations`, compiled.
    rules: Vec<Arc<Rule>>,
    /// Whether this node or one below it has rules: the rules' walk skips the others.
    rules_below: bool,
    /// `x-kubernetes-map-type: atomic`: an update's old value is not looked into.
    atomic_map: bool,
    /// `x-kubernetes-list-map-keys` of an `x-kubernetes-list-type: map` list.
    list_map_keys: Option<Vec<String>>,
}

/// `maximum` or `minimum`: v3.0's boolean `exclusive…` flags, or v3.1's numeric ones.
#[derive(Debug, Clone, Copy)]
struct Bound {
    limit: f64,
    exclusive: bool,
}

/// `maxItems`/`minItems`, or `maxProperties`/`minProperties`.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    max: Option<u64>,
    min: Option<u64>,
}

/// `additionalProperties`.
#[derive(Debug, Clone, Default)]
enum Additional {
    /// Absent, or `true`: any other property is accepted unchecked.
    #[default]
    Accepted,
    /// `false`.
    Forbidden,
    Schema(Box<ValueSchema>),
}

impl ValueSchema {
    /// Read the schema JSON `s`.
    pub fn new(s: &Value) -> ValueSchema {
        if !s.is_object() {
            return ValueSchema::default();
        }
        let text = |key: &str| s.get(key).and_then(Value::as_str).map(str::to_owned);
        let count = |key: &str| as_count(s.get(key));
        let list = |key: &str| match s.get(key) {
            Some(Value::Array(subs)) => subs.iter().map(ValueSchema::new).collect(),
            _ => Vec::new(),
        };
        let boxed = |key: &str| {
            s.get(key)
                .filter(|sub| sub.is_object())
                .map(|sub| Box::new(ValueSchema::new(sub)))
        };
        let mut schema = ValueSchema {
            active: true,
            ty: text("type").filter(|t| !t.is_empty()),
            nullable: flag(s, "nullable"),
            int_or_string: flag(s, "x-kubernetes-int-or-string"),
            embedded_resource: flag(s, "x-kubernetes-embedded-resource"),
            format: text("format"),
            allowed: match s.get("enum") {
                Some(Value::Array(allowed)) => Some(allowed.clone()),
                _ => None,
            },
            maximum: Bound::of(s, "maximum", "exclusiveMaximum"),
            minimum: Bound::of(s, "minimum", "exclusiveMinimum"),
            multiple_of: match s.get("multipleOf") {
                Some(Value::Number(m)) => Some(m.clone()),
                _ => None,
            },
            max_length: count("maxLength"),
            min_length: count("minLength"),
            pattern: text("pattern").map(|p| {
                let regex = compiled(&p);
                (p, regex)
            }),
            item_count: Counts {
                max: count("maxItems"),
                min: count("minItems"),
            },
            unique_items: flag(s, "uniqueItems"),
            items: boxed("items"),
            property_count: Counts {
                max: count("maxProperties"),
                min: count("minProperties"),
            },
            required: crate::meta::string_list(s.get("required")),
            properties: props(s).map(|ps| {
                ps.iter()
                    .map(|(k, sub)| (k.clone(), ValueSchema::new(sub)))
                    .collect()
            }),
            additional: match s.get("additionalProperties") {
                Some(Value::Bool(false)) => Additional::Forbidden,
                Some(a @ Value::Object(_)) => Additional::Schema(Box::new(ValueSchema::new(a))),
                _ => Additional::Accepted,
            },
            all_of: list("allOf"),
            any_of: list("anyOf"),
            one_of: list("oneOf"),
            not: boxed("not"),
            rules: rules::read(s),
            rules_below: false,
            atomic_map: text("x-kubernetes-map-type").as_deref() == Some("atomic"),
            list_map_keys: (text("x-kubernetes-list-type").as_deref() == Some("map"))
                .then(|| crate::meta::string_list(s.get("x-kubernetes-list-map-keys"))),
        };
        schema.rules_below = !schema.rules.is_empty()
            || schema.items.as_ref().is_some_and(|i| i.rules_below)
            || schema
                .properties
                .iter()
                .flatten()
                .any(|(_, p)| p.rules_below)
            || matches!(&schema.additional, Additional::Schema(a) if a.rules_below);
        schema
    }

    /// Whether this node or one below it has `x-kubernetes-validations`.
    pub(crate) fn has_rules(&self) -> bool {
        self.rules_below
    }

    pub(super) fn rules(&self) -> &[Arc<Rule>] {
        &self.rules
    }

    /// `type`, as kube names a value in a rule's error (`""` when untyped).
    pub(super) fn type_name(&self) -> &str {
        self.ty.as_deref().unwrap_or("")
    }

    /// The schema of property `key` of an object this schema describes.
    pub(super) fn child_schema(&self, key: &str) -> Option<&ValueSchema> {
        if let Some(sub) = self.properties.as_ref().and_then(|p| p.get(key)) {
            return Some(sub);
        }
        match &self.additional {
            Additional::Schema(sub) => Some(sub),
            _ => None,
        }
    }

    /// Whether this schema describes an object by its properties (not a map by its values):
    /// rules name its fields escaped (`__namespace__`).
    pub(super) fn declares_properties(&self) -> bool {
        self.properties.is_some() && !matches!(self.additional, Additional::Schema(_))
    }

    /// The schema of an item of a list this schema describes.
    pub(super) fn item_schema(&self) -> Option<&ValueSchema> {
        self.items.as_deref()
    }

    /// Whether an object's old field values correspond to its new ones (not an atomic map).
    pub(super) fn map_correlates(&self) -> bool {
        !self.atomic_map
    }

    /// The item of the old list `old` that `item` is the new state of: only in a
    /// `map` list, the one with the same keys (kube correlates no other lists).
    pub(super) fn correlated_item<'o>(&self, item: &Value, old: &'o Value) -> Option<&'o Value> {
        let keys = self.list_map_keys.as_ref()?;
        old.as_array()?
            .iter()
            .find(|candidate| keys.iter().all(|k| candidate.get(k) == item.get(k)))
    }
}

impl Bound {
    fn of(s: &Value, limit: &str, exclusive: &str) -> Option<Bound> {
        let (limit, exclusive) = match (s.get(limit).and_then(Value::as_f64), s.get(exclusive)) {
            (_, Some(Value::Number(e))) => (e.as_f64(), true),
            (m, e) => (m, e.and_then(Value::as_bool).unwrap_or(false)),
        };
        limit.map(|limit| Bound { limit, exclusive })
    }
}

/// One step of the walk: a value, the schema it must satisfy, and where it is.
#[derive(Clone, Copy)]
struct Node<'a> {
    value: &'a Value,
    schema: &'a ValueSchema,
    path: Path<'a>,
    /// The object's top level, whose `apiVersion`, `kind` and `metadata` are not checked.
    root: bool,
}

impl<'a> Node<'a> {
    fn root(value: &'a Value, schema: &'a ValueSchema) -> Self {
        Node {
            value,
            schema,
            path: Path::At(""),
            root: true,
        }
    }

    /// The same value at the same place, against another schema (`allOf`, `anyOf`…).
    fn against(self, schema: &'a ValueSchema) -> Self {
        Node { schema, ..self }
    }
}

/// The walk over an object and its schema. It holds nothing.
struct Validator;

/// Every schema `pattern` compiled so far (`None`: not a valid regex), shared by all
/// schemas: a pattern many CRDs share is compiled once. Patterns come from CRDs, so few are
/// distinct; the map is still emptied when it holds [`COMPILED_PATTERNS`], so that no
/// sequence of CRDs grows it without bound.
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

/// An error at `path`, whose message names the value's place as go-openapi does
/// (`<path> in body …`); `message` gets that name.
fn error_at(
    path: &Path<'_>,
    reason: FieldErrorReason,
    message: impl FnOnce(&str) -> String,
) -> FieldError {
    let path = path.render();
    let message = message(subject(&path));
    FieldError::new(&path, reason, message)
}

impl Validator {
    fn node(&self, node: Node<'_>, out: &mut Vec<FieldError>) {
        let Node {
            value: v,
            schema: s,
            path,
            root,
        } = node;
        if !s.active {
            return;
        }
        let ty = s.ty.as_deref();

        // nullable / type
        if v.is_null() {
            if s.nullable {
                return;
            }
            let expected = if s.int_or_string {
                Some("integer,string")
            } else {
                ty
            };
            if let Some(expected) = expected {
                out.push(type_error(&path, expected, v));
                return;
            }
        } else if s.int_or_string {
            if !(is_integer(v) || v.is_string()) {
                out.push(type_error(&path, "integer,string", v));
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
                out.push(type_error(&path, t, v));
                return;
            }
        }

        // format: integer ranges, and the string formats kube checks
        let format_ok = match (s.format.as_deref(), v) {
            (Some("int32"), Value::Number(n)) => {
                n.as_i64().is_some_and(|i| i32::try_from(i).is_ok())
            }
            (Some("int64"), Value::Number(n)) => n.is_i64(),
            (Some(fmt), Value::String(text)) => super::formats::valid(fmt, text),
            _ => true,
        };
        if !format_ok && let Some(fmt) = s.format.as_deref() {
            out.push(error_at(
                &path,
                FieldErrorReason::TypeInvalid,
                |name| match v {
                    Value::String(text) => format!(
                        "Invalid value: {}: {name} in body must be of type {fmt}: {}",
                        quote(text),
                        quote(text)
                    ),
                    _ => format!("Invalid value: {v}: {name} in body must be of type {fmt}"),
                },
            ));
        }

        // enum
        if let Some(allowed) = &s.allowed
            && !allowed.iter().any(|a| json_eq(a, v))
        {
            let supported: Vec<String> = allowed
                .iter()
                .map(|a| match a {
                    Value::String(s) => quote(s),
                    other => quote(&other.to_string()),
                })
                .collect();
            out.push(error_at(&path, FieldErrorReason::NotSupported, |_| {
                format!(
                    "Unsupported value: {}: supported values: {}",
                    fmt_value(v),
                    supported.join(", ")
                )
            }));
        }

        match v {
            Value::Number(n) => self.number(n, v, s, &path, out),
            Value::String(st) => self.string(st, v, s, &path, out),
            Value::Array(items) => self.array(items, v, s, &path, out),
            Value::Object(map) => self.object(map, s, &path, root, out),
            _ => {}
        }

        self.composite(node, out);
    }

    fn number(
        &self,
        n: &Number,
        v: &Value,
        s: &ValueSchema,
        path: &Path,
        out: &mut Vec<FieldError>,
    ) {
        let Some(x) = n.as_f64() else { return };
        let invalid = |detail: String| {
            error_at(path, FieldErrorReason::Invalid, |name| {
                format!("Invalid value: {v}: {name} in body {detail}")
            })
        };
        if let Some(Bound { limit, exclusive }) = s.maximum {
            if exclusive && x >= limit {
                out.push(invalid(format!("should be less than {}", fmt_num(limit))));
            } else if !exclusive && x > limit {
                out.push(invalid(format!(
                    "should be less than or equal to {}",
                    fmt_num(limit)
                )));
            }
        }
        if let Some(Bound { limit, exclusive }) = s.minimum {
            if exclusive && x <= limit {
                out.push(invalid(format!(
                    "should be greater than {}",
                    fmt_num(limit)
                )));
            } else if !exclusive && x < limit {
                out.push(invalid(format!(
                    "should be greater than or equal to {}",
                    fmt_num(limit)
                )));
            }
        }
        if let Some(m) = &s.multiple_of {
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

    fn string(&self, st: &str, v: &Value, s: &ValueSchema, path: &Path, out: &mut Vec<FieldError>) {
        let len = st.chars().count() as u64;
        if let Some(max) = s.max_length
            && len > max
        {
            out.push(error_at(path, FieldErrorReason::TooLong, |_| {
                format!("Too long: may not be longer than {max}")
            }));
        }
        if let Some(min) = s.min_length
            && len < min
        {
            out.push(error_at(path, FieldErrorReason::Invalid, |name| {
                format!(
                    "Invalid value: {}: {name} in body should be at least {min} chars long",
                    fmt_value(v)
                )
            }));
        }
        if let Some((pattern, Some(re))) = &s.pattern
            && !re.is_match(st)
        {
            out.push(error_at(path, FieldErrorReason::Invalid, |name| {
                format!(
                    "Invalid value: {}: {name} in body should match '{pattern}'",
                    fmt_value(v)
                )
            }));
        }
    }

    fn array(
        &self,
        items: &[Value],
        v: &Value,
        s: &ValueSchema,
        path: &Path,
        out: &mut Vec<FieldError>,
    ) {
        check_count(&s.item_count, "items", path, items.len(), out);
        if s.unique_items {
            let mut seen = HashSet::new();
            let dup = items.iter().any(|x| {
                let mut c = String::new();
                canonical(x, &mut c);
                !seen.insert(c)
            });
            if dup {
                out.push(error_at(path, FieldErrorReason::Invalid, |name| {
                    format!(
                        "Invalid value: {}: {name} in body shouldn't contain duplicates",
                        fmt_value(v)
                    )
                }));
            }
        }
        if let Some(is) = &s.items {
            for (i, x) in items.iter().enumerate() {
                let node = Node {
                    value: x,
                    schema: is,
                    path: Path::Item(path, i),
                    root: false,
                };
                self.node(node, out);
            }
        }
    }

    fn object(
        &self,
        map: &Map<String, Value>,
        s: &ValueSchema,
        path: &Path,
        root: bool,
        out: &mut Vec<FieldError>,
    ) {
        let skip_meta = root || s.embedded_resource;
        check_count(&s.property_count, "properties", path, map.len(), out);
        for r in &s.required {
            if root && META_FIELDS.contains(&r.as_str()) {
                continue;
            }
            if !map.contains_key(r) {
                out.push(FieldError::new(
                    child(&path.render(), r),
                    FieldErrorReason::Required,
                    "Required value",
                ));
            }
        }
        // A map's keys are sorted, so the error order does not depend on how it was built.
        for (k, val) in map {
            if skip_meta && META_FIELDS.contains(&k.as_str()) {
                continue;
            }
            let at = Path::Field(path, k);
            let below = |schema| Node {
                value: val,
                schema,
                path: at,
                root: false,
            };
            match (
                s.properties.as_ref().and_then(|ps| ps.get(k)),
                &s.additional,
            ) {
                (Some(ps), _) => self.node(below(ps), out),
                (None, Additional::Forbidden) => {
                    let p = at.render();
                    out.push(FieldError::new(
                        &p,
                        FieldErrorReason::Invalid,
                        format!(
                            "Invalid value: {}: {p} in body is a forbidden property",
                            quote(k)
                        ),
                    ));
                }
                (None, Additional::Schema(a)) => self.node(below(a), out),
                (None, Additional::Accepted) => {}
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
        let composite_err = |what: &str| {
            error_at(&path, FieldErrorReason::Invalid, |name| {
                format!(
                    "Invalid value: {}: {name} in body {what}",
                    fmt_value_short(v)
                )
            })
        };
        for sub in &s.all_of {
            self.node(node.against(sub), out);
        }
        if !s.any_of.is_empty() && !s.any_of.iter().any(|sub| self.passes(node.against(sub))) {
            out.push(composite_err("must validate at least one schema (anyOf)"));
        }
        if !s.one_of.is_empty() {
            let passing = s
                .one_of
                .iter()
                .filter(|sub| self.passes(node.against(sub)))
                .count();
            if passing != 1 {
                out.push(composite_err(
                    "must validate one and only one schema (oneOf)",
                ));
            }
        }
        if let Some(not) = &s.not
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

fn type_error(path: &Path<'_>, expected: &str, v: &Value) -> FieldError {
    let actual = quote(type_name(v));
    error_at(path, FieldErrorReason::TypeInvalid, |name| {
        format!("Invalid value: {actual}: {name} in body must be of type {expected}: {actual}")
    })
}

/// Errors for a value of `len` entries (`items` or `properties`) outside `bounds`.
fn check_count(
    bounds: &Counts,
    entries: &str,
    path: &Path<'_>,
    len: usize,
    out: &mut Vec<FieldError>,
) {
    let len = len as u64;
    if let Some(max) = bounds.max
        && len > max
    {
        out.push(too_many(&path.render(), len, max));
    }
    if let Some(min) = bounds.min
        && len < min
    {
        out.push(error_at(path, FieldErrorReason::Invalid, |name| {
            format!("Invalid value: {len}: {name} in body should have at least {min} {entries}")
        }));
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

    /// Validation against the schema JSON, read for each call.
    fn validate(obj: &Value, schema: &Value) -> Vec<FieldError> {
        super::validate(obj, &ValueSchema::new(schema))
    }

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
