//! Built-in objects read as kube-apiserver reads them: through the kind's Go struct.
//!
//! kube-apiserver decodes every body into the kind's Go struct and stores what that struct
//! encodes, so a value of the wrong type is refused (400 `… cannot be handled as a …`) and
//! a field the struct does not have is dropped — silently, with a Warning, or refused, as
//! the request's `fieldValidation` asks (`unknown field "spec.replica"`). steady keeps
//! objects as JSON, so it walks each object along its kind's fields instead (`schema.txt`,
//! generated from the OpenAPI definitions of Kubernetes 1.32) to learn what Go's decoder
//! would refuse or drop, and removes what it would drop. The walk allocates nothing but
//! the paths it reports. This module knows nothing of requests or storage.

mod schema;

use std::fmt;

use base64::Engine;
use serde_json::Value;

use schema::{SCHEMA, Shape, Struct, StructId};

/// The top-level struct of one built-in kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Root(StructId);

/// The struct of `kind` in `api_version`, if it is a built-in kind.
pub fn root(api_version: &str, kind: &str) -> Option<Root> {
    SCHEMA.kinds.get(&(api_version, kind)).copied().map(Root)
}

/// One step from an object to one of its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step<'a> {
    /// A struct's field.
    Field(&'a str),
    /// A map's key.
    Key(&'a str),
    Index(usize),
}

/// Where a field sits in an object, shown as kube shows it: `spec.containers[0].name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPath(Vec<PathSegment>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum PathSegment {
    Key(String),
    Index(usize),
}

impl FieldPath {
    fn of(steps: &[Step<'_>], last: &str) -> FieldPath {
        let segment = |step: &Step<'_>| match step {
            Step::Field(key) | Step::Key(key) => PathSegment::Key(key.to_string()),
            Step::Index(index) => PathSegment::Index(*index),
        };
        let mut segments: Vec<PathSegment> = steps.iter().map(segment).collect();
        segments.push(PathSegment::Key(last.to_string()));
        FieldPath(segments)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                PathSegment::Key(key) if i == 0 => f.write_str(key)?,
                PathSegment::Key(key) => write!(f, ".{key}")?,
                PathSegment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// Why Go's decoder would refuse an object, in its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What reading an object as its Go struct found to drop.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// Fields the struct does not have (in the object's key order), which the request's
    /// `fieldValidation` decides how to report.
    pub unknown: Vec<FieldPath>,
    /// Optional fields Go would not encode back (null, `[]`, `{}`): dropped silently.
    pub empty: Vec<FieldPath>,
}

impl Reading {
    pub fn is_clean(&self) -> bool {
        self.unknown.is_empty() && self.empty.is_empty()
    }

    /// Removes from `object` every field Go's decoder and encoder would not carry through.
    pub fn drop_from(&self, object: &mut Value) {
        drop_fields(object, &self.unknown);
        drop_fields(object, &self.empty);
    }
}

impl Root {
    /// Reads `object` as the kind's struct: what to drop from it, or the first value Go
    /// would not decode.
    pub fn read(self, object: &Value) -> Result<Reading, DecodeError> {
        let mut walk = Walk {
            steps: Vec::new(),
            unknown: Vec::new(),
            empty: Vec::new(),
        };
        let root = &SCHEMA.structs[usize::from(self.0)];
        walk.value(object, &Shape::Struct(self.0), root)?;
        Ok(Reading {
            unknown: walk.unknown,
            empty: walk.empty,
        })
    }
}

/// Removes the fields at `paths` from `object`.
fn drop_fields(object: &mut Value, paths: &[FieldPath]) {
    for FieldPath(segments) in paths {
        let Some((PathSegment::Key(last), parents)) = segments.split_last() else {
            continue;
        };
        let parent = parents
            .iter()
            .try_fold(&mut *object, |value, segment| match segment {
                PathSegment::Key(key) => value.get_mut(key.as_str()),
                PathSegment::Index(index) => value.get_mut(*index),
            });
        if let Some(Value::Object(fields)) = parent {
            fields.remove(last.as_str());
        }
    }
}

struct Walk<'a> {
    steps: Vec<Step<'a>>,
    unknown: Vec<FieldPath>,
    empty: Vec<FieldPath>,
}

/// Whether Go, having decoded `value` into an `omitempty` field of this shape, encodes
/// nothing: a null, or an empty list or map.
fn encodes_as_nothing(value: &Value, shape: &Shape) -> bool {
    match (value, shape) {
        (Value::Null, _) => true,
        (Value::Array(items), Shape::List(_)) => items.is_empty(),
        (Value::Object(entries), Shape::Map(_)) => entries.is_empty(),
        _ => false,
    }
}

impl<'a> Walk<'a> {
    /// `value` where Go expects `shape`, inside a field of `owner`.
    fn value(
        &mut self,
        value: &'a Value,
        shape: &Shape,
        owner: &'static Struct,
    ) -> Result<(), DecodeError> {
        // Go leaves a field it reads as null at its zero value.
        if value.is_null() {
            return Ok(());
        }
        let fits = match (shape, value) {
            (Shape::Any, _)
            | (Shape::String, Value::String(_))
            | (Shape::Bool, Value::Bool(_))
            | (Shape::Float64 | Shape::Quantity, Value::Number(_))
            | (Shape::Quantity | Shape::IntOrString, Value::String(_)) => true,
            (Shape::Int32 | Shape::IntOrString, Value::Number(n)) => {
                n.as_i64().is_some_and(|i| i32::try_from(i).is_ok())
            }
            (Shape::Int64, Value::Number(n)) => n.is_i64(),
            (Shape::Time, Value::String(s)) => return self.time(s),
            (Shape::Bytes, Value::String(s)) => return self.base64(s),
            (Shape::Struct(id), Value::Object(fields)) => {
                let inner = &SCHEMA.structs[usize::from(*id)];
                for (name, value) in fields {
                    match inner.field(name) {
                        Some(field)
                            if field.optional && encodes_as_nothing(value, &field.shape) =>
                        {
                            self.empty.push(FieldPath::of(&self.steps, name));
                        }
                        Some(field) => {
                            self.nested(Step::Field(name), value, &field.shape, inner)?
                        }
                        None => self.unknown.push(FieldPath::of(&self.steps, name)),
                    }
                }
                return Ok(());
            }
            (Shape::List(item), Value::Array(items)) => {
                for (i, element) in items.iter().enumerate() {
                    self.nested(Step::Index(i), element, item, owner)?;
                }
                return Ok(());
            }
            (Shape::Map(of), Value::Object(entries)) => {
                for (key, entry) in entries {
                    self.nested(Step::Key(key), entry, of, owner)?;
                }
                return Ok(());
            }
            _ => false,
        };
        if fits {
            Ok(())
        } else {
            Err(self.mismatch(value, shape, owner))
        }
    }

    fn nested(
        &mut self,
        step: Step<'a>,
        value: &'a Value,
        shape: &Shape,
        owner: &'static Struct,
    ) -> Result<(), DecodeError> {
        self.steps.push(step);
        let checked = self.value(value, shape, owner);
        self.steps.pop();
        checked
    }

    /// Go's `UnmarshalTypeError`: `json: cannot unmarshal number into Go struct field
    /// EnvVar.spec.template.spec.containers.env.value of type string`. The field is named
    /// by its struct and its JSON path from the object, without list indices or map keys.
    fn mismatch(&self, value: &Value, shape: &Shape, owner: &Struct) -> DecodeError {
        let found = match value {
            Value::Number(n) if matches!(shape, Shape::Int32 | Shape::Int64) => {
                format!("number {n}")
            }
            Value::Number(_) => "number".into(),
            Value::String(_) => "string".into(),
            Value::Bool(_) => "bool".into(),
            Value::Array(_) => "array".into(),
            Value::Object(_) | Value::Null => "object".into(),
        };
        let fields: Vec<&str> = self
            .steps
            .iter()
            .filter_map(|step| match step {
                Step::Field(name) => Some(*name),
                Step::Key(_) | Step::Index(_) => None,
            })
            .collect();
        let owner_name = owner.go_name().rsplit('.').next().unwrap_or_default();
        DecodeError(format!(
            "json: cannot unmarshal {found} into Go struct field {owner_name}.{} of type {}",
            fields.join("."),
            go_type(shape)
        ))
    }

    /// `metav1.Time` parses RFC 3339.
    fn time(&self, text: &str) -> Result<(), DecodeError> {
        match chrono::DateTime::parse_from_rfc3339(text) {
            Ok(_) => Ok(()),
            Err(_) => Err(DecodeError(format!(
                "parsing time {text:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {text:?} as RFC 3339"
            ))),
        }
    }

    /// `[]byte` is base64 with padding (Go's `StdEncoding`).
    fn base64(&self, text: &str) -> Result<(), DecodeError> {
        use base64::DecodeError as Bad;
        match base64::engine::general_purpose::STANDARD.decode(text) {
            Ok(_) => Ok(()),
            Err(e) => {
                let at = match e {
                    Bad::InvalidByte(at, _) | Bad::InvalidLastSymbol(at, _) => at,
                    // Go names the start of the quantum left incomplete.
                    Bad::InvalidLength(_) | Bad::InvalidPadding => text.len() - text.len() % 4,
                };
                Err(DecodeError(format!(
                    "illegal base64 data at input byte {at}"
                )))
            }
        }
    }
}

/// How Go's reflection prints the type of a field of this shape.
fn go_type(shape: &Shape) -> String {
    match shape {
        Shape::String => "string".into(),
        Shape::Bool => "bool".into(),
        Shape::Int32 => "int32".into(),
        Shape::Int64 => "int64".into(),
        Shape::Float64 => "float64".into(),
        Shape::Time => "v1.Time".into(),
        Shape::Bytes => "[]uint8".into(),
        Shape::IntOrString => "intstr.IntOrString".into(),
        Shape::Quantity => "resource.Quantity".into(),
        Shape::Any => "interface {}".into(),
        Shape::Struct(id) => SCHEMA.structs[usize::from(*id)].go_name().into(),
        Shape::List(item) => format!("[]{}", go_type(item)),
        Shape::Map(value) => format!("map[string]{}", go_type(value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(api_version: &str, kind: &str, object: &Value) -> Reading {
        let root = root(api_version, kind).expect("a built-in kind");
        root.read(object).expect("decodes")
    }

    fn unknown(api_version: &str, kind: &str, object: &Value) -> Vec<String> {
        let reading = read(api_version, kind, object);
        reading.unknown.iter().map(ToString::to_string).collect()
    }

    fn refused(api_version: &str, kind: &str, object: &Value) -> String {
        let root = root(api_version, kind).expect("a built-in kind");
        root.read(object).expect_err("refused").to_string()
    }

    #[test]
    fn unknown_fields_are_found_where_they_are_and_dropped() {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labelz": {"a": "b"}, "labels": {"any-key": "v"}},
            "spec": {"containers": [
                {"name": "a", "image": "i"},
                {"name": "b", "image": "i", "imagePullPolic": "Always",
                 "ports": [{"containerPort": 80, "hostPortt": 1}]}
            ]},
            "bogus": true
        });
        // In the order of the object's keys, which serde_json keeps sorted.
        let found = read("v1", "Pod", &pod);
        assert_eq!(
            found
                .unknown
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "bogus",
                "metadata.labelz",
                "spec.containers[1].imagePullPolic",
                "spec.containers[1].ports[0].hostPortt",
            ]
        );
        found.drop_from(&mut pod);
        assert_eq!(
            pod,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "labels": {"any-key": "v"}},
                "spec": {"containers": [
                    {"name": "a", "image": "i"},
                    {"name": "b", "image": "i", "ports": [{"containerPort": 80}]}
                ]}
            })
        );
        assert!(unknown("v1", "Pod", &pod).is_empty());
    }

    #[test]
    fn values_of_the_wrong_type_are_refused_in_go_words() {
        let env = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template":
            {"spec": {"containers": [{"name": "a", "env": [{"name": "N", "value": 7070}]}]}}}});
        assert_eq!(
            refused("apps/v1", "Deployment", &env),
            "json: cannot unmarshal number into Go struct field EnvVar.spec.template.spec.containers.env.value of type string"
        );
        let labels = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "spec": {"selector": {"matchLabels": {"app": 1}}}});
        assert_eq!(
            refused("apps/v1", "Deployment", &labels),
            "json: cannot unmarshal number into Go struct field LabelSelector.spec.selector.matchLabels of type string"
        );
        let replicas =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1.5}});
        assert_eq!(
            refused("apps/v1", "Deployment", &replicas),
            "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
        let spec = json!({"apiVersion": "v1", "kind": "Pod", "spec": "x"});
        assert_eq!(
            refused("v1", "Pod", &spec),
            "json: cannot unmarshal string into Go struct field Pod.spec of type v1.PodSpec"
        );
        let containers = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": {}}});
        assert_eq!(
            refused("v1", "Pod", &containers),
            "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container"
        );
        let port = json!({"apiVersion": "v1", "kind": "Service",
            "spec": {"ports": [{"port": 80, "targetPort": true}]}});
        assert!(refused("v1", "Service", &port).ends_with("of type intstr.IntOrString"));
        let too_big = json!({"apiVersion": "v1", "kind": "Service",
            "spec": {"ports": [{"port": 4294967296_i64}]}});
        assert!(refused("v1", "Service", &too_big).contains("number 4294967296"));
    }

    #[test]
    fn times_and_bytes_are_parsed() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "data": {"k": "not base64!"}});
        assert_eq!(
            refused("v1", "Secret", &secret),
            "illegal base64 data at input byte 3"
        );
        let ok = json!({"apiVersion": "v1", "kind": "Secret", "data": {"k": "aGk="}});
        assert!(unknown("v1", "Secret", &ok).is_empty());
        let lease = |time: &str| {
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "spec": {"renewTime": time}})
        };
        for good in ["2026-12-05T10:00:00Z", "2026-12-05T10:00:00.123456+01:00"] {
            assert!(unknown("coordination.k8s.io/v1", "Lease", &lease(good)).is_empty());
        }
        assert!(
            refused("coordination.k8s.io/v1", "Lease", &lease("yesterday"))
                .starts_with("parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\"")
        );
    }

    #[test]
    fn empty_optional_lists_and_maps_are_not_encoded_back() {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {}, "annotations": {"a": "b"}, "finalizers": []},
            "spec": {
                "containers": [{"name": "a", "image": "i", "ports": [], "args": [],
                    "securityContext": {}, "stdin": false}],
                "volumes": [], "nodeSelector": {}, "hostNetwork": false
            }
        });
        let reading = read("v1", "Pod", &pod);
        reading.drop_from(&mut pod);
        // Only lists and maps: Go's pointers (`*bool`, `*SecurityContext`) keep a zero
        // value, and which scalars are pointers the OpenAPI does not say.
        assert_eq!(
            pod,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "annotations": {"a": "b"}},
                "spec": {
                    "containers": [{"name": "a", "image": "i", "securityContext": {}, "stdin": false}],
                    "hostNetwork": false
                }
            })
        );
        // A required list is encoded back even when empty.
        let empty = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": []}});
        assert!(read("v1", "Pod", &empty).is_clean());
    }

    #[test]
    fn nulls_free_form_values_and_missing_fields_decode_as_go_reads_them() {
        // Go leaves a field it reads as null at its zero value and requires nothing:
        // what is missing is validation's business, not the decoder's.
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": null},
            "spec": {"containers": [{"image": "i", "ports": null}], "nodeName": null}
        });
        let reading = read("v1", "Pod", &pod);
        assert!(reading.unknown.is_empty());
        let empty: Vec<String> = reading.empty.iter().map(ToString::to_string).collect();
        assert_eq!(
            empty,
            [
                "metadata.labels",
                "spec.containers[0].ports",
                "spec.nodeName"
            ]
        );
        let revision = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "revision": 2, "data": {"anything": [1, {"goes": true}]}});
        assert!(unknown("apps/v1", "ControllerRevision", &revision).is_empty());
        assert_eq!(root("example.com/v1", "Widget"), None);
    }
}
